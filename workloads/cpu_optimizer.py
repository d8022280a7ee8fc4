"""Mistake: the optimizer kept on the CPU (gradients copied down, a CPU Adam step, weights up).

An MLP (``--width`` wide, ``--layers`` deep) runs forward and backward on the GPU on batches
made there once. Its optimizer state lives on the host, as an offloading setup without
overlap does it: each step copies every gradient to host memory (``grads to host``), runs
``torch.optim.Adam`` on fp32 master weights on the CPU (``cpu optimizer``) and copies the
updated weights back into the model (``weights to device``).

The GPU timeline: each ``step N`` range queues the forward and backward, then blocks in the
device-to-host copies until the backward is done; the GPU then idles for the whole CPU Adam
step and the host-to-device copies of the weights, which are not the step's input batch. The
idle is the CPU optimizer's: the fix is to keep the optimizer on the GPU (``fused=True``
Adam), or, when memory forces offloading, to overlap it (ZeRO-Offload style: the CPU step of
one bucket while the GPU computes the next, pinned buffers, ``non_blocking`` copies).
"""

from __future__ import annotations

import nvtx
import torch

if __package__:  # python -m nsysprobe.workloads.cpu_optimizer
    from .mistakes import BLUE, GREEN, RED, YELLOW, Size, announce, measure, parse_args, report
else:  # python workloads/cpu_optimizer.py
    from mistakes import BLUE, GREEN, RED, YELLOW, Size, announce, measure, parse_args, report
from torch import nn

SIZES = {
    "batch_size": Size(2048, 16, "samples per step"),
    "width": Size(2048, 64, "MLP width"),
    "layers": Size(6, 2, "hidden layers"),
}


def mlp(width: int, layers: int) -> nn.Sequential:
    return nn.Sequential(*(m for _ in range(layers) for m in (nn.Linear(width, width), nn.GELU())))


def main(argv: list[str] | None = None) -> None:
    config = parse_args("cpu_optimizer", __doc__.splitlines()[0], SIZES, argv)
    announce(config)
    device = config.device
    model = mlp(config.width, config.layers).to(device)
    params = list(model.parameters())
    # fp32 master weights and the Adam state on the host, as an offloaded optimizer keeps them.
    master = [p.detach().to("cpu", copy=True).requires_grad_(True) for p in params]
    optimizer = torch.optim.Adam(master, lr=1e-4)
    criterion = nn.MSELoss()
    inputs = torch.randn(config.batch_size, config.width, device=device)
    targets = torch.randn(config.batch_size, config.width, device=device)

    def step(index: int) -> None:
        with nvtx.annotate(f"step {index}", color=BLUE):
            with nvtx.annotate("forward/backward", color=GREEN):
                for p in params:
                    p.grad = None
                criterion(model(inputs), targets).backward()
            with nvtx.annotate("grads to host", color=YELLOW):
                for m, p in zip(master, params):
                    m.grad = p.grad.to("cpu")
            with nvtx.annotate("cpu optimizer", color=RED):
                optimizer.step()
            with nvtx.annotate("weights to device", color=YELLOW), torch.no_grad():
                for m, p in zip(master, params):
                    p.copy_(m)

    report(measure(config, step))


if __name__ == "__main__":
    main()
