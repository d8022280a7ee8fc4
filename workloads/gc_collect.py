"""Mistake: ``gc.collect()`` every step, in a process holding millions of Python objects.

A transformer-style MLP trains on batches made on the GPU once, in a process that also holds
what real jobs hold: an index of the dataset as Python objects (``--index-items`` small
records, tuples and dicts, some of them in reference cycles). After each step the loop does
"memory hygiene" in an NVTX range ``cleanup``: ``gc.collect()``, which walks every tracked
object of the process, each time.

The GPU timeline: each ``step N`` queues its kernels quickly; then the training thread runs
``cleanup`` in pure Python (no CUDA call, no OS wait) for longer than the GPU's step, and the
GPU idles. An NVTX range names the place, Python sampling (``nsys profile
--python-sampling=true``) names the function and line: ``gc.collect`` here. The fix: drop the
explicit collection (CPython collects by itself), or ``gc.freeze()`` the long-lived objects
after start-up so collections skip them, or collect every N steps.
"""

from __future__ import annotations

import gc

import nvtx
import torch

if __package__:  # python -m nsysprobe.workloads.gc_collect
    from .mistakes import BLUE, GREEN, RED, Size, announce, measure, parse_args, report
else:  # python workloads/gc_collect.py
    from mistakes import BLUE, GREEN, RED, Size, announce, measure, parse_args, report
from torch import nn

SIZES = {
    "index_items": Size(1_000_000, 10_000, "records in the dataset's Python index"),
    "batch_size": Size(1024, 16, "samples per step"),
    "width": Size(2048, 64, "MLP width"),
    "layers": Size(4, 2, "hidden layers"),
}


def dataset_index(items: int) -> list:
    """Records as a loader's index keeps them: a tuple and a dict each, every 100th in a
    reference cycle with the next."""
    records = []
    for i in range(items):
        record = {"id": i, "path": ("shard", i // 1000, i % 1000), "label": i % 1000}
        if i % 100 == 1:
            record["prev"] = records[-1]
            records[-1]["next"] = record
        records.append(record)
    return records


def main(argv: list[str] | None = None) -> None:
    config = parse_args("gc_collect", __doc__.splitlines()[0], SIZES, argv)
    announce(config)
    device = config.device
    config.index = dataset_index(config.index_items)  # held for the whole run, as a loader's
    width = config.width
    model = nn.Sequential(
        *(m for _ in range(config.layers) for m in (nn.Linear(width, width), nn.GELU()))
    ).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    criterion = nn.MSELoss()
    inputs = torch.randn(config.batch_size, config.width, device=device)
    targets = torch.randn(config.batch_size, config.width, device=device)

    def step(index: int) -> None:
        with nvtx.annotate(f"step {index}", color=BLUE):
            with nvtx.annotate("train", color=GREEN):
                optimizer.zero_grad(set_to_none=True)
                criterion(model(inputs), targets).backward()
                optimizer.step()
            with nvtx.annotate("cleanup", color=RED):
                gc.collect()

    report(measure(config, step))


if __name__ == "__main__":
    main()
