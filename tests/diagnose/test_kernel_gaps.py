"""``kernel_gaps``, the rule added as one row of ``rules.RULES`` (and its check, page and
these tests): the idle between kernels the GPU already had queued, where most kernel time is
in tiny kernels. Its gain is held to the gaps computed from the export with SQL; with larger
kernels the same idle stays ``gpu_idle``'s, never read by both."""

from __future__ import annotations

import pytest
from independent import query

import nsysprobe
from nsysprobe.analyses.kernels import TINY_NS
from nsysprobe.diagnose.host import KERNEL_GAPS_TINY_TIME_RATIO

from conftest import SAMPLE_TRACES
from exports import Export

US = 1_000
# Each step: 100 launches, 2 us apart, then the kernels back to back on the GPU, each after a
# gap; every kernel was issued before the gap in front of it began.
#
#   thread  |launch x100|
#   GPU                      |k| |k| |k| ... |k|
#                               ^gap (queued)
KERNELS = 100
# The gap between a kernel's end and the start of the next one, issued before the first began.
QUEUED_GAPS = """
    WITH k AS (
        SELECT k.start AS start, k.end AS end, r.end AS issued
        FROM CUPTI_ACTIVITY_KIND_KERNEL AS k
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r ON r.correlationId = k.correlationId
    ), ordered AS (
        SELECT start, issued, LAG(end) OVER (ORDER BY start) AS previous_end FROM k
    )
    SELECT COALESCE(SUM(start - previous_end), 0) FROM ordered
    WHERE start > previous_end AND issued <= previous_end
"""


def queued_kernels(kernel_ns: int, gap_ns: int, steps: int = 4) -> Export:
    ex = Export()
    t = 1_000_000 * US
    for i in range(steps):
        first = t + 300 * US
        for j in range(KERNELS):
            start = first + j * (kernel_ns + gap_ns)
            ex.kernel(start, start + kernel_ns, launch_at=t + j * 2 * US)
        end = first + KERNELS * (kernel_ns + gap_ns) - gap_ns
        ex.nvtx(t, end, f"Batch {i}")
        t = end + 100 * US
    return ex


def recommendations(path) -> dict:
    return {r.id: r for r in nsysprobe.analyze(path).recommendations}


def test_its_gain_is_the_idle_between_tiny_queued_kernels(build):
    path = build(queued_kernels(kernel_ns=4 * US, gap_ns=3 * US))
    gaps = query(path, QUEUED_GAPS)[0][0]
    assert gaps == 4 * (KERNELS - 1) * 3 * US  # the export is what the picture says
    recs = recommendations(path)
    rec = recs["kernel_gaps"]
    assert rec.saved_ns == gaps
    assert rec.evidence["queued_ns"] == gaps
    assert rec.evidence["buckets"] == "queued"
    assert rec.evidence["tiny_time_ratio"] == 1.0 >= KERNEL_GAPS_TINY_TIME_RATIO
    assert rec.evidence["kernels"] == 4 * KERNELS
    assert rec.expected_gain_ratio == pytest.approx(gaps / rec.evidence["measured_ns"])
    # The queued idle is read once: gpu_idle, its other reader, leaves it to kernel_gaps.
    assert "gpu_idle" not in recs


def test_with_larger_kernels_the_same_idle_is_gpu_idle_s(build):
    kernel_ns = 4 * TINY_NS  # none of them tiny
    path = build(queued_kernels(kernel_ns=kernel_ns, gap_ns=20 * US))
    gaps = query(path, QUEUED_GAPS)[0][0]
    recs = recommendations(path)
    assert "kernel_gaps" not in recs
    assert recs["gpu_idle"].evidence["buckets"] == "queued, cuda_api"
    assert recs["gpu_idle"].evidence["queued_ns"] == gaps


def test_on_a_real_trace_of_tiny_layers_and_not_after_the_fix():
    before = recommendations(SAMPLE_TRACES / "h200_tiny_layers.sqlite")
    rec = before["kernel_gaps"]
    assert "gpu_idle" not in before  # its idle was the queued gaps, now named
    assert rec.saved_ns == rec.evidence["queued_ns"] <= rec.evidence["measured_ns"]
    after = recommendations(SAMPLE_TRACES / "h200_tiny_layers_graph.sqlite")
    assert "kernel_gaps" not in after
    # The one-rank NCCL loop idles with work queued too, but its kernel time is mostly in
    # larger kernels: gpu_idle's, as before.
    nccl = recommendations(SAMPLE_TRACES / "h200_nccl_one_rank.sqlite")
    assert "kernel_gaps" not in nccl
    assert "queued" in nccl["gpu_idle"].evidence["buckets"]
