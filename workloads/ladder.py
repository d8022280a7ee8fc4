"""The optimization ladder: one ResNet-18 training loop, fed six ways.

Each rung changes one thing about how batches reach the GPU, in the order the source articles
take them; everything else (data, model, optimizer, loop, measurement) is shared here:

    baseline     DataLoader in the training process, pageable blocking copies
    multiworker  + loader worker processes (--workers)
    pinned       + pinned host memory and non_blocking copies
    streams      + a copy stream and a compute stream: batch N+1 copies while batch N computes
    prefetch     + that overlap packaged as a prefetching iterator (apex's data_prefetcher);
                   the loop computes on the default stream again
    cached       one batch kept on the GPU: no loading, the compute ceiling

Every step is one NVTX range ``Batch i`` (blue) holding ``get batch`` (red), ``copy batch``
(yellow) and ``Compute`` (green). In rungs 1-3 step i gets and copies batch i; in ``streams``
and ``prefetch`` it gets and copies batch i+1 while the GPU works on batch i, so each step
still does exactly one fetch. ``cached`` fetches one batch before step 0 and then only
computes. The profiled steps sit between ``torch.cuda.profiler.start()`` and ``stop()``, so
``nsys profile --capture-range=cudaProfilerApi`` records them and not the warm-up.

Steps per second are measured over the profiled steps only, with the device synchronized at
both ends of the measurement and nowhere inside it: a synchronization per step would stop the
CPU from queueing ahead of the GPU and hide the overlap the upper rungs build.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import NamedTuple

import nvtx
import torch
import torchvision
from torch.utils.data import DataLoader, Dataset

# ARGB as nsys records them; passed as ints so no color-name table can change them.
BLUE, RED, YELLOW, GREEN = 0x0000FF, 0xFF0000, 0xFFFF00, 0x008000
NUM_CLASSES = 1000

Batch = tuple[torch.Tensor, torch.Tensor]


def accelerator(device: torch.device) -> ModuleType:
    """``torch.cuda`` for a CUDA device; ``torch.cpu``, whose streams do nothing, for the CPU."""
    return torch.get_device_module(device)


class SyntheticImages(Dataset):
    """Random images and labels made in ``__getitem__``: CPU work per sample, like a decode."""

    def __init__(self, length: int, image_size: int, seed: int) -> None:
        self.length = length
        self.image_size = image_size
        self.seed = seed

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> Batch:
        generator = torch.Generator().manual_seed(self.seed + index)
        image = torch.rand(3, self.image_size, self.image_size, generator=generator)
        label = torch.randint(NUM_CLASSES, (), generator=generator)
        return image, label


def get_batch(batches: Iterator[Batch]) -> Batch | None:
    """The loader's next batch on the host, or None once it is exhausted."""
    with nvtx.annotate("get batch", color=RED):
        return next(batches, None)


def copy_batch(batch: Batch, device: torch.device, non_blocking: bool) -> Batch:
    """The batch on ``device``, copied on whatever stream is current."""
    with nvtx.annotate("copy batch", color=YELLOW):
        images, labels = batch
        return (
            images.to(device, non_blocking=non_blocking),
            labels.to(device, non_blocking=non_blocking),
        )


def used_on(batch: Batch, stream: torch.Stream) -> None:
    """Tell the caching allocator that ``stream`` reads ``batch``, which another stream wrote.

    Without this, the memory is recycled for a later copy as soon as Python drops the batch,
    while kernels queued on ``stream`` may still be reading it.
    """
    for tensor in batch:
        if tensor.is_cuda:
            tensor.record_stream(stream)


class Feed(NamedTuple):
    """Device batches for the loop, and the stream the loop must compute on."""

    batches: Iterator[Batch]
    compute_stream: torch.Stream


def copy_in_step(loader: DataLoader, device: torch.device, non_blocking: bool) -> Feed:
    """Rungs 1-3: get batch i, copy it, compute on it, all on one stream."""

    def batches() -> Iterator[Batch]:
        host_batches = iter(loader)
        while (batch := get_batch(host_batches)) is not None:
            yield copy_batch(batch, device, non_blocking)

    return Feed(batches(), accelerator(device).current_stream())


