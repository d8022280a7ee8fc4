"""Row helpers the analyses share over the event tables' columns (``Table``, numpy arrays):
CUDA API names without their version suffix, a label per category or distinct value, the rows
of a thread or overlapping given intervals, tables too long to copy grouped a block at a time,
one thread's calls taken a stretch of time at a time (``ThreadCalls``, ``sweep``), and the
top-level ranges of each group (``top_level``).

Each holds a bounded part of a table at once however long it is: ``ROWS_PER_BLOCK`` rows,
``CALLS_PER_SWEEP`` calls, ``LARGE_GROUP`` ranges of one group.
"""

from __future__ import annotations

import copy
import re

import numpy as np

from nsysprobe.analyses import intervals as iv
from nsysprobe.common.table import Groups, Labels, Table, concat, ranked

# ``cudaLaunchKernel_v7000``, ``cudaMemcpyAsync_ptsz_v7000`` (per-thread default stream).
_API_VERSION = re.compile(r"(?:_pt(?:sz|ds))?(?:_v\d+)?$")


def api_name(raw: str) -> str:
    """``cudaMemcpyAsync_v3020`` and ``cudaMemcpyAsync_ptsz_v7000`` -> ``cudaMemcpyAsync``."""
    return _API_VERSION.sub("", raw)


def label_at(column: Labels, idx: np.ndarray) -> np.ndarray:
    """The labels of a ``Labels`` column at the rows ``idx``."""
    cats = column.categories
    return cats[column.codes[idx]] if len(column) else np.empty(0, dtype=object)


def per_category(column: Labels, label, dtype=object) -> np.ndarray:
    """``label(category)`` for each row of a ``Labels`` column, called once per category
    (millions of NVTX rows, a few hundred patterns)."""
    out = np.array([label(str(c)) for c in column.categories.tolist()], dtype=dtype)
    return out[column.codes] if out.size else np.empty(len(column), dtype=dtype)


def per_distinct(values: np.ndarray, label, dtype=object) -> np.ndarray:
    """``label(value)`` for each of ``values`` (string ids, kind codes), called once per
    distinct value."""
    distinct, which = ranked(np.asarray(values).ravel())
    out = np.array([label(v) for v in distinct.tolist()], dtype=dtype)
    return out[which] if out.size else np.empty(0, dtype=dtype)


# Rows tested at once when a table is cut down: temporaries stay a few MiB however long it is.
ROWS_PER_BLOCK = 1 << 20
# Calls one sweep step takes (``ThreadCalls``, ``sweep``): bounds what the attribution of idle
# time holds at once on a thread with millions of OS-runtime or CUDA API calls.
CALLS_PER_SWEEP = 1 << 18
# Groups of ranges at least this large are found enclosed one group at a time (``top_level``).
LARGE_GROUP = 1 << 12


def rows_overlapping(df: Table, by: iv.Intervals, threads) -> Table:
    """The rows of ``df`` that overlap one of ``by`` (disjoint, sorted) on the threads that
    ``threads`` accepts (a function of a block of ``globalTid`` values returning a mask). Only
    those rows are copied, tested a block at a time."""
    tids, s, e = (df[c] for c in ("globalTid", "start", "end"))
    hits = [np.empty(0, dtype=np.int64)]
    for lo in range(0, tids.size, ROWS_PER_BLOCK):
        mine = np.flatnonzero(threads(tids[lo : lo + ROWS_PER_BLOCK])) + lo
        hits.append(mine[iv.overlaps_any(s[mine], e[mine], by)])
    return df.take(np.concatenate(hits))


def rows_of_thread(df: Table, thread: int) -> np.ndarray:
    """The row numbers of ``thread``'s rows (``globalTid``) in ``df``, in table order, found a
    block at a time; 32-bit for tables under 2^31 rows."""
    tids = df["globalTid"]
    index = iv.index_type(tids.size)
    return np.concatenate(
        [np.empty(0, dtype=index)]
        + [
            (np.flatnonzero(tids[lo : lo + ROWS_PER_BLOCK] == thread) + lo).astype(index)
            for lo in range(0, tids.size, ROWS_PER_BLOCK)
        ]
    )


