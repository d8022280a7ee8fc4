"""Interval arithmetic on integer-nanosecond [start, end) arrays.

A *union* merges overlapping intervals, so time is counted once however many streams ran at
once; a *sum* adds every interval's length. The analyses say which one each figure is.

    kernels, stream 7:  [====)    [==)
    kernels, stream 9:     [=====)        [=)
    union:              [=========)[==)   [=)      (touching intervals merge)
    gaps (min 0):                         [)  between union intervals only

Every function takes and returns numpy int64 arrays and never loops in Python over events.
"""

from __future__ import annotations

import numpy as np

Intervals = tuple[np.ndarray, np.ndarray]


def as_intervals(starts, ends) -> Intervals:
    return np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)


def busy_ratio(busy_ns, wall_ns) -> float:
    """The one GPU busy ratio: the union of GPU work within a window over the window's wall
    time (0 for an empty window). Figures differ only by their window: the steps (the steps
    analysis, and ``compare``), one process and GPU over its steps (the step account, the
    ``gpu_bound`` verdict), or a device's span from first to last operation (without steps)."""
    return float(busy_ns) / float(wall_ns) if wall_ns else 0.0


def union_of(parts: list[Intervals]) -> Intervals:
    """The union of several unions (devices, kinds of work): one merge of all their
    intervals, far fewer than the rows they came from. The others' intervals are put in
    their places among the largest's, in start order, where that one is in start order (a
    device's 9 M kernels and its few copies: no sort of them all, and no copy of them in
    sorted order beside the joined ones)."""
    if len(parts) == 1:
        return parts[0]
    if not parts:
        return union([], [])
    big = max(range(len(parts)), key=lambda i: parts[i][0].size)
    b_s, b_e = as_intervals(*parts[big])
    rest = [as_intervals(*p) for i, p in enumerate(parts) if i != big]
    if not ascending(b_s):
        return union(
            np.concatenate([b_s, *(p[0] for p in rest)]),
            np.concatenate([b_e, *(p[1] for p in rest)]),
        )
    r_s = np.concatenate([p[0] for p in rest])
    r_e = np.concatenate([p[1] for p in rest])
    order = np.argsort(r_s, kind="stable")
    r_s, r_e = r_s[order], r_e[order]
    at = np.searchsorted(b_s, r_s, side="right")
    return union(np.insert(b_s, at, r_s), np.insert(b_e, at, r_e))


def ascending(a: np.ndarray) -> bool:
    """Whether ``a`` never falls (times in order)."""
    return bool((a[1:] >= a[:-1]).all()) if a.size > 1 else True


def union(starts, ends) -> Intervals:
    """Merge intervals into sorted, disjoint ones (intervals that touch are merged; empty
    ones cover no time and are dropped)."""
    starts, ends = as_intervals(starts, ends)
    nonempty = ends > starts
    if not nonempty.all():
        starts, ends = starts[nonempty], ends[nonempty]
    if starts.size == 0:
        return starts.copy(), ends.copy()
    if ascending(starts):
        s, e = starts, ends  # traces are mostly in time order already: no sort, no copy
    else:
        order = np.argsort(starts, kind="stable")
        s, e = starts[order], ends[order]
    running_end = np.maximum.accumulate(e)
    # A new merged interval begins where a start lies beyond every end seen before it.
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    new[1:] = s[1:] > running_end[:-1]
    first = np.flatnonzero(new)
    del new
    last = np.empty_like(first)  # each merged interval's last row
    last[:-1] = first[1:] - 1
    last[-1] = s.size - 1
    return s[first], running_end[last]


def total(intervals: Intervals) -> int:
    """Total length of disjoint intervals (use :func:`union` first for a union figure)."""
    s, e = intervals
    return int((e - s).sum())


def clip(intervals: Intervals, lo: int, hi: int) -> Intervals:
    """Disjoint sorted intervals cut to [lo, hi)."""
    s, e = intervals
    s2, e2 = np.maximum(s, lo), np.minimum(e, hi)
    keep = e2 > s2
    return s2[keep], e2[keep]


def complement(intervals: Intervals, lo: int, hi: int) -> Intervals:
    """The parts of [lo, hi) that disjoint sorted ``intervals`` do not cover."""
    s, e = clip(intervals, lo, hi)
    gap_s = np.concatenate(([lo], e))
    gap_e = np.concatenate((s, [hi]))
    keep = gap_e > gap_s
    return gap_s[keep], gap_e[keep]


