# Over 500 lines: one analysis read top to bottom (clocks, instances, rounds, verdicts). The
# docstring below, which ``nsysprobe explain arrivals`` prints as it is, names its steps
# (``_voted_offset``, ``_drift``, ``_bursts``), so they stay beside it; why a rank is late
# is ``late_causes.py``.
"""Arrivals at the collectives: which rank came late, by how much, and who is the straggler.

In synchronous data-parallel training every rank's step takes the same wall time: the ranks
that are ready first wait inside the collective for the last one, so a slow rank shows as
*long NCCL kernels on the other ranks*, not as a longer step of its own. Step wall times cannot
name it; arrival times can.

**One clock.** Ranks of one report share its clock. Ranks of different reports are placed on
UTC by each report's session start (without one, in order from each rank's first collective),
then each rank's offset to the reference rank (the first with collectives) is refined: a
collective *ends* on every rank at about the same moment (the last exchange completes it
everywhere; within 27 us on the public two-GPU trace), so the offset that lines up the most
ends wins (``_voted_offset``), when it lines up at least ``MIN_OFFSET_SUPPORT`` of them (ranks
that share no collective with the reference, such as another tensor-parallel group, keep the
session start); offsets voted in ``DRIFT_CHUNKS`` stretches of the capture and fitted by a line
follow a clock that drifts (``_drift``). Reports are told apart by their path, not their file
name.

**Instances.** Per collective name (``AllReduce``, ``SendRecv``, ...), every rank's operations
are pooled and sorted by end; ends less than ``CLUSTER_GAP_NS`` apart form a cluster, and a
cluster in which each rank has the same number m of operations is m instances (each rank's
first, second, ... by end), of the ranks present: subgroups (tensor-parallel groups, FSDP
shards) make instances of their own ranks. A cluster with unequal counts (a record lost on one
rank) or an instance whose ends spread over ``MAX_END_SPREAD_NS`` is left out. Point-to-point
operations (``SendRecv``, ``Send``, ``Recv``) count only between two ranks (where they are an
exchange, as the all-to-all of the public two-GPU trace): with more, they may be pipeline
stages, where the receiver waits for the sender by design and stages in lockstep end together,
so nothing in the kernels tells an exchange from a pipeline.

**Arrival and lateness.** A rank arrives when its NCCL operation starts on its GPU (it runs
once the rank's own work before it is done). Its *lateness* at an instance is its arrival
minus the median arrival of the other ranks there, when that is at least ``TIE_NS`` (else a
tie): with two ranks, how long the other waited for it; with more, how much later than the
typical rank it came, so two late ranks do not hide each other. Its *wait* is the last
arrival minus its own, up to its operation's length.

**Rounds and the straggler.** With NVTX steps on the reference rank, a round is a step (the
instances starting in it); without, a burst of instances between pauses (``_bursts``: a step's
buckets come close together), else each instance. A rank's lateness in a round is its largest
there: a rank late at a step's first bucket is late at the ones after it too, and the step loses
that delay once, not once per bucket. A rank is the **straggler** when its lateness per round is
larger than the other ranks' (one-sided Mann-Whitney U of its rounds against theirs pooled,
p < ``ALPHA`` / ranks) and it held the others up at least ``MIN_HELD_UP_RATIO`` of the measured
time (the reference rank's span of rounds): consistently late, and by enough to matter. A rank
that holds them up that much but not consistently is *late at times* (a periodic evaluation or
checkpoint on one rank); one consistently later by less is *slightly late*. Why a rank is late
is in its own step account, against the other ranks' (``late_causes``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from nsysprobe.analyses.intervals import outermost_cover
from nsysprobe.analyses.stats import one_sided
from nsysprobe.common.table import distinct

ALPHA = 0.05
# Closer arrivals are a tie: launch jitter and the ends' skew are of this order on one node
# (the public two-GPU trace: ends within 27 us, small kernels' starts within 55 us).
TIE_NS = 50_000
# The straggler must hold the others up this share of the measured time (the floor of
# ``diagnose.MIN_GAIN_RATIO``: less is not worth a fix).
MIN_HELD_UP_RATIO = 0.03
# Ends of one collective closer than this are one cluster; an instance's ends may spread this far.
CLUSTER_GAP_NS = TIE_NS
MAX_END_SPREAD_NS = 4 * TIE_NS
# Between pipeline stages the receiver waits for the sender by design: with more than two
# ranks these say nothing of a straggler.
POINT_TO_POINT = ("SendRecv", "Send", "Recv")
ROUND_UNITS = {
    "steps": "steps",
    "bursts": "bursts of collectives (no NVTX steps)",
    "collectives": "collectives",
}
# Without steps, a pause this many times the median pause between instances ends a burst.
BURST_GAP_RATIO = 3.0
ROUNDS_LISTED = 2_000
# Offset search: reference ends sampled, operations either way of the nearest one, and the
# share of sampled ends the chosen offset must line up.
OFFSET_SAMPLES = 500
OFFSET_SEARCH = 64
MIN_OFFSET_SUPPORT = 0.5
# The second search, by time: clocks up to this far apart, this many candidates per end.
MAX_SKEW_NS = 10 * 10**9
MAX_WINDOW_CANDIDATES = 4_000
# Clock drift: offsets voted in this many stretches of the capture, fitted by a line.
DRIFT_CHUNKS = 8
HOLDS_LISTED = 10


@dataclass(frozen=True)
class RankCollectives:
    """One rank's NCCL operations, as ``cross_rank`` hands them over."""

    label: str
    source: str  # the report (its path): ranks of one report share its clock
    utc: bool  # times are UTC (the report records its session start)
    start_ns: np.ndarray
    end_ns: np.ndarray
    collective: np.ndarray  # names, object array
    round_start_ns: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))  # steps
    round_end_ns: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    round_names: tuple[str, ...] = ()


