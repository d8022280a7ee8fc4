"""The C heap of an analysis: arrays kept in the process once freed, the largest mapped.

An analysis holds the columns of millions of events and makes many short-lived arrays of the
same length. glibc maps a block of 128 KiB or more on its own at first, and each time such a
block is freed raises that threshold to its size (up to 32 MiB), and gives the heap's free top
back to the kernel from 128 KiB. Memory the kernel takes back costs the next array that lands
on it a first touch: the kernel zeroes each page again and, on a virtual machine whose balloon
reports free pages to its host (this project's machine), the host backs each page again. That
cost is of the memory an analysis cycles through, not of what it holds at once: the
user-reported NVTX-heavy shape mapped 10.95 GiB over its analysis (strace, 2026-12-06) against a
peak of 1.8 GiB.

So blocks up to ``MAPPED_BYTES`` come from the heap and, freed, stay in it for the next
arrays (glibc reuses a free block that fits), and the heap's free top is given back only
beyond ``KEPT_BYTES``; only arrays of ``MAPPED_BYTES`` or more (a column of 32 M rows in int64)
are mapped on their own. The cost is what the holes between the arrays kept add to the peak.

Measured on this project's 2-core machine (2026-12-06, 05:33-05:46 UTC, ``nsysprobe analyze
--format json``, the same outputs), each array of 8 MiB or more mapped, as before, against
blocks kept up to 1 GiB (two runs each) and up to 256 MiB, this setting (one run): the
user-reported NVTX-heavy shape 22.8-24.3 s (system time 9.4-12.1 s) and 1,745-1,756 MiB at
most, against 19.2-20.3 s (5.3-5.9 s) and 1,821-1,825 MiB, and 18.9 s (4.7 s) and 1,831 MiB;
kernel-heavy 1e7 ops 26.2 s (17.6 s) and 3,158 MiB, against 21.9 s (11.8 s) and 3,397 MiB, and
22.7 s (10.6 s) and 3,193 MiB; kernel-heavy 1e6 2.03 s and 438 MiB, against 2.03 s and 463
MiB, and 1.92 s and 470 MiB. Blocks kept up to 64 MiB: the NVTX-heavy shape 21.1 s (7.7 s).

Threads allocate from one arena, the main one: by itself glibc gives each of the readers'
threads an arena of its own, which keeps what the thread's blocks freed resident beside the
main heap. Measured here (2026-12-02, 14:40 UTC, ``nsysprobe analyze --format json``, two or
three runs each, one arena against glibc's own): kernel-heavy 1e5 ops 82.3-82.8 MiB against
85.8-88.3 MiB and 0.44-0.45 s both; NVTX-heavy 1e6 407-413 MiB against 417-420 MiB, 6.8-7.0 s
both; OS-runtime-heavy 609-610 MiB against 616-622 MiB, 12.7 s against 12.4-13.2 s.
Elsewhere than glibc none of this is done.

numpy advises the kernel to back each array of 4 MiB or more with huge pages. Where
transparent huge pages are on ``madvise`` with ``defrag`` on ``madvise`` too (this project's
machine, and the default of several distributions), a first touch of such an array takes a free
block of a huge page (2 MiB here), or stalls on a compaction that makes one. On a virtual
machine whose balloon reports free pages to its host (``page_reporting_order`` 9 here: blocks of
2 MiB and more), those blocks are the ones the host took back: each huge page is zeroed by the
guest while the host backs it anew, page by page. A 4 KiB page comes first from the smaller free
blocks, which no one reported. Since freed arrays stay in the process (above), an analysis
touches new memory only up to its peak, and which blocks that memory comes from decides its
system time. So the advice stands only while the kernel holds ``HUGE_FREE_BYTES`` free in blocks
of a huge page or more and less than ``SMALL_FREE_BYTES`` in smaller ones (``/proc/buddyinfo``),
and is turned off otherwise. Measured on this machine:

- 2026-12-06, 08:27-08:35 UTC (``tests/data/buddyinfo/ci_2026-12-06_0830.txt``: 5,253 MiB free
  in smaller blocks, 8,504 MiB in huge ones), three rounds, each the Arrow floor then this rule
  (advice off) and the advice on (fde7c25), in alternating order, the same outputs: the
  kernel-heavy 1e7 replica 14.51-14.76 s (system time 2.5-2.7 s) against 20.84-23.52 s
  (12.8-17.2 s), the floor 10.33-14.60 s; the user-reported NVTX-heavy shape 18.32-18.62 s
  (2.0-2.2 s) against 20.72-22.21 s (5.8-9.6 s); kernel-heavy 1e6 1.86-1.91 s against
  1.78-2.00 s; the same peak memory.
- 2026-12-06, about 08:21 and 08:42-08:44 UTC, with another process holding 6.8 GiB of 4 KiB pages
  (``ci_2026-12-06_0842_held.txt``: 484 MiB free in smaller blocks, 7,228 MiB in huge ones), the
  1e7 replica, four runs each in two series: the advice on 16.2-23.1 s (median 16.6) against
  17.0-22.6 s (median 17.8).
- 2026-12-02, 10:30 UTC (the free blocks not recorded), each array of 8 MiB or more still
  mapped on its own and given back when freed: with the advice (``NUMPY_MADVISE_HUGEPAGE=1``
  against 0, two runs each) the OS-runtime-heavy 1e6 replica took 12.2-12.3 s against
  11.5-11.7 s; filling four fresh arrays of 9.8 M int64 values, 0.65 s against 0.14 s. On
  2026-12-05, 20:53-20:57 UTC (``ci_2026-12-05_2058.txt``), arrays still mapped on their own, the
  advice took the 1e7 replica from 21.0-23.6 s to 17.1-19.4 s: an analysis that mapped every
  array anew then touched ~11 GiB of new memory, where 4 KiB pages cost 512 faults per 2 MiB.
"""

