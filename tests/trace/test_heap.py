"""The reader's heap setting, on this machine's real glibc: large blocks mapped while reading.

The check runs in a fresh interpreter: where glibc puts a block depends on everything the
process allocated before, and a long test session (gigabytes of crafted exports read in
process) leaves a heap no real ``nsysprobe analyze`` starts from.
"""

from __future__ import annotations

import subprocess
import sys

CHECK = """
import ctypes

import numpy as np

from nsysprobe.trace.heap import large_blocks_mapped

M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
libc = ctypes.CDLL(None)
assert hasattr(libc, "mallopt"), "this project's machines run glibc"
libc.sbrk.restype = ctypes.c_void_p


def in_the_heap(array):
    # Below the heap's end (the program break), not in a mapping of its own.
    return array.ctypes.data < libc.sbrk(0)


# Where glibc gets to by itself once large blocks have been freed, and where the reader
# leaves it: an 8 MiB block comes from the heap (and, freed, stays resident there).
libc.mallopt(M_MMAP_THRESHOLD, 32 << 20)
outside = np.ones(1 << 20)
assert in_the_heap(outside), "outside"
del outside
with large_blocks_mapped():
    inside = np.ones(1 << 20)
    assert not in_the_heap(inside), "inside"  # unmapped, given back, when freed
    del inside
after = np.ones(1 << 20)
assert in_the_heap(after), "after"
"""


def test_large_blocks_are_mapped_on_their_own_while_reading():
    done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