def intersection_total(a: Intervals, b: Intervals) -> int:
    """Length of the intersection of two sets of disjoint sorted intervals."""
    _, _, overlap = overlap_pairs(a[0], a[1], b[0], b[1])
    return int(overlap.sum())


def gaps_between(intervals: Intervals, min_ns: int) -> Intervals:
    """Gaps strictly longer than ``min_ns`` between consecutive disjoint intervals.

    Leading and trailing idle time (before the first and after the last interval) is not a
    gap: the capture window, not the workload, decides it.
    """
    s, e = intervals
    if s.size < 2:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    gs, ge = e[:-1], s[1:]
    keep = (ge - gs) > min_ns
    return gs[keep], ge[keep]


def overlap_pairs(starts, ends, seg_starts, seg_ends) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every (interval, segment) pair that overlaps, with the overlap length.

    ``starts``/``ends`` may overlap each other and come in any order; the segments must be
    disjoint and sorted (a union, or gaps). Returns index arrays into the intervals and the
    segments, and the overlap in ns, for pairs with overlap > 0.
    """
    starts, ends = as_intervals(starts, ends)
    seg_starts, seg_ends = as_intervals(seg_starts, seg_ends)
    empty = np.empty(0, np.int64)
    if starts.size == 0 or seg_starts.size == 0:
        return empty, empty, empty
    # Segment k overlaps [s, e) when seg_end[k] > s and seg_start[k] < e.
    first = np.searchsorted(seg_ends, starts, side="right")
    stop = np.searchsorted(seg_starts, ends, side="left")
    counts = stop - first
    # Most intervals (API calls, OS calls) overlap no segment (gaps): drop them first.
    hit = np.flatnonzero(counts > 0)
    if hit.size == 0:
        return empty, empty, empty
    first, counts = first[hit], counts[hit]
    n = int(counts.sum())
    interval_idx = np.repeat(hit, counts)
    offsets = np.arange(n) - np.repeat(np.cumsum(counts) - counts, counts)
    seg_idx = np.repeat(first, counts) + offsets
    overlap = np.minimum(ends[interval_idx], seg_ends[seg_idx]) - np.maximum(
        starts[interval_idx], seg_starts[seg_idx]
    )
    keep = overlap > 0
    return interval_idx[keep], seg_idx[keep], overlap[keep]


def covered(starts, ends, union: Intervals) -> np.ndarray:
    """How much of each interval [start, end) the ``union`` (sorted, disjoint segments)
    covers, in ns. Prefix sums over the union: O((intervals + segments) log segments) in time
    and memory, however many segments each interval spans (``overlap_pairs`` makes a pair of
    each, steps x busy intervals when steps overlap).

        union     |==|   |=====|      |==|
        interval    [--------------)
        covered     ^-^  ^-----^          = upto(end) - upto(start)
    """
    return Coverage(union).of(starts, ends)


class Coverage:
    """``covered`` against one union, its prefix sums made once: for a union asked about
    many times (a run of intervals at a time), each question costs O(intervals log
    segments), not the union's size again."""

    def __init__(self, union: Intervals):
        self.starts, self.ends = as_intervals(*union)
        # before[k]: the time of segments 0..k-1
        self.before = np.concatenate(([0], np.cumsum(self.ends - self.starts)))

    def of(self, starts, ends) -> np.ndarray:
        starts, ends = as_intervals(starts, ends)
        if not starts.size or not self.starts.size:
            return np.zeros(starts.size, dtype=np.int64)
        return self._upto(ends) - self._upto(starts)

    def _upto(self, t: np.ndarray) -> np.ndarray:
        """Union covered before time t: whole segments, and the one t falls in."""
        i = np.searchsorted(self.starts, t, side="right")  # segments starting at or before t
        last = np.maximum(i - 1, 0)
        inside = np.minimum(t, self.ends[last]) - self.starts[last]
        return np.where(i > 0, self.before[last] + inside, 0)


def runs(weight: np.ndarray, budget: int):
    """Runs [lo, hi) of consecutive items whose weights (``weight``: their running total,
    nondecreasing) add up to at most ``budget``; an item heavier than that is a run alone."""
    lo = 0
    while lo < weight.size:
        before = weight[lo - 1] if lo else 0
        hi = max(int(np.searchsorted(weight, before + budget, side="right")), lo + 1)
        yield lo, hi
        lo = hi


