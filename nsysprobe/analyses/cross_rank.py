"""Across ranks: each rank against the others (slower, a straggler or neither), the
stragglers and the slowest ranks with what distinguishes each, from the ranks' summaries.

Step starts are aligned across reports on the UTC clock: the report's session start
(``TARGET_INFO_SESSION_START_TIME``) plus the step's start on the report's own clock. A rank's
**start lag** is the median over step indexes of how much later its step began (its NVTX
range on the CPU) than the earliest rank's step of the same index (only among ranks whose
session start is known).

A rank is a **straggler** when it arrives later than the others at the collectives,
consistently and by enough to matter (``nsysprobe.analyses.arrivals``): in synchronous
training the fast ranks wait inside the collective for it, so every rank's step takes the same
wall time and a wall-time test cannot see it. Why it is late comes from its own step account
against the other ranks' (``straggler_causes``): the buckets where it spends more time per step
than the other ranks' median (its input, pageable copies, host syncs, slower GPU work, ...),
and its threads' NUMA placement where the capture has it.

Without collectives (ranks that do not communicate), a rank is **slower** when its per-step
wall times are slower than those of every other rank pooled. Steps are matched by index across
ranks and each divided by the median across ranks of the same step (``relative_steps``), so
what every rank shares cancels out. The test is Mann-Whitney U
(``nsysprobe.analyses.stats``), one-sided, with p < ``ALPHA`` / ranks tested
(Bonferroni), and the effect size must reach ``MIN_SLOWDOWN_RATIO``: the rank's median relative
step over the others' (a significant 1 % is not slower). The stragglers and the slowest ranks
slower than the others' median (``SLOWEST_LISTED``) are listed with what distinguishes each:
the figures where it exceeds the median of the other ranks by ``DISTINCT_RATIO`` and by at
least the metric's floor (GPU idle, pageable copies, OS-runtime call time, start lag).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from nsysprobe.analyses.arrivals import (
    ROUND_UNITS,
    Arrivals,
    RankCollectives,
    analyze_arrivals,
)
from nsysprobe.analyses.late_causes import Cause, late_causes
from nsysprobe.analyses.stats import ALPHA, MIN_STEPS, one_sided

SCHEMA_VERSION = 1
MIN_SLOWDOWN_RATIO = 1.05
SLOWEST_LISTED = 3
DISTINCT_RATIO = 1.2
# What a distinction must exceed the others' median by, besides DISTINCT_RATIO.
DISTINCT_FLOORS = {"ns": 100_000, "bytes": 1 << 20}
DISTINCT_METRICS = (
    ("idle_per_step_ns", "GPU idle per step", "ns"),
    ("gap_ns", "GPU idle in gaps", "ns"),
    ("pageable_htod_bytes", "pageable HtoD copies", "bytes"),
    ("osrt_ns", "OS-runtime call time", "ns"),
    ("osrt_in_gap_ns", "OS-runtime calls during GPU gaps", "ns"),
    ("start_lag_ns", "step start lag", "ns"),
)
# NUMA: the rank's threads ran this much less of their time on the GPU's node than the others'.
NUMA_CAUSE_DROP_RATIO = 0.25


@dataclass(frozen=True)
class RankSummary:
    """What a worker sends back for one rank: figures, never events."""

    label: str  # the report's path relative to the inputs' common folder, + ":pid" per process
    source: str  # the report's file name
    pid: int | None  # the process, when the report holds several
    error: str | None  # why this report could not be analyzed (the other figures are empty)
    session_start_utc_ns: int | None
    step_count: int | None
    steps_per_s: float | None  # steps over time (``windows.py``)
    median_step_ns: int | None
    gpu_busy_ratio: float | None  # as in compare: over the steps, else over the devices' span
    busy_basis: str  # "steps", "span" or "none"
    idle_per_step_ns: int | None  # median over steps
    gap_ns: int | None  # GPU idle in gaps over the threshold, all devices
    pageable_htod_bytes: int | None
    osrt_ns: int | None  # sum of OS-runtime call durations
    osrt_in_gap_ns: int | None  # their overlap with GPU gaps
    top_recommendation: str | None
    top_title: str | None
    top_gain_ratio: float | None
    step_wall_ns: tuple[int, ...] = ()
    step_start_ns: tuple[int, ...] = ()  # UTC ns when the session start is known
    worker: str = ""  # the Dask worker that analyzed it
    analyze_s: float = 0.0  # the task's time for the whole report
    peak_rss_bytes: int | None = None  # the worker process's peak resident memory so far
    # The step account of its main process and GPU: the mean per step of each bucket, and its
    # NCCL work (all of it, and the part with no compute kernel running).
    bucket_ns_per_step: tuple[tuple[str, int], ...] = ()
    account_step_ns: int = 0  # the account's mean step (or window) wall time
    communication_ns: int = 0
    communication_exposed_ns: int = 0
    gpu_node_ratio: float | None = None  # its threads' share of run time on the GPU's node
    # Its NCCL operations for the arrivals (not in the JSON).
    collectives: RankCollectives | None = None


@dataclass(frozen=True)
class RankVerdict:
    label: str
    verdict: str  # "straggler", "slower" (below the effect size), "not slower", "unknown"
    slowdown_ratio: float | None  # median relative step / the other ranks' pooled median
    p_value: float | None  # one-sided: this rank's steps are longer
    slower_share_ratio: float | None  # P(a step of this rank is longer than one of the others)
    start_lag_ns: int | None
    why: str


@dataclass(frozen=True)
class Distinction:
    metric: str  # a RankSummary/RankVerdict field, e.g. "pageable_htod_bytes"
    title: str
    unit: str  # "ns" or "bytes"
    value: float
    others_median: float


@dataclass(frozen=True)
class SlowRank:
    label: str
    median_step_ns: int | None  # None without NVTX steps
    slowdown_ratio: float | None
    distinctions: tuple[Distinction, ...]
    causes: tuple[Cause, ...] = ()  # for a straggler: why it arrives late, largest first


@dataclass(frozen=True)
class ManyReport:
    schema_version: int
    ranks: tuple[RankSummary, ...]
    verdicts: tuple[RankVerdict, ...]  # one per rank, in the same order
    stragglers: tuple[str, ...]  # labels
    slowest: tuple[SlowRank, ...]
    alignment: str  # "utc" (every rank's session start known), "partial" or "none"
    thresholds: dict[str, float] = field(default_factory=dict)
    arrivals: Arrivals | None = None  # None when fewer than two ranks have collectives

    @property
    def errors(self) -> tuple[RankSummary, ...]:
        return tuple(r for r in self.ranks if r.error is not None)


def cross_rank(summaries: Sequence[RankSummary]) -> ManyReport:
    """Verdicts, stragglers and the slowest ranks from the ranks' summaries (pure)."""
    ok = [s for s in summaries if s.error is None]
    lags = start_lags(ok)
    relative = relative_steps([s for s in ok if len(s.step_wall_ns) >= MIN_STEPS])
    alpha = ALPHA / max(1, len(relative))
    arrivals = analyze_arrivals([s.collectives for s in ok if s.collectives is not None])
    stragglers = arrivals.stragglers if arrivals else ()
    verdicts = [
        _verdict(s, relative, alpha, lags.get(s.label), arrivals, stragglers) for s in summaries
    ]
    starts = [s.session_start_utc_ns for s in ok]
    alignment = (
        "utc"
        if starts and all(t is not None for t in starts)
        else ("partial" if any(t is not None for t in starts) else "none")
    )
    return ManyReport(
        schema_version=SCHEMA_VERSION,
        ranks=tuple(summaries),
        verdicts=tuple(verdicts),
        stragglers=stragglers,
        slowest=_slowest(ok, {v.label: v for v in verdicts}, arrivals),
        alignment=alignment,
        thresholds={
            "alpha": ALPHA,
            "alpha_per_rank": alpha,
            "min_slowdown_ratio": MIN_SLOWDOWN_RATIO,
            "distinct_ratio": DISTINCT_RATIO,
            "min_steps": MIN_STEPS,
        },
        arrivals=arrivals,
    )


