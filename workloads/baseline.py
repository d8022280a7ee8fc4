"""Rung 1, baseline: the DataLoader runs in the training process, copies are pageable and blocking.

The GPU waits while the CPU makes each batch: in the trace, long red ``get batch`` ranges and
an idle GPU between short green ``Compute`` ranges.
"""

from ladder import main

if __name__ == "__main__":
    main("baseline")
