"""Mistake: a value read back to the host every step (``loss.item()``, an accuracy via ``.cpu()``).

A small transformer encoder classifies token sequences; data and model live on the GPU (a few
batches made there once, no DataLoader), so nothing but the step itself should limit it. But
every step ends by logging: ``loss.item()`` and an accuracy computed on the GPU and brought
over with ``.cpu()``, formatted into a log line and printed.

The GPU timeline: in each ``step N`` range, ``forward/backward`` only queues the kernels and is
short; ``log`` then waits in ``cudaMemcpyAsync`` + ``cudaStreamSynchronize`` (the ``.item()``)
for the GPU to drain the whole step. Once it has, the GPU sits idle while the CPU runs the
accuracy's tiny kernels and its second readback, formats and prints the line, and launches
the next step's first kernels: a gap after every step, with the CPU's queue empty each time,
where a loop without readbacks keeps several steps queued ahead of the GPU. The per-step host
sync is the cause of the idle time; nsysprobe's ``host_sync`` names it.

Measured on the H200 (torch 2.11, GPU activity through torch.profiler, 2026-12-01): about
54 steps/s, 17 ms of GPU work a step while queueing it takes the CPU about half that, and
1.3 ms of GPU idle a step (7 %), after the readbacks and in the restart of the empty queue.

The fix: keep the metrics on the GPU (``running_loss += loss.detach()``, counts of correct
predictions as tensors) and read them back every N steps, or copy them with
``.to("cpu", non_blocking=True)`` into pinned memory and print them one step later;
``torch.cuda.set_sync_debug_mode("warn")`` finds the hidden ones.
"""

from __future__ import annotations

import nvtx
import torch

if __package__:  # python -m nsysprobe.workloads.readback
    from .mistakes import BLUE, GREEN, RED, Size, announce, measure, parse_args, report
else:  # python workloads/readback.py
    from mistakes import BLUE, GREEN, RED, Size, announce, measure, parse_args, report
from torch import nn

SIZES = {
    "batch_size": Size(256, 8, "sequences per step"),
    "seq_len": Size(64, 16, "tokens per sequence"),
    "d_model": Size(512, 32, "model width"),
    "layers": Size(2, 2, "encoder layers"),
    "batches": Size(8, 2, "distinct batches made on the device once, used in turn"),
}
VOCAB, CLASSES = 8192, 1000


class Classifier(nn.Module):
    """Token embedding, a pre-norm transformer encoder, mean pooling, a linear head."""

    def __init__(self, d_model: int, layers: int, seq_len: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, d_model)
        self.position = nn.Parameter(torch.randn(seq_len, d_model) * 0.02)
        layer = nn.TransformerEncoderLayer(
            d_model, nhead=8, dim_feedforward=4 * d_model, batch_first=True, norm_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d_model, CLASSES)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        hidden = self.encoder(self.embed(tokens) + self.position)
        return self.head(hidden.mean(dim=1))


def main(argv: list[str] | None = None) -> None:
    config = parse_args("readback", __doc__.splitlines()[0], SIZES, argv)
    announce(config)
    device = config.device
    model = Classifier(config.d_model, config.layers, config.seq_len).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    criterion = nn.CrossEntropyLoss()
    shape = (config.batches, config.batch_size)
    tokens = torch.randint(VOCAB, (*shape, config.seq_len), device=device)
    labels = torch.randint(CLASSES, shape, device=device)
    losses: list[float] = []

    def step(index: int) -> None:
        with nvtx.annotate(f"step {index}", color=BLUE):
            batch, target = tokens[index % config.batches], labels[index % config.batches]
            with nvtx.annotate("forward/backward", color=GREEN):
                optimizer.zero_grad(set_to_none=True)
                logits = model(batch)
                loss = criterion(logits, target)
                loss.backward()
                optimizer.step()
            with nvtx.annotate("log", color=RED):
                losses.append(loss.item())  # waits for the whole step to finish on the GPU
                accuracy = (logits.argmax(dim=1) == target).float().mean().cpu()
                recent = losses[-10:]
                average = sum(recent) / len(recent)
                print(
                    f"step {index:4d} | loss {losses[-1]:.4f} | avg10 {average:.4f}"
                    f" | acc {float(accuracy):6.2%}",
                    flush=True,
                )

    report(measure(config, step))


if __name__ == "__main__":
    main()
