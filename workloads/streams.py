"""Rung 4: a copy stream and a compute stream; batch N+1 copies while batch N computes.

``wait_stream`` makes compute wait for its own batch only; ``record_stream`` keeps the caching
allocator from recycling a batch that the other stream still reads.
"""

if __package__:  # python -m nsysprobe.workloads.streams
    from .ladder import main
else:  # python workloads/streams.py
    from ladder import main

if __name__ == "__main__":
    main("streams")
