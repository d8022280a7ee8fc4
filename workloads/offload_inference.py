"""Weight offloading: inference whose layer weights live in host memory and stream in per layer.

A stack of ``--layers`` large linear layers (``--width`` x ``--width``, bf16, several GiB in
all) is too big to keep on the GPU in this simulation, so the weights stay in pinned host
memory and each layer's weights are copied to the GPU on a copy stream one layer ahead of the
compute (NVTX ranges ``prefetch_h2d_w{i}``), the way inference offloading (accelerate's
``device_map``, DeepSpeed ZeRO-Inference) runs. Each step is one forward pass of a small
batch (``forward N``). There is no DataLoader and no training.

The GPU timeline: the copy engine busy the whole step moving weights, the compute stream
waiting for each layer's copy; the copies are the step. Loading-pipeline advice does not
apply: the fixes are a larger batch per pass (more compute per byte moved), keeping the
hottest layers resident, or smaller weights (int8/fp8 quantization).
"""

from __future__ import annotations

import nvtx
import torch

if __package__:  # python -m nsysprobe.workloads.offload_inference
    from .mistakes import BLUE, GREEN, YELLOW, Size, announce, measure, parse_args, report
else:  # python workloads/offload_inference.py
    from mistakes import BLUE, GREEN, YELLOW, Size, announce, measure, parse_args, report

SIZES = {
    "layers": Size(24, 2, "linear layers, each streamed from the host"),
    "width": Size(8192, 64, "layer width"),
    "batch_size": Size(16, 2, "samples per forward pass"),
}


def main(argv: list[str] | None = None) -> None:
    config = parse_args("offload_inference", __doc__.splitlines()[0], SIZES, argv)
    announce(config)
    device = config.device
    dtype = torch.bfloat16
    on_gpu = config.on_gpu
    host = [
        torch.randn(config.width, config.width, dtype=dtype) * 0.01 for _ in range(config.layers)
    ]
    if on_gpu:
        host = [w.pin_memory() for w in host]
    copies = torch.cuda.Stream() if on_gpu else None
    x0 = torch.randn(config.batch_size, config.width, dtype=dtype, device=device)

    def fetch(i: int) -> torch.Tensor:
        with nvtx.annotate(f"prefetch_h2d_w{i}", color=YELLOW):
            if copies is None:
                return host[i].to(device)
            with torch.cuda.stream(copies):
                return host[i].to(device, non_blocking=True)

    @torch.no_grad()
    def step(index: int) -> None:
        with nvtx.annotate(f"forward {index}", color=BLUE):
            x = x0
            ahead = fetch(0)
            for i in range(config.layers):
                if copies is not None:
                    torch.cuda.current_stream().wait_stream(copies)
                    ahead.record_stream(torch.cuda.current_stream())
                weight, ahead = ahead, fetch(i + 1) if i + 1 < config.layers else None
                with nvtx.annotate(f"layer {i}", color=GREEN):
                    x = torch.relu(x @ weight)

    report(measure(config, step))


if __name__ == "__main__":
    main()