def relative_steps(ranks: Sequence[RankSummary]) -> dict[str, np.ndarray]:
    """label -> each step's wall time over the median across ranks of the same step.

    Steps are matched by index over the steps every rank has (synchronous training runs step
    *k* on every rank at once). Dividing by the cross-rank median removes what all ranks share
    (a slow data batch, a checkpoint), so the test sees how each rank compares step by step.
    """
    if len(ranks) < 2:
        return {}
    n = min(len(r.step_wall_ns) for r in ranks)
    walls = np.array([r.step_wall_ns[:n] for r in ranks], dtype=np.float64)
    ratio = walls / np.maximum(np.median(walls, axis=0), 1.0)
    return {r.label: ratio[i] for i, r in enumerate(ranks)}


def start_lags(ranks: Sequence[RankSummary]) -> dict[str, int]:
    """label -> median over step indexes of (its step start - the earliest rank's, same index),
    among ranks with a UTC session start and steps."""
    timed = [r for r in ranks if r.session_start_utc_ns is not None and r.step_start_ns]
    if len(timed) < 2:
        return {}
    n = min(len(r.step_start_ns) for r in timed)
    starts = np.array([r.step_start_ns[:n] for r in timed], dtype=np.int64)
    lag = starts - starts.min(axis=0)
    return {r.label: int(np.median(lag[i])) for i, r in enumerate(timed)}


