"""Interval arithmetic against a brute-force timeline of unit cells."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from nsysprobe.analyses import intervals as iv

SPAN = 60

interval = st.tuples(st.integers(0, SPAN), st.integers(0, 12)).map(lambda t: (t[0], t[0] + t[1]))
interval_lists = st.lists(interval, max_size=25)


def cells(intervals) -> np.ndarray:
    """A boolean per unit of time: covered or not (the independent model)."""
    line = np.zeros(SPAN + 20, dtype=bool)
    for s, e in intervals:
        line[s:e] = True
    return line


def runs(line: np.ndarray) -> list[tuple[int, int]]:
    out, start = [], None
    for i, v in enumerate(list(line) + [False]):
        if v and start is None:
            start = i
        if not v and start is not None:
            out.append((start, i))
            start = None
    return out


def arrays(intervals):
    return (
        np.array([s for s, _ in intervals], dtype=np.int64),
        np.array([e for _, e in intervals], dtype=np.int64),
    )


@given(interval_lists)
def test_union_matches_covered_cells(ivs):
    s, e = iv.union(*arrays(ivs))
    assert list(zip(s.tolist(), e.tolist())) == runs(cells(ivs))
    assert iv.total((s, e)) == int(cells(ivs).sum())


@given(interval_lists, st.integers(0, 5))
def test_gaps_between_are_the_uncovered_runs_inside_the_span(ivs, min_len):
    u = iv.union(*arrays(ivs))
    gs, ge = iv.gaps_between(u, min_len)
    line = cells(ivs)
    expected = []
    if line.any():
        first, last = np.flatnonzero(line)[[0, -1]]
        expected = [(a, b) for a, b in runs(~line[: last + 1]) if a > first and b - a > min_len]
    assert list(zip(gs.tolist(), ge.tolist())) == expected


@given(interval_lists, interval_lists)
def test_intersection_total_counts_cells_covered_by_both(a, b):
    ua, ub = iv.union(*arrays(a)), iv.union(*arrays(b))
    assert iv.intersection_total(ua, ub) == int((cells(a) & cells(b)).sum())


@given(interval_lists, interval_lists)
def test_overlap_pairs_match_pairwise_overlaps(ivs, segs):
    seg = iv.union(*arrays(segs))
    i_idx, s_idx, ov = iv.overlap_pairs(*arrays(ivs), *seg)
    got = sorted(zip(i_idx.tolist(), s_idx.tolist(), ov.tolist()))
    expected = []
    for i, (s, e) in enumerate(ivs):
        for k, (a, b) in enumerate(zip(seg[0].tolist(), seg[1].tolist())):
            o = min(e, b) - max(s, a)
            if o > 0:
                expected.append((i, k, o))
    assert got == sorted(expected)


@given(interval_lists, st.integers(0, SPAN), st.integers(0, SPAN))
def test_complement_and_clip_partition_the_window(ivs, lo, width):
    hi = lo + width
    u = iv.union(*arrays(ivs))
    inside, outside = iv.clip(u, lo, hi), iv.complement(u, lo, hi)
    line = cells(ivs)
    assert iv.total(inside) == int(line[lo:hi].sum())
    assert iv.total(inside) + iv.total(outside) == hi - lo


def test_union_of_nothing_is_empty():
    s, e = iv.union([], [])
    assert s.size == 0 and e.size == 0
    assert iv.gaps_between((s, e), 0)[0].size == 0
