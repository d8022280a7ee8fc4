"""Mistake: too few DataLoader workers for a dataset that does real CPU work per sample.

ResNet-18 (torchvision, random weights) trains at 224 px, batch 64, on a dataset whose
``__getitem__`` does what a JPEG pipeline does on the CPU: it "decodes" a 3x256x256 uint8
image (made from a seeded generator), smooths it, takes a random resized crop to 224 px with
antialiasing, flips it, jitters brightness, contrast and saturation, and normalizes it;
several milliseconds per sample on one core. Only ``--workers`` (2 by default) processes make
batches. Everything else is right: ``pin_memory=True`` and ``non_blocking=True`` copies, so
the loader's throughput is the only problem.

The GPU timeline: in each ``Batch N`` range the training thread waits in ``data`` (in
``next()`` on the loader, polling its worker queue) for most of the step; ``step`` then queues
a ResNet-18 step that the GPU finishes in a fraction of the time, and the GPU idles until
the next batch arrives. The idle gaps fall inside ``data``, with the worker processes busy the
whole time: nsysprobe's ``multiprocess_loading`` (here: more workers). Each worker makes a
whole batch, so with 2 workers batches arrive in pairs: every other step waits about two
batches' worth of CPU time and the next finds its batch ready.

Measured on the H200 (torch 2.11, GPU activity through torch.profiler, 2026-12-01): about
6.3 steps/s, 14 ms of GPU work in a 140-160 ms step (the GPU busy 10 %); about 4.7 ms of CPU
per sample.

The fix: ``num_workers`` up to the CPU cores per GPU, ``persistent_workers=True`` and a
``prefetch_factor`` that covers the jitter; then cheaper transforms (decode at lower
resolution, augment on the GPU, NVIDIA DALI).
"""

from __future__ import annotations

import nvtx
import torch
import torch.nn.functional as F
import torchvision

if __package__:  # python -m nsysprobe.workloads.slow_loader
    from .mistakes import BLUE, GREEN, RED, Size, announce, fail, measure, parse_args, report
else:  # python workloads/slow_loader.py
    from mistakes import BLUE, GREEN, RED, Size, announce, fail, measure, parse_args, report
from torch.utils.data import DataLoader, Dataset

SIZES = {
    "workers": Size(2, 2, "DataLoader worker processes", minimum=0),
    "batch_size": Size(64, 4, "images per step"),
    "image_size": Size(256, 64, "side of the decoded image in px"),
    "crop_size": Size(224, 56, "side of the random resized crop fed to the model"),
}
NUM_CLASSES = 1000
MEAN = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)
GRAY = torch.tensor([0.299, 0.587, 0.114]).view(3, 1, 1)
BLUR = torch.full((3, 1, 5, 5), 1 / 25)


class DecodedImages(Dataset):
    """Per sample: a decode's worth of work and a standard ImageNet augmentation, on the CPU."""

    def __init__(self, length: int, image_size: int, crop_size: int, seed: int) -> None:
        self.length = length
        self.image_size = image_size
        self.crop_size = crop_size
        self.seed = seed

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
        side = self.image_size
        raw = torch.randint(0, 256, (3, side, side), dtype=torch.uint8, generator=g)
        image = F.conv2d(raw.float().div_(255)[None], BLUR, padding=2, groups=3)
        # Random resized crop: 35-100 % of the area, aspect 3/4-4/3, resized with antialiasing.
        area = side * side * (0.35 + 0.65 * torch.rand((), generator=g).item())
        aspect = 0.75 + (4 / 3 - 0.75) * torch.rand((), generator=g).item()
        height = min(side, round((area / aspect) ** 0.5))
        width = min(side, round((area * aspect) ** 0.5))
        top = int(torch.randint(side - height + 1, (), generator=g))
        left = int(torch.randint(side - width + 1, (), generator=g))
        crop = image[:, :, top : top + height, left : left + width]
        size = (self.crop_size, self.crop_size)
        image = F.interpolate(crop, size=size, mode="bilinear", antialias=True)[0]
        if torch.rand((), generator=g) < 0.5:
            image = image.flip(-1)
        brightness, contrast, saturation = (0.6 + 0.8 * torch.rand(3, generator=g)).tolist()
        image = image * brightness
        mean = image.mean()
        image = (image - mean) * contrast + mean
        gray = (image * GRAY).sum(dim=0, keepdim=True)
        image = ((image - gray) * saturation + gray).clamp_(0, 1)
        label = torch.randint(NUM_CLASSES, (), generator=g)
        return (image - MEAN) / STD, label


def main(argv: list[str] | None = None) -> None:
    config = parse_args("slow_loader", __doc__.splitlines()[0], SIZES, argv)
    if config.crop_size > config.image_size:
        fail(config, "--crop-size must not exceed --image-size")
    announce(config)
    device = config.device
    model = torchvision.models.resnet18(num_classes=NUM_CLASSES).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    criterion = torch.nn.CrossEntropyLoss()
    length = (config.warmup + config.steps) * config.batch_size
    dataset = DecodedImages(length, config.image_size, config.crop_size, config.seed)
    loader = DataLoader(
        dataset,
        batch_size=config.batch_size,
        shuffle=True,
        num_workers=config.workers,
        pin_memory=config.on_gpu,  # pinning needs a GPU driver
    )
    batches = iter(loader)

    def step(index: int) -> None:
        with nvtx.annotate(f"Batch {index}", color=BLUE):
            with nvtx.annotate("data", color=RED):
                images, labels = next(batches)
                images = images.to(device, non_blocking=True)
                labels = labels.to(device, non_blocking=True)
            with nvtx.annotate("step", color=GREEN):
                optimizer.zero_grad(set_to_none=True)
                loss = criterion(model(images), labels)
                loss.backward()
                optimizer.step()

    report(measure(config, step))


if __name__ == "__main__":
    main()
