"""Mistake: weight histograms logged from the training loop every few steps.

ResNet-18 (torchvision, random weights) trains with Adam on one batch made on the GPU once
(``--image-size`` px, ``--batch-size`` images), a step the CPU queues well ahead of the GPU.
Every ``--log-every`` steps, inside an NVTX range ``log metrics``, the loop does what a
TensorBoard or W&B hook does: reads the loss and the gradient norm back (``.item()``), copies
every parameter to the host for a numpy histogram, and appends a line to a log file.

The GPU timeline: most ``step N`` windows are busy end to end; every ``--log-every``-th one
drains the queue at the first read-back and idles while the host builds the histograms. A
periodic step: its period and cost are the finding. The fix: log scalars accumulated on the
GPU, histograms rarely (or from a copy made with ``non_blocking`` copies into pinned memory,
in another thread).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import nvtx
import torch
import torchvision

if __package__:  # python -m nsysprobe.workloads.weight_histograms
    from .mistakes import BLUE, GREEN, RED, Size, announce, measure, parse_args, report
else:  # python workloads/weight_histograms.py
    from mistakes import BLUE, GREEN, RED, Size, announce, measure, parse_args, report

SIZES = {
    "batch_size": Size(64, 2, "images per step"),
    "image_size": Size(224, 32, "image side in px"),
    "log_every": Size(4, 2, "steps between log lines"),
}
NUM_CLASSES = 1000
BINS = 64


def main(argv: list[str] | None = None) -> None:
    config = parse_args("weight_histograms", __doc__.splitlines()[0], SIZES, argv)
    announce(config)
    device = config.device
    model = torchvision.models.resnet18(num_classes=NUM_CLASSES).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    criterion = torch.nn.CrossEntropyLoss()
    side = config.image_size
    images = torch.randn(config.batch_size, 3, side, side, device=device)
    labels = torch.randint(NUM_CLASSES, (config.batch_size,), device=device)
    log = Path(tempfile.mkdtemp(prefix="nsysprobe-histograms-")) / "log.jsonl"

    def step(index: int) -> None:
        with nvtx.annotate(f"step {index}", color=BLUE):
            with nvtx.annotate("train", color=GREEN):
                optimizer.zero_grad(set_to_none=True)
                loss = criterion(model(images), labels)
                loss.backward()
                norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9)
                optimizer.step()
            if (index + 1) % config.log_every == 0:
                with nvtx.annotate("log metrics", color=RED):
                    line = {"step": index, "loss": loss.item(), "grad_norm": norm.item()}
                    for name, p in model.named_parameters():
                        counts, _ = np.histogram(p.detach().cpu().numpy(), bins=BINS)
                        line[name] = counts.tolist()
                    with log.open("a") as f:
                        f.write(json.dumps(line) + "\n")

    try:
        report(measure(config, step))
    finally:
        log.unlink(missing_ok=True)
        log.parent.rmdir()


if __name__ == "__main__":
    main()
