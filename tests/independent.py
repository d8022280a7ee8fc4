"""Figures computed straight from an export with ``sqlite3`` and numpy, for tests to hold
nsysprobe's answers to. Nothing here imports nsysprobe: a bug there cannot leak into the
expected value.

A process id is bits 24-47 of ``globalPid``/``globalTid``, as nsys packs them. GPU work is
every row of the kernel, memcpy and memset tables; busy time is the **union** of those rows:

    kernel   |=====|   |====|
    memcpy      |=====|
    busy     |=========|====|
"""

from __future__ import annotations

import sqlite3
from bisect import bisect_left, bisect_right
from pathlib import Path

import numpy as np

GPU_TABLES = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
)
# GPU work a CUDA call launches: what a step's CPU range projects onto the GPU.
LAUNCHED_TABLES = GPU_TABLES + ("CUPTI_ACTIVITY_KIND_GRAPH_TRACE",)
PID_OF = "((({col}) >> 24) & 16777215)"


def query(path: Path, sql: str, params: tuple = ()) -> list[tuple]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return db.execute(sql, params).fetchall()
    finally:
        db.close()


def tables(path: Path) -> set[str]:
    return {t for (t,) in query(path, "SELECT name FROM sqlite_master WHERE type = 'table'")}


def row_count(path: Path, table: str) -> int:
    """``COUNT(*)`` of a table, 0 where the lazy export left it out."""
    if table not in tables(path):
        return 0
    return query(path, f'SELECT count(*) FROM "{table}"')[0][0]


def gpu_pids(path: Path) -> list[int]:
    """The processes with GPU work: kernels, copies, memsets or CUDA graph replays."""
    present = [t for t in LAUNCHED_TABLES if t in tables(path)]
    sql = " UNION ".join(f"SELECT {PID_OF.format(col='globalPid')} FROM {t}" for t in present)
    return sorted({p for (p,) in query(path, sql)})


