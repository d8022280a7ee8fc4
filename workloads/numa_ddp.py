"""The NUMA article's DDP experiment: ResNet-18 on random 1024x1024 images resized to 224 on
the device, batch 128, SGD, DataLoader workers = CPUs / GPUs, with or without NUMA binding.

Launch with ``nsysprobe launch --nproc-per-node N --numa none -- python workloads/numa_ddp.py``
or ``torchrun --nproc-per-node N workloads/numa_ddp.py``; ``--numa-aware`` binds the rank and
its loader workers to the GPU's node (``nsysprobe.numa``). ``--device cpu`` runs on gloo for a
smoke test: ``--device cpu --image-size 64 --batch-size 4 --steps 2``.

A rank made slow the way real ranks are: ``--rank-workers 1=2`` gives rank 1 two loader
workers (the others keep theirs), ``--pageable-rank 1`` has rank 1 copy its batches from
pageable memory (no ``pin_memory``, blocking copies). Each timed step is an NVTX range
``step i``, and on CUDA the timed steps lie between ``cudaProfilerStart`` and
``cudaProfilerStop``, so ``nsys profile --capture-range=cudaProfilerApi -o rank%q{RANK}``
captures the same steps on every rank.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import nvtx
import torch
import torch.distributed as dist
import torch.nn.functional as F
import torchvision
from torch.utils.data import DataLoader, Dataset

from nsysprobe.errors import NsysprobeError
from nsysprobe.numa import NumaWorkerInit, bind_local_rank


class RandomImages(Dataset):
    def __init__(self, length: int, image_size: int) -> None:
        self.length = length
        self.image_size = image_size

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        image = torch.rand(3, self.image_size, self.image_size)
        return image, index % 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5, help="Steps left out of the timing.")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--image-size", type=int, default=1024)
    parser.add_argument("--workers", type=int, help="Loader workers (default: CPUs / GPUs).")
    parser.add_argument("--numa-aware", action="store_true")
    parser.add_argument("--numa-mode", default="node")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument(
        "--rank-workers",
        action="append",
        default=[],
        metavar="RANK=N",
        help="Loader workers for one rank (repeatable), e.g. 1=2 to make rank 1 a straggler.",
    )
    parser.add_argument(
        "--pageable-rank",
        type=int,
        action="append",
        default=[],
        metavar="RANK",
        help="This rank copies batches from pageable memory, blocking (repeatable).",
    )
    args = parser.parse_args()
    try:
        per_rank = {int(k): int(v) for k, v in (x.split("=", 1) for x in args.rank_workers)}
    except ValueError:
        parser.error(f"--rank-workers {args.rank_workers}: give RANK=N, e.g. 1=2")
    if any(n < 0 for n in per_rank.values()):
        parser.error("--rank-workers: N must be 0 or more")

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    worker_init = None
    if args.numa_aware:
        try:
            outcome = bind_local_rank(args.numa_mode, local_rank=local_rank)
        except NsysprobeError as exc:
            # A machine without a readable GPU topology still runs the experiment, unbound.
            print(f"rank {local_rank}: not bound: {exc}", flush=True)
        else:
            worker_init = NumaWorkerInit(outcome.binding)
            print(f"rank {local_rank}: bound to {outcome.binding.describe()}", flush=True)

    if args.device == "cuda":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
        gpus = torch.cuda.device_count()
    else:
        device = torch.device("cpu")
        gpus = world_size
    if "RANK" in os.environ:
        dist.init_process_group("nccl" if args.device == "cuda" else "gloo")
    rank = int(os.environ.get("RANK", "0"))
    workers = args.workers if args.workers is not None else max((os.cpu_count() or 1) // gpus, 1)
    workers = per_rank.get(rank, workers)
    pinned = args.device == "cuda" and rank not in args.pageable_rank

    model = torchvision.models.resnet18(num_classes=1000).to(device)
    if dist.is_initialized():
        model = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[local_rank] if args.device == "cuda" else None
        )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loader = DataLoader(
        RandomImages(args.batch_size * (args.steps + args.warmup), args.image_size),
        batch_size=args.batch_size,
        num_workers=workers,
        pin_memory=pinned,
        worker_init_fn=worker_init,
        persistent_workers=workers > 0,
    )
    model.train()
    started = None
    done = 0
    batches = iter(loader)
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            if args.device == "cuda":
                torch.cuda.synchronize()
                torch.cuda.profiler.start()
            started = time.perf_counter()
        name = f"step {step - args.warmup}" if started is not None else f"warmup {step}"
        with nvtx.annotate(name):
            images, labels = next(batches)
            images = images.to(device, non_blocking=pinned)
            labels = labels.to(device, non_blocking=pinned)
            images = F.interpolate(images, size=(224, 224), mode="bilinear", align_corners=False)
            loss = F.cross_entropy(model(images), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        if started is not None:
            done += 1
    if args.device == "cuda":
        torch.cuda.synchronize()
        if started is not None:
            torch.cuda.profiler.stop()
    elapsed = time.perf_counter() - started if started is not None else 0.0
    rate = done / elapsed if elapsed > 0 else 0.0
    # One write of the whole line: the ranks share one stdout, and with PYTHONUNBUFFERED a
    # print() writes its text and its newline apart, so another rank's line can land between.
    sys.stdout.write(
        f"rank {local_rank}: {rate:.2f} steps/s over {done} steps "
        f"(numa-aware={args.numa_aware}, workers={workers}, "
        f"pageable={rank in args.pageable_rank}, pinned={pinned}, "
        f"world={world_size})\n"
    )
    sys.stdout.flush()
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