@dataclass(frozen=True)
class RankArrival:
    label: str
    operations: int  # its NCCL operations
    instances: int  # collective instances it took part in
    # instances / its operations: well under 1 when its ends do not line up with the others'
    # (a clock drifting against the reference's, records lost on that rank)
    matched_ratio: float
    clock_offset_ns: int | None  # subtracted to put it on the reference's clock (at the middle
    # of the reference's capture when it drifts); None: nothing in common and no end lined up
    clock_drift_ppm: float  # how fast its clock runs against the reference's (0: no drift seen)
    last_rounds: int  # rounds it held up longest
    rounds: int  # rounds it took part in
    late_share_ratio: float  # P(its lateness in a round > another rank's): 0.5 is even
    p_value: float  # one-sided Mann-Whitney U: its lateness per round is larger
    held_up_ns: int  # its largest lateness in each round, summed over rounds
    held_up_ratio: float  # held_up_ns / the measured time
    waited_ns: int  # time its operations waited for later ranks (hidden or exposed)
    verdict: str  # "straggler", "late at times", "slightly late", "not late"


@dataclass(frozen=True)
class ArrivalRound:
    index: int
    name: str
    instances: int
    last: str | None  # the rank with the largest lateness, None when every rank tied
    held_up_ns: int  # that rank's lateness in the round


@dataclass(frozen=True)
class Hold:
    """One collective instance held up by its latest rank."""

    collective: str
    at_ns: int  # the instance's first arrival (the reference's clock)
    last: str
    held_up_ns: int


@dataclass(frozen=True)
class CollectiveArrivals:
    collective: str
    instances: int
    last_counts: tuple[tuple[str, int], ...]  # rank -> instances it was latest in, most first
    median_held_up_ns: int  # over instances with a late rank


