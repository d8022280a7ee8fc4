"""Mistake: a per-sample post-process of the logits in Python on the host, every step.

ResNet-18 (torchvision, random weights) trains on one batch made on the GPU once. After each
step the loop turns the logits into per-sample top-5 predictions and their probabilities
the way a quick script does it: ``logits.cpu().tolist()``, then for each sample a Python
softmax and a ``sorted()`` over the classes, inside an NVTX range ``postprocess``.

The GPU timeline: the read-back at the start of ``postprocess`` waits for the step to drain
the GPU (a few ms of copy), then the GPU idles for all of the Python loop: the host work
after the read-back, named by the range it runs in, is the cost, not the copy. The fix:
``torch.topk``/``softmax`` on the GPU and read back the 5 x batch result, every N steps or a
step late from pinned memory.
"""

from __future__ import annotations

import math

import nvtx
import torch
import torchvision

if __package__:  # python -m nsysprobe.workloads.host_postprocess
    from .mistakes import BLUE, GREEN, RED, Size, announce, measure, parse_args, report
else:  # python workloads/host_postprocess.py
    from mistakes import BLUE, GREEN, RED, Size, announce, measure, parse_args, report

SIZES = {
    "batch_size": Size(128, 2, "images per step"),
    "image_size": Size(160, 32, "image side in px"),
}
NUM_CLASSES = 1000
TOP = 5


def top_predictions(logits: list[list[float]]) -> list[list[tuple[int, float]]]:
    """Per sample, its TOP classes and their softmax probabilities, in plain Python."""
    out = []
    for row in logits:
        peak = max(row)
        weights = [math.exp(v - peak) for v in row]
        total = sum(weights)
        ranked = sorted(range(len(row)), key=lambda k: weights[k], reverse=True)
        out.append([(k, weights[k] / total) for k in ranked[:TOP]])
    return out


def main(argv: list[str] | None = None) -> None:
    config = parse_args("host_postprocess", __doc__.splitlines()[0], SIZES, argv)
    announce(config)
    device = config.device
    model = torchvision.models.resnet18(num_classes=NUM_CLASSES).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    criterion = torch.nn.CrossEntropyLoss()
    side = config.image_size
    images = torch.randn(config.batch_size, 3, side, side, device=device)
    labels = torch.randint(NUM_CLASSES, (config.batch_size,), device=device)
    predictions: list = []

    def step(index: int) -> None:
        with nvtx.annotate(f"step {index}", color=BLUE):
            with nvtx.annotate("train", color=GREEN):
                optimizer.zero_grad(set_to_none=True)
                logits = model(images)
                criterion(logits, labels).backward()
                optimizer.step()
            with nvtx.annotate("postprocess", color=RED):
                predictions[:] = top_predictions(logits.detach().cpu().tolist())

    report(measure(config, step))


if __name__ == "__main__":
    main()
