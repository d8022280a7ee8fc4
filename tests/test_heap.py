"""The heap setting of an analysis, on this machine's real glibc: large arrays mapped.

Each check runs in a fresh interpreter: where glibc puts a block depends on everything the
process allocated before (a freed block that fits is reused whatever the setting), and a long
test session leaves a heap no real ``nsysprobe analyze`` starts from.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from nsysprobe.common.heap import free_huge_bytes

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


BUDDYINFO = Path(__file__).parent / "data" / "buddyinfo"


def test_free_huge_bytes_counts_the_free_blocks_of_2_mib_and_more():
    # Orders 9 and 10 (2 and 4 MiB) of every zone, by hand: at 20:58, 2 x (1 + 134 + 77) +
    # 4 x (3 + 79 + 205) MiB; at 20:59, 2 x (1 + 133 + 800) + 4 x (3 + 79 + 1666) MiB.
    assert free_huge_bytes(BUDDYINFO / "ci_2026-12-05_2058.txt") == 1572 << 20
    assert free_huge_bytes(BUDDYINFO / "ci_2026-12-05_2059.txt") == 8860 << 20
    assert free_huge_bytes(BUDDYINFO / "absent.txt") == 0


def test_free_huge_bytes_takes_the_kernels_huge_page_and_any_bytes(tmp_path, monkeypatch):
    import nsysprobe.common.heap as heap

    # Huge pages of 4 MiB (order 10): at 20:58, 4 x (3 + 79 + 205) MiB.
    size = tmp_path / "hpage_pmd_size"
    size.write_text(f"{4 << 20}\n")
    monkeypatch.setattr(heap, "HUGE_PAGE", str(size))
    assert free_huge_bytes(BUDDYINFO / "ci_2026-12-05_2058.txt") == 1148 << 20
    # Bytes no kernel writes: not UTF-8, a digit that is not ASCII, a size that is no number.
    odd = tmp_path / "buddyinfo"
    odd.write_bytes(b"Node 0, zone Nor\xffmal 1 2 3 4 5 6 7 8 9 \xc2\xb2 2\n")
    size.write_text("2M\n")  # read as 2 MiB: order 9 (the non-ASCII digit) and 10 (two)
    assert free_huge_bytes(odd) == 2 * (4 << 20)


@pytest.mark.parametrize(
    "buddyinfo, before, after",
    [
        ("ci_2026-12-05_2058.txt", "0", "True"),  # 1,572 MiB free in 2 MiB blocks
        ("fragmented", "1", "False"),  # the same with no block of 2 MiB or more free
        ("absent.txt", "1", "False"),
    ],
)
def test_numpy_advises_huge_pages_only_where_the_kernel_has_them_free(
    buddyinfo, before, after, tmp_path
):
    path = BUDDYINFO / buddyinfo
    if buddyinfo == "fragmented":
        lines = (BUDDYINFO / "ci_2026-12-05_2058.txt").read_text().splitlines()
        path = tmp_path / "buddyinfo"
        path.write_text("".join(" ".join(line.split()[:-2] + ["0", "0"]) + "\n" for line in lines))
    check = "print(np._core.multiarray._get_madvise_hugepage())\n"
    env = {**os.environ, "NUMPY_MADVISE_HUGEPAGE": before}
    script = (
        SETUP
        + check
        + f"import nsysprobe.common.heap as heap\nheap.BUDDYINFO = {str(path)!r}\n"
        + "map_large_arrays()\n"
        + check
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert done.stdout.split() == [str(before == "1"), after], done.stderr


def test_events_load_sets_it():
    load = (
        "from nsysprobe.analyses.events import Events\n"
        "from nsysprobe.trace.reader import Trace\n"
        f"with Trace({str(SAMPLE)!r}) as t:\n"
        "    Events.load(t)\n"
    )
    run(SETUP + load + AFTER.format(where="not "))
