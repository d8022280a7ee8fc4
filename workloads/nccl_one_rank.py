"""One-rank NCCL probe: what a single GPU shows of NCCL's own work under Nsight Systems.

DDP ResNet-18 (``bucket_cap_mb=5``, batch 32 of 3x224x224 on the GPU) on a one-rank NCCL
process group, then per step the collectives a training job issues: ``all_reduce`` of 4 kB,
4 MB and 64 MB, ``all_gather_into_tensor``, ``broadcast`` and ``reduce_scatter_tensor``. Eight
steps in NVTX ranges ``step i``, captured between ``cudaProfilerStart``/``Stop`` after three
warm-up steps, and timed as the other workloads time theirs (``steps_per_s=`` last: the
device synchronized before the first profiled step and after the last). With one rank NCCL
launches no kernels: its ranges (``ncclAllReduce``, ... in the ``NCCL`` NVTX domain) issue
device-to-device copies where a copy is needed, or nothing.

    nsys profile --trace=cuda,nvtx,osrt --capture-range=cudaProfilerApi \
        --capture-range-end=stop -o nccl1 python workloads/nccl_one_rank.py
"""

from __future__ import annotations

import os
import time

import nvtx
import torch
import torch.distributed as dist
import torch.nn.functional as F
import torchvision

STEPS, WARMUP = 8, 3


def main() -> None:
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29512")
    dist.init_process_group("nccl", rank=0, world_size=1)
    torch.cuda.set_device(0)
    model = torch.nn.parallel.DistributedDataParallel(
        torchvision.models.resnet18().cuda(), device_ids=[0], bucket_cap_mb=5
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(32, 3, 224, 224, device="cuda")
    y = torch.randint(0, 1000, (32,), device="cuda")

    def train_step() -> None:
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad()

    for _ in range(WARMUP):
        train_step()
    tensors = [torch.ones(n, device="cuda") for n in (1024, 1 << 20, 16 << 20)]
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    started = time.perf_counter()
    for i in range(STEPS):
        with nvtx.annotate(f"step {i}", color="green"):
            train_step()
            for t in tensors:
                dist.all_reduce(t)
            dist.all_gather_into_tensor(torch.empty(1 << 20, device="cuda"), tensors[1])
            dist.broadcast(tensors[1], 0)
            dist.reduce_scatter_tensor(torch.empty(1 << 20, device="cuda"), tensors[1])
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - started
    torch.cuda.profiler.stop()
    print("nccl", torch.cuda.nccl.version())
    print(f"steps_per_s={STEPS / elapsed:.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
