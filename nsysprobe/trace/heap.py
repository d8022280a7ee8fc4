"""The C heap while an export is read: large blocks in mappings of their own.

Reading a table makes large short-lived blocks (a block of rows' text, parsed into arrays that
are then joined), on several threads at once, between the arrays it keeps. glibc serves a
block below its mmap threshold from the heap, and raises that threshold (up to 32 MiB) each
time a larger mapped block is freed: the reader's blocks then come from the heaps, whose freed
holes between kept arrays stay resident. Measured on this project's 2-core machine
(2026-12-01, ``benchmarks/README.md``'s NVTX-heavy export of 189 copies): 661-686 MiB peak RSS
for ``nsysprobe analyze`` without this, 476-479 MiB with it. After reading, the threshold is
set to glibc's ceiling, where its raising leads anyway: the analyses' many mid-sized arrays
come from the heap again (held at 128 KiB throughout, the user-reported shape took 85 s
instead of 75 s).
Elsewhere than glibc this does nothing.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from contextlib import contextmanager

_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
_WHILE_READING = 128 << 10  # glibc's initial threshold
_AFTER = 32 << 20  # glibc's ceiling for the threshold it raises (64-bit)


def _mallopt(param: int, value: int) -> None:
    try:
        ctypes.CDLL(None).mallopt(param, value)
    except (OSError, AttributeError):
        pass  # not glibc


@contextmanager
def large_blocks_mapped() -> Iterator[None]:
    """Within: every C block of 128 KiB or more is mapped on its own, unmapped when freed."""
    _mallopt(_M_MMAP_THRESHOLD, _WHILE_READING)
    try:
        yield
    finally:
        _mallopt(_M_MMAP_THRESHOLD, _AFTER)
