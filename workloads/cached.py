"""The ceiling: one batch copied to the GPU once and reused by every step.

No loading and no copies: its steps/s are the most any data pipeline could reach, the measure
the other rungs are compared against.
"""

if __package__:  # python -m nsysprobe.workloads.cached
    from .ladder import main
else:  # python workloads/cached.py
    from ladder import main

if __name__ == "__main__":
    main("cached")
