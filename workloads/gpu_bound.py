"""A GPU-bound loop: a wide MLP on data resident on the GPU, so the CPU runs ahead of the GPU.

An MLP of ``--depth`` blocks of ``Linear(width, width)`` + ReLU trains with Adam on batches
made on the GPU once: no loader, no copies, no read-backs unless asked for. The CPU queues a
step's few dozen kernels in a millisecond or two, while the GPU needs tens of milliseconds to
run them, so the CPU's ``step N`` ranges end long before the GPU work they launched; the
profiled steps are all queued within a fraction of the time the GPU takes, and the CPU then
waits in the synchronization after the last step. Timing the steps by their CPU ranges
measures the launch rate, not the training rate (nsysprobe times a step where the GPU ran it).

Options that change the GPU's speed or the coupling, one at a time:

    --precision fp32   GEMMs on CUDA cores in full fp32 (TF32 off): the slowest
    --precision tf32   the same GEMMs on tensor cores in TF32
    --precision bf16   torch.autocast(bfloat16)
    --sync-every N     ``loss.item()`` every N steps: the CPU waits for the GPU every N steps
    --cuda-graph       the step captured once in a CUDA graph and replayed (one launch a step)

Measured on the H200: see ``sample_traces/manifest.json`` (``h200_gpu_bound_*``).

The fix for the fp32 loop is in its kernel names: TF32 (``torch.backends.cuda.matmul.
allow_tf32 = True``) or bf16 autocast; beyond that, compute (Nsight Compute, fusion).
"""

from __future__ import annotations

import torch

if __package__:  # python -m nsysprobe.workloads.gpu_bound
    from .mistakes import Size, announce, cuda_graph, fail, measure, parse_args, report
else:  # python workloads/gpu_bound.py
    from mistakes import Size, announce, cuda_graph, fail, measure, parse_args, report
from torch import nn

SIZES = {
    "depth": Size(4, 2, "Linear(width, width) + ReLU blocks"),
    "width": Size(4096, 64, "features per layer"),
    "batch_size": Size(8192, 32, "samples per step"),
    "sync_every": Size(0, 0, "loss.item() every N steps (0: never)", minimum=0),
}
FLAGS = {"cuda_graph": "capture the training step once in a CUDA graph and replay it"}
CHOICES = {
    "precision": (
        ("fp32", "tf32", "bf16"),
        "fp32 on CUDA cores (TF32 off), tf32 on tensor cores, or bf16 autocast",
    )
}


def mlp(depth: int, width: int) -> nn.Sequential:
    return nn.Sequential(*(m for _ in range(depth) for m in (nn.Linear(width, width), nn.ReLU())))


def set_precision(precision: str) -> None:
    """TF32 on or off for matrix multiplies and convolutions (bf16 runs them under autocast)."""
    tf32 = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32


def main(argv: list[str] | None = None) -> None:
    config = parse_args(
        "gpu_bound", __doc__.splitlines()[0], SIZES, argv, flags=FLAGS, choices=CHOICES
    )
    if config.cuda_graph and not config.on_gpu:
        fail(config, "--cuda-graph needs a CUDA device; run it without --device cpu")
    if config.cuda_graph and config.sync_every:
        fail(config, "--cuda-graph replays the step whole; leave out --sync-every")
    announce(config)
    device = config.device
    set_precision(config.precision)
    model = mlp(config.depth, config.width).to(device)
    # capturable: the optimizer's step counter stays on the GPU, so a graph can replay it.
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, capturable=config.cuda_graph)
    criterion = nn.MSELoss()
    inputs = torch.randn(config.batch_size, config.width, device=device)
    targets = torch.randn(config.batch_size, config.width, device=device)
    bf16 = config.precision == "bf16"

    def train_step() -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=bf16):
            loss = criterion(model(inputs), targets)
        loss.backward()
        optimizer.step()
        return loss

    def eager_step(index: int) -> None:
        torch.cuda.nvtx.range_push(f"step {index}")
        loss = train_step()
        if config.sync_every and (index + 1) % config.sync_every == 0:
            print(f"step {index} loss {loss.item():.4f}", flush=True)
        torch.cuda.nvtx.range_pop()

    step = eager_step
    if config.cuda_graph:
        graph = cuda_graph(train_step, optimizer)

        def graph_step(index: int) -> None:
            torch.cuda.nvtx.range_push(f"step {index}")
            graph.replay()
            torch.cuda.nvtx.range_pop()

        step = graph_step

    report(measure(config, step))


if __name__ == "__main__":
    main()
