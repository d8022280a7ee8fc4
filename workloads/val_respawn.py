"""Mistake: a validation pass every few steps whose DataLoader starts new workers each time.

ResNet-18 (torchvision, random weights) trains with SGD on one batch made on the GPU once.
Every ``--val-every`` steps, inside an NVTX range ``validate``, it runs ``--val-batches``
batches of a validation DataLoader (``--workers`` worker processes over the CPU-heavy dataset
of ``slow_loader.py``, ``persistent_workers=False``, the default) under ``torch.no_grad()``:
each pass starts new worker processes and waits for their first batches.

The GPU timeline: most ``step N`` windows are busy; every ``--val-every``-th one holds the
validation, mostly idle while the new workers start. A periodic step, its cost the workers'
start-up. The fix: ``persistent_workers=True`` on the validation loader (the workers then
live between passes), and validate less often.
"""

from __future__ import annotations

import nvtx
import torch
import torchvision
from torch.utils.data import DataLoader

if __package__:  # python -m nsysprobe.workloads.val_respawn
    from .mistakes import BLUE, GREEN, RED, Size, announce, fail, measure, parse_args, report
    from .slow_loader import DecodedImages
else:  # python workloads/val_respawn.py
    from mistakes import BLUE, GREEN, RED, Size, announce, fail, measure, parse_args, report
    from slow_loader import DecodedImages

SIZES = {
    "workers": Size(4, 2, "validation DataLoader worker processes", minimum=0),
    "val_every": Size(5, 2, "training steps between validation passes"),
    "val_batches": Size(4, 2, "batches per validation pass"),
    "batch_size": Size(64, 4, "images per batch"),
    "image_size": Size(144, 48, "side of the decoded image in px"),
    "crop_size": Size(128, 32, "side of the random resized crop fed to the model"),
}
NUM_CLASSES = 1000


def main(argv: list[str] | None = None) -> None:
    config = parse_args("val_respawn", __doc__.splitlines()[0], SIZES, argv)
    if config.crop_size > config.image_size:
        fail(config, "--crop-size must not exceed --image-size")
    announce(config)
    device = config.device
    model = torchvision.models.resnet18(num_classes=NUM_CLASSES).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    criterion = torch.nn.CrossEntropyLoss()
    side = config.crop_size
    images = torch.randn(config.batch_size, 3, side, side, device=device)
    labels = torch.randint(NUM_CLASSES, (config.batch_size,), device=device)
    length = config.val_batches * config.batch_size
    val_set = DecodedImages(length, config.image_size, config.crop_size, config.seed + 1)
    val_loader = DataLoader(
        val_set,
        batch_size=config.batch_size,
        num_workers=config.workers,
        persistent_workers=False,  # the mistake (and the default)
    )

    def step(index: int) -> None:
        with nvtx.annotate(f"step {index}", color=BLUE):
            with nvtx.annotate("train", color=GREEN):
                model.train()
                optimizer.zero_grad(set_to_none=True)
                criterion(model(images), labels).backward()
                optimizer.step()
            if (index + 1) % config.val_every == 0:
                with nvtx.annotate("validate", color=RED), torch.no_grad():
                    model.eval()
                    correct = torch.zeros((), device=device)
                    for x, y in val_loader:
                        out = model(x.to(device, non_blocking=True))
                        correct += (out.argmax(1) == y.to(device)).sum()
                    correct.item()

    report(measure(config, step))


if __name__ == "__main__":
    main()
