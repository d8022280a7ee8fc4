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
from bisect import bisect_right
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
