"""Mistake: ``torch.backends.cudnn.benchmark = True`` with a new input shape every step.

ResNet-18 (torchvision, random weights) trains on batches made on the GPU once, but each
step's images have another size (``--min-size`` px, then ``--size-step`` px more every step:
variable-resolution data without bucketing). With ``cudnn.benchmark`` on, cuDNN times every
candidate algorithm for every convolution at every new shape before it runs it: each step is
an autotuning step.

The GPU timeline: every ``step N`` holds thousands of short trial kernels, device and event
synchronizations between them and workspace ``cudaMalloc``/``cudaFree`` calls, and no two
steps run the same set of kernels; the GPU idles between the trials while the host drives
them. The fix: fixed (or bucketed) input shapes, so each shape is tuned once, or
``cudnn.benchmark = False`` for data whose shapes keep changing.
"""

from __future__ import annotations

import nvtx
import torch
import torchvision

if __package__:  # python -m nsysprobe.workloads.cudnn_autotune
    from .mistakes import BLUE, GREEN, Size, announce, measure, parse_args, report
else:  # python workloads/cudnn_autotune.py
    from mistakes import BLUE, GREEN, Size, announce, measure, parse_args, report

SIZES = {
    "batch_size": Size(32, 2, "images per step"),
    "min_size": Size(128, 32, "the first step's image side in px"),
    "size_step": Size(8, 4, "px added to the image side every step"),
}
NUM_CLASSES = 1000


def main(argv: list[str] | None = None) -> None:
    config = parse_args("cudnn_autotune", __doc__.splitlines()[0], SIZES, argv)
    announce(config)
    torch.backends.cudnn.benchmark = True  # the mistake, with the shapes below
    device = config.device
    model = torchvision.models.resnet18(num_classes=NUM_CLASSES).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    criterion = torch.nn.CrossEntropyLoss()
    largest = config.min_size + config.size_step * (config.warmup + config.steps)
    pool = torch.randn(config.batch_size, 3, largest, largest, device=device)
    labels = torch.randint(NUM_CLASSES, (config.batch_size,), device=device)

    def step(index: int) -> None:
        side = config.min_size + config.size_step * index
        with nvtx.annotate(f"step {index}", color=BLUE):
            with nvtx.annotate("train", color=GREEN):
                optimizer.zero_grad(set_to_none=True)
                criterion(model(pool[:, :, :side, :side]), labels).backward()
                optimizer.step()

    report(measure(config, step))


if __name__ == "__main__":
    main()