def grouped_in_blocks(n: int, block, keys: list[str], how: dict, sort: bool) -> Table:
    """The rows [0, n) of a table too long to copy whole grouped by the columns ``keys``:
    ``block(lo, hi)`` gives the columns (a dict of arrays) of rows [lo, hi), a block of
    ``ROWS_PER_BLOCK`` at a time; each aggregate of ``how`` (name -> (column, "size", "sum",
    "min" or "max")) is combined over the blocks (sizes and sums add up). A table of the
    keys, then the aggregates, a row per group: in the keys' order with ``sort``, else in
    order of first appearance. Millions of rows, a few hundred groups."""
    parts = [
        _aggregate(block(lo, lo + ROWS_PER_BLOCK), keys, how, sort)
        for lo in range(0, max(n, 1), ROWS_PER_BLOCK)
    ]
    if len(parts) == 1:
        return parts[0]
    combine = {name: (name, "sum" if f in ("size", "sum") else f) for name, (_, f) in how.items()}
    return _aggregate(concat(parts), keys, combine, sort)


def _aggregate(columns, keys: list[str], how: dict, sort: bool) -> Table:
    groups = Groups([columns[k] for k in keys], sort=sort)
    out = dict(zip(keys, groups.keys))
    for name, (column, func) in how.items():
        out[name] = groups.count() if func == "size" else getattr(groups, func)(columns[column])
    return Table(out)


class ThreadCalls:
    """One thread's rows of a table (calls, NVTX ranges) in start order, taken a stretch of
    time at a time by ``take``: each stretch holds the rows started in it and those still
    open from before (a call nested in another, a range open over many stretches), so what is
    held follows the stretch, not the table."""

    def __init__(self, df: Table, thread: int):
        rows = rows_of_thread(df, thread)
        self._table_start = df["start"]
        self.start = None  # the rows' starts, kept only when the table is not in start order
        if not iv.ascending(self._table_start):
            start = self._table_start[rows]
            order = np.argsort(start, kind="stable")
            rows, self.start = rows[order], start[order]
        self.df, self.rows = df, rows
        self._end = df["end"]
        self._open = rows[:0]  # taken rows ending after the last stretch
        self._taken = 0  # rows[:_taken] started before the last stretch ended

    def fork(self) -> ThreadCalls:
        """The same rows, taken from the first again: a sweep of another thread's own."""
        other = copy.copy(self)
        other._open, other._taken = self.rows[:0], 0
        return other

    def started_before(self, t) -> np.ndarray:
        """How many of the rows start before each time of ``t``."""
        if self.start is not None:
            return np.searchsorted(self.start, t, side="left")
        # In a table in start order, the rows started before t are those before its first
        # row starting at t or later.
        at = np.searchsorted(self._table_start, t, side="left").astype(self.rows.dtype)
        return np.searchsorted(self.rows, at)  # (same types: no copy of the rows)

    def take(self, by: iv.Intervals) -> Table:
        """The rows overlapping one of ``by`` (disjoint, sorted), in start order. Each call
        must come after the last one's intervals: rows that ended before are forgotten."""
        if not by[0].size:
            return self.df.head(0)
        lo, hi = int(by[0][0]), int(by[1][-1])
        b = int(self.started_before(hi))
        rows = np.concatenate([self._open, self.rows[self._taken : b]])
        self._taken = b
        ends = self._end[rows]
        self._open = rows[ends > hi]
        rows = rows[ends > lo]
        s = self._table_start[rows]
        return self.df.take(rows[iv.overlaps_any(s, self._end[rows], by)])


