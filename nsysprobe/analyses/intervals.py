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


def union(starts, ends) -> Intervals:
    """Merge intervals into sorted, disjoint ones (intervals that touch are merged; empty
    ones cover no time and are dropped)."""
    starts, ends = as_intervals(starts, ends)
    nonempty = ends > starts
    if not nonempty.all():
        starts, ends = starts[nonempty], ends[nonempty]
    if starts.size == 0:
        return starts.copy(), ends.copy()
    if (starts[1:] >= starts[:-1]).all():
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
    last = np.append(first[1:], s.size) - 1
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
