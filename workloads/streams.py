"""Rung 4: a copy stream and a compute stream; batch N+1 copies while batch N computes.

``wait_stream`` makes compute wait for its own batch only; ``record_stream`` keeps the caching
allocator from recycling a batch that the other stream still reads.
"""

from ladder import main

if __name__ == "__main__":
    main("streams")
