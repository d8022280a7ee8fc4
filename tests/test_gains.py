"""Every printed gain is at most what its fix can remove, by a what-if computed from the
export's intervals with SQL and plain Python (``independent``), never from nsysprobe's
buckets; the first recommendation is the one with the largest gain.

For each steady window of the report's main account (the windows themselves are held to SQL
in ``tests/analyses/test_account.py``), from the process's GPU work on its device:

    compute     union of its compute kernels (and graph replays) in the window
    idle        the window less the union of all its GPU work
    exposed X   the union of X (pinned or pageable host-to-device copies, NCCL) less compute
    free of X   compute less the union of X: compute not already running under X

and the bounds, each what the fix's own mechanism allows:

    stream_pipelining      <= sum over windows of min(exposed pinned copies, compute free of
                              them): the step cannot drop below the longer of the two
    + copy_bound           <= sum of exposed pinned and pageable copies
    + pinned_memory        <= the same and the idle
    exposed_communication  <= sum of min(exposed NCCL, compute free of NCCL)
    + communication_bound  <= sum of exposed NCCL (with late_rank)
    pinned_memory          <= exposed pageable copies + idle
    device_to_host         <= exposed device-to-host copies + idle
    every other rule       <= idle, and all of them together too (with device_to_host: with
                              its copies)
    all gains              <= sum of (window - compute): no step drops below its compute
    periodic_step          <= the larger of its steps' idle beyond the other steps' mean (done
                              off the training thread) and half their wall time beyond it
                              (done half as often); with the other idle rules, its idle part
                              <= idle. It alone may remove GPU work (an evaluation's), so it is
                              out of the last sum.

``numa_placement`` is left out of the sums: its gain is a measured slowdown of remote memory
scaled to the whole step, not a share of the timeline.
"""

from __future__ import annotations

import json
import re

import pytest
from independent import (
    completion_windows,
    gpu_ops,
    inside,
    minus,
    query,
    startup_count,
    step_ranges,
    union,
)

import nsysprobe

from conftest import SAMPLE_TRACES, shared_trace
from exports import Export

TRACES = sorted(p.name for p in SAMPLE_TRACES.glob("*.sqlite"))
SHARED = [
    "nsysai_mfu_2gpu_before_nsys2026.2.sqlite",
    "cs336_h100_train_nsys2023.4.sqlite",
    "centerformer_titanrtx_nsys2022.4.sqlite",
]
COPY = {"stream_pipelining", "copy_bound"}
COMMUNICATION = {"exposed_communication", "communication_bound", "late_rank"}
NOT_TIMELINE = {"numa_placement"}
PERIODIC = {"periodic_step"}
# Rounding: each gain is an int of ns, ratios are floats.
SLACK_NS = 16
US = 1_000


def what_if(path, a) -> dict[str, int]:
    """The bounds above for account ``a`` over its steady windows."""
    ops = gpu_ops(path)[(a.pid, a.device_id)]
    compute = union(ops["compute"])
    every = union(ops["compute"] + ops["nccl"] + ops["other"])
    pinned = minus(union(ops["htod_pinned"]), compute)
    pageable = minus(union(ops["htod_pageable"]), compute)
    nccl = minus(union(ops["nccl"]), compute)
    free_of_pinned = minus(compute, union(ops["htod_pinned"]))
    free_of_nccl = minus(compute, union(ops["nccl"]))
    dtoh = minus(union(ops["dtoh"]), compute)
    out = dict.fromkeys(
        ("idle", "not_compute", "pinned", "hide_pinned", "pageable", "dtoh", "nccl", "hide_nccl"),
        0,
    )
    walls, idles = {}, {}
    for step in a.steps:
        if step.startup or step.final:
            continue
        lo, hi = step.start_ns, step.start_ns + step.wall_ns
        c = inside(compute, lo, hi)
        walls[step.name], idles[step.name] = hi - lo, hi - lo - inside(every, lo, hi)
        out["idle"] += hi - lo - inside(every, lo, hi)
        out["not_compute"] += hi - lo - c
        out["pinned"] += inside(pinned, lo, hi)
        out["hide_pinned"] += min(inside(pinned, lo, hi), inside(free_of_pinned, lo, hi))
        out["pageable"] += inside(pageable, lo, hi)
        out["dtoh"] += inside(dtoh, lo, hi)
        out["nccl"] += inside(nccl, lo, hi)
        out["hide_nccl"] += min(inside(nccl, lo, hi), inside(free_of_nccl, lo, hi))
    out["walls"], out["idles"] = walls, idles
    return out


