"""Arrivals at the collectives and the straggler they name.

Part 1: the public two-GPU trace (both ranks in one report), every figure recomputed here with
SQL and plain Python. Part 2: synthetic DDP jobs (``tests/ddp.py``) whose step wall times are
the same on every rank, with a rank made slow the way real ranks are (its input, its pageable
copies, its GPU); the expected lateness comes from the generator's own arrival times. Part 3:
what must not fool it: clock skew between hosts, no session start, capture windows cut at
different moments, a balanced job, ranks with nothing in common, wall time alone.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import ddp
import numpy as np
import pytest

from nsysprobe import analyze
from nsysprobe.analyses.arrivals import (
    ALPHA,
    MIN_HELD_UP_RATIO,
    TIE_NS,
    RankCollectives,
    analyze_arrivals,
)
from nsysprobe.analyses.cross_rank import cross_rank
from nsysprobe.ranks.summary import summarize_report
from nsysprobe.runs.compare import mann_whitney

from conftest import shared_trace

TWO_GPU = "nsysai_mfu_2gpu_before_nsys2026.2.sqlite"


def one_sided(mine, theirs) -> tuple[float, float]:
    """P(a value of ``mine`` > one of ``theirs``, ties half), counted pair by pair, and the
    one-sided p of compare.mann_whitney (tested on its own in tests/cli/test_compare.py)."""
    wins = sum((x > y) + 0.5 * (x == y) for x in mine for y in theirs)
    share = wins / (len(mine) * len(theirs))
    _, p = mann_whitney(mine, theirs)
    return share, (p / 2 if share > 0.5 else 1 - p / 2)


# -- part 1: the public two-GPU trace --------------------------------------------------------


def nccl_kernels(path: Path) -> dict[int, list[tuple[int, int]]]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = db.execute(
        "SELECT (k.globalPid >> 24) & 16777215, k.start, k.end FROM CUPTI_ACTIVITY_KIND_KERNEL k "
        "JOIN StringIds s ON s.id = k.shortName WHERE s.value LIKE 'ncclDevKernel%' "
        "ORDER BY 1, 2"
    ).fetchall()
    db.close()
    out: dict[int, list] = {}
    for pid, s, e in rows:
        out.setdefault(pid, []).append((s, e))
    return out


def test_the_two_gpu_trace_names_the_rank_that_arrives_last():
    path = shared_trace(TWO_GPU)
    ops = nccl_kernels(path)
    assert sorted(ops) == [144, 145] and len(ops[144]) == len(ops[145]) == 33
    # One report, one clock; both ranks run the same 33 SendRecv in order. With two ranks a
    # rank's lateness is how long the other waited for it (no steps: each instance a round).
    lateness = {144: [], 145: []}
    waited = {144: 0, 145: 0}
    for (s0, e0), (s1, e1) in zip(ops[144], ops[145]):
        assert abs(e1 - e0) < 30_000  # a collective ends on both ranks at once
        late = max(s0, s1)
        waited[144] += min(late - s0, e0 - s0)
        waited[145] += min(late - s1, e1 - s1)
        lateness[144].append(s0 - s1 if s0 - s1 >= TIE_NS else 0)
        lateness[145].append(s1 - s0 if s1 - s0 >= TIE_NS else 0)
    last = {p: sum(x > 0 for x in lateness[p]) for p in (144, 145)}
    held = {p: sum(lateness[p]) for p in (144, 145)}
    span = max(max(e for _, e in ops[p]) for p in ops) - min(min(s for s, _ in ops[p]) for p in ops)

    report = analyze(path)
    a = report.arrivals
    assert a is not None and a.instances == 33 and a.rounds_basis == "collectives"
    assert a.clock == "one report: one clock"
    for pid, other in ((144, 145), (145, 144)):
        r = a.rank(f"process {pid}")
        share, p = one_sided(lateness[pid], lateness[other])
        assert (r.last_rounds, r.rounds) == (last[pid], 33)
        assert r.held_up_ns == held[pid]
        assert r.waited_ns == waited[pid]
        assert r.held_up_ratio == pytest.approx(held[pid] / span)
        assert r.late_share_ratio == pytest.approx(share)
        assert r.p_value == pytest.approx(p)
        assert r.clock_offset_ns == 0
    # Rank 145 is later in 16 of 33 instances (rank 144 in 2) and holds rank 144 up 3.8 % of
    # the time: consistently, and enough.
    assert (last[145], last[144]) == (16, 2)
    assert one_sided(lateness[145], lateness[144])[1] < ALPHA / 2
    assert held[145] / span >= MIN_HELD_UP_RATIO
    assert a.stragglers == ("process 145",)
    # The verdict is read from the rank that waited, and says whom it waited for.
    assert report.account.main.pid == 144
    late = next(r for r in report.recommendations if r.id == "late_rank")
    assert late.evidence["late_rank"] == "process 145"
    assert late.saved_ns == min(waited[144], report.account.main.ns("communication"))


def test_the_two_gpu_trace_one_rank_at_a_time_sees_no_arrivals():
    path = shared_trace(TWO_GPU)
    alone = analyze(path, pid=144)
    assert alone.arrivals is None
    assert not any(r.id == "late_rank" for r in alone.recommendations)


# -- part 2: synthetic DDP jobs ------------------------------------------------------------


def expected_held(truth: ddp.Truth, slow: int) -> list[int]:
    """Per step, the slow rank's largest lateness at the step's all-reduces, from the
    generator's own arrival times: its start minus the median of the other ranks' starts,
    when 50 us or more."""
    out = []
    for starts in truth.allreduce_start:
        worst = 0
        for per_rank in starts:
            late = per_rank[slow] - np.median([s for r, s in enumerate(per_rank) if r != slow])
            worst = max(worst, late if late >= TIE_NS else 0)
        out.append(worst)
    return out


def near(got: list[int], expected: list[int], per_step_ns: int = 40_000) -> bool:
    """Per-rank reports: each clock offset is estimated from the collectives' ends, which the
    generator spreads by up to 5 us; a step of 4 all-reduces may move by a few us."""
    return len(got) == len(expected) and all(
        abs(g - e) <= per_step_ns for g, e in zip(got, expected)
    )


def per_rank_summaries(folder: Path, job: ddp.Job, **save) -> tuple[list, ddp.Truth]:
    exs, truth = ddp.build(job)
    paths = ddp.save_per_rank(exs, folder, **save)
    return [s for p in paths for s in summarize_report(str(p), p.stem, {})], truth


def step_walls(path: Path) -> list[int]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = db.execute(
        "SELECT end - start FROM NVTX_EVENTS WHERE eventType = 59 AND domainId = 0 ORDER BY start"
    ).fetchall()
    db.close()
    return [w for (w,) in rows if w > 20_000_000]  # the steps, not the 'data' ranges


@pytest.mark.parametrize(
    "slow, cause",
    [("load", "multiprocess_loading"), ("pageable", "pinned_memory"), ("gpu", "gpu_work")],
)
def test_per_rank_reports_name_the_straggler_and_why(tmp_path, slow, cause):
    job = ddp.Job(ranks=4, slow_rank=2, slow=slow)
    summaries, truth = per_rank_summaries(tmp_path, job)
    # Every rank's step wall times are the same: the wall-time view sees nothing.
    walls = [step_walls(tmp_path / f"rank{r}.sqlite") for r in range(4)]
    assert all(w == walls[0] for w in walls) and len(walls[0]) == job.steps
    many = cross_rank(summaries)
    a = many.arrivals
    assert a.rounds_basis == "steps" and a.instances == job.steps * job.buckets
    assert many.stragglers == ("rank2",)
    assert near([r.held_up_ns for r in a.rounds], expected_held(truth, 2))
    assert all(r.last == "rank2" for r in a.rounds)
    slow_rank = a.rank("rank2")
    assert abs(slow_rank.held_up_ns - sum(expected_held(truth, 2))) <= 40_000 * job.steps
    assert slow_rank.p_value < ALPHA / 4 and slow_rank.late_share_ratio > 0.9
    # The others' NCCL kernels waited for it: far more than it waited for anyone.
    assert all(a.rank(f"rank{r}").waited_ns > 5 * slow_rank.waited_ns for r in (0, 1, 3))
    listed = next(s for s in many.slowest if s.label == "rank2")
    assert listed.causes and listed.causes[0].recommendation == cause
    verdicts = {v.label: v.verdict for v in many.verdicts}
    assert verdicts == {
        "rank0": "not late",
        "rank1": "not late",
        "rank2": "straggler",
        "rank3": "not late",
    }


def test_one_report_holding_every_rank(tmp_path):
    exs, truth = ddp.build(ddp.Job(ranks=4, slow_rank=1, slow="pageable"))
    path = ddp.save_one_report(exs, tmp_path / "job.sqlite")
    report = analyze(path)
    a = report.arrivals
    assert a.stragglers == ("process 5001",)
    assert [r.held_up_ns for r in a.rounds] == expected_held(truth, 1)
    # The verdict comes from a rank that waited: fix rank 1's pageable copies.
    assert report.verdict.id == "late_rank"
    assert report.verdict.evidence["late_rank"] == "process 5001"
    assert report.verdict.evidence["late_cause"] == "pinned_memory"
    assert report.account.main.pid != 5001
    # exposed_communication keeps only what is not the wait.
    comm = next((r for r in report.recommendations if r.id == "exposed_communication"), None)
    if comm is not None:
        assert comm.saved_ns == report.account.main.ns("communication") - report.verdict.saved_ns
    many = cross_rank(summarize_report(str(path), "job", {}))
    assert many.stragglers == ("job:5001",)


def test_eight_ranks_one_throttled_gpu(tmp_path):
    summaries, truth = per_rank_summaries(
        tmp_path, ddp.Job(ranks=8, steps=10, slow_rank=5, slow="gpu", slow_by=0.2)
    )
    many = cross_rank(summaries)
    assert many.stragglers == ("rank5",)
    assert near([r.held_up_ns for r in many.arrivals.rounds], expected_held(truth, 5))
    cause = next(s for s in many.slowest if s.label == "rank5").causes[0]
    assert cause.recommendation == "gpu_work"
    assert cause.ns_per_step > cause.others_ns_per_step * 1.1


# -- part 3: what must not fool it -----------------------------------------------------------


@pytest.mark.parametrize(
    "save",
    [
        {"skew_ns": {1: 3_000_000, 3: -2_000_000}},  # hosts' clocks off by ms, > the spacing
        {"skew_ns": {1: 40_000_000}},  # more than a step
        {"utc": False},  # no session start: each report on its own clock
    ],
    ids=["skew-ms", "skew-step", "no-session-start"],
)
def test_clocks_that_disagree(tmp_path, save):
    job = ddp.Job(ranks=4, slow_rank=1, slow="load")
    summaries, truth = per_rank_summaries(tmp_path, job, **save)
    many = cross_rank(summaries)
    a = many.arrivals
    assert many.stragglers == ("rank1",)
    assert a.instances == job.steps * job.buckets
    # Each rank's clock is recovered to the few microseconds by which ends differ.
    for r in range(1, 4):
        origin = (r * 1_234_567) if not save.get("utc", True) else 0
        expected = save.get("skew_ns", {}).get(r, 0) - origin
        assert abs(a.rank(f"rank{r}").clock_offset_ns - expected) < 10_000
    assert near([r.held_up_ns for r in a.rounds], expected_held(truth, 1))


def test_capture_windows_cut_at_different_steps(tmp_path):
    """Rank 0's report starts two steps later: the collectives still line up by time, and
    the rounds are rank 0's steps."""
    job = ddp.Job(ranks=3, slow_rank=2, slow="load")
    exs, truth = ddp.build(job)
    cut = truth.step_start[2]
    for table, rows in exs[0].tables.items():
        if table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "NVTX_EVENTS"):
            exs[0].tables[table] = [r for r in rows if r.get("end") is None or r["start"] >= cut]
    paths = ddp.save_per_rank(exs, tmp_path)
    many = cross_rank([s for p in paths for s in summarize_report(str(p), p.stem, {})])
    # The first two steps' all-reduces are instances of ranks 1 and 2 only.
    assert many.arrivals.instances == job.steps * job.buckets
    assert many.arrivals.rank("rank0").instances == (job.steps - 2) * job.buckets
    assert many.stragglers == ("rank2",)
    assert near([r.held_up_ns for r in many.arrivals.rounds], expected_held(truth, 2)[2:])


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_a_balanced_job_has_no_straggler(tmp_path, seed):
    summaries, _ = per_rank_summaries(tmp_path, ddp.Job(ranks=4, seed=seed))
    many = cross_rank(summaries)
    assert many.arrivals is not None and many.stragglers == ()
    assert all(v.verdict != "straggler" for v in many.verdicts)


