"""Mistake: a deep model of tiny layers, so the step is bound by kernel launches.

An MLP of ``--depth`` blocks of ``Linear(64, 64)`` + ReLU (150 by default) at batch 32 trains
with SGD on batches made on the GPU once. Each forward, backward and optimizer kernel does a
few microseconds of work, less than the CPU needs to launch it through PyTorch's eager
dispatcher, so the GPU runs each kernel as soon as it arrives and waits for the next.

The GPU timeline (eager): within each ``iteration N`` range the kernel row is a comb of
thousands of kernels of a few µs each with idle slivers between them, the GPU busy only a
small share of the step although nothing synchronizes; the CUDA API row is solid
``cudaLaunchKernel``. The CPU, not the GPU, sets the pace: nsysprobe's ``launch_overhead``.

The fix, ``--cuda-graph``: the whole training step (forward, loss, backward, optimizer step)
is captured once with ``torch.cuda.graph`` after warm-up iterations on a side stream, the
recipe in PyTorch's CUDA-graphs notes (static input and target tensors, SGD, ``zero_grad``
with ``set_to_none=True`` before capture); each step copies its batch into the static input
and target and replays the graph: one ``cudaGraphLaunch`` per step and the kernels packed
back to back. ``torch.compile(mode="reduce-overhead")`` does the same automatically; fusing
layers or making them wider helps too.

Measured on the H200 (torch 2.11, GPU activity through torch.profiler, 2026-12-01): eager,
35 steps/s, about 1,400 kernels and 150 memsets a step with 3.5 ms of GPU work in a 28 ms
step (the GPU busy 8-12 %); with ``--cuda-graph``, 250 steps/s, the GPU busy 77 % (the rest is
the replay launches and the batch copies).
"""

from __future__ import annotations

import torch

if __package__:  # python -m nsysprobe.workloads.tiny_layers
    from .mistakes import Size, announce, cuda_graph, fail, measure, parse_args, report
else:  # python workloads/tiny_layers.py
    from mistakes import Size, announce, cuda_graph, fail, measure, parse_args, report
from torch import nn

SIZES = {
    "depth": Size(150, 20, "Linear(width, width) + ReLU blocks"),
    "width": Size(64, 64, "features per layer"),
    "batch_size": Size(32, 32, "samples per step"),
    "batches": Size(8, 2, "distinct batches made on the device once, used in turn"),
}
FLAGS = {"cuda_graph": "capture the training step once in a CUDA graph and replay it (the fix)"}


def tiny_mlp(depth: int, width: int) -> nn.Sequential:
    return nn.Sequential(*(m for _ in range(depth) for m in (nn.Linear(width, width), nn.ReLU())))


def main(argv: list[str] | None = None) -> None:
    config = parse_args("tiny_layers", __doc__.splitlines()[0], SIZES, argv, flags=FLAGS)
    if config.cuda_graph and not config.on_gpu:
        fail(config, "--cuda-graph needs a CUDA device; run it without --device cpu")
    announce(config)
    device = config.device
    model = tiny_mlp(config.depth, config.width).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    criterion = nn.MSELoss()
    shape = (config.batches, config.batch_size, config.width)
    inputs = torch.randn(shape, device=device)
    targets = torch.randn(shape, device=device)

    def train_step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    def eager_step(index: int) -> None:
        torch.cuda.nvtx.range_push(f"iteration {index}")
        train_step(inputs[index % config.batches], targets[index % config.batches])
        torch.cuda.nvtx.range_pop()

    step = eager_step
    if config.cuda_graph:
        static_input, static_target = inputs[0].clone(), targets[0].clone()
        graph = cuda_graph(lambda: train_step(static_input, static_target), optimizer)

        def graph_step(index: int) -> None:
            torch.cuda.nvtx.range_push(f"iteration {index}")
            static_input.copy_(inputs[index % config.batches])
            static_target.copy_(targets[index % config.batches])
            graph.replay()
            torch.cuda.nvtx.range_pop()

        step = graph_step

    report(measure(config, step))


if __name__ == "__main__":
    main()
