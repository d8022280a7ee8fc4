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

import pandas as pd

from nsysprobe.analyses import intervals as iv
from nsysprobe.analyses.events import Events, grouped_in_blocks

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
class OsrtResult:
    rows: tuple[OsrtRow, ...]  # per function and thread, most time in gaps first, then total
    functions: tuple[OsrtFunction, ...]  # per function over all threads, largest total first
    call_count: int


def analyze_osrt(events: Events, gaps: dict[int, iv.Intervals]) -> OsrtResult:
    os_calls = events.osrt
    gap_union = iv.union_of(list(gaps.values()))
    groups = _per_function_and_thread(os_calls, gap_union)
    per_thread = groups.sort_values(["gap", "total"], ascending=False)
    rows = tuple(
        OsrtRow(
            function=events.name_of(name_id),
            thread=events.thread_label(tid),
            count=int(r["count"]),
            total_ns=int(r["total"]),
            max_ns=int(r["max"]),
            in_gap_ns=int(r["gap"]),
        )
        for (name_id, tid), r in per_thread.head(ROWS_LISTED).iterrows()
    )
    per_id = groups.groupby(level="nameId", sort=False).agg(
        {"count": "sum", "total": "sum", "max": "max", "gap": "sum"}
    )
    per_fn = per_id.groupby(per_id.index.map(events.name_of), sort=False).agg(
        {"count": "sum", "total": "sum", "max": "max", "gap": "sum"}
    )
    functions = tuple(
        OsrtFunction(
            function=str(fn),
            count=int(r["count"]),
            total_ns=int(r["total"]),
            max_ns=int(r["max"]),
            in_gap_ns=int(r["gap"]),
        )
        for fn, r in per_fn.sort_values("total", ascending=False).iterrows()
    )
    return OsrtResult(rows=rows, functions=functions, call_count=len(os_calls))


def _per_function_and_thread(os_calls: pd.DataFrame, gap_union: iv.Intervals) -> pd.DataFrame:
    """count, total, max and gap (ns in gaps) per (nameId, tid), groups in order of first
    call: summed a block of calls at a time, then over the blocks (ten million calls, a few
    hundred groups)."""
    cols = [os_calls[c].to_numpy() for c in ("start", "end", "nameId", "globalTid")]

    def block(lo: int, hi: int) -> pd.DataFrame:
        s, e, name, tid = (a[lo:hi] for a in cols)
        in_gap = iv.covered(s, e, gap_union)
        return pd.DataFrame({"nameId": name, "tid": tid, "dur": e - s, "gap": in_gap})

    how = {
        "count": ("dur", "size"),
        "total": ("dur", "sum"),
        "max": ("dur", "max"),
        "gap": ("gap", "sum"),
    }
    return grouped_in_blocks(len(os_calls), block, ["nameId", "tid"], how, sort=False)
