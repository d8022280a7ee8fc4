"""The control: a step the GPU is busy with all the time; no input or host-side mistake.

ResNet-50 (torchvision, random weights) trains at 224 px, batch 256, with SGD, on one batch
made on the GPU once: no loader, no copies, no readbacks, no Python between steps. The CPU
queues each step in a fraction of the time the GPU takes to run it, so it stays ahead.

The GPU timeline: kernels back to back through every ``step`` range (the same name every
step, pushed with ``torch.cuda.nvtx.range_push``), the GPU busy more than 95 % of the time.
The CPU runs ahead until the launch queue is full and then waits inside ``cudaLaunchKernel``,
so its ``step`` ranges run about a queue's worth of kernels ahead of the GPU, and it waits
for the GPU once more in the synchronization after the last step. nsysprobe's verdict is
``gpu_bound``: no input-side fix would help.

Measured on the H200 (torch 2.11, GPU activity through torch.profiler, 2026-12-01): about
8.6 steps/s, 115 ms of GPU work a step, the GPU busy 99 % with no gap of 0.1 ms or more.

What would speed it up is compute: mixed precision (``torch.autocast`` with bfloat16),
``channels_last``, ``torch.compile``, Nsight Compute on the longest kernels.
"""

from __future__ import annotations

import torch
import torchvision

if __package__:  # python -m nsysprobe.workloads.compute_bound
    from .mistakes import Size, announce, measure, parse_args, report
else:  # python workloads/compute_bound.py
    from mistakes import Size, announce, measure, parse_args, report

SIZES = {
    "batch_size": Size(256, 2, "images per step"),
    "image_size": Size(224, 64, "image side in px"),
}
NUM_CLASSES = 1000


def main(argv: list[str] | None = None) -> None:
    config = parse_args("compute_bound", __doc__.splitlines()[0], SIZES, argv)
    announce(config)
    device = config.device
    model = torchvision.models.resnet50(num_classes=NUM_CLASSES).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    criterion = torch.nn.CrossEntropyLoss()
    side = config.image_size
    images = torch.randn(config.batch_size, 3, side, side, device=device)
    labels = torch.randint(NUM_CLASSES, (config.batch_size,), device=device)

    def step(index: int) -> None:
        torch.cuda.nvtx.range_push("step")
        optimizer.zero_grad(set_to_none=True)
        loss = criterion(model(images), labels)
        loss.backward()
        optimizer.step()
        torch.cuda.nvtx.range_pop()

    report(measure(config, step))


if __name__ == "__main__":
    main()