def periodic_bound(bound, periodic_steps: set[str]) -> tuple[float, float]:
    """The periodic steps' idle and wall time beyond the other steady steps' mean."""
    excess = {}
    for key in ("idles", "walls"):
        mine = [v for k, v in bound[key].items() if k in periodic_steps]
        rest = [v for k, v in bound[key].items() if k not in periodic_steps]
        excess[key] = sum(mine) - len(mine) * sum(rest) / len(rest)
    return excess["idles"], excess["walls"]


def path_of(name):
    return SAMPLE_TRACES / name if name in TRACES else shared_trace(name)


@pytest.mark.parametrize("name", TRACES + SHARED)
def test_each_gain_is_within_what_its_fix_can_remove(name):
    path = path_of(name)
    report = nsysprobe.analyze(path)
    recs = [r for r in report.recommendations if r.saved_ns > 0]
    if not recs:
        return
    pid, device = map(int, re.findall(r"-?\d+", recs[0].evidence["account"]))
    (a,) = [x for x in report.account.accounts if (x.pid, x.device_id) == (pid, device)]
    assert all(r.evidence["account"] == f"process {pid}, GPU {device}" for r in recs)
    bound = what_if(path, a)
    saved = {r.id: r.saved_ns for r in recs}
    assert len(saved) == len(recs)  # one gain per fix

    def total(ids):
        return sum(saved.get(i, 0) for i in ids)

    assert saved.get("stream_pipelining", 0) <= bound["hide_pinned"] + SLACK_NS
    assert total(COPY) <= bound["pinned"] + bound["pageable"] + SLACK_NS
    uploads = COPY | {"pinned_memory"}
    assert total(uploads) <= bound["pinned"] + bound["pageable"] + bound["idle"] + SLACK_NS
    assert saved.get("exposed_communication", 0) <= bound["hide_nccl"] + SLACK_NS
    assert total(COMMUNICATION) <= bound["nccl"] + SLACK_NS
    assert saved.get("pinned_memory", 0) <= bound["pageable"] + bound["idle"] + SLACK_NS
    assert saved.get("device_to_host", 0) <= bound["dtoh"] + bound["idle"] + SLACK_NS
    periodic_idle = 0.0
    if "periodic_step" in saved:
        (rec,) = [r for r in recs if r.id == "periodic_step"]
        periodic_idle, periodic_wall = periodic_bound(
            bound, set(rec.evidence["periodic_steps"].split(", "))
        )
        assert saved["periodic_step"] <= max(periodic_idle, periodic_wall / 2) + SLACK_NS
        periodic_idle = min(periodic_idle, saved["periodic_step"])
    idle_only = set(saved) - COPY - COMMUNICATION - NOT_TIMELINE - PERIODIC - {"pinned_memory"}
    assert total(idle_only - {"device_to_host"}) + periodic_idle <= bound["idle"] + SLACK_NS
    assert total(idle_only) + periodic_idle <= bound["idle"] + bound["dtoh"] + SLACK_NS
    host = idle_only | {"pinned_memory"}
    assert total(host) <= bound["idle"] + bound["dtoh"] + bound["pageable"] + SLACK_NS
    assert total(set(saved) - NOT_TIMELINE - PERIODIC) <= bound["not_compute"] + SLACK_NS
    # The ranking follows the gains: the first is the largest.
    gains = [r.saved_ns for r in report.recommendations if r.expected_gain_ratio > 0]
    assert gains == sorted(gains, reverse=True)