@dataclass(frozen=True)
class Arrivals:
    reference: str
    clock: str  # how the ranks' times were put on one clock
    ranks: tuple[RankArrival, ...]
    instances: int
    left_out: int  # clusters of ends that were not one instance (unequal counts, spread)
    median_end_spread_ns: int  # over instances: latest end - earliest end, after alignment
    rounds_basis: str  # "steps" (the reference's NVTX steps), "bursts" or "collectives"
    measured_ns: int  # the reference rank's span of rounds
    rounds: tuple[ArrivalRound, ...]
    collectives: tuple[CollectiveArrivals, ...]
    holds: tuple[Hold, ...]  # the longest, HOLDS_LISTED of them
    stragglers: tuple[str, ...]
    alpha_per_rank: float
    thresholds: dict[str, float]
    # Ranks left out: on a clock of their own (no session start) with no end lined up.
    unaligned: tuple[str, ...] = ()

    def rank(self, label: str) -> RankArrival | None:
        return next((r for r in self.ranks if r.label == label), None)


def analyze_arrivals(ranks: Sequence[RankCollectives]) -> Arrivals | None:
    """The arrivals of ranks with collectives (see the module docstring); None when fewer than
    two ranks have any, or no collective instance has two of them."""
    ranks = [r for r in ranks if r.start_ns.size]
    if len(ranks) < 2:
        return None
    ranks = list(ranks)
    ref = ranks[0]
    offsets: list[int | None] = [0] * len(ranks)
    drifts: dict[int, float] = {}  # rank -> clock rate against the reference's (ns per ns)
    shown: dict[int, int] = {}  # rank -> its offset at the middle of the reference's capture
    for k, r in enumerate(ranks[1:], 1):
        if r.source == ref.source:
            continue
        shared = sorted(set(ref.collective.tolist()) & set(r.collective.tolist()))
        same_clock = r.utc and ref.utc
        guess = 0 if same_clock else _ordinal_offset(ref, r, shared)
        voted = _voted_offset(ref, r, shared, guess)
        offsets[k] = voted if voted is not None else (guess if same_clock else None)
        if offsets[k] is not None:
            # A drifting clock smears the ends over the capture: vote stretch by stretch.
            rate, voted = _drift(ref, r, shared, offsets[k])
            drifts[k] = rate
            if rate:
                # Put the rank on the reference's clock point by point: t - (a + rate * t).
                intercept = voted - rate * float(np.median(ref.end_ns))
                ranks[k] = replace(
                    r,
                    start_ns=r.start_ns - np.rint(intercept + rate * r.start_ns).astype(np.int64),
                    end_ns=r.end_ns - np.rint(intercept + rate * r.end_ns).astype(np.int64),
                )
                shown[k] = voted
                offsets[k] = 0
    kept = [k for k, o in enumerate(offsets) if o is not None]
    unaligned = tuple(r.label for k, r in enumerate(ranks) if k not in kept)
    ranks = [ranks[k] for k in kept]
    offsets = [offsets[k] for k in kept]
    clocks = [(shown.get(k, offsets[i]), drifts.get(k, 0.0)) for i, k in enumerate(kept)]
    if len(ranks) < 2:
        return None
    found = _instances(ranks, offsets)
    if found is None:
        return None
    return replace(_arrivals(ranks, clocks, *found), unaligned=unaligned)


