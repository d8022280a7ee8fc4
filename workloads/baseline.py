"""Rung 1, baseline: the DataLoader runs in the training process, copies are pageable and blocking.

The GPU waits while the CPU makes each batch: in the trace, long red ``get batch`` ranges and
an idle GPU between short green ``Compute`` ranges.
"""

if __package__:  # python -m nsysprobe.workloads.baseline
    from .ladder import main
else:  # python workloads/baseline.py
    from ladder import main

if __name__ == "__main__":
    main("baseline")
