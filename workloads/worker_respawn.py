"""Mistake: DataLoader workers started again every (short) epoch: no ``persistent_workers``.

ResNet-18 (torchvision, random weights) trains at ``--crop-size`` px on the CPU-heavy dataset
of ``slow_loader.py`` (a decode's worth of work and an ImageNet augmentation per sample) with
``--workers`` worker processes, enough for the GPU's pace once they run. But an epoch is
short (``--epoch-batches`` batches: a small dataset, or a validation set), and the loader is
built with ``persistent_workers=False``, the default: every epoch starts a new iterator, which
starts ``--workers`` new processes and waits for their first batches, and shuts them down at
the epoch's end.

The GPU timeline: within an epoch the steps come at the workers' pace; at each epoch's first
step the training thread waits while the new workers are born (new ``pt_data_worker``
processes in the trace) and make their first batches. The fix: ``persistent_workers=True``
(and a ``prefetch_factor`` that covers the first batches); a longer epoch only hides it.
"""

from __future__ import annotations

import nvtx
import torch
import torchvision
from torch.utils.data import DataLoader

if __package__:  # python -m nsysprobe.workloads.worker_respawn
    from .mistakes import BLUE, GREEN, RED, Size, announce, fail, measure, parse_args, report
    from .slow_loader import DecodedImages
else:  # python workloads/worker_respawn.py
    from mistakes import BLUE, GREEN, RED, Size, announce, fail, measure, parse_args, report
    from slow_loader import DecodedImages

SIZES = {
    "workers": Size(8, 2, "DataLoader worker processes", minimum=0),
    "epoch_batches": Size(4, 2, "batches per epoch"),
    "batch_size": Size(64, 4, "images per step"),
    "image_size": Size(144, 48, "side of the decoded image in px"),
    "crop_size": Size(128, 32, "side of the random resized crop fed to the model"),
}
NUM_CLASSES = 1000


def main(argv: list[str] | None = None) -> None:
    config = parse_args("worker_respawn", __doc__.splitlines()[0], SIZES, argv)
    if config.crop_size > config.image_size:
        fail(config, "--crop-size must not exceed --image-size")
    announce(config)
    device = config.device
    model = torchvision.models.resnet18(num_classes=NUM_CLASSES).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    criterion = torch.nn.CrossEntropyLoss()
    length = config.epoch_batches * config.batch_size
    dataset = DecodedImages(length, config.image_size, config.crop_size, config.seed)
    loader = DataLoader(
        dataset,
        batch_size=config.batch_size,
        shuffle=True,
        num_workers=config.workers,
        pin_memory=config.on_gpu,
        persistent_workers=False,  # the mistake (and the default)
    )
    batches = iter(())

    def step(index: int) -> None:
        nonlocal batches
        with nvtx.annotate(f"Batch {index}", color=BLUE):
            with nvtx.annotate("data", color=RED):
                batch = next(batches, None)
                if batch is None:  # a new epoch: a new iterator, new worker processes
                    batches = iter(loader)
                    batch = next(batches)
                images, labels = (t.to(device, non_blocking=True) for t in batch)
            with nvtx.annotate("step", color=GREEN):
                optimizer.zero_grad(set_to_none=True)
                criterion(model(images), labels).backward()
                optimizer.step()

    report(measure(config, step))


if __name__ == "__main__":
    main()