def test_the_copy_bound_capture_names_the_copies_not_the_overlap():
    """h200_copy_bound moves 1 GiB a step from pinned memory on a copy stream, its 5 % of
    kernel time already under the copies (by SQL): overlap can hide nothing more, so no
    pipelining advice, and every exposed copy is the copies' own."""
    path = SAMPLE_TRACES / "h200_copy_bound.sqlite"
    report = nsysprobe.analyze(path)
    first = report.recommendations[0]
    bound = what_if(path, report.account.main)
    assert bound["hide_pinned"] < bound["pinned"] / 1000
    assert first.id == "copy_bound"
    assert "stream_pipelining" not in [r.id for r in report.recommendations]
    assert first.saved_ns == pytest.approx(bound["pinned"] - bound["hide_pinned"], rel=0.01)
    assert "DataLoader" not in first.advice and "GPU" in first.advice


PATHOLOGIES = json.loads((SAMPLE_TRACES / "manifest.json").read_text())["pathologies"]["traces"]
EXPECTED = sorted(n for n, t in PATHOLOGIES.items() if "expected_first_recommendation_id" in t)


@pytest.mark.parametrize("name", EXPECTED)
def test_the_issue_32_captures_get_their_expected_first_recommendation(name):
    facts = PATHOLOGIES[name]
    recs = nsysprobe.analyze(SAMPLE_TRACES / name).recommendations
    assert recs[0].id == facts["expected_first_recommendation_id"]
    if "expected_also" in facts:
        assert facts["expected_also"] in [r.id for r in recs]
    if facts.get("expected_advice") == "weights":  # streamed weights: no input-pipeline advice
        assert "weights" in recs[0].title.lower() and "resident" in recs[0].advice
    if facts.get("input_pipeline") is False:  # no loader: no input-pipeline advice
        assert not any(r.id == "multiprocess_loading" for r in recs)
        assert all("DataLoader" not in r.advice for r in recs[:1])


def test_start_up_is_counted_apart_at_its_cost():
    """h200_init_in_capture builds its model and compiles inside the capture: the work before
    the first step and the first window (by SQL, ``completion_windows``) are start-up, out of
    every steady figure."""
    path = SAMPLE_TRACES / "h200_init_in_capture.sqlite"
    report = nsysprobe.analyze(path)
    a = report.account.main
    ranges = step_ranges(path, a.pid)
    walls = [e - s for _, s, e in completion_windows(path, ranges, a.pid)]
    k = startup_count(walls)
    assert k == PATHOLOGIES["h200_init_in_capture.sqlite"]["startup_steps"] == a.startup_steps
    # And the GPU work before the first step, which model construction ('init_model') spans.
    ops = gpu_ops(path)[(a.pid, a.device_id)]
    first_op = min(s for kind in ops.values() for s, _ in kind)
    before = completion_windows(path, ranges, a.pid)[0][1] - first_op
    assert before > max(walls[k:])
    (startup,) = [r for r in report.recommendations if r.id == "startup_in_capture"]
    assert startup.saved_ns == 0 and startup.evidence["startup_ns"] == sum(walls[:k]) + before
    assert "'init_model'" in startup.reason
    assert a.wall_ns == sum(walls[k:]) and a.final_steps == 0
    assert "--capture-range=cudaProfilerApi" in startup.advice
    # The pace is a steady-state question too: the GPU sets it once start-up is apart.
    assert report.steps.paced_by == "gpu" and report.steps.startup_steps == k