def _verdict(
    s: RankSummary,
    relative: dict[str, np.ndarray],
    alpha: float,
    lag: int | None,
    arrivals: Arrivals | None,
    stragglers: tuple[str, ...],
) -> RankVerdict:
    def unknown(why: str) -> RankVerdict:
        return RankVerdict(s.label, "unknown", None, None, None, lag, why)

    if s.error is not None:
        return unknown("not analyzed")
    mine = arrivals.rank(s.label) if arrivals else None
    if mine is not None:
        # Ranks that communicate: arrivals decide; step walls are the same on every rank.
        unit = ROUND_UNITS[arrivals.rounds_basis]
        why = (
            f"the latest at the collectives in {mine.last_rounds} of {mine.rounds} {unit}; "
            f"later than another rank's in {mine.late_share_ratio:.0%} of comparisons "
            f"(Mann-Whitney U of its lateness per round, one-sided p={mine.p_value:.3g}); held "
            f"the others up {mine.held_up_ns / 1e6:,.1f} ms ({mine.held_up_ratio:.1%} of the "
            f"time); waited {mine.waited_ns / 1e6:,.1f} ms for later ranks"
        )
        verdict = "straggler" if s.label in stragglers else mine.verdict
        return RankVerdict(s.label, verdict, None, mine.p_value, None, lag, why)
    if len(s.step_wall_ns) < MIN_STEPS:
        return unknown(f"needs {MIN_STEPS}+ steps to test (has {len(s.step_wall_ns)})")
    if s.label not in relative:
        return unknown(f"needs another rank with {MIN_STEPS}+ steps to compare with")
    mine = relative[s.label]
    pooled = np.concatenate([v for k, v in relative.items() if k != s.label])
    # One-sided: the question is only whether this rank is slower.
    slower_share, p = one_sided(mine, pooled)
    slowdown = float(np.median(mine) / np.median(pooled))
    why = (
        f"Mann-Whitney U on {mine.size} step times (each over the ranks' median of that step) "
        f"vs {pooled.size} of {len(relative) - 1} other ranks, one-sided p={p:.3g}, "
        f"median x{slowdown:.3f}"
    )
    # Without collectives the ranks do not wait for each other: a rank with slower steps is
    # slower, never a straggler (a straggler is late at the collectives).
    verdict = "slower" if p < alpha and slowdown >= MIN_SLOWDOWN_RATIO else "not slower"
    return RankVerdict(s.label, verdict, slowdown, p, slower_share, lag, why)


def _slowest(
    ok: list[RankSummary], verdicts: dict[str, RankVerdict], arrivals: Arrivals | None
) -> tuple[SlowRank, ...]:
    timed = [s for s in ok if s.median_step_ns is not None]
    listed = [s for s in ok if verdicts[s.label].verdict == "straggler"]
    if len(timed) >= 2:
        timed.sort(key=lambda s: (-s.median_step_ns, s.label))
        listed += [
            s
            for s in timed[:SLOWEST_LISTED]
            if s not in listed and (verdicts[s.label].slowdown_ratio or 0.0) > 1.0
        ]
    if len(ok) < 2:
        return ()
    return tuple(
        SlowRank(
            label=s.label,
            median_step_ns=s.median_step_ns,
            slowdown_ratio=verdicts[s.label].slowdown_ratio,
            distinctions=_distinctions(s, [o for o in ok if o is not s], verdicts),
            causes=straggler_causes(s, [o for o in ok if o is not s], arrivals)
            if verdicts[s.label].verdict == "straggler"
            else (),
        )
        for s in listed
    )


def straggler_causes(
    s: RankSummary, others: list[RankSummary], arrivals: Arrivals | None
) -> tuple[Cause, ...]:
    """Why the straggler is late (``late_causes`` on the ranks' step accounts), and its NUMA
    placement when the others ran on their GPU's node and it did not."""
    mine_arrival = arrivals.rank(s.label) if arrivals else None
    held = mine_arrival.held_up_ratio * s.account_step_ns if mine_arrival else 0.0
    out = list(
        late_causes(
            dict(s.bucket_ns_per_step),
            [dict(o.bucket_ns_per_step) for o in others if o.bucket_ns_per_step],
            held,
        )
    )
    theirs = [o.gpu_node_ratio for o in others if o.gpu_node_ratio is not None]
    if s.gpu_node_ratio is not None and theirs:
        median = float(np.median(theirs))
        if median - s.gpu_node_ratio >= NUMA_CAUSE_DROP_RATIO:
            out.insert(
                0,
                Cause(
                    f"NUMA: its threads ran {s.gpu_node_ratio:.0%} of their time on the GPU's "
                    f"node, the other ranks' {median:.0%}",
                    "numa_binding",
                    (),
                    s.gpu_node_ratio,
                    median,
                ),
            )
    return tuple(out)


def _metric(s: RankSummary, verdicts: dict[str, RankVerdict], name: str) -> float | None:
    value = verdicts[s.label].start_lag_ns if name == "start_lag_ns" else getattr(s, name)
    return None if value is None else float(value)


def _distinctions(
    s: RankSummary, others: list[RankSummary], verdicts: dict[str, RankVerdict]
) -> tuple[Distinction, ...]:
    out = []
    for name, title, unit in DISTINCT_METRICS:
        value = _metric(s, verdicts, name)
        theirs = [v for o in others if (v := _metric(o, verdicts, name)) is not None]
        if value is None or not theirs:
            continue
        median = float(np.median(theirs))
        if value >= median * DISTINCT_RATIO and value - median >= DISTINCT_FLOORS[unit]:
            out.append(Distinction(name, title, unit, value, median))
    return tuple(out)