def test_wall_time_alone_never_names_a_straggler(tmp_path):
    """Ranks without collectives: slower steps make a rank 'slower', not a straggler."""
    from exports import ladder_rung

    paths = []
    for r, steps in enumerate((8, 8, 8)):
        ex = ladder_rung("pinned" if r != 1 else "multiworker", steps=steps)
        paths.append(ex.save(tmp_path / f"rank{r}.sqlite"))
    many = cross_rank([s for p in paths for s in summarize_report(str(p), p.stem, {})])
    assert many.arrivals is None
    assert many.stragglers == ()
    assert {v.label: v.verdict for v in many.verdicts}["rank1"] == "slower"


def ops(label, starts, ends, names, source="x", utc=True, steps=((), ())):
    """A rank's collectives (and its NVTX steps: starts, ends) built by hand."""
    return RankCollectives(
        label=label,
        source=source,
        utc=utc,
        start_ns=np.asarray(starts, dtype=np.int64),
        end_ns=np.asarray(ends, dtype=np.int64),
        collective=np.asarray(names, dtype=object),
        round_start_ns=np.asarray(steps[0], dtype=np.int64),
        round_end_ns=np.asarray(steps[1], dtype=np.int64),
        round_names=tuple(f"step {i}" for i in range(len(steps[0]))),
    )


