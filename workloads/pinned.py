"""Rung 3: pinned host memory (``pin_memory=True``) and ``non_blocking=True`` copies.

The copy runs by DMA at full link speed and no longer blocks the CPU, but it is still queued on
the compute stream, so the GPU copies and computes in turn, never at once.
"""

if __package__:  # python -m nsysprobe.workloads.pinned
    from .ladder import main
else:  # python workloads/pinned.py
    from ladder import main

if __name__ == "__main__":
    main("pinned")
