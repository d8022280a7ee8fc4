"""Mistake: ``torch.cuda.empty_cache()`` every step, while the input shapes change every step.

A transformer encoder trains on token batches whose sequence length is drawn anew each step
(a seeded RNG, as bucketing by length gives), the kind of loop where memory use swings and
someone adds ``torch.cuda.empty_cache()`` after each step "to avoid fragmentation" or to
make ``nvidia-smi`` look better. There are no NVTX ranges at all, as in most training code.

The GPU timeline: ``empty_cache`` hands every cached block back to the driver, and
``cudaFree`` waits for the device to finish, so each step ends with the GPU drained, then idle
through a row of ``cudaFree`` calls; the next step's allocations all go to the driver again
(``cudaMalloc``, up to milliseconds each for large blocks, the GPU idle in between while the
CPU cannot queue past them). The CUDA API row shows ``cudaFree``/``cudaMalloc`` every step;
with the caching allocator left alone they appear in the first steps only.

Captured on the H200 under nsys (2026-12-01, ``sample_traces/h200_empty_cache.sqlite``, these
defaults): 21.7 steps/s, the GPU idle 8.9 % of the time, 7.2 % of it after ``cudaFree`` drained
the GPU or in ``cudaMalloc``. At batch 16 and width 512 (an earlier capture) the thread's own
per-operation overhead was as large as the allocator's; at batch 64 the GPU was 97 % busy and
the allocator's cost hidden behind the queued work.

The fix: delete the call (the caching allocator already reuses blocks across shapes); if
fragmentation is real, ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``, or pad lengths
to a few buckets.
"""

from __future__ import annotations

import random

import torch

if __package__:  # python -m nsysprobe.workloads.empty_cache
    from .mistakes import Size, announce, fail, measure, parse_args, report
else:  # python workloads/empty_cache.py
    from mistakes import Size, announce, fail, measure, parse_args, report
from torch import nn

SIZES = {
    "batch_size": Size(8, 4, "sequences per step"),
    "min_len": Size(128, 8, "shortest sequence"),
    "max_len": Size(1024, 32, "longest sequence"),
    "d_model": Size(1024, 32, "model width"),
    "layers": Size(4, 1, "encoder layers"),
}
VOCAB, CLASSES = 8192, 1000


class Encoder(nn.Module):
    def __init__(self, d_model: int, layers: int, max_len: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, d_model)
        self.position = nn.Parameter(torch.randn(max_len, d_model) * 0.02)
        layer = nn.TransformerEncoderLayer(
            d_model, nhead=8, dim_feedforward=4 * d_model, batch_first=True, norm_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d_model, CLASSES)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        hidden = self.embed(tokens) + self.position[: tokens.shape[1]]
        return self.head(self.encoder(hidden).mean(dim=1))


def main(argv: list[str] | None = None) -> None:
    config = parse_args("empty_cache", __doc__.splitlines()[0], SIZES, argv)
    if config.min_len > config.max_len:
        fail(config, "--min-len must not exceed --max-len")
    announce(config)
    device = config.device
    model = Encoder(config.d_model, config.layers, config.max_len).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    criterion = nn.CrossEntropyLoss()
    lengths = random.Random(config.seed)

    def step(index: int) -> None:
        length = lengths.randint(config.min_len, config.max_len)
        tokens = torch.randint(VOCAB, (config.batch_size, length), device=device)
        labels = torch.randint(CLASSES, (config.batch_size,), device=device)
        optimizer.zero_grad(set_to_none=True)
        loss = criterion(model(tokens), labels)
        loss.backward()
        optimizer.step()
        del tokens, labels, loss
        if config.on_gpu:
            torch.cuda.empty_cache()  # the mistake

    report(measure(config, step))


if __name__ == "__main__":
    main()
