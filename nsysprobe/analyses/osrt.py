"""OS-runtime stalls: libc calls per function and thread, and how much fell in GPU idle gaps.

Per (function, thread): count, the **sum** of call durations, the longest call, and
``in_gap_ns``: the sum of each call's overlap with the GPU idle gaps (union over devices of
the gaps longer than the threshold). A thread's ``poll`` or ``pthread_cond_wait`` inside gaps
is the training thread waiting for DataLoader workers; ``munmap`` there is memory being
returned to the OS on the critical path.

What nsys can see: ``--trace=osrt`` records calls made through the PLT above a 1 us threshold.
``munmap`` calls that glibc's ``malloc``/``free`` make internally are invisible; ``munmap``
through the exported symbol (Python ``mmap``, PyTorch shared memory, pinned buffers) is seen.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nsysprobe.analyses import intervals as iv
from nsysprobe.analyses.events import Events
from nsysprobe.analyses.rows import grouped_in_blocks, per_distinct
from nsysprobe.common.frames import Tables
from nsysprobe.common.table import Groups, Table, descending

ROWS_LISTED = 30


@dataclass(frozen=True)
class OsrtRow:
    function: str
    thread: str
    count: int
    total_ns: int  # sum of call durations
    max_ns: int
    in_gap_ns: int  # sum of overlap with GPU idle gaps


@dataclass(frozen=True)
class OsrtFunction:
    function: str
    count: int
    total_ns: int
    max_ns: int
    in_gap_ns: int


@dataclass(frozen=True)
class OsrtResult(Tables):
    TABLES = {"rows": OsrtRow, "functions": OsrtFunction}

    rows: tuple[OsrtRow, ...]  # per function and thread, most time in gaps first, then total
    functions: tuple[OsrtFunction, ...]  # per function over all threads, largest total first
    call_count: int
    pairs: int = 0  # (function, thread) pairs in all, of which ``rows`` lists ROWS_LISTED


def analyze_osrt(events: Events, gaps: dict[int, iv.Intervals]) -> OsrtResult:
    os_calls = events.osrt
    gap_union = iv.union_of(list(gaps.values()))
    groups = _per_function_and_thread(os_calls, gap_union)
    count, total, longest, gap = (groups[c] for c in ("count", "total", "max", "gap"))
    # Most time in gaps first, then most time (a stable sort: ties in order of first call).
    per_thread = np.lexsort((~total, ~gap))[:ROWS_LISTED].tolist()
    rows = tuple(
        OsrtRow(
            function=events.name_of(groups["nameId"][i]),
            thread=events.thread_label(groups["tid"][i]),
            count=int(count[i]),
            total_ns=int(total[i]),
            max_ns=int(longest[i]),
            in_gap_ns=int(gap[i]),
        )
        for i in per_thread
    )
    # Per function: string ids of one name (a name recorded twice) are one function.
    per_fn = Groups([per_distinct(groups["nameId"], events.name_of)], sort=False)
    fn_count, fn_total = per_fn.sum(count), per_fn.sum(total)
    fn_max, fn_gap = per_fn.max(longest), per_fn.sum(gap)
    functions = tuple(
        OsrtFunction(
            function=str(per_fn.keys[0][i]),
            count=int(fn_count[i]),
            total_ns=int(fn_total[i]),
            max_ns=int(fn_max[i]),
            in_gap_ns=int(fn_gap[i]),
        )
        for i in descending(fn_total).tolist()
    )
    return OsrtResult(
        rows=rows, functions=functions, call_count=len(os_calls), pairs=int(count.size)
    )


def _per_function_and_thread(os_calls: Table, gap_union: iv.Intervals) -> Table:
    """nameId, tid, then count, total, max and gap (ns in gaps) per (nameId, tid), groups in
    order of first call: summed a block of calls at a time, then over the blocks (ten million
    calls, a few hundred groups)."""
    cols = [os_calls[c] for c in ("start", "end", "nameId", "globalTid")]

    def block(lo: int, hi: int) -> dict[str, np.ndarray]:
        s, e, name, tid = (a[lo:hi] for a in cols)
        in_gap = iv.covered(s, e, gap_union)
        return {"nameId": name, "tid": tid, "dur": e - s, "gap": in_gap}

    how = {
        "count": ("dur", "size"),
        "total": ("dur", "sum"),
        "max": ("dur", "max"),
        "gap": ("gap", "sum"),
    }
    return grouped_in_blocks(len(os_calls), block, ["nameId", "tid"], how, sort=False)
