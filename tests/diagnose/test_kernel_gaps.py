"""``kernel_gaps``, the rule added as one row of ``rules.RULES`` (and its check, page and
these tests): the idle between kernels the GPU already had queued, in stretches no longer than
the GPU's start of one (``QUEUED_START_NS``), where most kernel time is in tiny kernels. Its
gain is held to the gaps computed from the export with SQL; longer queued stalls, larger
kernels, and time another process's kernels held the GPU are not its: the rest stays
``gpu_idle``'s, never read by both."""

from __future__ import annotations

import pytest
from independent import query, queued_gaps

import nsysprobe
from nsysprobe.analyses.account import QUEUED_START_NS
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


def queued_kernels(
    kernel_ns: int, gap_ns: int, steps: int = 4, stall_ns: int = 0, other_pid: int = 0
) -> Export:
    """``steps`` steps of ``KERNELS`` queued kernels; with ``stall_ns``, the gap before each
    step's middle kernel lasts that long (a wait on other work); with ``other_pid``, that
    process runs a kernel in every gap between them on the same GPU."""
    ex = Export()
    t = 1_000_000 * US
    for i in range(steps):
        start = t + 300 * US
        for j in range(KERNELS):
            if j:
                gap = stall_ns if stall_ns and j == KERNELS // 2 else gap_ns
                if other_pid:
                    ex.kernel(start, start + gap, pid=other_pid, name="other")
                start += gap
            ex.kernel(start, start + kernel_ns, launch_at=t + j * 2 * US)
            start += kernel_ns
        ex.nvtx(t, start, f"Batch {i}")
        t = start + 100 * US
    return ex


def recommendations(path) -> dict:
    return {r.id: r for r in nsysprobe.analyze(path).recommendations}


def test_its_gain_is_the_idle_between_tiny_queued_kernels(build):
    path = build(queued_kernels(kernel_ns=4 * US, gap_ns=3 * US))
    gaps = queued_gaps(path)
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
    gaps = queued_gaps(path)
    recs = recommendations(path)
    assert "kernel_gaps" not in recs
    assert recs["gpu_idle"].evidence["buckets"] == "queued, cuda_api"
    assert recs["gpu_idle"].evidence["queued_ns"] == gaps


def test_a_long_queued_stall_between_tiny_kernels_stays_gpu_idle_s(build):
    """A wait on other work (a stream or event dependency) is not the GPU's start of a kernel:
    fewer kernels would not remove it."""
    path = build(queued_kernels(kernel_ns=4 * US, gap_ns=3 * US, stall_ns=400 * US))
    starts = queued_gaps(path, 1, QUEUED_START_NS)
    stalls = queued_gaps(path, QUEUED_START_NS + 1)
    assert (starts, stalls) == (4 * (KERNELS - 2) * 3 * US, 4 * 400 * US)
    recs = recommendations(path)
    assert recs["kernel_gaps"].saved_ns == starts
    assert recs["kernel_gaps"].evidence["queued_ns"] == starts + stalls
    assert recs["gpu_idle"].saved_ns == stalls


def test_on_a_shared_gpu_the_other_process_s_kernels_are_not_idle(build):
    """Where another process's kernel ran between this one's, the GPU was busy: no kernel
    start of this process to save, no gap, and no idle with no canned fix; that time is
    ``other_process``, and ``shared_gpu``'s."""
    path = build(queued_kernels(kernel_ns=4 * US, gap_ns=3 * US, other_pid=777))
    held = query(
        path,
        "SELECT SUM(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL "
        "WHERE (globalPid >> 24) & 16777215 = 777",
    )[0][0]
    assert held == queued_gaps(path) == 4 * (KERNELS - 1) * 3 * US
    report = nsysprobe.analyze(path, min_gap_ms=0.002)
    main = report.account.main
    assert main.pid == 4242
    assert (main.ns("other_process"), main.ns("queued")) == (held, 0)
    recs = {r.id: r for r in report.recommendations}
    assert "kernel_gaps" not in recs and "gpu_idle" not in recs
    assert recs["shared_gpu"].saved_ns == held
    # Its gaps over 2 us: between the steps (100 us and more), none of the 3 us between kernels.
    lengths = main.idle_gaps.end_ns - main.idle_gaps.start_ns
    assert lengths.size and lengths.min() >= 100 * US
    # The same process alone on its GPU: the same time is the GPU's kernel starts.
    alone = nsysprobe.analyze(build(queued_kernels(kernel_ns=4 * US, gap_ns=3 * US), "a.sqlite"))
    assert alone.account.main.ns("queued") == held
    assert {r.id: r for r in alone.recommendations}["kernel_gaps"].saved_ns == held


def test_on_a_real_trace_of_tiny_layers_and_not_after_the_fix():
    before = recommendations(SAMPLE_TRACES / "h200_tiny_layers.sqlite")
    rec = before["kernel_gaps"]
    assert rec.saved_ns <= rec.evidence["queued_ns"] <= rec.evidence["measured_ns"]
    after = recommendations(SAMPLE_TRACES / "h200_tiny_layers_graph.sqlite")
    assert "kernel_gaps" not in after
    # The one-rank NCCL loop idles with work queued too, but its kernel time is mostly in
    # larger kernels: gpu_idle's, as before.
    nccl = recommendations(SAMPLE_TRACES / "h200_nccl_one_rank.sqlite")
    assert "kernel_gaps" not in nccl
    assert "queued" in nccl["gpu_idle"].evidence["buckets"]
