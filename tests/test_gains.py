"""Every printed gain is at most what its fix can remove, by a what-if computed from the
export's intervals with SQL and plain Python (``independent``), never from nsysprobe's
buckets; the first recommendation is the one with the largest gain.

For each steady window of the report's main account (the windows themselves are held to SQL
in ``tests/analyses/test_account.py``), from the process's GPU work on its device:

    compute     union of its compute kernels (and graph replays) in the window
    idle        the window less the union of all its GPU work
    exposed X   the union of X (pinned or pageable host-to-device copies, NCCL) less compute

and the bounds, each what the fix's own mechanism allows:

    stream_pipelining      <= sum over windows of min(exposed pinned copies, compute)
    + copy_bound           <= sum of exposed pinned copies
    exposed_communication  <= sum of min(exposed NCCL, compute)
    + communication_bound  <= sum of exposed NCCL (with late_rank)
    pinned_memory          <= exposed pageable copies + idle
    device_to_host         <= exposed device-to-host copies + idle
    every other rule       <= idle, and all of them together too (with device_to_host: with
                              its copies)
    all gains              <= sum of (window - compute): no step drops below its compute

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
# Rounding: each gain is an int of ns, ratios are floats.
SLACK_NS = 16


def what_if(path, a) -> dict[str, int]:
    """The bounds above for account ``a`` over its steady windows."""
    ops = gpu_ops(path)[(a.pid, a.device_id)]
    compute = union(ops["compute"])
    every = union(ops["compute"] + ops["nccl"] + ops["other"])
    pinned = minus(union(ops["htod_pinned"]), compute)
    pageable = minus(union(ops["htod_pageable"]), compute)
    nccl = minus(union(ops["nccl"]), compute)
    dtoh = minus(union(ops["dtoh"]), compute)
    out = dict.fromkeys(
        ("idle", "not_compute", "pinned", "hide_pinned", "pageable", "dtoh", "nccl", "hide_nccl"),
        0,
    )
    for step in a.steps:
        if step.startup:
            continue
        lo, hi = step.start_ns, step.start_ns + step.wall_ns
        c = inside(compute, lo, hi)
        out["idle"] += hi - lo - inside(every, lo, hi)
        out["not_compute"] += hi - lo - c
        out["pinned"] += inside(pinned, lo, hi)
        out["hide_pinned"] += min(inside(pinned, lo, hi), c)
        out["pageable"] += inside(pageable, lo, hi)
        out["dtoh"] += inside(dtoh, lo, hi)
        out["nccl"] += inside(nccl, lo, hi)
        out["hide_nccl"] += min(inside(nccl, lo, hi), c)
    return out


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
    assert total(COPY) <= bound["pinned"] + SLACK_NS
    assert saved.get("exposed_communication", 0) <= bound["hide_nccl"] + SLACK_NS
    assert total(COMMUNICATION) <= bound["nccl"] + SLACK_NS
    assert saved.get("pinned_memory", 0) <= bound["pageable"] + bound["idle"] + SLACK_NS
    assert saved.get("device_to_host", 0) <= bound["dtoh"] + bound["idle"] + SLACK_NS
    idle_only = set(saved) - COPY - COMMUNICATION - NOT_TIMELINE - {"pinned_memory"}
    assert total(idle_only - {"device_to_host"}) <= bound["idle"] + SLACK_NS
    assert total(idle_only) <= bound["idle"] + bound["dtoh"] + SLACK_NS
    host = idle_only | {"pinned_memory"}
    assert total(host) <= bound["idle"] + bound["dtoh"] + bound["pageable"] + SLACK_NS
    assert total(set(saved) - NOT_TIMELINE) <= bound["not_compute"] + SLACK_NS
    # The ranking follows the gains: the first is the largest.
    gains = [r.saved_ns for r in report.recommendations if r.expected_gain_ratio > 0]
    assert gains == sorted(gains, reverse=True)


def test_the_copy_bound_captures_name_the_copies_not_the_overlap():
    """h200_copy_bound moves 1 GiB a step from pinned memory for 5 % of kernel time: overlap
    can hide at most the compute (per step, by SQL), the rest is the copies' own."""
    path = SAMPLE_TRACES / "h200_copy_bound.sqlite"
    report = nsysprobe.analyze(path)
    first, *rest = report.recommendations
    bound = what_if(path, report.account.main)
    assert first.id == "copy_bound"
    pipelining = next(r for r in rest if r.id == "stream_pipelining")
    assert pipelining.saved_ns <= bound["hide_pinned"] + SLACK_NS
    # The two together are the exposed copies, split where compute runs out.
    assert first.saved_ns + pipelining.saved_ns == pytest.approx(bound["pinned"], rel=0.01)
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
    assert a.wall_ns == sum(walls[k:])
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
