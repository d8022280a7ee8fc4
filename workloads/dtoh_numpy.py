"""Mistake: every step copies tens of MB to pageable host memory and reduces them in numpy.

A token model (embedding, residual MLP blocks, a language-model head over the vocabulary)
trains on batches made on the GPU once. After each step the script monitors its logits the
way one would in a notebook: ``logits.detach().cpu().numpy()`` (``--mb`` MB, 64 by default;
the batch is sized so the logits are that large), then their mean, spread, extremes and
percentiles (of a strided sample) in numpy, on the training thread.

The GPU timeline: in each ``Batch N`` range, ``train`` queues the step; ``metrics on host``
then blocks in a device-to-host ``cudaMemcpyAsync`` into pageable memory (the copy waits for
the step to finish, then crawls through the driver's staging buffer, 1.5 GB/s on the H200
machine against about 50 GB/s into pinned memory), and the GPU sits idle for the whole numpy
reduction that follows, about half of every step. nsysprobe shows the pageable
device-to-host bytes per step and the idle gaps inside ``metrics on host``.

Measured on the H200 (torch 2.11, GPU activity through torch.profiler, 2026-12-01): about
5 steps/s; a step is 32 ms of kernels, a 45 ms pageable copy of the 64 MiB (1.5 GB/s) and
95 ms of numpy with the GPU idle, which is 55 % of the time.

The fix: reduce on the GPU (``torch.histc``, ``torch.quantile`` on a sample, ``aminmax``) and
bring back a few numbers, every N steps; if the host really needs the tensor, copy it into a
pinned buffer with ``non_blocking=True`` and reduce it one step later, off the training thread.
"""

from __future__ import annotations

import numpy as np
import nvtx
import torch

if __package__:  # python -m nsysprobe.workloads.dtoh_numpy
    from .mistakes import BLUE, GREEN, RED, Size, announce, measure, parse_args, report
else:  # python workloads/dtoh_numpy.py
    from mistakes import BLUE, GREEN, RED, Size, announce, measure, parse_args, report
from torch import nn

SIZES = {
    "mb": Size(64, 1, "MiB of logits copied to the host and reduced there each step"),
    "seq_len": Size(128, 16, "tokens per sequence"),
    "vocab": Size(8192, 1024, "vocabulary: logits per token"),
    "d_model": Size(2048, 64, "model width"),
    "blocks": Size(3, 1, "residual MLP blocks"),
}
# Percentiles of every 16th logit: a full np.percentile of 16 M values takes a third of a second.
SAMPLE_STRIDE = 16


class TokenModel(nn.Module):
    def __init__(self, vocab: int, d_model: int, blocks: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.blocks = nn.ModuleList(
            nn.Sequential(
                nn.LayerNorm(d_model),
                nn.Linear(d_model, 4 * d_model),
                nn.GELU(),
                nn.Linear(4 * d_model, d_model),
            )
            for _ in range(blocks)
        )
        self.head = nn.Linear(d_model, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        hidden = self.embed(tokens)
        for block in self.blocks:
            hidden = hidden + block(hidden)
        return self.head(hidden)


def host_metrics(logits: np.ndarray) -> dict[str, float]:
    """What a notebook would log about the logits, in numpy: moments, extremes, percentiles."""
    p01, p50, p99 = np.percentile(logits.ravel()[::SAMPLE_STRIDE], [1, 50, 99])
    return {
        "mean": float(logits.mean()),
        "std": float(logits.std()),
        "min": float(logits.min()),
        "max": float(logits.max()),
        "p01": float(p01),
        "p50": float(p50),
        "p99": float(p99),
    }


def main(argv: list[str] | None = None) -> None:
    config = parse_args("dtoh_numpy", __doc__.splitlines()[0], SIZES, argv)
    # The batch that makes the logits --mb MiB (float32), at least one sequence.
    config.batch_size = max(1, config.mb * 2**20 // (config.seq_len * config.vocab * 4))
    config.shown = (*config.shown, "batch_size")
    announce(config)
    device = config.device
    model = TokenModel(config.vocab, config.d_model, config.blocks).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    criterion = nn.CrossEntropyLoss()
    shape = (2, config.batch_size, config.seq_len)
    tokens = torch.randint(config.vocab, shape, device=device)
    targets = torch.randint(config.vocab, shape, device=device)
    history: list[dict[str, float]] = []

    def step(index: int) -> None:
        with nvtx.annotate(f"Batch {index}", color=BLUE):
            batch, target = tokens[index % 2], targets[index % 2]
            with nvtx.annotate("train", color=GREEN):
                optimizer.zero_grad(set_to_none=True)
                logits = model(batch)
                loss = criterion(logits.flatten(0, 1), target.flatten())
                loss.backward()
                optimizer.step()
            with nvtx.annotate("metrics on host", color=RED):
                # Blocking: waits for the step, then copies into pageable memory.
                history.append(host_metrics(logits.detach().cpu().numpy()))

    report(measure(config, step))


if __name__ == "__main__":
    main()