def gpu_work(path: Path, pid: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Start and end of every kernel, copy and memset (of process ``pid`` only, if given)."""
    rows: list[tuple[int, int]] = []
    for table in GPU_TABLES:
        if table not in tables(path):
            continue
        sql = f"SELECT start, end FROM {table}"
        if pid is None:
            rows += query(path, sql)
        else:
            rows += query(path, sql + f" WHERE {PID_OF.format(col='globalPid')} = ?", (pid,))
    array = np.array(rows, dtype=np.int64).reshape(-1, 2)
    return array[:, 0], array[:, 1]


def union_ns(starts: np.ndarray, ends: np.ndarray, lo: int | None = None, hi: int | None = None):
    """Length of the union of [start, end) intervals, clipped to [lo, hi) when given."""
    if lo is not None:
        starts, ends = np.maximum(starts, lo), np.minimum(ends, hi)
    keep = ends > starts
    starts, ends = starts[keep], ends[keep]
    if not len(starts):
        return 0
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    reach = np.maximum.accumulate(ends)
    # A new block starts where an interval begins after everything before it has ended.
    new = np.r_[True, starts[1:] > reach[:-1]]
    block_start = starts[new]
    block_end = reach[np.r_[np.flatnonzero(new)[1:] - 1, len(starts) - 1]]
    return int((block_end - block_start).sum())


def nvtx_ranges(path: Path, like: str, pid: int | None = None) -> list[tuple[int, int]]:
    """(start, end) of the push/pop NVTX ranges whose name matches the SQL pattern ``like``."""
    sql = (
        "SELECT n.start, n.end FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId "
        "WHERE n.eventType = 59 AND coalesce(n.text, s.value) LIKE ?"
    )
    params: tuple = (like,)
    if pid is not None:
        sql += f" AND {PID_OF.format(col='n.globalTid')} = ?"
        params += (pid,)
    return sorted(query(path, sql + " ORDER BY n.start", params))


def busy_ratio_over_steps(path: Path, steps: list[tuple[int, int]], pid: int | None = None):
    """GPU busy time inside the step windows over their total wall time."""
    starts, ends = gpu_work(path, pid)
    busy = sum(union_ns(starts, ends, s, e) for s, e in steps)
    return busy / sum(e - s for s, e in steps)


def busy_ratio_over_span(path: Path, pid: int | None = None) -> float:
    """GPU busy time over the span from the first GPU operation's start to the last's end."""
    starts, ends = gpu_work(path, pid)
    return union_ns(starts, ends) / int(ends.max() - starts.min())


def launched_work(path: Path, pid: int) -> list[tuple[int, int]]:
    """(start of the launching CUDA call, end of the operation) for every kernel, copy,
    memset and graph replay of process ``pid``, joined to its call on the process and the
    correlation id, by SQL."""
    have = tables(path)
    if "CUPTI_ACTIVITY_KIND_RUNTIME" not in have:
        return []
    rows: list[tuple[int, int]] = []
    for table in LAUNCHED_TABLES:
        if table not in have:
            continue
        rows += query(
            path,
            f"SELECT min(r.start), g.end FROM {table} g "
            f"JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = g.correlationId "
            f"AND {PID_OF.format(col='r.globalTid')} = {PID_OF.format(col='g.globalPid')} "
            f"WHERE {PID_OF.format(col='g.globalPid')} = ? GROUP BY g.rowid",
            (pid,),
        )
    return rows


def completion_windows(
    path: Path, ranges: list[tuple[str, int, int]], pid: int
) -> list[tuple[str, int, int]]:
    """Each step's window (name, start, end): from the last step's completion (the first
    step's: its range's start) to its own, a step completing when its CPU range and the GPU
    work launched inside it (``launched_work``) have both ended, never before the step
    before it. ``ranges``: the steps' CPU ranges in time order."""
    starts = [s for _, s, _ in ranges]
    done_at = [e for _, _, e in ranges]
    for launched, end in launched_work(path, pid):
        i = bisect_right(starts, launched) - 1
        if i >= 0 and launched < ranges[i][2]:
            done_at[i] = max(done_at[i], end)
    out, last = [], None
    for (name, start, _), done in zip(ranges, done_at):
        begin = start if last is None else last
        last = done if last is None else max(last, done)
        out.append((name, begin, last))
    return out


def step_windows(path: Path, like: str, pid: int | None = None) -> list[tuple[int, int]]:
    """(start, end) of each step's window (``completion_windows``) for the push/pop NVTX
    ranges named like the SQL pattern ``like`` of process ``pid`` (default: the one process
    with GPU work; in a trace with none, every range so named, timed by itself)."""
    if pid is None:
        pids = gpu_pids(path)
        if not pids:
            ranges = [("", s, e) for s, e in nvtx_ranges(path, like)]
            return [(s, e) for _, s, e in completion_windows(path, ranges, -1)]
        (pid,) = pids
    ranges = [("", s, e) for s, e in nvtx_ranges(path, like, pid)]
    return [(s, e) for _, s, e in completion_windows(path, ranges, pid)]


# -- the step account's intervals, by SQL and plain Python ---------------------------------

GLOBAL_PID = "((globalPid >> 24) & 16777215)"
VALID = "start IS NOT NULL AND end IS NOT NULL AND end >= start"
# Copy kinds and memory kinds as exported (``ENUM_CUDA_MEM_KIND`` when present says the same).
HTOD, DTOH = 1, 2
MEM_KIND = {0: "Pageable", 1: "Pinned"}


def nccl_issued(path: Path) -> set[tuple[int, int]]:
    """(pid, correlationId) of the CUDA calls made inside NCCL's NVTX ranges: ranges of the
    process's domain named NCCL, or named ncclXxx."""
    if not {"NVTX_EVENTS", "CUPTI_ACTIVITY_KIND_RUNTIME"} <= tables(path):
        return set()
    # Both tables built once (MATERIALIZED): a correlated EXISTS over every NVTX row, run
    # per joined row, took 13 s on the two-GPU export's 19,000 ranges.
    rows = query(
        path,
        "WITH dom AS MATERIALIZED (SELECT DISTINCT (globalTid >> 24) & 16777215 AS pid, "
        "  domainId FROM NVTX_EVENTS WHERE eventType = 75 AND text = 'NCCL'), "
        "r AS MATERIALIZED (SELECT n.globalTid, n.start, n.end FROM NVTX_EVENTS n "
        "  LEFT JOIN StringIds s ON s.id = n.textId "
        "  LEFT JOIN dom ON dom.pid = (n.globalTid >> 24) & 16777215 "
        "  AND dom.domainId = n.domainId "
        "  WHERE n.eventType IN (59, 60) AND n.end > n.start "
        "  AND (coalesce(n.text, s.value) GLOB 'nccl[A-Z]*' OR dom.pid IS NOT NULL)) "
        "SELECT DISTINCT (c.globalTid >> 24) & 16777215, c.correlationId "
        "FROM r JOIN CUPTI_ACTIVITY_KIND_RUNTIME c ON c.globalTid = r.globalTid "
        "AND r.start <= c.start AND c.start < r.end",
    )
    return set(rows)


def _mem_kinds(path: Path) -> dict[int, str]:
    if "ENUM_CUDA_MEM_KIND" in tables(path):
        return dict(query(path, "SELECT id, label FROM ENUM_CUDA_MEM_KIND"))
    return MEM_KIND


def gpu_ops(path: Path) -> dict[tuple[int, int], dict[str, list[tuple[int, int]]]]:
    """(pid, device) -> {"compute": non-NCCL kernels and graph replays, "nccl": NCCL kernels
    and whatever NCCL's NVTX ranges issued, "other": copies and memsets, and of those
    "htod_pinned" and "htod_pageable": host-to-device copies by their source memory, "dtoh":
    device-to-host copies}, each a list of (start, end)."""
    have = tables(path)
    issued = nccl_issued(path)
    kinds = _mem_kinds(path)
    out: dict[tuple[int, int], dict[str, list]] = {}

    def add(pid, dev, kind, s, e):
        ops = out.setdefault(
            (pid, dev),
            {
                "compute": [],
                "nccl": [],
                "other": [],
                "htod_pinned": [],
                "htod_pageable": [],
                "dtoh": [],
            },
        )
        ops[kind].append((s, e))

    if "CUPTI_ACTIVITY_KIND_KERNEL" in have:
        rows = query(
            path,
            f"SELECT {GLOBAL_PID}, k.deviceId, k.start, k.end, s.value, k.correlationId "
            f"FROM CUPTI_ACTIVITY_KIND_KERNEL k LEFT JOIN StringIds s ON s.id = k.shortName "
            f"WHERE {VALID}",
        )
        for pid, dev, s, e, name, corr in rows:
            low = (name or "").lower()
            nccl = (low.startswith("nccl") and "kernel" in low) or (pid, corr) in issued
            add(pid, dev, "nccl" if nccl else "compute", s, e)
    for table, kind in (
        ("CUPTI_ACTIVITY_KIND_GRAPH_TRACE", "compute"),
        ("CUPTI_ACTIVITY_KIND_MEMCPY", "other"),
        ("CUPTI_ACTIVITY_KIND_MEMSET", "other"),
    ):
        if table not in have:
            continue
        copy = table.endswith("MEMCPY")
        extra = ", copyKind, srcKind" if copy else ", NULL, NULL"
        q = f"SELECT {GLOBAL_PID}, deviceId, start, end, correlationId{extra} FROM {table} "
        for pid, dev, s, e, corr, copy_kind, src in query(path, q + f"WHERE {VALID}"):
            add(pid, dev, "nccl" if (pid, corr) in issued else kind, s, e)
            if copy and copy_kind == HTOD and kinds.get(src) in ("Pinned", "Pageable"):
                add(pid, dev, f"htod_{kinds[src].lower()}", s, e)
            if copy and copy_kind == DTOH:
                add(pid, dev, "dtoh", s, e)
    return out


class Spans(list):
    """Disjoint (start, end) intervals in time order, with their running length, so that
    ``inside`` is two bisections."""

    def __init__(self, spans):
        super().__init__(spans)
        self.starts = [s for s, _ in self]
        self.before = [0]  # before[i]: the length of spans[:i]
        for s, e in self:
            self.before.append(self.before[-1] + e - s)


def union(intervals) -> Spans:
    out: list[list[int]] = []
    for s, e in sorted(intervals):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return Spans((s, e) for s, e in out)


def intersect(a, b) -> Spans:
    """Intersection of two disjoint sorted lists (a two-pointer sweep)."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if e > s:
            out.append((s, e))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return Spans(out)


def minus(a, b) -> Spans:
    """The parts of disjoint sorted ``a`` outside disjoint sorted ``b``."""
    out, j = [], 0
    for s, e in a:
        while j < len(b) and b[j][1] <= s:
            j += 1
        k, at = j, s
        while k < len(b) and b[k][0] < e:
            if b[k][0] > at:
                out.append((at, b[k][0]))
            at = max(at, b[k][1])
            k += 1
        if at < e:
            out.append((at, e))
    return Spans(out)


def inside(u: Spans, lo: int, hi: int) -> int:
    """Length of disjoint sorted ``u`` within [lo, hi)."""
    if not isinstance(u, Spans):
        u = Spans(u)
    i = max(bisect_right(u.starts, lo) - 1, 0)
    j = bisect_left(u.starts, hi)
    if j <= i + 1:
        return sum(max(0, min(e, hi) - max(s, lo)) for s, e in u[i:j])
    # Whole spans strictly between the first and the last, clipped ends added.
    first, last = u[i], u[j - 1]
    middle = u.before[j - 1] - u.before[i + 1]
    return (
        max(0, min(first[1], hi) - max(first[0], lo))
        + middle
        + max(0, min(last[1], hi) - max(last[0], lo))
    )


# Step ranges in the project's captures: the ladder's ``Batch N``, the workloads' ``step``,
# ``step N``, ``train_step N``, ``iteration N``, ``forward N``.
STEP_NAMES = (
    "Batch [0-9]*",
    "step",
    "step [0-9]*",
    "train_step [0-9]*",
    "iteration [0-9]*",
    "forward [0-9]*",
)


def step_ranges(path: Path, pid: int | None = None) -> list[tuple[str, int, int]]:
    """The top-level NVTX ranges with a step name on a main thread (tid == pid) of process
    ``pid`` (any, when None), in time order; a range is top-level when no other range of its
    thread encloses it."""
    if "NVTX_EVENTS" not in tables(path):
        return []
    name = "coalesce(n.text, s.value)"
    is_step = " OR ".join(f"{name} GLOB '{g}'" for g in STEP_NAMES)
    rows = query(
        path,
        f"SELECT {name}, n.start, n.end, n.globalTid, ({is_step}) "
        "FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId "
        "WHERE n.eventType IN (59, 60) "
        "AND (n.globalTid & 16777215) = ((n.globalTid >> 24) & 16777215) "
        "ORDER BY n.globalTid, n.start, n.end DESC",
    )
    out, reach = [], {}
    for name, s, e, tid, is_step in rows:
        enclosed = reach.get(tid, -1) >= e
        reach[tid] = max(reach.get(tid, -1), e)
        if is_step and not enclosed and pid in (None, (tid >> 24) & 0xFFFFFF):
            out.append((name, s, e))
    return sorted(out, key=lambda r: r[1])


def fixed_windows(ops) -> list[tuple[str, int, int]]:
    """Ten equal windows over [first start, last end) of the account's GPU work: edge i at
    lo + i * (hi - lo) // 10, so the last window ends at hi exactly."""
    lo = min(s for kind in ops.values() for s, _ in kind)
    hi = max(e for kind in ops.values() for _, e in kind)
    edges = [lo + i * (hi - lo) // 10 for i in range(11)]
    return [(f"window {i}", edges[i], edges[i + 1]) for i in range(10)]


def startup_count(walls: list[int], ratio: float = 3) -> int:
    """Leading windows that are start-up: the most k (at least two windows left) such that
    each of the first k is longer than ``ratio`` times every window after them (the issue's
    rule, written out as a loop)."""
    best = 0
    for k in range(1, len(walls) - 1):
        if all(w > ratio * v for w in walls[:k] for v in walls[k:]):
            best = k
    return best


def final_count(walls: list[int], startup: int, ratio: float = 3) -> int:
    """Trailing windows that are one-time (a final checkpoint): the most f (at least two
    windows left after the ``startup`` leading ones) such that each of the last f is longer
    than ``ratio`` times every window between the start-up ones and them."""
    rest, best = walls[startup:], 0
    for f in range(1, len(rest) - 1):
        if all(w > ratio * v for w in rest[-f:] for v in rest[:-f]):
            best = f
    return best


# The gap between a kernel's end and the start of the next one, issued before the first began,
# of a length in [shortest, longest] (the kernels of the process launching them: those joined
# to a launch).
_QUEUED_GAPS = """
    WITH k AS (
        SELECT k.start AS start, k.end AS end, r.end AS issued
        FROM CUPTI_ACTIVITY_KIND_KERNEL AS k
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r ON r.correlationId = k.correlationId
    ), ordered AS (
        SELECT start, issued, LAG(end) OVER (ORDER BY start) AS previous_end FROM k
    )
    SELECT COALESCE(SUM(start - previous_end), 0) FROM ordered
    WHERE start > previous_end AND issued <= previous_end
        AND start - previous_end BETWEEN ? AND ?
"""


def queued_gaps(path: Path, shortest: int = 1, longest: int = 2**62) -> int:
    """ns of idle between launched kernels whose next kernel was issued before it began."""
    return query(path, _QUEUED_GAPS, (shortest, longest))[0][0]