def copy_on_side_stream(loader: DataLoader, device: torch.device, non_blocking: bool) -> Feed:
    """Rung 4: batch N+1 is copied on a copy stream while batch N computes on a compute stream."""
    streams = accelerator(device)
    copy_stream, compute_stream = streams.Stream(), streams.Stream()
    # The model and optimizer state were made on the default stream.
    compute_stream.wait_stream(streams.current_stream())

    def get_and_copy(host_batches: Iterator[Batch]) -> Batch | None:
        batch = get_batch(host_batches)
        if batch is None:
            return None
        with streams.stream(copy_stream):
            return copy_batch(batch, device, non_blocking)

    def batches() -> Iterator[Batch]:
        host_batches = iter(loader)
        ready = get_and_copy(host_batches)
        while ready is not None:
            # Called before the next copy is queued, so compute waits for this batch only.
            compute_stream.wait_stream(copy_stream)
            used_on(ready, compute_stream)
            current, ready = ready, get_and_copy(host_batches)
            yield current

    return Feed(batches(), compute_stream)


class CUDAPrefetcher:
    """Wraps a loader; while the caller computes on batch N, batch N+1 copies on a side stream.

    The shape of NVIDIA apex's ``data_prefetcher``: the training loop stays as it was and keeps
    computing on the current stream, the overlap of rung 4 lives in the iterator.
    """

    def __init__(self, loader: DataLoader, device: torch.device) -> None:
        self.streams = accelerator(device)
        self.device = device
        self.host_batches = iter(loader)
        self.copy_stream = self.streams.Stream()
        self.preload()

    def preload(self) -> None:
        batch = get_batch(self.host_batches)
        if batch is None:
            self.next_batch = None
            return
        with self.streams.stream(self.copy_stream):
            self.next_batch = copy_batch(batch, self.device, non_blocking=True)

    def __iter__(self) -> CUDAPrefetcher:
        return self

    def __next__(self) -> Batch:
        batch = self.next_batch
        if batch is None:
            raise StopIteration
        compute_stream = self.streams.current_stream()
        compute_stream.wait_stream(self.copy_stream)
        used_on(batch, compute_stream)
        self.preload()
        return batch


def prefetcher(loader: DataLoader, device: torch.device, non_blocking: bool) -> Feed:
    """Rung 5: the loader wrapped in a CUDAPrefetcher (whose copies are always non_blocking)."""
    return Feed(CUDAPrefetcher(loader, device), accelerator(device).current_stream())


def cached_batch(loader: DataLoader, device: torch.device, non_blocking: bool) -> Feed:
    """The ceiling: one batch copied once and fed to every step, so steps only compute."""
    batch = copy_batch(get_batch(iter(loader)), device, non_blocking)

    def batches() -> Iterator[Batch]:
        while True:
            yield batch

    return Feed(batches(), accelerator(device).current_stream())


@dataclass(frozen=True)
class Rung:
    name: str
    uses_workers: bool
    pinned: bool
    feed: Callable[[DataLoader, torch.device, bool], Feed]


RUNGS = {
    rung.name: rung
    for rung in (
        Rung("baseline", uses_workers=False, pinned=False, feed=copy_in_step),
        Rung("multiworker", uses_workers=True, pinned=False, feed=copy_in_step),
        Rung("pinned", uses_workers=True, pinned=True, feed=copy_in_step),
        Rung("streams", uses_workers=True, pinned=True, feed=copy_on_side_stream),
        Rung("prefetch", uses_workers=True, pinned=True, feed=prefetcher),
        # One batch is all it loads: worker processes would only add start-up time.
        Rung("cached", uses_workers=False, pinned=False, feed=cached_batch),
    )
}


@dataclass(frozen=True)
class Config:
    rung: str
    device: torch.device
    steps: int
    warmup: int
    batch_size: int
    image_size: int
    workers: int
    pin_memory: bool
    seed: int

    def describe(self) -> str:
        return (
            f"config rung={self.rung} device={self.device} batch_size={self.batch_size} "
            f"workers={self.workers} image_size={self.image_size} steps={self.steps} "
            f"warmup={self.warmup} pin_memory={self.pin_memory}"
        )


def default_workers() -> int:
    return min(8, os.cpu_count() or 1)