def test_ranks_with_nothing_in_common_or_one_collective():
    a = ops("a", [0, 10], [5, 15], ["AllReduce", "AllReduce"])
    b = ops("b", [0, 10], [5, 15], ["AllGather", "AllGather"])
    assert analyze_arrivals([a, b]) is None
    assert analyze_arrivals([a]) is None
    assert analyze_arrivals([a, ops("c", [], [], [])]) is None
    one = analyze_arrivals(
        [ops("a", [0], [1_000_000], ["AllReduce"]), ops("b", [400_000], [1_000_000], ["AllReduce"])]
    )
    assert one.instances == 1 and one.rank("b").last_rounds == 1
    assert one.rank("b").held_up_ns == 400_000 and one.rank("a").waited_ns == 400_000
    # One instance is no evidence of a consistent delay, however large.
    assert one.stragglers == () and one.rank("b").verdict == "late at times"


# -- part 4: what a hostile review found (each was wrong before it was fixed) ---------------


def test_two_equally_slow_ranks_do_not_hide_each_other(tmp_path):
    summaries, _ = per_rank_summaries(tmp_path, ddp.Job(ranks=8, slow_rank=(2, 5), slow="load"))
    many = cross_rank(summaries)
    assert many.stragglers == ("rank2", "rank5")
    for label in many.stragglers:
        cause = next(s for s in many.slowest if s.label == label).causes[0]
        assert cause.recommendation == "multiprocess_loading"


