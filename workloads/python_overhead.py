"""Mistake: heavy pure-Python bookkeeping on the training thread between steps.

An MLP (4096 wide, batch 1024) trains on batches made on the GPU once; the step itself never
synchronizes (no ``.item()``). But after ``optimizer.step()`` the loop updates a hand-written
metrics tracker that touches no CUDA tensor at all: running windows of thousands of Python
floats (host-side timings and per-sample bookkeeping), their means, extremes and medians
(``statistics``), a ``json.dumps`` of the whole dict written to a log file and a formatted
log line. ``--log-work N`` sets how many metrics it tracks; by default it takes about twice
as long as the GPU needs for a step.

The GPU timeline: in each ``train_step N`` range, ``forward_backward`` queues the step in a
fraction of a millisecond and the GPU runs it; ``log metrics`` then keeps the CPU busy in
pure Python, with no CUDA call at all, for longer than the GPU's step, so the queue runs dry
and the GPU idles until the next step's kernels come. The gaps lie inside ``log metrics``
with the CPU thread running (no sync, no OS wait): the training thread, not the GPU, is the
bottleneck.

Measured on the H200 (torch 2.11, GPU activity through torch.profiler, 2026-12-01): about
45 steps/s, 9 ms of GPU work a step and 17 ms in ``log metrics`` (1.9 times as long), the GPU
busy 41 %.

The fix: do the bookkeeping every N steps, incrementally (running sums, not whole windows),
or in another thread or process; log lazily; keep the hot loop free of ``json.dumps``.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import time
from collections import deque
from typing import TextIO

import nvtx
import torch

if __package__:  # python -m nsysprobe.workloads.python_overhead
    from .mistakes import BLUE, GREEN, YELLOW, Size, announce, measure, parse_args, report
else:  # python workloads/python_overhead.py
    from mistakes import BLUE, GREEN, YELLOW, Size, announce, measure, parse_args, report
from torch import nn

SIZES = {
    "log_work": Size(3000, 100, "metrics the Python tracker keeps (scales its work)"),
    "batch_size": Size(1024, 16, "samples per step"),
    "width": Size(4096, 64, "MLP width"),
    "layers": Size(4, 2, "hidden layers"),
}
WINDOW = 50  # values kept per metric


class MetricsTracker:
    """Running windows of many named metrics, summarized and logged in full every step."""

    def __init__(self, metrics: int, seed: int, log: TextIO) -> None:
        self.random = random.Random(seed)
        self.windows = {
            f"group{i // 50:03d}/metric{i % 50:02d}": deque(maxlen=WINDOW) for i in range(metrics)
        }
        self.step_times: deque[float] = deque(maxlen=WINDOW)
        self.last = time.perf_counter()
        self.log = log

    def update(self, step: int) -> str:
        now = time.perf_counter()
        self.step_times.append(now - self.last)
        self.last = now
        for values in self.windows.values():
            values.append(self.random.gauss(1.0, 0.1) * self.step_times[-1])
        summary = {
            name: {
                "mean": statistics.fmean(values),
                "min": min(values),
                "max": max(values),
                "median": statistics.median(values),
                "last": values[-1],
            }
            for name, values in self.windows.items()
        }
        self.log.write(json.dumps({"step": step, "metrics": summary}, sort_keys=True) + "\n")
        shown = list(summary.items())[:8]
        return f"step {step:4d} | " + " | ".join(f"{k} {v['mean']:.3e}" for k, v in shown)


def main(argv: list[str] | None = None) -> None:
    config = parse_args("python_overhead", __doc__.splitlines()[0], SIZES, argv)
    announce(config)
    device = config.device
    layers = [nn.Linear(config.width, config.width) for _ in range(config.layers)]
    model = nn.Sequential(*(m for layer in layers for m in (layer, nn.GELU()))).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    criterion = nn.MSELoss()
    shape = (2, config.batch_size, config.width)
    inputs = torch.randn(shape, device=device)
    targets = torch.randn(shape, device=device)
    log = open(os.devnull, "w")  # stands in for the run's metrics.jsonl
    tracker = MetricsTracker(config.log_work, config.seed, log)
    lines: list[str] = []

    def step(index: int) -> None:
        with nvtx.annotate(f"train_step {index}", color=BLUE):
            with nvtx.annotate("forward_backward", color=GREEN):
                optimizer.zero_grad(set_to_none=True)
                loss = criterion(model(inputs[index % 2]), targets[index % 2])
                loss.backward()
                optimizer.step()
            with nvtx.annotate("log metrics", color=YELLOW):
                lines.append(tracker.update(index))

    with log:
        report(measure(config, step))


if __name__ == "__main__":
    main()