def _instances(ranks, offsets):
    """(starts, ends, names, base, left out): one row per instance, one column per rank (float
    ns after ``base``, NaN where the rank is not in it), the instances' collective names, and
    the clusters left out; None without instances."""
    n = len(ranks)
    base = min(int((r.start_ns - o).min()) for r, o in zip(ranks, offsets))
    names = sorted(set().union(*(set(r.collective.tolist()) for r in ranks)))
    rows_s, rows_e, rows_n = [], [], []
    left_out = 0
    for name in names:
        if name in POINT_TO_POINT and n > 2:
            continue
        rank_of, s, e = [], [], []
        for k, (r, o) in enumerate(zip(ranks, offsets)):
            mine = r.collective == name
            rank_of.append(np.full(int(mine.sum()), k))
            s.append(r.start_ns[mine] - o - base)
            e.append(r.end_ns[mine] - o - base)
        rank_of, s, e = (np.concatenate(x) for x in (rank_of, s, e))
        if not e.size:
            continue
        order = np.lexsort((s, e))
        rank_of, s, e = rank_of[order], s[order], e[order]
        cluster = np.concatenate([[0], np.cumsum(np.diff(e) > CLUSTER_GAP_NS)])
        n_clusters = int(cluster[-1]) + 1
        counts = np.bincount(cluster * n + rank_of, minlength=n_clusters * n).reshape(-1, n)
        present = counts > 0
        top = counts.max(axis=1)
        equal = (counts == top[:, None]) | ~present
        good = equal.all(axis=1) & (present.sum(axis=1) >= 2)
        left_out += int((~good & (present.sum(axis=1) >= 2)).sum())
        keep = good[cluster]
        rank_of, s, e, cluster = rank_of[keep], s[keep], e[keep], cluster[keep]
        if not s.size:
            continue
        # The j-th operation of each rank in a cluster (by end) is the cluster's j-th instance.
        key = cluster * n + rank_of
        by_key = np.argsort(key, kind="stable")
        first = np.searchsorted(key[by_key], key[by_key], side="left")
        occurrence = np.empty(key.size, dtype=np.int64)
        occurrence[by_key] = np.arange(key.size) - first
        offset = np.concatenate([[0], np.cumsum(top)])[:-1]
        inst = offset[cluster] + occurrence
        # Renumber the instances of kept clusters 0..n_inst-1.
        used, inst = np.unique(inst, return_inverse=True)
        n_inst = used.size
        a = np.full((n_inst, n), np.nan)
        b = np.full((n_inst, n), np.nan)
        a[inst, rank_of] = s
        b[inst, rank_of] = e
        spread = np.nanmax(b, axis=1) - np.nanmin(b, axis=1)
        ok = spread <= MAX_END_SPREAD_NS
        left_out += int((~ok).sum())
        rows_s.append(a[ok])
        rows_e.append(b[ok])
        rows_n += [name] * int(ok.sum())
    if not rows_n:
        return None
    a, e = np.concatenate(rows_s), np.concatenate(rows_e)
    order = np.argsort(np.nanmin(a, axis=1), kind="stable")
    coll = np.array(rows_n, dtype=object)[order]
    return a[order], e[order], coll, base, left_out