def test_a_rank_late_only_every_tenth_step_is_late_at_times(tmp_path):
    job = ddp.Job(ranks=4, steps=30, slow_rank=1, slow="load", slow_by=4.0, slow_every=10)
    summaries, truth = per_rank_summaries(tmp_path, job)
    many = cross_rank(summaries)
    r = many.arrivals.rank("rank1")
    assert many.stragglers == ()
    assert r.verdict == "late at times" and r.held_up_ratio >= MIN_HELD_UP_RATIO
    assert abs(r.held_up_ns - sum(expected_held(truth, 1))) <= 40_000 * job.steps


def test_five_steps_are_enough_when_one_rank_is_late_in_each(tmp_path):
    summaries, _ = per_rank_summaries(tmp_path, ddp.Job(ranks=2, steps=5, slow_rank=1))
    assert cross_rank(summaries).stragglers == ("rank1",)


def test_a_rank_late_at_one_bucket_and_another_at_the_rest_are_both_named():
    """Rank 1 is 2 ms late at each step's first all-reduce, rank 2 1.2 ms late at the other
    three: each costs a step its largest lateness (6.9 % and 4.1 % of the time)."""
    rng = np.random.default_rng(0)
    starts, ends = {r: [] for r in range(4)}, {r: [] for r in range(4)}
    steps_s, steps_e = [], []
    for step in range(30):
        t0 = 10_000_000 + step * 30_000_000
        steps_s.append(t0)
        steps_e.append(t0 + 29_000_000)
        for b in range(4):
            arrive = t0 + 10_000_000 + b * 4_000_000 + rng.integers(0, 20_000, 4)
            arrive[1 if b == 0 else 2] += 2_000_000 if b == 0 else 1_200_000
            for r in range(4):
                starts[r].append(arrive[r])
                ends[r].append(arrive.max() + 1_500_000 + rng.integers(0, 5_000))
    ranks = [
        ops(f"rank{r}", starts[r], ends[r], ["AllReduce"] * 120, "one", steps=(steps_s, steps_e))
        for r in range(4)
    ]
    a = analyze_arrivals(ranks)
    assert a.stragglers == ("rank1", "rank2")
    assert a.rank("rank2").held_up_ns == pytest.approx(30 * 1_200_000, rel=0.02)


