"""Common training mistakes, one script each, plus a control: test traces with a known diagnosis.

    readback         loss.item() and an accuracy read back with .cpu() every step
    dtoh_numpy       tens of MB copied to pageable host memory and reduced in numpy every step
    empty_cache      torch.cuda.empty_cache() every step while the input shapes change
    tiny_layers      a deep stack of tiny layers: launch-bound (--cuda-graph replays the step)
    slow_loader      too few DataLoader workers for a CPU-heavy dataset
    python_overhead  heavy pure-Python bookkeeping between steps, with no synchronization
    compute_bound    the control: data on the GPU, a ResNet-50 step, no synchronization
    gpu_bound        a wide MLP the CPU runs ahead of, at fp32, TF32 or bf16 (also with a sync
                     every N steps, or as a CUDA graph): steps timed where the GPU runs them

Each script's docstring says what the mistake is, what the GPU timeline looks like and what
the fix is. This module holds what they share: the options, whose default sizes are the GPU's
unless the device is a CPU, where they shrink so a run takes seconds; the device choice; and
the measurement: warm-up steps, then the profiled steps between ``torch.cuda.profiler.start()``
and ``stop()`` (what ``nsys profile --capture-range=cudaProfilerApi`` records), with the device
synchronized at both ends of the measurement and nowhere inside it. Every script prints a
``config ...`` line first and ``steps_per_s=X.XXX`` last, like the ladder rungs.

On a CPU, what only CUDA has (the profiler range, ``empty_cache``, CUDA graphs, pinned memory)
is skipped, so the scripts run anywhere; only their GPU timelines show the mistakes.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

# ARGB as nsys records them, the ladder's colors; passed as ints so no color table changes them.
BLUE, RED, YELLOW, GREEN = 0x0000FF, 0xFF0000, 0xFFFF00, 0x008000


@dataclass(frozen=True)
class Size:
    """An option's default on a GPU and on a CPU."""

    gpu: int | float
    cpu: int | float
    help: str
    minimum: int | float = 1


# Every script has these: 20 profiled steps after 5 warm-up steps on a GPU.
COMMON = {
    "steps": Size(20, 3, "profiled steps"),
    "warmup": Size(5, 1, "unmeasured steps first"),
}


class Config(argparse.Namespace):
    """The parsed options, with ``device`` a ``torch.device`` and every size filled in."""

    script: str
    device: torch.device
    steps: int
    warmup: int
    seed: int
    shown: tuple[str, ...]

    @property
    def on_gpu(self) -> bool:
        return self.device.type == "cuda"

    def describe(self) -> str:
        fields = " ".join(f"{name}={getattr(self, name)}" for name in self.shown)
        return f"config script={self.script} device={self.device} {fields}"


def choose_device(name: str) -> torch.device:
    """``auto`` is the current CUDA device if there is one, else the CPU; ``cuda`` gets a number."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(name)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"--device {name}: no CUDA device is visible; use --device cpu")
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        torch.cuda.set_device(device)
    elif device.type != "cpu":
        raise ValueError(f"--device {name}: these workloads run on cpu or cuda[:N]")
    return device


def parse_args(
    script: str,
    description: str,
    sizes: dict[str, Size],
    argv: list[str] | None = None,
    flags: dict[str, str] | None = None,
    choices: dict[str, tuple[tuple[str, ...], str]] | None = None,
) -> Config:
    """Options ``--steps --warmup``, ``sizes`` (GPU or CPU defaults), ``--device --seed``,
    ``flags`` (name: help), which are off unless given, and ``choices`` (name: (values, help)),
    the first value by default; all of them go into the config line.

    Seeds Python's and torch's random generators with ``--seed``.
    """
    parser = argparse.ArgumentParser(prog=f"{script}.py", description=description)
    every = {**COMMON, **sizes}
    for name, size in every.items():
        parser.add_argument(
            "--" + name.replace("_", "-"),
            type=type(size.gpu),
            help=f"{size.help} (default {size.gpu}; {size.cpu} on a CPU)",
        )
    parser.add_argument("--device", default="auto", help="auto (cuda if available), cpu, cuda:N")
    parser.add_argument("--seed", type=int, default=0, help="seed for weights and data (default 0)")
    for name, text in (flags or {}).items():
        parser.add_argument("--" + name.replace("_", "-"), action="store_true", help=text)
    for name, (values, text) in (choices or {}).items():
        parser.add_argument(
            "--" + name.replace("_", "-"),
            choices=values,
            default=values[0],
            help=f"{text} (default {values[0]})",
        )
    config = parser.parse_args(argv, namespace=Config())
    try:
        config.device = choose_device(config.device)
    except ValueError as error:
        parser.error(str(error))
    for name, size in every.items():
        if getattr(config, name) is None:
            setattr(config, name, size.gpu if config.on_gpu else size.cpu)
    if config.steps < 1 or config.warmup < 0:
        parser.error("--steps must be at least 1 and --warmup at least 0")
    for name, size in sizes.items():
        if getattr(config, name) < size.minimum:
            parser.error(f"--{name.replace('_', '-')} must be at least {size.minimum}")
    config.script = script
    config.shown = (*every, "seed", *(flags or {}), *(choices or {}))
    torch.manual_seed(config.seed)
    random.seed(config.seed)
    return config


def fail(config: Config, message: str) -> None:
    """Exit with a one-line error and code 2, as argparse does for a bad option."""
    print(f"{config.script}.py: error: {message}", file=sys.stderr, flush=True)
    sys.exit(2)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(config: Config, step: Callable[[int], object]) -> float:
    """Run ``step(i)`` for the warm-up steps, then the profiled ones; return profiled steps/s.

    Steps are numbered from 0 with the warm-up included, as in the ladder. The device is
    synchronized before the profiler starts and after the last step, and nowhere else here.
    """
    for index in range(config.warmup):
        step(index)
    synchronize(config.device)
    if config.on_gpu:
        torch.cuda.profiler.start()
    started = time.perf_counter()
    for index in range(config.warmup, config.warmup + config.steps):
        step(index)
    synchronize(config.device)
    elapsed = time.perf_counter() - started
    if config.on_gpu:
        torch.cuda.profiler.stop()
    return config.steps / elapsed


# Warm-up iterations on a side stream before a capture, as in PyTorch's whole-network example.
CAPTURE_WARMUP = 3


def cuda_graph(train_step: Callable[[], object], optimizer) -> torch.cuda.CUDAGraph:
    """``train_step`` captured once in a CUDA graph, the recipe in PyTorch's CUDA-graphs notes:
    warm-up iterations on a side stream, the gradients set to None (they are then made inside
    the graph's private memory pool), then the capture. ``graph.replay()`` runs the step."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(CAPTURE_WARMUP):
            train_step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    optimizer.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        train_step()
    return graph


def announce(config: Config) -> None:
    """The first line a script prints."""
    print(config.describe(), flush=True)


def report(steps_per_s: float) -> None:
    """The last line a script prints."""
    print(f"steps_per_s={steps_per_s:.3f}", flush=True)
