"""Rung 2: the DataLoader makes batches in worker processes (``--workers``).

Batches are ready when the step asks, so ``get batch`` shrinks; the blocking pageable copy in
``copy batch``, staged by the driver through a bounce buffer, is what the GPU waits on now.
"""

if __package__:  # python -m nsysprobe.workloads.multiworker
    from .ladder import main
else:  # python workloads/multiworker.py
    from ladder import main

if __name__ == "__main__":
    main("multiworker")
