"""A copy-bound loop: large pinned uploads every step and little compute to hide them under.

Each step uploads ``--mb`` MiB of precomputed features from pinned host memory with
``non_blocking=True`` copies on a copy stream, one batch ahead (the prefetcher of the ladder's
top rung: nothing is wrong with *how* it copies), and trains a small linear head on them. The
copies take many times longer than the compute, so hiding them under compute (streams,
prefetching) can save at most the compute there is.

The GPU timeline: the copy engine busy end to end, the compute stream mostly idle, waiting
for each batch's copy. The fix is to move fewer bytes: keep the data on the GPU (it fits,
or cache it there), send it compressed or in lower precision (bf16/uint8 and convert on the
GPU), or do the feature extraction on the GPU from the raw data.
"""

from __future__ import annotations

import nvtx
import torch

if __package__:  # python -m nsysprobe.workloads.copy_bound
    from .mistakes import BLUE, GREEN, YELLOW, Size, announce, measure, parse_args, report
else:  # python workloads/copy_bound.py
    from mistakes import BLUE, GREEN, YELLOW, Size, announce, measure, parse_args, report
from torch import nn

SIZES = {
    "mb": Size(1024, 4, "MiB of features uploaded per step"),
    "features": Size(4096, 256, "features per sample"),
    "classes": Size(10, 10, "classes of the head"),
}


def main(argv: list[str] | None = None) -> None:
    config = parse_args("copy_bound", __doc__.splitlines()[0], SIZES, argv)
    rows = max(1, config.mb * 2**20 // (4 * config.features))
    config.batch_size = rows
    config.shown = (*config.shown, "batch_size")
    announce(config)
    device = config.device
    head = nn.Linear(config.features, config.classes).to(device)
    optimizer = torch.optim.SGD(head.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()
    pinned = config.on_gpu
    host = [
        torch.randn(rows, config.features).pin_memory()
        if pinned
        else torch.randn(rows, config.features)
        for _ in range(2)
    ]
    labels = torch.randint(config.classes, (rows,), device=device)
    copies = torch.cuda.Stream() if config.on_gpu else None
    compute = torch.cuda.current_stream() if config.on_gpu else None

    def upload(index: int) -> torch.Tensor:
        with nvtx.annotate("copy batch", color=YELLOW):
            if copies is None:
                return host[index % 2].to(device)
            with torch.cuda.stream(copies):
                return host[index % 2].to(device, non_blocking=True)

    ready = [upload(0)]

    def step(index: int) -> None:
        with nvtx.annotate(f"Batch {index}", color=BLUE):
            if compute is not None:
                compute.wait_stream(copies)
                ready[0].record_stream(compute)
            batch, ready[0] = ready[0], upload(index + 1)
            with nvtx.annotate("Compute", color=GREEN):
                optimizer.zero_grad(set_to_none=True)
                criterion(head(batch), labels).backward()
                optimizer.step()

    report(measure(config, step))


if __name__ == "__main__":
    main()