def test_a_pipeline_of_point_to_point_stages_names_no_straggler():
    """Four balanced stages: each receiver posts 1 ms before its sender; all stages' transfers
    end together. Between more than two ranks SendRecv says nothing of a straggler."""
    starts, ends = {r: [] for r in range(4)}, {r: [] for r in range(4)}
    for slot in range(1, 40):
        end = slot * 5_000_000 + 300_000
        for k in range(3):
            # stage k sends (starts at the slot), stage k+1 receives (posted 1 ms before)
            for r, at in ((k, slot * 5_000_000), (k + 1, slot * 5_000_000 - 1_000_000)):
                if len(starts[r]) and ends[r][-1] == end:
                    starts[r][-1] = min(starts[r][-1], at)
                else:
                    starts[r].append(at)
                    ends[r].append(end)
    ranks = [ops(f"stage{r}", starts[r], ends[r], ["SendRecv"] * len(starts[r])) for r in range(4)]
    assert analyze_arrivals(ranks) is None


def test_tensor_parallel_groups_are_matched_within_each_group(tmp_path):
    """Ranks 0-1 all-reduce together (rank 1 slow), ranks 2-3 separately (balanced), with the
    same kernel names: each group's collectives are instances of its own ranks."""
    a, _ = ddp.build(ddp.Job(ranks=2, slow_rank=1, seed=1))
    b, _ = ddp.build(ddp.Job(ranks=2, seed=2, load_ns=5_500_000))
    paths = ddp.save_per_rank(a + b, tmp_path)
    many = cross_rank([s for p in paths for s in summarize_report(str(p), p.stem, {})])
    assert many.stragglers == ("rank1",)
    assert {many.arrivals.rank(f"rank{r}").instances for r in range(4)} == {48}


def test_reports_with_one_file_name_in_different_folders_keep_their_own_clocks(tmp_path):
    exs, _ = ddp.build(ddp.Job(ranks=3, slow_rank=1))
    for r, ex in enumerate(exs):
        ddp.shift(ex, 3_000_000 + r * 1_234_567)  # each report on its own clock, no UTC
        (tmp_path / f"host{r}").mkdir()
        ex.save(tmp_path / f"host{r}" / "profile.sqlite")
    paths = [tmp_path / f"host{r}" / "profile.sqlite" for r in range(3)]
    many = cross_rank([s for p in paths for s in summarize_report(str(p), p.parent.name, {})])
    assert many.stragglers == ("host1",)
    assert many.arrivals.clock.startswith("the collectives' ends")


def test_clocks_seconds_apart_in_a_long_capture(tmp_path):
    job = ddp.Job(ranks=3, steps=60, slow_rank=2)
    summaries, _ = per_rank_summaries(tmp_path, job, skew_ns={1: 2_000_000_000})
    a = cross_rank(summaries).arrivals
    assert abs(a.rank("rank1").clock_offset_ns - 2_000_000_000) < 10_000
    assert a.instances == job.steps * job.buckets and a.stragglers == ("rank2",)


def test_concurrent_collectives_of_one_name_ending_together(tmp_path):
    """FSDP-like: two AllGathers per step on two streams end at the same moment on every rank;
    rank 1 arrives 2 ms late at the first of them."""
    rng = np.random.default_rng(3)
    starts, ends = {r: [] for r in range(4)}, {r: [] for r in range(4)}
    steps_s, steps_e = [], []
    for step in range(30):
        t0 = step * 30_000_000
        steps_s.append(t0)
        steps_e.append(t0 + 29_000_000)
        end = t0 + 10_000_000
        for r in range(4):
            for k in range(2):
                late = 2_000_000 if (r == 1 and k == 0) else 0
                starts[r].append(end - 3_000_000 + k * 500_000 + late + rng.integers(0, 20_000))
                ends[r].append(end)
    ranks = [
        ops(f"rank{r}", starts[r], ends[r], ["AllGather"] * 60, "one", steps=(steps_s, steps_e))
        for r in range(4)
    ]
    a = analyze_arrivals(ranks)
    assert a.instances == 60 and a.stragglers == ("rank1",)


