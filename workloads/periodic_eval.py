"""Mistake: a full evaluation pass inside the training loop every few steps, synchronously.

A small transformer encoder (``readback.py``'s classifier) trains on batches made on the GPU
once. Every ``--eval-every`` steps the loop evaluates: ``--eval-batches`` batches under
``torch.no_grad()`` in an NVTX range ``evaluate``, each batch's accuracy read back with
``.item()`` and summed in Python.

The GPU timeline: most ``step N`` windows are alike and the GPU is busy; every
``--eval-every``-th one is several times longer, holding the evaluation's forward passes and
a read-back per batch, each draining the GPU. A periodic step, with its period and its cost,
is the finding. The fix: evaluate less often, keep the accuracy on the GPU and read it once
per evaluation, or evaluate in another process on a saved checkpoint.
"""

from __future__ import annotations

import nvtx
import torch

if __package__:  # python -m nsysprobe.workloads.periodic_eval
    from .mistakes import BLUE, GREEN, RED, Size, announce, measure, parse_args, report
    from .readback import VOCAB, Classifier
else:  # python workloads/periodic_eval.py
    from mistakes import BLUE, GREEN, RED, Size, announce, measure, parse_args, report
    from readback import VOCAB, Classifier

SIZES = {
    "batch_size": Size(256, 8, "sequences per step"),
    "seq_len": Size(64, 16, "tokens per sequence"),
    "d_model": Size(512, 32, "model width"),
    "layers": Size(2, 2, "encoder layers"),
    "eval_every": Size(5, 2, "training steps between evaluations"),
    "eval_batches": Size(20, 2, "batches per evaluation"),
}
CLASSES = 1000


def main(argv: list[str] | None = None) -> None:
    config = parse_args("periodic_eval", __doc__.splitlines()[0], SIZES, argv)
    announce(config)
    device = config.device
    model = Classifier(config.d_model, config.layers, config.seq_len).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    criterion = torch.nn.CrossEntropyLoss()
    shape = (config.batch_size, config.seq_len)
    tokens = torch.randint(VOCAB, shape, device=device)
    labels = torch.randint(CLASSES, (config.batch_size,), device=device)
    accuracy: list[float] = []

    def step(index: int) -> None:
        with nvtx.annotate(f"step {index}", color=BLUE):
            with nvtx.annotate("train", color=GREEN):
                model.train()
                optimizer.zero_grad(set_to_none=True)
                criterion(model(tokens), labels).backward()
                optimizer.step()
            if (index + 1) % config.eval_every == 0:
                with nvtx.annotate("evaluate", color=RED), torch.no_grad():
                    model.eval()
                    correct = 0
                    for _ in range(config.eval_batches):
                        correct += (model(tokens).argmax(-1) == labels).sum().item()
                    accuracy.append(correct / (config.eval_batches * config.batch_size))

    report(measure(config, step))


if __name__ == "__main__":
    main()