def _arrivals(ranks, clocks, a, e, coll, base, left_out) -> Arrivals:
    ref = ranks[0]
    n_inst, n_ranks = a.shape
    present = ~np.isnan(a)
    late = _lateness(a)
    latest = np.nanmax(a, axis=1)
    waited = np.where(present, np.minimum(latest[:, None] - a, e - a), 0.0).clip(min=0)
    first = np.nanmin(a, axis=1)

    # Rounds: the reference's steps holding the instances' first arrivals, else bursts of
    # collectives between long pauses, else each instance.
    basis, r_of, r_names = _bursts(first)
    measured = int(np.nanmax(e) - np.nanmin(a))
    if ref.round_start_ns.size:
        w = outermost_cover(ref.round_start_ns, ref.round_end_ns, (first + base).astype(np.int64))
        if (w >= 0).any():
            basis, r_of, r_names = "steps", w, ref.round_names
            used = distinct(w[w >= 0])
            measured = int((ref.round_end_ns[used] - ref.round_start_ns[used]).sum())
    inside = r_of >= 0
    n_rounds = int(r_of.max()) + 1 if inside.any() else 0
    per_round = np.zeros((n_rounds, n_ranks))
    took_part = np.zeros((n_rounds, n_ranks), dtype=bool)
    # A rank late at one collective of a round is late at those after it too (its delay
    # carries): the round's cost is its largest lateness there, not the sum.
    np.maximum.at(per_round, r_of[inside], late[inside])
    np.logical_or.at(took_part, r_of[inside], present[inside])
    held_round = per_round.max(axis=1) if n_rounds else np.zeros(0)
    last_round = np.where(held_round >= TIE_NS, per_round.argmax(axis=1), -1)
    has_round = took_part.any(axis=1)
    alpha = ALPHA / n_ranks
    out_ranks = []
    for k, r in enumerate(ranks):
        mine = per_round[took_part[:, k], k]
        others = np.concatenate([per_round[took_part[:, q], q] for q in range(n_ranks) if q != k])
        if mine.size and others.size:
            share, p = one_sided(mine, others)
        else:
            share, p = 0.5, 1.0
        held = int(round(per_round[:, k].sum()))
        ratio = held / measured if measured else 0.0
        consistent = p < alpha and share > 0.5
        big = ratio >= MIN_HELD_UP_RATIO
        verdict = (
            "straggler"
            if consistent and big
            else "late at times"
            if big
            else "slightly late"
            if consistent
            else "not late"
        )
        out_ranks.append(
            RankArrival(
                label=r.label,
                operations=int(r.start_ns.size),
                instances=int(present[:, k].sum()),
                matched_ratio=float(present[:, k].sum() / max(r.start_ns.size, 1)),
                clock_offset_ns=clocks[k][0],
                clock_drift_ppm=clocks[k][1] * 1e6,
                last_rounds=int(((last_round == k) & has_round).sum()),
                rounds=int(took_part[:, k].sum()),
                late_share_ratio=float(share),
                p_value=float(p),
                held_up_ns=held,
                held_up_ratio=ratio,
                waited_ns=int(round(waited[:, k].sum())),
                verdict=verdict,
            )
        )
    rounds = []
    for i in np.flatnonzero(has_round)[:ROUNDS_LISTED].tolist():
        if basis == "collectives":
            name = f"{coll[i]} {i}"
        elif basis == "bursts":
            name = f"burst {i}"
        else:
            name = r_names[i] if i < len(r_names) else f"step {i}"
        rounds.append(
            ArrivalRound(
                index=i,
                name=str(name),
                instances=int((r_of == i).sum()),
                last=ranks[last_round[i]].label if last_round[i] >= 0 else None,
                held_up_ns=int(round(held_round[i])) if last_round[i] >= 0 else 0,
            )
        )
    inst_held = late.max(axis=1)
    inst_last = np.where(inst_held > 0, late.argmax(axis=1), -1)
    collectives = []
    for name in sorted(set(coll.tolist())):
        mine = coll == name
        hit = mine & (inst_last >= 0)
        counts = np.bincount(inst_last[hit], minlength=n_ranks)
        collectives.append(
            CollectiveArrivals(
                collective=name,
                instances=int(mine.sum()),
                last_counts=tuple(
                    (ranks[k].label, int(counts[k]))
                    for k in np.argsort(-counts, kind="stable").tolist()
                    if counts[k]
                ),
                median_held_up_ns=int(np.median(inst_held[hit])) if hit.any() else 0,
            )
        )
    top = np.argsort(-inst_held, kind="stable")[:HOLDS_LISTED]
    holds = tuple(
        Hold(str(coll[i]), int(first[i] + base), ranks[inst_last[i]].label, int(inst_held[i]))
        for i in top.tolist()
        if inst_last[i] >= 0
    )
    spread = np.nanmax(e, axis=1) - np.nanmin(e, axis=1)
    sources = {r.source for r in ranks}
    clock = (
        "one report: one clock"
        if len(sources) == 1
        else "session start (UTC), then the collectives' ends"
        if all(r.utc for r in ranks)
        else "the collectives' ends, matched in order from each rank's first"
    )
    return Arrivals(
        reference=ref.label,
        clock=clock,
        ranks=tuple(out_ranks),
        instances=n_inst,
        left_out=left_out,
        median_end_spread_ns=int(np.median(spread)),
        rounds_basis=basis,
        measured_ns=measured,
        rounds=tuple(rounds),
        collectives=tuple(collectives),
        holds=holds,
        stragglers=tuple(x.label for x in out_ranks if x.verdict == "straggler"),
        alpha_per_rank=alpha,
        thresholds={
            "alpha": ALPHA,
            "tie_ns": TIE_NS,
            "min_held_up_ratio": MIN_HELD_UP_RATIO,
        },
    )


def _bursts(first: np.ndarray) -> tuple[str, np.ndarray, None]:
    """Without steps: rounds are the bursts of instances between pauses longer than
    ``BURST_GAP_RATIO`` times the median pause (a step's all-reduce buckets come close
    together, the next step's after its input and forward pass), so the buckets of one step are
    one round, not as many independent ones; without such pauses, each instance is a round."""
    gaps = np.diff(first)
    if gaps.size >= 2:
        cut = gaps > BURST_GAP_RATIO * max(float(np.median(gaps)), 1.0)
        if cut.any() and not cut.all():
            return "bursts", np.concatenate([[0], np.cumsum(cut)]), None
    return "collectives", np.arange(first.size), None


