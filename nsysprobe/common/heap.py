"""The C heap of an analysis: large arrays in mappings of their own.

An analysis holds the columns of millions of events and makes many short-lived arrays of the
same length. glibc maps a block of 128 KiB or more on its own at first, and each time such a
block is freed raises that threshold to its size (up to 32 MiB): arrays of a few million rows
then come from the heap, where the holes they leave between the arrays kept stay resident.
Held at 8 MiB, an array of a million int64 values or more is always mapped, and given back
when freed; the reader's blocks of rows, far smaller, are still served from the heap.

Measured on this project's 2-core machine (2026-12-02, 09:33 UTC, three runs each of
``nsysprobe analyze --format json`` on the replicas of ``benchmarks/README.md``):
kernel-heavy 1e6 ops 349-356 MiB peak RSS and 2.6-2.8 s with glibc's own threshold, 327-331
MiB and 2.5-2.6 s at 8 MiB; NVTX-heavy 1e6 474-476 MiB, 6.4-6.5 s, and 452-454 MiB, 6.6-6.8
s; OS-runtime-heavy 666-671 MiB, 10.4-10.8 s, and 642-652 MiB, 11.3-11.4 s (2 MiB: 633-642
MiB, 14-16 s).
Elsewhere than glibc this does nothing.
"""

from __future__ import annotations

import ctypes

_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
LARGE_BYTES = 8 << 20


def map_large_arrays() -> None:
    """From now on, in this process: every C block of ``LARGE_BYTES`` or more is mapped on
    its own and unmapped when freed (glibc no longer moves the threshold)."""
    try:
        ctypes.CDLL(None).mallopt(_M_MMAP_THRESHOLD, LARGE_BYTES)
    except (OSError, AttributeError):
        pass  # not glibc
