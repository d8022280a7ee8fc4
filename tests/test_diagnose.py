"""The diagnosis walks the optimization ladder: each rung's trace recommends the next rung.

The traces are built to the shape of each rung (tests/exports.py: ladder_rung); the sample
traces captured on the H200 are checked the same way in tests/test_sample_traces.py.
"""

from __future__ import annotations

import pytest

import nsysprobe
from nsysprobe.diagnose.common import MIN_GAIN_RATIO

from exports import Export


@pytest.mark.parametrize(
    "rung, first",
    [
        ("baseline", "multiprocess_loading"),
        ("multiworker", "pinned_memory"),
        ("pinned", "stream_pipelining"),
        ("pipelined", "gpu_bound"),
    ],
)
@pytest.mark.parametrize("version", ["2020.3", "2022.4", "2023.4", "2026.2"])
def test_each_rung_recommends_the_next(rung, first, version, build):
    from exports import ladder_rung

    report = nsysprobe.analyze(build(ladder_rung(rung, version=version)))
    assert report.verdict.id == first
    ids = [r.id for r in report.recommendations]
    assert ("gpu_bound" in ids) == (first == "gpu_bound")


def test_baseline_gain_is_the_idle_time_spent_loading(rung):
    report = nsysprobe.analyze(rung("baseline", steps=6))
    rec = report.verdict
    # 6 steps of 300 ms loading + 40 ms copy + 60 ms compute. Each step's 300 ms of loading
    # is idle GPU time ending in the batch's host-to-device copy (the first step's too: the
    # account is per step, not per gap); the 0.5 ms between steps is in the next step's
    # window, the thread's own code before that step's copy: loading too.
    assert rec.saved_ns == 6 * 300_000_000 + 5 * 500_000
    wall = 6 * 400_000_000 + 5 * 500_000
    assert rec.expected_gain_ratio == pytest.approx(rec.saved_ns / wall)
    assert rec.evidence["measured_ns"] == wall


def test_pinned_gain_uses_the_assumed_rate_without_pinned_copies(rung):
    rec = next(
        r for r in nsysprobe.analyze(rung("multiworker")).recommendations if r.id == "pinned_memory"
    )
    # 6 pageable copies of 64 MiB in 40 ms each: at twice the rate they would take 20 ms
    assert rec.saved_ns == 6 * 20_000_000
    assert rec.evidence["pinned_gbps_source"].startswith("assumed 2x the pageable rate (no pinned")


def test_gpu_bound_leads_only_when_no_input_fix_reaches_the_threshold(rung):
    report = nsysprobe.analyze(rung("pipelined"))
    assert [r.id for r in report.recommendations] == ["gpu_bound"]
    assert report.verdict.thresholds["min_gain_ratio"] == MIN_GAIN_RATIO


def test_capture_without_gpu_work_asks_to_fix_the_capture(build):
    ex = Export()
    ex.nvtx(0, 10, "Batch 0")
    ex.nvtx(20, 30, "Batch 1")
    report = nsysprobe.analyze(build(ex))
    assert [r.id for r in report.recommendations] == ["capture_incomplete"]
    assert "no GPU work" in report.verdict.reason


@pytest.mark.parametrize("workers, named_in", [(8, "PROCESSES"), (3, "ThreadNames"), (0, None)])
def test_with_loader_workers_only_the_steps_input_copy_makes_the_idle_before_it_loading(
    build, workers, named_in
):
    """Per step (ms):  get batch 50 | HtoD batch 2 | kernel 20 | build mask 30 | HtoD mask 1 |
    kernel 10; each step is 113 ms. With DataLoader worker processes in the report, only the
    step's first host-to-device copy is its batch: the idle before it is loading (50 / 113),
    the idle before the later copy is the thread's own code, named by its range (cpu,
    30 / 113). Without workers the thread makes whatever it copies: both are loading."""
    ms = 1_000_000
    ex = Export()
    for k in range(workers):
        # PyTorch names a DataLoader worker pt_data_worker (the process and its thread).
        if named_in == "PROCESSES":
            ex.row("PROCESSES", globalPid=(4300 + k) << 24, pid=4300 + k, name="pt_data_worker")
        else:
            ex.thread_name("pt_data_worker", tid=4300 + k, pid=4300 + k)
    t = 1_000 * ms
    for i in range(4):
        step0 = t
        ex.nvtx(t, t + 50 * ms, "get batch")
        t += 50 * ms
        ex.memcpy(t, t + 2 * ms, 8 << 20, src=1, api="cudaMemcpyAsync_v3020", api_span=(t, t + 10))
        ex.kernel(t + 2 * ms, t + 22 * ms, launch_at=t + 1_000)
        ex.api(t + 3_000, t + 22 * ms, "cudaStreamSynchronize_v3020")
        t += 22 * ms
        ex.nvtx(t, t + 30 * ms, "build mask")
        t += 30 * ms
        ex.memcpy(t, t + 1 * ms, 256_000, src=1, api="cudaMemcpyAsync_v3020", api_span=(t, t + 10))
        ex.kernel(t + 1 * ms, t + 11 * ms, launch_at=t + 1_000)
        ex.api(t + 3_000, t + 11 * ms, "cudaStreamSynchronize_v3020")
        t += 11 * ms
        ex.nvtx(step0, t, f"Batch {i}")
    report = nsysprobe.analyze(build(ex))
    a = report.account.main
    assert a.loader_processes == workers
    if workers:
        assert (a.ns("loading"), a.ns("cpu")) == (4 * 50 * ms, 4 * 30 * ms)
        assert a.bucket("cpu").details[0].name == "build mask"
        assert [r.id for r in report.recommendations][:2] == [
            "multiprocess_loading",
            "cpu_overhead",
        ]
        assert report.verdict.expected_gain_ratio == pytest.approx(50 / 113)
    else:
        assert (a.ns("loading"), a.ns("cpu")) == (4 * 80 * ms, 0)
        assert report.verdict.id == "multiprocess_loading"
        assert report.verdict.expected_gain_ratio == pytest.approx(80 / 113)