def index_type(n: int) -> type:
    """The integer type for row numbers and counts below ``n``: 32-bit while they fit."""
    return np.int32 if n < 2**31 else np.int64


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """The distinct values, sorted (a sort and a compare: numpy's hashing unique is several
    times slower on millions of int64 timestamps)."""
    return distinct_of_sorted(np.sort(values))


def distinct_of_sorted(v: np.ndarray) -> np.ndarray:
    """The distinct values of the sorted ``v``."""
    if v.size < 2:
        return v
    keep = np.empty(v.size, dtype=bool)
    keep[0] = True
    np.not_equal(v[1:], v[:-1], out=keep[1:])
    return v[keep]


def partition(layers: list[Intervals]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Split the union of several layers of disjoint sorted intervals into disjoint sorted
    segments, each labeled with the first layer (in list order) that covers it.

        layer 0:   [=====)
        layer 1:      [=======)      [==)
        segments:  [00000)[111)      [11)

    Returns (starts, ends, layer index); time no layer covers is left out.
    """
    empty = np.empty(0, np.int64)
    if not any(s.size for s, _ in layers):
        return empty, empty, empty
    bounds = np.concatenate([edge for layer in layers for edge in layer])
    bounds.sort()  # its own array: sorted in place, no second copy
    bounds = distinct_of_sorted(bounds)
    seg_s, seg_e = bounds[:-1], bounds[1:]
    label = np.full(seg_s.size, -1, dtype=np.min_scalar_type(-len(layers)))
    for k in range(len(layers) - 1, -1, -1):  # the first layer written last wins
        s, e = layers[k]
        s, e = s[e > s], e[e > s]
        if not s.size:
            continue
        # Every bound is a segment's edge: a layer's interval covers the segments from the
        # one starting at its start to the one ending at its end, marked as +1 ... -1.
        edge = np.zeros(seg_s.size + 1, dtype=np.int8)
        edge[np.searchsorted(seg_s, s)] += 1
        edge[np.searchsorted(seg_s, e)] -= 1
        label[np.cumsum(edge[:-1], dtype=np.int8) > 0] = k
        del edge
    keep = label >= 0
    return seg_s[keep], seg_e[keep], label[keep]


def split_at(starts: np.ndarray, ends: np.ndarray, points) -> tuple[np.ndarray, ...]:
    """Cut disjoint sorted segments at every point strictly inside one of them.

    Returns (starts, ends, origin): the pieces in order and the index of the segment each
    came from.
    """
    n = starts.size
    pts = np.asarray(points, dtype=np.int64)
    # Keep the points inside a segment first: often few of millions.
    idx = np.searchsorted(starts, pts, side="right") - 1
    safe = np.clip(idx, 0, None)
    inside = (idx >= 0) & (pts > starts[safe]) & (pts < ends[safe]) if n else idx < -1
    del safe
    pts = sorted_unique(pts[inside])
    idx = np.searchsorted(starts, pts, side="right") - 1
    piece_s = np.concatenate([starts, pts])
    origin = np.concatenate([np.arange(n), idx])
    order = np.argsort(piece_s, kind="stable")
    piece_s, origin = piece_s[order], origin[order]
    piece_e = np.empty_like(piece_s)
    piece_e[:-1] = piece_s[1:]
    last = np.ones(piece_s.size, dtype=bool)
    last[:-1] = origin[1:] != origin[:-1]
    piece_e[last] = ends[origin[last]]
    return piece_s, piece_e, origin


def split_by(starts: np.ndarray, ends: np.ndarray, by: Intervals) -> tuple[np.ndarray, ...]:
    """Cut disjoint sorted segments at every edge of ``by`` (intervals sorted by start, each
    ending after the one before) and say which of them holds each piece.

    Returns (starts, ends, origin, holder): the pieces, the segment each came from, and the
    index of the ``by`` interval holding it, -1 for a piece outside them all.
    """
    p_s, p_e, origin = split_at(starts, ends, np.concatenate([by[0], by[1]]))
    if not by[0].size:
        return p_s, p_e, origin, np.full(p_s.size, -1, dtype=np.int64)
    mid = p_s + (p_e - p_s) // 2
    k = np.searchsorted(by[0], mid, side="right") - 1
    inside = (k >= 0) & (by[1][np.clip(k, 0, None)] > mid)
    return p_s, p_e, origin, np.where(inside, k, -1)


def overlaps_any(starts: np.ndarray, ends: np.ndarray, by: Intervals) -> np.ndarray:
    """Per interval [start, end), does it overlap one of ``by`` (sorted by start, each ending
    after the one before): start before that one's end and end after its start? (So an empty
    interval strictly inside one overlaps it.)"""
    b_s, b_e = by
    if not b_s.size:
        return np.zeros(starts.size, dtype=bool)
    first = np.searchsorted(b_e, starts, side="right")  # the first one ending after the start
    ok = first < b_s.size
    ok[ok] = b_s[first[ok]] < ends[ok]
    return ok


def outermost_cover(starts: np.ndarray, ends: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Per point, the index of the earliest-starting interval holding it, or -1.

    ``starts`` must be sorted; the intervals may nest or overlap. An interval holds the
    points in [start, end).
    """
    if not starts.size:
        return np.full(points.size, -1, dtype=np.int64)
    running_end = np.maximum.accumulate(ends)
    # The first interval whose running end passes the point is the first that ends after it.
    j = np.searchsorted(running_end, points, side="right")
    ok = j < starts.size
    ok[ok] = starts[j[ok]] <= points[ok]
    return np.where(ok, j, -1)