def sweep(calls: list[ThreadCalls], s: np.ndarray, e: np.ndarray, parts: int = 1):
    """Runs [lo, hi) of the intervals [s, e) (disjoint, sorted) in which ``calls`` start about
    ``CALLS_PER_SWEEP`` rows at most (and as many intervals), for ``ThreadCalls.take``; at
    least ``parts`` runs of about equal weight where there are as many intervals (each for a
    thread of its own)."""
    weight = np.arange(1, s.size + 1, dtype=np.int64)
    for c in calls:
        weight += c.started_before(e)
    total = int(weight[-1]) if weight.size else 0
    yield from iv.runs(weight, max(1, min(CALLS_PER_SWEEP, -(-total // parts))))


def top_level(df: Table, group: str) -> np.ndarray:
    """Mask of ranges that no other range of the same ``group`` encloses.

    Sorted by (start, longest first) within its group, a range is enclosed when an earlier
    one of the group ends at or after its own end. The groups' rows are found by one stable
    sort of the groups, so a group's rows keep the table's order (usually by start already).
    A large group (a thread with millions of ranges) is done on its own, sorted only if it is
    not in order; the small ones all together, as one sorted table.
    """
    n = len(df)
    mask = np.ones(n, dtype=bool)
    if n < 2:
        return mask
    g = df[group]
    starts, ends = df["start"], df["end"]
    by_group = np.argsort(g, kind="stable")
    cut = np.empty(n + 1, dtype=bool)
    cut[0] = cut[n] = True
    np.not_equal(g[by_group[1:]], g[by_group[:-1]], out=cut[1:n])
    bounds = np.flatnonzero(cut)
    del cut
    sizes = np.diff(bounds)
    large = sizes >= LARGE_GROUP
    for lo, hi in zip(bounds[:-1][large].tolist(), bounds[1:][large].tolist()):
        rows = by_group[lo:hi]
        s, e = starts[rows], ends[rows]
        if not _start_then_longest(s, e):
            order = np.lexsort((-e, s))
            rows, e = rows[order], e[order]
        del s
        reach = np.maximum.accumulate(e)
        mask[rows[1:]] = reach[:-1] < e[1:]
    small = (sizes > 1) & ~large
    if small.any():
        rows = by_group[np.repeat(small, sizes)]  # in group order
        g, s, e = g[rows], starts[rows], ends[rows]
        order = np.lexsort((-e, s, g))
        rows, g, e = rows[order], g[order], e[order]
        mask[rows[_enclosed_in_group(g, e)]] = False
    return mask


def _enclosed_in_group(g: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Mask of the rows (sorted by group, then start, longest first) that an earlier row of
    their group ends at or after: the running maximum of the ends within each group, one row
    behind. The ends are ranked densely (equal ends, equal ranks) and each group's ranks
    lifted above every earlier group's, so one running maximum serves every group."""
    n = e.size
    group = np.concatenate([[0], np.cumsum(g[1:] != g[:-1])]).astype(np.int64)
    rank = np.unique(e, return_inverse=True)[1].reshape(-1).astype(np.int64)
    reach = np.maximum.accumulate(group * (n + 1) + rank)
    enclosed = np.zeros(n, dtype=bool)
    same = group[1:] == group[:-1]
    enclosed[1:] = same & (reach[:-1] - group[1:] * (n + 1) >= rank[1:])
    return enclosed


def _start_then_longest(s: np.ndarray, e: np.ndarray) -> bool:
    """Are the ranges in start order, the longest first among those starting together?"""
    later, same = s[1:] > s[:-1], s[1:] == s[:-1]
    return bool((later | (same & (e[1:] <= e[:-1]))).all())


def first_row_of(keys: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Per wanted value, the index of the first row of ``keys`` holding it, or -1."""
    if not keys.size:
        return np.full(wanted.size, -1, dtype=np.int64)
    order = np.argsort(keys, kind="stable")
    k = keys[order]
    i = np.clip(np.searchsorted(k, wanted, side="left"), 0, k.size - 1)
    return np.where(k[i] == wanted, order[i], -1)


def columns_where(df: Table, rows: np.ndarray, cols) -> dict[str, np.ndarray]:
    """The arrays of ``cols`` over the ``rows`` (a mask) of ``df``: the table's own arrays, not
    copies, when every row is wanted (one GPU, one process: most reports)."""
    every = bool(rows.all())
    return {c: df[c] if every else df[c][rows] for c in cols}