def parse_args(rung: str, argv: list[str] | None = None) -> Config:
    parser = argparse.ArgumentParser(
        description=f"ResNet-18 training, optimization-ladder rung '{rung}' (see ladder.py)."
    )
    # The articles' sizes; a CPU runs a ResNet-18 step on 64 images of 512 px in tens of
    # seconds, so without a GPU the defaults shrink to keep a run to a minute or two.
    gpu = {"steps": 30, "warmup": 10, "batch_size": 64, "image_size": 512}
    cpu = {"steps": 5, "warmup": 2, "batch_size": 16, "image_size": 128}
    parser.add_argument("--steps", type=int, help="profiled steps (default 30; 5 on a CPU)")
    parser.add_argument(
        "--warmup", type=int, help="unmeasured steps first (default 10; 2 on a CPU)"
    )
    parser.add_argument("--batch-size", type=int, help="images per step (default 64; 16 on a CPU)")
    parser.add_argument(
        "--image-size", type=int, help="image side in px (default 512; 128 on a CPU)"
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help=f"DataLoader worker processes (default {default_workers()} if the rung uses "
        "them, else 0)",
    )
    parser.add_argument("--device", default="auto", help="auto (cuda if available), cpu, cuda:N")
    parser.add_argument("--seed", type=int, default=0, help="seed for weights and data (default 0)")
    args = parser.parse_args(argv)
    if args.device == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        device = torch.device(args.device)
    sizes = gpu if device.type == "cuda" else cpu
    for name, value in sizes.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.steps < 1 or args.warmup < 0:
        parser.error("--steps must be at least 1 and --warmup at least 0")
    if device.type == "cuda" and device.index is None:
        # Streams and set_device need a numbered device.
        device = torch.device("cuda", torch.cuda.current_device())
    workers = args.workers
    if workers is None:
        workers = default_workers() if RUNGS[rung].uses_workers else 0
    return Config(
        rung=rung,
        device=device,
        steps=args.steps,
        warmup=args.warmup,
        batch_size=args.batch_size,
        image_size=args.image_size,
        workers=workers,
        # Pinning needs a GPU driver; on the CPU the rung runs with pageable memory.
        pin_memory=RUNGS[rung].pinned and device.type == "cuda",
        seed=args.seed,
    )


def make_loader(config: Config) -> DataLoader:
    # One batch more than the steps use: in streams and prefetch the last step fetches it, so
    # every step does one fetch and none shuts the workers down inside the measurement.
    batches = config.warmup + config.steps + 1
    dataset = SyntheticImages(batches * config.batch_size, config.image_size, config.seed)
    return DataLoader(
        dataset,
        batch_size=config.batch_size,
        num_workers=config.workers,
        pin_memory=config.pin_memory,
    )


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train(config: Config) -> float:
    """Run the rung's warm-up and profiled steps; return profiled steps per second."""
    device = config.device
    if device.type == "cuda":
        torch.cuda.set_device(device)
    torch.manual_seed(config.seed)
    model = torchvision.models.resnet18(num_classes=NUM_CLASSES).to(device)
    optimizer = torch.optim.Adam(model.parameters())
    criterion = torch.nn.CrossEntropyLoss()
    rung = RUNGS[config.rung]
    feed = rung.feed(make_loader(config), device, rung.pinned)

    with accelerator(device).stream(feed.compute_stream):
        for step in range(config.warmup + config.steps):
            if step == config.warmup:
                synchronize(device)
                if device.type == "cuda":
                    torch.cuda.profiler.start()
                started = time.perf_counter()
            with nvtx.annotate(f"Batch {step}", color=BLUE):
                images, labels = next(feed.batches)
                with nvtx.annotate("Compute", color=GREEN):
                    optimizer.zero_grad(set_to_none=True)
                    loss = criterion(model(images), labels)
                    loss.backward()
                    optimizer.step()
        synchronize(device)
        elapsed = time.perf_counter() - started
        if device.type == "cuda":
            torch.cuda.profiler.stop()
    return config.steps / elapsed


def main(rung: str, argv: list[str] | None = None) -> None:
    """Parse the common options, run ``rung`` and print its config and steps per second."""
    config = parse_args(rung, argv)
    print(config.describe(), flush=True)
    print(f"steps_per_s={train(config):.3f}", flush=True)
