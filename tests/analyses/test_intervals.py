"""Interval arithmetic against a brute-force timeline of unit cells."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nsysprobe.analyses import intervals as iv
from nsysprobe.analyses import rows as rows_module
from nsysprobe.analyses.rows import ThreadCalls, top_level
from nsysprobe.common.table import Table

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


@given(interval_lists, interval_lists)
def test_covered_is_each_intervals_covered_cells(ivs, others):
    # Intervals that overlap one another (steps nested or crossing), against unit cells.
    line = cells(others)
    got = iv.covered(*arrays(ivs), iv.union(*arrays(others)))
    assert got.tolist() == [int(line[s:e].sum()) for s, e in ivs]
    assert got.dtype == np.int64


@given(interval_lists, st.integers(0, SPAN), st.integers(0, SPAN))
def test_complement_and_clip_partition_the_window(ivs, lo, width):
    hi = lo + width
    u = iv.union(*arrays(ivs))
    inside, outside = iv.clip(u, lo, hi), iv.complement(u, lo, hi)
    line = cells(ivs)
    assert iv.total(inside) == int(line[lo:hi].sum())
    assert iv.total(inside) + iv.total(outside) == hi - lo


@given(st.lists(interval_lists, min_size=2, max_size=4), st.booleans())
def test_the_union_of_unions_is_the_union_of_all_their_intervals(parts, as_given):
    # Unions, or the intervals as given (unsorted, overlapping: the largest then joined and
    # sorted with the others, not merged into its places).
    made = [arrays(p) if as_given else iv.union(*arrays(p)) for p in parts]
    s, e = iv.union_of(made)
    expected = runs(cells([i for p in parts for i in p]))
    assert list(zip(s.tolist(), e.tolist())) == expected


def test_the_union_of_a_large_union_and_small_ones_puts_them_in_its_places():
    # 20,000 kernels one after another with a gap, copies inside, across and between them.
    k_s = np.arange(20_000, dtype=np.int64) * 10
    kernels = (k_s, k_s + 6)
    copies = iv.union(np.array([3, 8, 95, 199_990, 55]), np.array([5, 12, 107, 200_005, 56]))
    memsets = iv.union(np.array([9, 1_000]), np.array([10, 1_004]))
    s, e = iv.union_of([kernels, copies, memsets])
    line = np.zeros(200_010, dtype=bool)
    for a, b in [*zip(k_s, k_s + 6), *zip(*copies), *zip(*memsets)]:
        line[a:b] = True
    assert list(zip(s.tolist(), e.tolist())) == runs(line)


def test_union_of_nothing_is_empty():
    s, e = iv.union([], [])
    assert s.size == 0 and e.size == 0
    assert iv.gaps_between((s, e), 0)[0].size == 0


# -- partition, split_at, outermost_cover, innermost_cover ---------------------------------
# Each against a brute-force model on a small integer timeline: every unit cell [t, t + 1) or
# every integer instant t in 0..TIME (and a little beyond, to see what lies outside).

TIME = 200
INSTANTS = np.arange(-3, TIME + 4, dtype=np.int64)


@st.composite
def disjoint_sorted(draw, max_size=12):
    """Disjoint sorted non-empty intervals in [0, TIME]; neighbours may touch."""
    out, t = [], 0
    for _ in range(draw(st.integers(0, max_size))):
        s = t + draw(st.integers(0, 25))
        e = s + draw(st.integers(1, 25))
        if e > TIME:
            break
        out.append((s, e))
        t = e
    return out


def cell_labels(segments, labels) -> np.ndarray:
    """Per unit cell, the label of the one segment covering it (-1: none); fails when two
    segments cover the same cell."""
    line = np.full(TIME + 1, -1, dtype=np.int64)
    for (s, e), k in zip(segments, labels):
        assert (line[s:e] == -1).all(), f"segment {(s, e)} overlaps another"
        line[s:e] = k
    return line


def pairs(starts, ends):
    return list(zip(np.asarray(starts).tolist(), np.asarray(ends).tolist()))


@given(st.lists(disjoint_sorted(), max_size=5))
def test_partition_labels_each_cell_with_the_first_layer_covering_it(layers):
    expected = np.full(TIME + 1, -1, dtype=np.int64)
    for k in range(len(layers) - 1, -1, -1):  # brute force: the first layer is written last
        for s, e in layers[k]:
            expected[s:e] = k
    s, e, label = iv.partition([arrays(layer) for layer in layers])
    segs = pairs(s, e)
    assert all(a < b for a, b in segs), "empty segment"
    assert segs == sorted(segs)
    assert cell_labels(segs, label.tolist()).tolist() == expected.tolist()


@given(disjoint_sorted(), st.lists(st.integers(-5, TIME + 5), max_size=30))
def test_split_at_cuts_the_segments_at_every_point_strictly_inside_one(segments, points):
    s_in, e_in = arrays(segments)
    p_s, p_e, origin = iv.split_at(s_in, e_in, np.array(points, dtype=np.int64))
    pieces = pairs(p_s, p_e)
    assert all(a < b for a, b in pieces), "empty piece"
    assert pieces == sorted(pieces)
    # The pieces cover exactly the cells of the segments, each cell once, each piece inside
    # the segment it names as its origin.
    assert len(origin) == len(pieces)
    covered = cell_labels(pieces, origin.tolist())
    assert covered.tolist() == cell_labels(segments, range(len(segments))).tolist()
    # The cuts are the points strictly inside a segment, and nothing else.
    inside = {p for p in points for s, e in segments if s < p < e}
    assert set(p_s.tolist()) == {s for s, _ in segments} | inside
    assert set(p_e.tolist()) == {e for _, e in segments} | inside


@given(
    st.lists(
        st.tuples(st.integers(0, TIME), st.integers(0, 40)).map(lambda t: (t[0], t[0] + t[1])),
        max_size=20,
    )
)
def test_outermost_cover_is_the_first_interval_in_start_order_holding_the_point(ivs):
    ivs = sorted(ivs, key=lambda x: x[0])  # sorted by start; ties keep the drawn order
    got = iv.outermost_cover(*arrays(ivs), INSTANTS)
    expected = [next((i for i, (s, e) in enumerate(ivs) if s <= t < e), -1) for t in INSTANTS]
    assert got.tolist() == expected


@st.composite
def nested_family(draw, lo=0, hi=TIME, depth=0):
    """Properly nested intervals in [lo, hi) by recursive splitting: a child may start and
    end where its parent does (and so equal it), siblings may touch."""
    out, t = [], lo
    while t < hi and len(out) < 6:
        s = t + draw(st.integers(0, 15))
        if s >= hi:
            break
        e = draw(st.integers(s + 1, min(hi, s + 120)))
        out.append((s, e))
        if depth < 4 and draw(st.booleans()):
            out += draw(nested_family(s, e, depth + 1))
        t = e
        if draw(st.integers(0, 3)) == 0:
            break
    return out


@given(nested_family(), st.randoms(use_true_random=False))
def test_innermost_cover_is_the_shortest_interval_holding_the_point(ivs, rnd):
    rnd.shuffle(ivs)  # the input need not be sorted
    got = iv.innermost_cover(*arrays(ivs), INSTANTS).tolist()
    for t, j in zip(INSTANTS.tolist(), got):
        holding = [e - s for s, e in ivs if s <= t < e]
        if not holding:
            assert j == -1, f"t={t}: nothing holds it, got {j}"
            continue
        assert j >= 0, f"t={t}: {len(holding)} intervals hold it, got -1"
        s, e = ivs[j]
        assert s <= t < e, f"t={t}: interval {ivs[j]} does not hold it"
        assert e - s == min(holding), f"t={t}: {ivs[j]} is not the innermost"


@given(nested_family())
def test_innermost_cover_of_ranges_in_start_order_as_a_thread_reads_them(ivs):
    # Sorted by start, no two equal: the ranges are taken in the order given (no lexsort);
    # with equal starts, the lexsort. Either way the shortest interval holding the point.
    ivs = sorted(ivs, key=lambda x: (x[0], -x[1]))
    got = iv.innermost_cover(*arrays(ivs), INSTANTS).tolist()
    for t, j in zip(INSTANTS.tolist(), got):
        holding = [e - s for s, e in ivs if s <= t < e]
        assert (j == -1) if not holding else (ivs[j][1] - ivs[j][0] == min(holding))


def test_innermost_cover_of_ranges_nested_past_16_bits_of_depth():
    # 70,000 ranges, each inside the one before: levels past 65,535 are ordered by their
    # 64-bit keys, not the 16-bit radix sort.
    n = 70_000
    starts = np.arange(n, dtype=np.int64)
    ends = 2 * n - starts
    points = np.array([0, 65_535, 65_536, n - 1, n, 2 * n - 1, 2 * n], dtype=np.int64)
    # The innermost holding t < n is range t; past n - 1, the range ending just after t.
    expected = [0, 65_535, 65_536, n - 1, n - 1, 0, -1]
    assert iv.innermost_cover(starts, ends, points).tolist() == expected


def test_innermost_cover_with_equal_starts_picks_the_shorter():
    # [0, 100) > [0, 40) > [0, 10), given out of order; [50, 60) a second child.
    starts = np.array([0, 50, 0, 0], dtype=np.int64)
    ends = np.array([40, 60, 100, 10], dtype=np.int64)
    points = np.array([0, 9, 10, 39, 40, 55, 60, 99, 100], dtype=np.int64)
    assert iv.innermost_cover(starts, ends, points).tolist() == [3, 3, 0, 0, 2, 1, 2, 2, -1]


def test_innermost_cover_is_not_thrown_by_an_empty_interval():
    # [0, 10) > [2, 8) > [4, 4): the empty one holds no point, and from 4 to 7 the innermost
    # interval holding the point is still [2, 8).
    got = iv.innermost_cover(np.array([0, 2, 4]), np.array([10, 8, 4]), np.arange(11))
    assert got.tolist() == [0, 0, 1, 1, 1, 1, 1, 1, 0, 0, -1]


@given(disjoint_sorted(), disjoint_sorted())
def test_split_by_says_which_interval_holds_each_piece(segments, by):
    """Every unit cell of a segment lies in exactly one piece, and that piece's holder is the
    ``by`` interval covering the cell (-1 where none does)."""
    s, e = (np.array(x, dtype=np.int64) for x in zip(*segments)) if segments else (_E, _E)
    b_s, b_e = (np.array(x, dtype=np.int64) for x in zip(*by)) if by else (_E, _E)
    p_s, p_e, origin, holder = iv.split_by(s, e, (b_s, b_e))
    want = cell_labels(by, range(len(by)))
    got = np.full(TIME + 1, -2, dtype=np.int64)
    for a, b, o, h in zip(p_s.tolist(), p_e.tolist(), origin.tolist(), holder.tolist()):
        assert segments[o][0] <= a < b <= segments[o][1]
        assert (got[a:b] == -2).all()
        got[a:b] = h
    covered = cell_labels(segments, [0] * len(segments)) == 0
    assert (got[covered] == want[covered]).all()
    assert (got[~covered] == -2).all()


@given(st.lists(interval, max_size=15), disjoint_sorted())
def test_overlaps_any_matches_pairwise_overlap(ivs, by):
    starts, ends = arrays(ivs)
    b_s, b_e = (np.array(x, dtype=np.int64) for x in zip(*by)) if by else (_E, _E)
    got = iv.overlaps_any(starts, ends, (b_s, b_e))
    # Pairwise: it starts before one's end and ends after its start (an empty interval
    # strictly inside one overlaps it too).
    want = [any(s < be and e > bs for bs, be in by) for s, e in ivs]
    assert got.tolist() == want
    # For non-empty intervals that is sharing a unit cell.
    inside = cell_labels(by, [1] * len(by)) == 1
    assert all(got[i] == bool(inside[s:e].any()) for i, (s, e) in enumerate(ivs) if e > s)


_E = np.empty(0, dtype=np.int64)


def random_ranges(rng, n, span, longest, threads, p=None, in_order=False) -> Table:
    """``n`` ranges of ``threads`` starting in [0, span), up to ``longest`` long, one in ten
    of zero length; in a random row order, or stably sorted by start. ``row``: each range's
    place in the table."""
    start = rng.integers(0, span, n)
    ranges = Table(
        {
            "start": start,
            "end": start + rng.integers(0, longest, n) * (rng.random(n) < 0.9),
            "globalTid": rng.choice(threads, n, p=p),
        }
    )
    if in_order:
        ranges = ranges.take(np.argsort(ranges["start"], kind="stable"))
    ranges["row"] = np.arange(n)
    return ranges


def as_rows(ranges: Table) -> list[tuple[int, int, int]]:
    """(start, end, globalTid) of each range, in table order, as Python integers."""
    return list(zip(*(ranges[c].tolist() for c in ("start", "end", "globalTid"))))


@pytest.mark.parametrize("seed", range(6))
def test_thread_calls_take_what_overlaps_each_stretch_in_turn(seed):
    # Calls of two threads, nested and overlapping, in a random row order (or in start order);
    # stretches of disjoint intervals taken in time order get exactly the overlapping calls
    # of the thread, by brute force.
    rng = np.random.default_rng(seed)
    df = random_ranges(rng, 400, 10_000, 3_000, [7, 9], in_order=bool(seed % 2))
    edges = np.sort(rng.choice(np.arange(1, 12_000), 60, replace=False))
    s, e = edges[0::2], edges[1::2]
    calls = ThreadCalls(df, 7)
    rows = as_rows(df)
    for lo, hi in zip(range(0, 30, 4), range(4, 34, 4)):
        by = (s[lo:hi], e[lo:hi])
        got = sorted(calls.take(by)["row"].tolist())
        want = [
            i
            for i, (start, end, tid) in enumerate(rows)
            if tid == 7 and any(start < b and end > a for a, b in zip(*by))
        ]
        assert got == want
    assert sum(1 for start, _, tid in rows if tid == 7 and start < 5000) == int(
        calls.started_before(np.array([5000]))[0]
    )


@pytest.mark.parametrize(("parts", "cap"), [(1, 10_000), (2, 10_000), (2, 150)])
@pytest.mark.parametrize("seed", range(4))
def test_a_sweep_has_as_many_runs_as_asked_each_within_its_weight(parts, cap, seed, monkeypatch):
    # 30 idle intervals and 400 calls of two threads. A run weighs its intervals and the calls
    # started before its last interval ends, less those started before the run's first
    # (brute force). The runs cover the intervals in order, each weighs at most the total over
    # ``parts`` (rounded up) and at most CALLS_PER_SWEEP, unless it is one interval; asked for
    # two, there are two at least (the account's two threads each make one: in_order).
    monkeypatch.setattr(rows_module, "CALLS_PER_SWEEP", cap)
    rng = np.random.default_rng(seed)
    df = random_ranges(rng, 400, 10_000, 3_000, [7, 9], in_order=bool(seed % 2))
    edges = np.sort(rng.choice(np.arange(1, 12_000), 60, replace=False))
    s, e = edges[0::2], edges[1::2]
    starts = [start for start, _, _ in as_rows(df)]
    before = [k + 1 + sum(1 for start in starts if start < end) for k, end in enumerate(e.tolist())]
    runs = list(rows_module.sweep([ThreadCalls(df, 7), ThreadCalls(df, 9)], s, e, parts=parts))
    assert [lo for lo, _ in runs] == [0] + [hi for _, hi in runs[:-1]] and runs[-1][1] == 30
    budget = min(cap, -(-before[-1] // parts))
    for lo, hi in runs:
        assert before[hi - 1] - (before[lo - 1] if lo else 0) <= budget or hi - lo == 1
    assert len(runs) >= parts and (len(runs) == 1) == (parts == 1 and cap >= before[-1])


@pytest.mark.parametrize("large", [2, 60, 1 << 12])
@pytest.mark.parametrize("seed", range(8))
def test_top_level_ranges_are_those_no_range_of_their_thread_encloses(seed, large, monkeypatch):
    # Nested, overlapping, repeated and zero-length ranges of three threads (and threads of
    # one range), in start order with ties either way or in a random order; every thread
    # large (done alone), some, or none. By brute force: a range is enclosed when another of
    # its thread starts no later and ends no earlier, of two identical ranges the first in
    # the table being the top one.
    monkeypatch.setattr(rows_module, "LARGE_GROUP", large)
    rng = np.random.default_rng(seed)
    threads, p = [5, 7, 9, 11, 13], [0.4, 0.3, 0.28, 0.01, 0.01]
    df = random_ranges(rng, 300, 60, 30, threads, p, in_order=bool(seed % 2))
    rows = as_rows(df)
    want = [
        not any(
            j != i
            and o_tid == r_tid
            and o_start <= r_start
            and o_end >= r_end
            and (o_start, -o_end, j) < (r_start, -r_end, i)
            for j, (o_start, o_end, o_tid) in enumerate(rows)
        )
        for i, (r_start, r_end, r_tid) in enumerate(rows)
    ]
    assert top_level(df, "globalTid").tolist() == want
    assert top_level(df.head(1), "globalTid").tolist() == [True]
    assert top_level(df.head(0), "globalTid").tolist() == []


@given(
    st.lists(st.integers(0, 300), max_size=40),
    st.lists(st.tuples(st.integers(-10, 310), st.integers(1, 80)), max_size=8),
    st.booleans(),
)
def test_busy_time_per_window_counts_each_instant_in_the_window_holding_it(bounds, wins, apart):
    # account/busy.py _per_window: prefix sums for windows apart (steps), cut pieces when they
    # overlap. Model: every integer instant u covers goes to the last window starting at or
    # before it, when that window has not ended.
    from nsysprobe.analyses.account.busy import _per_window

    b = sorted(bounds)[: len(bounds) // 2 * 2]
    u = iv.union(np.array(b[0::2], np.int64), np.array(b[1::2], np.int64))
    wins = sorted(wins)
    ws = np.array([s for s, _ in wins], np.int64)
    we = np.array([s + n for s, n in wins], np.int64)
    if apart and ws.size:
        we = np.minimum(we, np.append(ws[1:], we[-1]))  # each ends by the next one's start
        ws, we = ws[we > ws], we[we > ws]
    we = np.maximum.accumulate(we) if we.size else we  # each ending after the one before
    expected = [0] * ws.size
    for s, e in zip(*u):
        for t in range(int(s), int(e)):
            k = int(np.searchsorted(ws, t, side="right")) - 1
            if k >= 0 and we[k] > t:
                expected[k] += 1
    assert _per_window((ws, we), u).tolist() == expected


def test_innermost_cover_holds_few_arrays_of_the_ranges_length(monkeypatch):
    # 8.1 M ranges of one thread (the user-reported shape) made the step account's peak:
    # 729 MiB inside this function, about twelve int64 arrays of the ranges' length; then
    # under three (191 MiB); now at most about two (the levels in 32 bits, made in blocks,
    # here of a sixteenth of the ranges as 2^20 are of 8 M). Allocations as numpy reports
    # them to tracemalloc.
    import tracemalloc

    n = 200_000
    monkeypatch.setattr(iv, "LEVEL_BLOCK", n // 16)
    starts = np.arange(n, dtype=np.int64) * 10
    ends = starts + np.where(np.arange(n) % 2 == 0, 15, 4)  # pairs: one range inside another
    points = np.arange(0, 10 * n, 7, dtype=np.int64)[:1000]
    tracemalloc.start()
    try:
        got = iv.innermost_cover(starts, ends, points)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    held = [[i for i in range(n) if starts[i] <= t < ends[i]] for t in points.tolist()[:50]]
    assert got[:50].tolist() == [max(h, key=lambda i: starts[i]) if h else -1 for h in held]
    assert peak < 2.2 * 8 * n, f"{peak / (8 * n):.1f} arrays of the ranges' length"


def test_innermost_cover_with_levels_made_in_small_blocks(monkeypatch):
    # The levels made 5 ranges at a time: 300 nested families of up to 60 ranges each, in
    # start order and shuffled; each point's answer is the shortest interval holding it.
    monkeypatch.setattr(iv, "LEVEL_BLOCK", 5)
    rng = np.random.default_rng(11)

    def family(ivs: list, lo: int, hi: int, depth: int) -> list[tuple[int, int]]:
        t = lo
        while t < hi - 1 and len(ivs) < 60:
            s = int(rng.integers(t, hi - 1))
            e = int(rng.integers(s + 1, hi))
            ivs.append((s, e))
            if depth < 5 and rng.random() < 0.6:
                family(ivs, s, e, depth + 1)
            t = e
        return ivs

    for _ in range(300):
        ivs = family([], 0, 400, 0)
        if rng.random() < 0.5:
            rng.shuffle(ivs)
        starts = np.array([s for s, _ in ivs], dtype=np.int64)
        ends = np.array([e for _, e in ivs], dtype=np.int64)
        points = np.arange(-1, 401, dtype=np.int64)
        got = iv.innermost_cover(starts, ends, points).tolist()
        for t, j in zip(points.tolist(), got):
            holding = [e - s for s, e in ivs if s <= t < e]
            assert (j == -1) if not holding else (ivs[j][1] - ivs[j][0] == min(holding)), t
