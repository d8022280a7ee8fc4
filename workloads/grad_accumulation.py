"""Mistake: gradient accumulation over micro-batches from a loader that cannot keep up.

ResNet-18 (torchvision, random weights) trains at ``--crop-size`` px; each step accumulates
gradients over ``--micro-batches`` micro-batches of ``--batch-size`` images, each taken from a
DataLoader with ``--workers`` worker processes over the CPU-heavy dataset of
``slow_loader.py`` (a decode's worth of work and an ImageNet augmentation per sample) and
copied from pageable memory. The loop names its steps only (``step N``, and
``forward/backward`` around each micro-batch's compute): no range says where the input comes
from.

The GPU timeline: every micro-batch, not only a step's first, waits for the workers: the
training thread blocks in the loader before each copy, the GPU idle. The fix: more workers
(or cheaper per-sample work), and ``pin_memory=True`` with ``non_blocking`` copies.
"""

from __future__ import annotations

import nvtx
import torch
import torchvision
from torch.utils.data import DataLoader

if __package__:  # python -m nsysprobe.workloads.grad_accumulation
    from .mistakes import BLUE, GREEN, Size, announce, fail, measure, parse_args, report
    from .slow_loader import DecodedImages
else:  # python workloads/grad_accumulation.py
    from mistakes import BLUE, GREEN, Size, announce, fail, measure, parse_args, report
    from slow_loader import DecodedImages

SIZES = {
    "workers": Size(3, 2, "DataLoader worker processes", minimum=0),
    "micro_batches": Size(4, 2, "micro-batches per step"),
    "batch_size": Size(32, 4, "images per micro-batch"),
    "image_size": Size(144, 48, "side of the decoded image in px"),
    "crop_size": Size(128, 32, "side of the random resized crop fed to the model"),
}
NUM_CLASSES = 1000


def main(argv: list[str] | None = None) -> None:
    config = parse_args("grad_accumulation", __doc__.splitlines()[0], SIZES, argv)
    if config.crop_size > config.image_size:
        fail(config, "--crop-size must not exceed --image-size")
    announce(config)
    device = config.device
    model = torchvision.models.resnet18(num_classes=NUM_CLASSES).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    criterion = torch.nn.CrossEntropyLoss()
    micro = config.micro_batches
    length = (config.steps + config.warmup + 2) * micro * config.batch_size
    dataset = DecodedImages(length, config.image_size, config.crop_size, config.seed)
    loader = DataLoader(
        dataset,
        batch_size=config.batch_size,
        num_workers=config.workers,
        persistent_workers=config.workers > 0,
    )
    batches = iter(loader)

    def step(index: int) -> None:
        with nvtx.annotate(f"step {index}", color=BLUE):
            optimizer.zero_grad(set_to_none=True)
            for _ in range(micro):
                images, labels = (t.to(device) for t in next(batches))
                with nvtx.annotate("forward/backward", color=GREEN):
                    (criterion(model(images), labels) / micro).backward()
            optimizer.step()

    report(measure(config, step))


if __name__ == "__main__":
    main()
