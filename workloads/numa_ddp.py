"""The NUMA article's DDP experiment: ResNet-18 on random 1024x1024 images resized to 224 on
the device, batch 128, SGD, DataLoader workers = CPUs / GPUs, with or without NUMA binding.

Launch with ``nsysprobe launch --nproc-per-node N --numa none -- python workloads/numa_ddp.py``
or ``torchrun --nproc-per-node N workloads/numa_ddp.py``; ``--numa-aware`` binds the rank and
its loader workers to the GPU's node (``nsysprobe.numa``). ``--device cpu`` runs on gloo for a
smoke test: ``--device cpu --image-size 64 --batch-size 4 --steps 2``.
"""

from __future__ import annotations

import argparse
import os
import time

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
    args = parser.parse_args()

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
    workers = args.workers if args.workers is not None else max((os.cpu_count() or 1) // gpus, 1)

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
        pin_memory=args.device == "cuda",
        worker_init_fn=worker_init,
        persistent_workers=workers > 0,
    )
    model.train()
    started = None
    done = 0
    for step, (images, labels) in enumerate(loader):
        if step == args.warmup:
            if args.device == "cuda":
                torch.cuda.synchronize()
            started = time.perf_counter()
        images = images.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True)
        images = F.interpolate(images, size=(224, 224), mode="bilinear", align_corners=False)
        loss = F.cross_entropy(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if started is not None:
            done += 1
    if args.device == "cuda":
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - started if started is not None else 0.0
    rate = done / elapsed if elapsed > 0 else 0.0
    print(
        f"rank {local_rank}: {rate:.2f} steps/s over {done} steps "
        f"(numa-aware={args.numa_aware}, workers={workers}, world={world_size})",
        flush=True,
    )
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
