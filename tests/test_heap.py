"""The heap setting of an analysis, on this machine's real glibc: large arrays mapped.

Each check runs in a fresh interpreter: where glibc puts a block depends on everything the
process allocated before (a freed block that fits is reused whatever the setting), and a long
test session leaves a heap no real ``nsysprobe analyze`` starts from.
"""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import SAMPLE_TRACES

SAMPLE = SAMPLE_TRACES / "h200_pinned.sqlite"

SETUP = """
import ctypes

import numpy as np

from nsysprobe.common.heap import LARGE_BYTES, map_large_arrays

libc = ctypes.CDLL(None)
assert hasattr(libc, "mallopt"), "this project's machines run glibc"
libc.sbrk.restype = ctypes.c_void_p


def in_the_heap(array):
    # Below the heap's end (the program break), not in a mapping of its own.
    return array.ctypes.data < libc.sbrk(0)


def freed_mapped_block():
    # glibc by itself: freeing a mapped 16 MiB block raises its threshold to 16 MiB.
    big = np.ones(16 << 17)
    assert not in_the_heap(big), "16 MiB"
    del big
"""

AFTER = """
freed_mapped_block()
large = np.ones(LARGE_BYTES // 8)
assert {where}in_the_heap(large), "large"
small = np.ones((LARGE_BYTES >> 1) // 8)
assert in_the_heap(small), "small"  # the reader's blocks of rows: reused heap memory
"""


def run(script: str) -> None:
    # glibc's own settings only: a Dask nanny started by an earlier test sets
    # MALLOC_TRIM_THRESHOLD_ in this process, which stops the threshold moving in its children.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "GLIBC_TUNABLES"))}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr


def test_without_it_glibc_keeps_large_arrays_in_the_heap():
    # Freed, an array of the heap stays resident between the arrays kept.
    run(SETUP + AFTER.format(where=""))


def test_arrays_from_the_threshold_up_are_mapped_on_their_own():
    # The threshold no longer moves: a large array is unmapped, given back, when freed.
    run(SETUP + "map_large_arrays()\n" + AFTER.format(where="not "))


ARENAS = """
import threading

barrier = threading.Barrier(4)


def work():
    barrier.wait()
    kept = [np.ones(8000) for _ in range(50)]  # 64 KB blocks: from a malloc arena
    barrier.wait()


threads = [threading.Thread(target=work) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
libc.malloc_stats()  # to stderr: a line "Arena N:" per arena
"""


def arenas(script: str) -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "GLIBC_TUNABLES"))}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    return sum(line.startswith("Arena ") for line in done.stderr.splitlines())


def test_threads_share_one_arena_after_it():
    # By itself glibc gives each of the readers' threads an arena of its own, which keeps the
    # memory its blocks freed; after it they all allocate from the main one.
    assert arenas(SETUP + ARENAS) > 1
    assert arenas(SETUP + "map_large_arrays()\n" + ARENAS) == 1


def test_numpy_gives_no_huge_page_advice_after_it():
    check = "print(np._core.multiarray._get_madvise_hugepage())\n"
    env = {**os.environ, "NUMPY_MADVISE_HUGEPAGE": "1"}
    script = SETUP + check + "map_large_arrays()\n" + check
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert done.stdout.split() == ["True", "False"], done.stderr


def test_events_load_sets_it():
    load = (
        "from nsysprobe.analyses.events import Events\n"
        "from nsysprobe.trace.reader import Trace\n"
        f"with Trace({str(SAMPLE)!r}) as t:\n"
        "    Events.load(t)\n"
    )
    run(SETUP + load + AFTER.format(where="not "))