def _lateness(a: np.ndarray) -> np.ndarray:
    """Per instance and rank: its arrival minus the median of the other ranks' arrivals there,
    when at least ``TIE_NS``; else 0 (and 0 where the rank is not in the instance)."""
    n_inst, n = a.shape
    order = np.argsort(a, axis=1)  # NaN (absent) last
    s = np.take_along_axis(a, order, axis=1)
    m = (~np.isnan(a)).sum(axis=1)  # ranks in each instance
    c = (m - 1)[:, None]  # the others
    i = np.arange(n)[None, :]  # each rank's place among the sorted arrivals
    lo, hi = (c - 1) // 2, c // 2

    def other(j):  # the j-th of the others: skip the rank itself at place i
        j = np.clip(j + (j >= i), 0, n - 1)
        return np.take_along_axis(s, j, axis=1)

    median = (other(lo) + other(hi)) / 2
    late_sorted = np.where((i < m[:, None]) & (c >= 1), s - median, 0.0)
    late = np.empty_like(late_sorted)
    np.put_along_axis(late, order, late_sorted, axis=1)
    late = np.nan_to_num(late, nan=0.0)
    return np.where(late >= TIE_NS, late, 0.0)


def _drift(ref: RankCollectives, r: RankCollectives, names, offset: int) -> tuple[float, int]:
    """(rate, offset at the middle of the reference's capture): how fast the clock of ``r``
    runs against the reference's (ns per ns), from offsets voted in ``DRIFT_CHUNKS`` stretches
    of the reference's capture around ``offset`` and fitted by a line; rate 0 (and ``offset``)
    when they drift by less than half of ``TIE_NS`` over the capture."""
    ends = np.sort(ref.end_ns)
    if ends.size < DRIFT_CHUNKS * 4:
        return 0.0, offset
    edges = ends[np.linspace(0, ends.size - 1, DRIFT_CHUNKS + 1).astype(int)]
    at, found = [], []
    for lo, hi in zip(edges[:-1], edges[1:]):
        part = (ref.end_ns >= lo) & (ref.end_ns <= hi)
        chunk = replace(ref, end_ns=ref.end_ns[part], collective=ref.collective[part])
        voted = _vote(chunk, r, names, offset, OFFSET_SAMPLES // DRIFT_CHUNKS, 16, None)
        if voted is not None:
            at.append((lo + hi) / 2)
            found.append(voted)
    if len(found) < 3:
        return 0.0, offset
    x = np.asarray(at, dtype=np.float64)
    rate, intercept = np.polyfit(x - float(np.median(ends)), np.asarray(found, float), 1)
    if abs(rate) * float(ends[-1] - ends[0]) < TIE_NS / 2:
        return 0.0, offset
    return float(rate), int(round(intercept))


def _ordinal_offset(ref: RankCollectives, r: RankCollectives, names) -> int:
    """Without a shared clock: the median end difference of the k-th operations of each name."""
    diffs = []
    for name in names:
        x, y = ref.end_ns[ref.collective == name], r.end_ns[r.collective == name]
        n = min(x.size, y.size)
        diffs.append(np.sort(y)[:n] - np.sort(x)[:n])
    d = np.concatenate(diffs) if diffs else np.empty(0, np.int64)
    return int(np.median(d)) if d.size else 0


def _voted_offset(ref: RankCollectives, r: RankCollectives, names, guess: int) -> int | None:
    """The clock offset of ``r`` to the reference that lines up the most ends, or None when
    it lines up fewer than ``MIN_OFFSET_SUPPORT`` of the reference's sampled ends.

    Every difference between a sampled reference end and the ends of ``r`` near it in
    sequence (``OFFSET_SEARCH`` operations either way of the one nearest ``guess``) is a
    candidate; the window of ``2 * TIE_NS`` holding the most candidates wins, the one nearest
    ``guess`` on a tie (a regular job lines up again one step later), and the median of the
    candidates in it is the offset."""
    found = _vote(ref, r, names, guess, OFFSET_SAMPLES, OFFSET_SEARCH, None)
    if found is None:
        # Clocks further apart than the search reaches in a long capture: search by time.
        found = _vote(ref, r, names, guess, OFFSET_SAMPLES // 5, None, MAX_SKEW_NS)
    return found


def _vote(ref, r, names, guess, samples, search, window_ns) -> int | None:
    """One vote (see ``_voted_offset``): candidates within ``search`` operations of the
    nearest, or within ``window_ns`` of ``guess``."""
    diffs, sampled = [], 0
    for name in names:
        x = np.sort(ref.end_ns[ref.collective == name])
        y = np.sort(r.end_ns[r.collective == name])
        if not x.size or not y.size:
            continue
        x = x[:: max(1, x.size // samples)]
        sampled += x.size
        if search is not None:
            near = _nearest(y, x + guess)
            j = near[:, None] + np.arange(-search, search + 1)[None, :]
            valid = (j >= 0) & (j < y.size)
            diffs.append((y[np.clip(j, 0, y.size - 1)] - x[:, None])[valid])
        else:
            lo = np.searchsorted(y, x + guess - window_ns)
            hi = np.searchsorted(y, x + guess + window_ns)
            for i in range(x.size):
                part = y[lo[i] : hi[i]]
                if part.size > MAX_WINDOW_CANDIDATES:
                    part = part[:: part.size // MAX_WINDOW_CANDIDATES + 1]
                diffs.append(part - x[i])
    if not diffs:
        return None
    d = np.sort(np.concatenate(diffs))
    if not d.size:
        return None
    counts = np.searchsorted(d, d + 2 * TIE_NS, side="right") - np.arange(d.size)
    if counts.max() < MIN_OFFSET_SUPPORT * sampled:
        return None
    best = np.flatnonzero(counts == counts.max())
    pick = best[np.argmin(np.abs(d[best] + TIE_NS - guess))]
    return int(np.median(d[pick : pick + counts[pick]]))


def _nearest(sorted_values: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Per point, the index of the nearest value in ``sorted_values`` (non-empty)."""
    hi = np.clip(np.searchsorted(sorted_values, points), 0, sorted_values.size - 1)
    lo = np.clip(hi - 1, 0, None)
    pick_lo = np.abs(sorted_values[lo] - points) <= np.abs(sorted_values[hi] - points)
    return np.where(pick_lo, lo, hi)


def process_label(pid: int) -> str:
    """How a rank of a report holding every rank is named."""
    return f"process {pid}"


def rank_accounts(accounts) -> dict:
    """pid -> the account that stands for the process as a rank: that of its GPU with the most
    NCCL operations (a stray context on another GPU is not the rank)."""
    per_pid = {}
    for a in accounts:
        ops = a.communication_ops
        if ops is not None and len(ops):
            kept = per_pid.get(a.pid)
            if kept is None or len(ops) > len(kept.communication_ops):
                per_pid[a.pid] = a
    return per_pid


def within_report(accounts) -> Arrivals | None:
    """The arrivals of the processes of one report (one clock), each with its rank account
    (``rank_accounts``); rounds are its NVTX steps when it has them."""
    per_pid = rank_accounts(accounts)
    if len(per_pid) < 2:
        return None
    ranks = []
    none = np.empty(0, np.int64)
    for pid in sorted(per_pid):
        ops = per_pid[pid].communication_ops
        ranks.append(
            RankCollectives(
                label=process_label(pid),
                source="one report",
                utc=False,
                start_ns=ops.start_ns,
                end_ns=ops.end_ns,
                collective=ops.collective,
                round_start_ns=ops.window_start_ns if ops.stepped else none,
                round_end_ns=ops.window_end_ns if ops.stepped else none,
                round_names=tuple(ops.window_names.tolist()) if ops.stepped else (),
            )
        )
    return analyze_arrivals(ranks)