from __future__ import annotations

import ctypes
import os

import numpy as np

_M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8
# Blocks of this size or more are mapped on their own (and unmapped when freed).
MAPPED_BYTES = 256 << 20
# The heap's free top is given back to the kernel beyond this.
KEPT_BYTES = 1 << 30
# Huge pages are advised while the kernel holds this much free in blocks of a huge page or more.
HUGE_FREE_BYTES = 512 << 20
# ... and while it holds less than this free in smaller blocks (``huge_pages_pay``).
SMALL_FREE_BYTES = 1 << 30
BUDDYINFO = "/proc/buddyinfo"
# Digits of a count of free blocks read at most (``free_bytes``).
COUNT_DIGITS = 20
HUGE_PAGE = "/sys/kernel/mm/transparent_hugepage/hpage_pmd_size"


def keep_freed_arrays() -> None:
    """From now on, in this process: every C block under ``MAPPED_BYTES`` comes from the heap
    and stays there when freed, the heap's free top is kept up to ``KEPT_BYTES`` (glibc no
    longer moves either threshold), threads allocate from one arena, and numpy advises huge
    pages only where they pay (``huge_pages_pay``)."""
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(_M_MMAP_THRESHOLD, MAPPED_BYTES)
        libc.mallopt(_M_TRIM_THRESHOLD, KEPT_BYTES)
        libc.mallopt(_M_ARENA_MAX, 1)
    except (OSError, AttributeError):
        pass  # not glibc
    core = getattr(np, "_core", None) or np.core  # numpy 2 / numpy 1
    advise = getattr(core.multiarray, "_set_madvise_hugepage", None)
    if advise is not None:
        advise(huge_pages_pay())


def huge_pages_pay(path: str | None = None) -> bool:
    """Whether numpy's huge-page advice pays here: the kernel holds ``HUGE_FREE_BYTES`` free in
    blocks of a huge page or more, and less than ``SMALL_FREE_BYTES`` in smaller ones."""
    small, huge = free_bytes(path)
    return huge >= HUGE_FREE_BYTES and small < SMALL_FREE_BYTES


def free_bytes(path: str | None = None) -> tuple[int, int]:
    """(bytes free in blocks smaller than a huge page, bytes free in blocks of a huge page or
    more: ``HUGE_PAGE``, 2 MiB, or what the kernel says), over every zone of
    ``/proc/buddyinfo`` (a line per zone: ``Node 0, zone Normal`` then the count of free blocks
    of 1, 2, 4... pages); (0, 0) where it cannot be read."""
    text = _read(path or BUDDYINFO)
    if text is None:
        return 0, 0
    page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
    huge = max(0, (_huge_page_bytes() // page).bit_length() - 1)  # its order
    free = [0, 0]
    for line in text.splitlines():
        for order, n in enumerate(line.split()[4:]):
            # (a count of free blocks has a few digits; a field of thousands is no count)
            if n.isascii() and n.isdigit() and len(n) <= COUNT_DIGITS:
                free[order >= huge] += int(n) << order
    return free[0] * page, free[1] * page


def _huge_page_bytes() -> int:
    """The size of a transparent huge page: 2 MiB on x86-64, more on kernels of 16 or 64 KiB
    pages."""
    text = (_read(HUGE_PAGE) or "").strip()
    return int(text) if text.isascii() and text.isdigit() and int(text) > 0 else 2 << 20


def _read(path: str) -> str | None:
    """A kernel file's text (any bytes read), or None where it cannot be read."""
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read()
    except OSError:
        return None
