"""The reader's heap setting, on this machine's real glibc: blocks freed while reading go back."""

from __future__ import annotations

import ctypes

import numpy as np

from nsysprobe.trace.heap import large_blocks_mapped


def resident_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def freed_but_resident(mib: int) -> float:
    """MiB still resident after touching and freeing an array of ``mib`` MiB."""
    before = resident_mib()
    block = np.ones(mib << 17)  # 8-byte floats, every page written
    assert resident_mib() - before > mib * 0.9
    del block
    return resident_mib() - before


def test_a_block_freed_while_reading_leaves_the_process():
    assert hasattr(ctypes.CDLL(None), "mallopt"), "this project's machines run glibc"
    # glibc raises its threshold on freeing a large mapped block; 8 MiB blocks then come from
    # the heap and stay resident after free (outside the reader, as before it).
    freed_but_resident(24)
    with large_blocks_mapped():
        assert freed_but_resident(8) < 2
