"""The heap setting of an analysis, on this machine's real glibc: freed arrays kept in the
heap for the next ones, the largest mapped.

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

from nsysprobe.common.heap import free_bytes

from conftest import SAMPLE_TRACES

SAMPLE = SAMPLE_TRACES / "h200_pinned.sqlite"

SETUP = """
import ctypes

import numpy as np

from nsysprobe.common.heap import KEPT_BYTES, MAPPED_BYTES, keep_freed_arrays

libc = ctypes.CDLL(None)
assert hasattr(libc, "mallopt"), "this project's machines run glibc"
libc.sbrk.restype = ctypes.c_void_p


def in_the_heap(array):
    # Below the heap's end (the program break), not in a mapping of its own.
    return array.ctypes.data < libc.sbrk(0)


def freed_mapped_block():
    # glibc by itself: a 16 MiB block is mapped, and freeing it raises the threshold to 16 MiB.
    big = np.ones(16 << 17)
    del big
"""

AFTER = """
freed_mapped_block()
large = np.ones(MAPPED_BYTES // 8)
assert not in_the_heap(large), "large"
del large
below = np.ones((MAPPED_BYTES >> 1) // 8)
assert {where}in_the_heap(below), "below"
"""

# An array freed, then one of its size made: page faults only where its memory is new (the
# kernel zeroes and backs each page again), none where the freed one's was kept.
KEPT = """
import resource

assert 64 << 20 < min(MAPPED_BYTES, KEPT_BYTES)
freed = np.ones(64 << 17)  # 64 MiB
del freed
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
again = np.ones(64 << 17)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults)
"""


def run(script: str) -> None:
    # glibc's own settings only: a Dask nanny started by an earlier test sets
    # MALLOC_TRIM_THRESHOLD_ in this process, which stops the threshold moving in its children.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "GLIBC_TUNABLES"))}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr


def test_without_it_glibc_maps_arrays_above_its_moving_threshold():
    # After a 16 MiB block is freed glibc maps blocks from 16 MiB up (32 MiB at most).
    run(SETUP + AFTER.format(where="not "))


def test_after_it_only_the_largest_arrays_are_mapped():
    run(SETUP + "keep_freed_arrays()\n" + AFTER.format(where=""))


def faults(script: str) -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "GLIBC_TUNABLES"))}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


def test_a_freed_array_stays_in_the_process_for_the_next_one():
    # 64 MiB touched anew: 16,384 faults of 4 KiB pages, 32 of 2 MiB huge pages at least.
    assert faults(SETUP + KEPT) >= 32
    assert faults(SETUP + "keep_freed_arrays()\n" + KEPT) < 32


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
    assert arenas(SETUP + "keep_freed_arrays()\n" + ARENAS) == 1


BUDDYINFO = Path(__file__).parent / "data" / "buddyinfo"


def test_free_bytes_counts_the_free_blocks_of_2_mib_and_more():
    # Orders 9 and 10 (2 and 4 MiB) of every zone, by hand: at 20:58, 2 x (1 + 134 + 77) +
    # 4 x (3 + 79 + 205) MiB; at 20:59, 2 x (1 + 133 + 800) + 4 x (3 + 79 + 1666) MiB.
    assert free_bytes(BUDDYINFO / "ci_2026-12-05_2058.txt")[1] == 1572 << 20
    assert free_bytes(BUDDYINFO / "ci_2026-12-05_2059.txt")[1] == 8860 << 20
    assert free_bytes(BUDDYINFO / "absent.txt")[1] == 0


def test_free_bytes_takes_the_kernels_huge_page_and_any_bytes(tmp_path, monkeypatch):
    import nsysprobe.common.heap as heap

    # Huge pages of 4 MiB (order 10): at 20:58, 4 x (3 + 79 + 205) MiB.
    size = tmp_path / "hpage_pmd_size"
    size.write_text(f"{4 << 20}\n")
    monkeypatch.setattr(heap, "HUGE_PAGE", str(size))
    assert free_bytes(BUDDYINFO / "ci_2026-12-05_2058.txt")[1] == 1148 << 20
    # Bytes no kernel writes: not UTF-8, a digit that is not ASCII, a size that is no number.
    odd = tmp_path / "buddyinfo"
    odd.write_bytes(b"Node 0, zone Nor\xffmal 1 2 3 4 5 6 7 8 9 \xc2\xb2 2\n")
    size.write_text("2M\n")  # read as 2 MiB: order 9 (the non-ASCII digit) and 10 (two)
    assert free_bytes(odd)[1] == 2 * (4 << 20)
    # A field of 5,000 digits is no count (and past what int() reads by default).
    odd.write_text("Node 0, zone Normal " + "9" * 5000 + " 1 0 0 0 0 0 0 0 1 1\n")
    assert free_bytes(odd) == (2 * 4096, (2 << 20) + (4 << 20))  # order 1; orders 9 and 10


def test_free_bytes_splits_the_free_memory_at_a_huge_page():
    # Orders 0-8 (4 KiB to 1 MiB) and 9-10 of every zone, by hand. At 08:30: DMA 256 pages
    # (one block of order 8), DMA32
    # 309 + 2 x 276 + 4 x 216 + 8 x 151 + 16 x 115 + 32 x 78 + 64 x 62 + 128 x 54 + 256 x 27
    # = 25,061 pages, Normal 23,908 + 2 x 16,631 + 4 x 10,086 + 8 x 4,390 + 16 x 2,743
    # + 32 x 2,168 + 64 x 2,479 + 128 x 2,657 + 256 x 2,246 = 1,319,626 pages; huge: 2 x (1 + 23
    # + 1,096) + 4 x (3 + 716 + 847) MiB.
    assert free_bytes(BUDDYINFO / "ci_2026-12-06_0830.txt") == (
        (256 + 25_061 + 1_319_626) << 12,
        8504 << 20,
    )
    # With another process holding 6.8 GiB of 4 KiB pages: DMA and DMA32 the same 256 and
    # 25,061 pages, Normal 14,806 + 2 x 8,260 + 4 x 5,743 + 8 x 1,756 + 16 x 834 + 32 x 202
    # + 64 x 89 + 128 x 30 + 256 x 4 = 98,714 pages.
    assert free_bytes(BUDDYINFO / "ci_2026-12-06_0842_held.txt")[0] == (256 + 25_061 + 98_714) << 12
    assert free_bytes(BUDDYINFO / "absent.txt") == (0, 0)


@pytest.mark.parametrize(
    "buddyinfo, before, after",
    [
        # 484 MiB free in blocks under 2 MiB, 7,228 MiB in blocks of 2 MiB or more
        ("ci_2026-12-06_0842_held.txt", "0", "True"),
        # 5,253 MiB free in blocks under 2 MiB: 4 KiB pages come from blocks no one reported
        ("ci_2026-12-06_0830.txt", "1", "False"),
        ("ci_2026-12-05_2058.txt", "1", "False"),  # 10,410 MiB under 2 MiB, 1,572 over
        ("fragmented", "1", "False"),  # the held state with no block of 2 MiB or more free
        ("absent.txt", "1", "False"),
    ],
)
def test_numpy_advises_huge_pages_only_where_huge_blocks_are_free_and_small_ones_few(
    buddyinfo, before, after, tmp_path
):
    path = BUDDYINFO / buddyinfo
    if buddyinfo == "fragmented":
        lines = (BUDDYINFO / "ci_2026-12-06_0842_held.txt").read_text().splitlines()
        path = tmp_path / "buddyinfo"
        path.write_text("".join(" ".join(line.split()[:-2] + ["0", "0"]) + "\n" for line in lines))
    check = "print(np._core.multiarray._get_madvise_hugepage())\n"
    env = {**os.environ, "NUMPY_MADVISE_HUGEPAGE": before}
    script = (
        SETUP
        + check
        + f"import nsysprobe.common.heap as heap\nheap.BUDDYINFO = {str(path)!r}\n"
        + "keep_freed_arrays()\n"
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
    run(SETUP + load + AFTER.format(where=""))