# Ranges whose levels ``innermost_cover`` makes at a time (its search's temporary array).
LEVEL_BLOCK = 1 << 20


def innermost_cover(starts: np.ndarray, ends: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Per point, the index of the innermost interval holding it, or -1, for intervals that
    nest (NVTX push/pop ranges on one thread); ``starts`` need not be sorted.

    The innermost interval at a point at nesting depth d is the latest one started at depth d
    before it; intervals that overlap without nesting fall back to the outermost one.
    """
    nonempty = ends > starts  # an empty interval holds no point
    if not nonempty.any():
        return np.full(points.size, -1, dtype=np.int64)
    if not nonempty.all():
        held = np.flatnonzero(nonempty)
        found = innermost_cover(starts[held], ends[held], points)
        return np.where(found >= 0, held[np.clip(found, 0, None)], -1)
    del nonempty
    # Few arrays of the ranges' length at once (8 M ranges of one thread: 64 MB each in
    # int64): the ranges taken as given when already by start, the levels in 32 bits, each
    # made a block at a time.
    n = starts.size
    if bool((starts[1:] > starts[:-1]).all()):
        order, s, e = None, starts, ends  # by start, no two equal (NVTX ranges as read)
    else:
        order = np.lexsort((-ends, starts))  # by start, the longer (outer) one first on ties
        s, e = starts[order], ends[order]
    sorted_ends = np.sort(e)
    below = np.searchsorted(s, points, side="right")  # ranges started at or before the point
    depth = below - np.searchsorted(sorted_ends, points, side="right")
    # The outermost at level 1, ranges as they started, less those ended by then (>= 1:
    # a range that ended by then started before).
    wide = n >= 1 << 31
    level = np.empty(n, np.int64 if wide else np.int32)
    for lo in range(0, n, LEVEL_BLOCK):
        hi = min(n, lo + LEVEL_BLOCK)
        ended = np.searchsorted(sorted_ends, s[lo:hi], side="right")
        np.subtract(np.arange(lo + 1, hi + 1), ended, out=level[lo:hi], casting="unsafe")
    del sorted_ends
    # By level, then rank (the key level * n + rank): a stable sort of the levels, which numpy
    # sorts by radix (in linear time) when they fit 16 bits; 8 M ranges of one thread,
    # 0.08 s against 0.27 s. The keys are made in the sort's own array, a block at a time.
    top = int(level.max())
    keys = np.argsort(level.astype(np.uint16) if top < 1 << 16 else level, kind="stable")
    for lo in range(0, n, LEVEL_BLOCK):
        block = keys[lo : lo + LEVEL_BLOCK]
        block += level[block].astype(np.int64) * n
    del level
    q = np.searchsorted(keys, depth * n + below - 1, side="right") - 1
    key = keys[np.clip(q, 0, None)]
    del keys
    found = key % n
    ok = (depth > 0) & (q >= 0) & (key // n == depth)
    ok &= (s[found] <= points) & (e[found] > points)
    out = np.where(ok, found if order is None else order[found], -1)
    missing = (depth > 0) & ~ok
    if missing.any():
        outer = outermost_cover(s, e, points[missing])
        outer_at = np.clip(outer, 0, None)
        out[missing] = np.where(outer >= 0, outer_at if order is None else order[outer_at], -1)
    return out
