"""The diagnosis walks the optimization ladder: each rung's trace recommends the next rung.

The traces are built to the shape of each rung (tests/exports.py: ladder_rung); the sample
traces captured on the H200 are checked the same way in tests/test_sample_traces.py.
"""

from __future__ import annotations

import pytest

import nsysprobe
from nsysprobe.diagnose import MIN_GAIN_RATIO

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
    # 6 steps of 300 ms loading + 40 ms copy + 60 ms compute; gaps between steps 0.5 ms are
    # under the 1 ms threshold; each step's 300 ms of loading is idle GPU time, except that the
    # first step's loading precedes the first GPU operation (not a gap): 5 gaps of 300.5 ms.
    assert rec.saved_ns == 5 * 300_500_000
    wall = 6 * 400_000_000
    assert rec.expected_gain_ratio == pytest.approx(5 * 300.5 / 2400)
    assert rec.evidence["measured_ns"] == wall


def test_pinned_gain_uses_the_assumed_rate_without_pinned_copies(rung):
    rec = next(
        r for r in nsysprobe.analyze(rung("multiworker")).recommendations if r.id == "pinned_memory"
    )
    # 6 pageable copies of 64 MiB in 40 ms each: at twice the rate they would take 20 ms
    assert rec.saved_ns == 6 * 20_000_000
    assert rec.evidence["pinned_gbps_source"] == "assumed 2x the pageable rate"


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
