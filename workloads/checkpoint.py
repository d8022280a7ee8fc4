"""Mistake: a full checkpoint written from the training loop every few steps, synchronously.

ResNet-18 (torchvision, random weights) trains with Adam on one batch made on the GPU once
(``--image-size`` px, ``--batch-size`` images), a step the CPU queues well ahead of the GPU.
Every ``--every`` steps the loop saves the model's and the optimizer's state with
``torch.save`` into a file in a temporary folder, inside an NVTX range ``save checkpoint``:
some 135 MB, every tensor copied to the host first.

The GPU timeline: most ``step N`` windows are busy end to end; every ``--every``-th one holds
``save checkpoint``, where the thread waits in device-to-host copies until the queued steps
are done and then serializes and writes while the GPU idles. A periodic step: its period and
its cost are the finding, not "device-to-host copies". The fix: checkpoint less often, or
asynchronously (``torch.distributed.checkpoint.async_save``, or copy the state to pinned host
memory with ``non_blocking`` copies and write it from another thread).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import nvtx
import torch
import torchvision

if __package__:  # python -m nsysprobe.workloads.checkpoint
    from .mistakes import BLUE, GREEN, RED, Size, announce, measure, parse_args, report
else:  # python workloads/checkpoint.py
    from mistakes import BLUE, GREEN, RED, Size, announce, measure, parse_args, report

SIZES = {
    "batch_size": Size(64, 2, "images per step"),
    "image_size": Size(224, 32, "image side in px"),
    "every": Size(4, 2, "steps between checkpoints"),
}
NUM_CLASSES = 1000


def main(argv: list[str] | None = None) -> None:
    config = parse_args("checkpoint", __doc__.splitlines()[0], SIZES, argv)
    announce(config)
    device = config.device
    model = torchvision.models.resnet18(num_classes=NUM_CLASSES).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    criterion = torch.nn.CrossEntropyLoss()
    side = config.image_size
    images = torch.randn(config.batch_size, 3, side, side, device=device)
    labels = torch.randint(NUM_CLASSES, (config.batch_size,), device=device)
    folder = Path(tempfile.mkdtemp(prefix="nsysprobe-checkpoint-"))

    def step(index: int) -> None:
        with nvtx.annotate(f"step {index}", color=BLUE):
            with nvtx.annotate("train", color=GREEN):
                optimizer.zero_grad(set_to_none=True)
                criterion(model(images), labels).backward()
                optimizer.step()
            if (index + 1) % config.every == 0:
                with nvtx.annotate("save checkpoint", color=RED):
                    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
                    torch.save(state, folder / "last.pt")

    try:
        report(measure(config, step))
    finally:
        for path in folder.iterdir():
            path.unlink()
        folder.rmdir()


if __name__ == "__main__":
    main()