@pytest.mark.parametrize("stepped", [True, False])
def test_model_construction_in_the_capture_is_start_up_not_loading(build, stepped):
    """The NVTX range 'init_model' uploads 2 GB of weights from pageable memory, then the
    loop runs a 9 ms kernel every 10 ms, in 'infer' ranges (``stepped``: the steps) or in
    none (ten equal windows). Times in ms:

        init_model [0 ............ 1000)   pageable HtoD copies [100k, 100k+50), k = 0..9
        infer      [1000, 1010) [1010, 1020) ... 100 of them, a kernel [+1, +10) in each

    Stepped, the work before the first step spans more than a step; unstepped, the one-time
    range named like start-up ends before half the work: either way the windows cover
    [1000, 2000) (unstepped: from the first kernel, 1001), and the uploads are start-up at
    their span, never the steady state's pinned or loading advice."""
    ex = Export()
    ms = 1_000_000
    ex.nvtx(0, 1000 * ms, "init_model")
    for k in range(10):
        ex.memcpy(k * 100 * ms, (k * 100 + 50) * ms, 200 << 20, api="cudaMemcpy_v3020")
    for i in range(100):
        lo = (1000 + 10 * i) * ms
        if stepped:
            ex.nvtx(lo, lo + 10 * ms, "infer")
        ex.kernel(lo + ms, lo + 10 * ms, launch_at=lo)
    report = nsysprobe.analyze(build(ex))
    a = report.account.main
    first = 1000 * ms if stepped else 1001 * ms
    assert a.startup_range == "init_model"
    assert (a.steps[0].start_ns, a.wall_ns) == (first, 2000 * ms - first)
    assert a.ns("memcpy HtoD Pageable") == 0
    ids = [r.id for r in report.recommendations]
    assert "startup_in_capture" in ids
    assert not {"pinned_memory", "multiprocess_loading"} & set(ids)
    startup = report.recommendations[ids.index("startup_in_capture")]
    # From the first copy's start to the first step, or to the range's end.
    assert startup.evidence["startup_ns"] == 1000 * ms
    assert startup.saved_ns == 0 and "init_model" in startup.reason


def test_pinning_small_copies_saves_what_pinned_copies_of_their_size_take(build):
    """Per 10 ms step: a 256 MiB pinned copy under a 6 ms kernel (~54 GB/s), then 200
    pageable 4 KiB copies of 10 us each (issued 1 us before), two pinned 4 KiB copies of 8 us
    and a small kernel. A 4 KiB copy is latency-bound: pinned, it takes the 8 us the pinned
    ones of its size take here, not 4 KiB at 54 GB/s. Times in us."""
    ex = Export()
    for i in range(30):
        t = i * 10_000 * US
        ex.nvtx(t, t + 10_000 * US, "step")
        ex.memcpy(
            t, t + 5_000 * US, 256 << 20, src=1, stream=9, api="cudaMemcpyAsync_v3020",
            api_span=(t, t + 5 * US),
        )  # fmt: skip
        ex.kernel(t, t + 6_000 * US, launch_at=t + 6 * US)
        c = t + 6_000 * US
        for _ in range(200):
            ex.memcpy(
                c, c + 10 * US, 4096, src=0, api="cudaMemcpy_v3020", api_span=(c - US, c + 10 * US)
            )
            c += 10 * US
        for _ in range(2):
            ex.memcpy(
                c,
                c + 8 * US,
                4096,
                src=1,
                api="cudaMemcpyAsync_v3020",
                api_span=(c - US, c + 8 * US),
            )
            c += 10 * US
        ex.kernel(c, c + 10 * US, launch_at=c - 2 * US)
    path = build(ex)
    rows = query(
        path,
        "SELECT srcKind, count(*), avg(end - start), sum(end - start) "
        "FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = 1 AND bytes = 4096 GROUP BY srcKind",
    )
    (_, n, pageable_us, _), (_, _, pinned_us, _) = sorted(rows)
    # The copies shrink to the pinned 4 KiB time; the 1 us the thread waited before each goes.
    bound = n * (pageable_us - pinned_us) + n * US
    (rec,) = [r for r in nsysprobe.analyze(path).recommendations if r.id == "pinned_memory"]
    assert rec.saved_ns <= bound + SLACK_NS
    assert rec.saved_ns >= n * (pageable_us - pinned_us) - SLACK_NS
    assert "like size" in rec.evidence["pinned_gbps_source"]