def test_one_report_with_a_stray_context_on_another_gpu_keeps_the_cause(tmp_path):
    """Process 5001 also ran a memset on GPU 0 (it touched cuda:0 before set_device): its rank
    is still read from the GPU where its NCCL work is."""
    exs, _ = ddp.build(ddp.Job(ranks=4, slow_rank=1, slow="load"))
    for step in range(12):
        exs[1].memset(
            5_000_000 + step * 30_000_000, 5_010_000 + step * 30_000_000, device=0, pid=5001
        )
    report = analyze(ddp.save_one_report(exs, tmp_path / "job.sqlite"))
    late = next(r for r in report.recommendations if r.id == "late_rank")
    assert late.evidence["late_rank"] == "process 5001"
    assert late.evidence["late_cause"] == "multiprocess_loading"


def without_steps(exs: list) -> None:
    """Drop the NVTX step and data ranges (keep NCCL's own): a capture without NVTX steps."""
    for ex in exs:
        ex.tables["NVTX_EVENTS"] = [r for r in ex.tables["NVTX_EVENTS"] if r.get("domainId")]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_without_steps_a_steps_buckets_are_one_round(tmp_path, seed):
    """16 all-reduce buckets a step, no NVTX steps, nobody slow: the buckets of a step share
    their delays, so they are one round (a burst), not 16 independent pieces of evidence."""
    exs, _ = ddp.build(ddp.Job(ranks=8, buckets=16, jitter=0.05, seed=seed))
    without_steps(exs)
    paths = ddp.save_per_rank(exs, tmp_path)
    many = cross_rank([s for p in paths for s in summarize_report(str(p), p.stem, {})])
    assert many.arrivals.rounds_basis == "bursts" and len(many.arrivals.rounds) == 12
    assert many.stragglers == ()


def test_without_steps_the_straggler_is_still_found(tmp_path):
    exs, truth = ddp.build(ddp.Job(ranks=4, buckets=16, slow_rank=3))
    without_steps(exs)
    paths = ddp.save_per_rank(exs, tmp_path)
    many = cross_rank([s for p in paths for s in summarize_report(str(p), p.stem, {})])
    assert many.stragglers == ("rank3",)
    assert near([r.held_up_ns for r in many.arrivals.rounds], expected_held(truth, 3))


def test_a_small_delay_repeated_at_every_bucket_costs_it_once(tmp_path):
    """Rank 3's input is 0.2 ms late a step, and with short all-reduces that delay shows at each
    of its 16 buckets; the step loses 0.2 ms (under 1 %), not 16 times as much."""
    job = ddp.Job(ranks=4, buckets=16, allreduce_ns=200_000, slow_rank=3, slow_by=0.05)
    summaries, truth = per_rank_summaries(tmp_path, job)
    many = cross_rank(summaries)
    r = many.arrivals.rank("rank3")
    assert many.stragglers == () and r.verdict == "slightly late"
    # (Other ranks are the latest in some steps: compare rank 3's own total.)
    assert abs(r.held_up_ns - sum(expected_held(truth, 3))) <= 40_000 * job.steps
    assert r.held_up_ratio < MIN_HELD_UP_RATIO


def drift(ex, ppm: float) -> None:
    """The export's clock runs ``ppm`` parts per million fast."""
    ddp.retime(ex, lambda t: t + int(t * ppm / 1e6))


def test_a_clock_that_drifts_against_the_others(tmp_path):
    """Rank 1's host clock runs 50 ppm fast over a 10 s capture: 0.5 ms by the end, more than
    the spacing of its collectives' ends. The offset is followed along the capture."""
    job = ddp.Job(ranks=4, steps=360, slow_rank=2)
    exs, truth = ddp.build(job)
    drift(exs[1], 50)
    paths = ddp.save_per_rank(exs, tmp_path)
    many = cross_rank([s for p in paths for s in summarize_report(str(p), p.stem, {})])
    r1 = many.arrivals.rank("rank1")
    assert r1.clock_drift_ppm == pytest.approx(50, rel=0.05)
    assert r1.instances == job.steps * job.buckets
    assert many.stragglers == ("rank2",)
    assert near([r.held_up_ns for r in many.arrivals.rounds], expected_held(truth, 2))
