"""Mistake: the capture holds the start-up: model construction, weight upload, compilation.

The profiler range starts before anything is built (``torch.cuda.profiler.start()`` at the
top of the script, or ``nsys profile`` without a capture range): the model (a wide MLP,
``--layers`` x ``--width``, over a GiB of fp32 weights) is made on the host and uploaded, then
wrapped in ``torch.compile``, whose first step compiles (and autotunes) inside the capture;
then ``--steps`` steps follow (``--warmup`` is not used: the point is a capture with no
warm-up). The script prints the steps/s of all profiled steps and of the steady ones (after
the first).

The GPU timeline: a long stretch of host work and large pageable host-to-device copies in
``init_model`` before the first ``step``, and a first step many times longer than the others
(compilation, module loading, autotuning); the steady steps are alike. None of the start-up
is the steady state: report it as start-up inside the capture, and start the capture after
it (``torch.cuda.profiler.start()`` after a few warm-up steps, with ``nsys profile
--capture-range=cudaProfilerApi``).
"""

from __future__ import annotations

import time

import nvtx
import torch

if __package__:  # python -m nsysprobe.workloads.init_in_capture
    from .mistakes import BLUE, GREEN, RED, Size, announce, parse_args, synchronize
else:  # python workloads/init_in_capture.py
    from mistakes import BLUE, GREEN, RED, Size, announce, parse_args, synchronize
from torch import nn

SIZES = {
    "batch_size": Size(4096, 16, "samples per step"),
    "width": Size(8192, 64, "MLP width"),
    "layers": Size(6, 2, "hidden layers"),
}
FLAGS = {"no_compile": "leave the model eager (no torch.compile)"}


def main(argv: list[str] | None = None) -> None:
    config = parse_args("init_in_capture", __doc__.splitlines()[0], SIZES, argv, flags=FLAGS)
    announce(config)
    device = config.device
    if config.on_gpu:
        torch.cuda.profiler.start()  # the mistake: before the model exists
    with nvtx.annotate("init_model", color=RED):
        width = config.width
        model = nn.Sequential(
            *(m for _ in range(config.layers) for m in (nn.Linear(width, width), nn.GELU()))
        ).to(device)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
        run = model if config.no_compile else torch.compile(model)
    criterion = nn.MSELoss()
    inputs = torch.randn(config.batch_size, config.width, device=device)
    targets = torch.randn(config.batch_size, config.width, device=device)
    synchronize(device)
    started = steady = time.perf_counter()
    for index in range(config.steps):
        with nvtx.annotate(f"step {index}", color=BLUE), nvtx.annotate("train", color=GREEN):
            optimizer.zero_grad(set_to_none=True)
            criterion(run(inputs), targets).backward()
            optimizer.step()
        if index == 0:
            synchronize(device)
            steady = time.perf_counter()
    synchronize(device)
    ended = time.perf_counter()
    if config.on_gpu:
        torch.cuda.profiler.stop()
    if config.steps > 1:
        print(f"steady_steps_per_s={(config.steps - 1) / (ended - steady):.3f}", flush=True)
    print(f"steps_per_s={config.steps / (ended - started):.3f}", flush=True)


if __name__ == "__main__":
    main()
