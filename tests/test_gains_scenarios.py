"""Issue 32 on hand-made timelines, each a shape a hostile review found wrong once: what each
fix can remove, start-up and one-time steps apart, advice only where the program has its
input pipeline. Times in ms unless said; every expected figure is worked out in the
docstring from the timeline, not read from nsysprobe."""

from __future__ import annotations

import random

import numpy as np
import pytest
from independent import final_count, startup_count

import nsysprobe
from nsysprobe.analyses.windows import final_steps, startup_steps

from exports import Export

MS, US = 1_000_000, 1_000


def test_the_one_time_rules_are_the_loops_they_are_written_as():
    rng = random.Random(32)
    for _ in range(3000):
        walls = [
            rng.choice([1, 2, 3, 4, 10, 30, 31, 100, 300, 1000]) for _ in range(rng.randint(0, 9))
        ]
        k = startup_steps(np.array(walls, dtype=np.int64))
        assert k == startup_count(walls)
        assert final_steps(np.array(walls, dtype=np.int64), k) == final_count(walls, k)


def test_compute_already_under_the_copies_cannot_hide_them_again(build):
    """Each 20 ms step: a 20 ms pinned copy on stream 9 and a 10 ms kernel under its first
    half. The step cannot drop below 20 ms (the copy engine): overlap saves nothing, the
    copies' 10 ms exposed per step are all theirs (removing them would save 300 of 600)."""
    ex = Export()
    for i in range(30):
        t = i * 20 * MS
        ex.nvtx(t, t + 20 * MS, "step")
        ex.memcpy(t, t + 20 * MS, 500 << 20, src=1, stream=9, api="cudaMemcpyAsync_v3020",
                  api_span=(t, t + 10 * US))  # fmt: skip
        ex.kernel(t, t + 10 * MS, launch_at=t + 20 * US)
    recs = {r.id: r for r in nsysprobe.analyze(build(ex)).recommendations}
    assert "stream_pipelining" not in recs
    assert recs["copy_bound"].saved_ns == 300 * MS


def test_copies_from_pageable_memory_beyond_compute_are_named_copy_bound(build):
    """Each 10 ms step copies 200 MB from pageable memory (8 ms) and computes 0.5 ms; no
    pinned copy of a like size, so pinned is assumed 2x: pinning saves 4 ms a step, and the 4
    ms left are copies compute cannot hide (0.5 ms of compute, after them, could hide 0.5)."""
    ex = Export()
    for i in range(30):
        lo = i * 10 * MS
        ex.nvtx(lo, lo + 10 * MS, "step")
        ex.memcpy(lo + MS, lo + 9 * MS, 200_000_000, src=0, api="cudaMemcpy_v3020",
                  api_span=(lo + MS - 5 * US, lo + 9 * MS))  # fmt: skip
        ex.kernel(lo + 9 * MS + 10 * US, lo + 9 * MS + 510 * US, launch_at=lo + 9 * MS + 5 * US)
    recs = {r.id: r for r in nsysprobe.analyze(build(ex)).recommendations}
    assert recs["pinned_memory"].saved_ns == pytest.approx(30 * 4 * MS + 30 * 5 * US, rel=0.01)
    assert recs["copy_bound"].saved_ns == pytest.approx(30 * (4 * MS - 500 * US), rel=0.01)


def test_a_compilation_then_a_recompilation_are_both_start_up(build):
    """Steps of 100, 60, then 20 of 10 ms, a 9 ms kernel at the end of each: both leading
    steps are over 3x every later one, so both are start-up, and the steady idle is 1 ms a
    step (10 %)."""
    ex, t = Export(), 0
    for w in [100, 60] + [10] * 20:
        ex.nvtx(t * MS, (t + w) * MS, "step")
        ex.kernel((t + w - 9) * MS, (t + w) * MS, launch_at=(t + w - 9) * MS - 10 * US)
        t += w
    a = nsysprobe.analyze(build(ex)).account.main
    assert (a.startup_steps, a.startup_ns, a.wall_ns, a.idle_ns) == (2, 160 * MS, 200 * MS, 20 * MS)


def test_a_final_checkpoint_is_one_time_not_the_steady_state(build):
    """20 steps of 10 ms (9 ms of kernel each); the last one also holds 'save_checkpoint',
    a 400 ms read-back and 300 ms of host code: 710 ms, over 3x every step before. It is left
    out of every figure; the steady steps are 19 x 10 ms with 1 ms idle each."""
    ex = Export()
    for i in range(20):
        lo, w = i * 10 * MS, (710 if i == 19 else 10)
        ex.nvtx(lo, lo + w * MS, "step")
        ex.kernel(lo + MS, lo + 10 * MS, launch_at=lo + MS - 10 * US)
        if i == 19:
            ex.nvtx(lo + 10 * MS, lo + 710 * MS, "save_checkpoint")
            ex.memcpy(lo + 10 * MS, lo + 410 * MS, 4 << 30, copy_kind=2, src=2, dst=0,
                      api="cudaMemcpy_v3020", api_span=(lo + 10 * MS, lo + 410 * MS))  # fmt: skip
    report = nsysprobe.analyze(build(ex))
    a = report.account.main
    assert (a.final_steps, a.final_ns, a.step_count, a.wall_ns) == (1, 710 * MS, 19, 190 * MS)
    assert not any(r.id == "device_to_host" for r in report.recommendations)
    (once,) = [r for r in report.recommendations if r.id == "startup_in_capture"]
    assert once.evidence["final_ns"] == 710 * MS and "profiler.stop()" in once.advice


def test_a_one_time_range_on_another_thread_is_not_start_up(build):
    """A logging thread runs 'setup_wandb' [0, 450) once; the main thread's loop (5 ms of
    host code, a 5 ms kernel, no NVTX) is the same throughout: nothing is start-up."""
    ex = Export()
    ex.nvtx(0, 450 * MS, "setup_wandb", tid=4260)
    for i in range(100):
        lo = i * 10 * MS
        ex.kernel(lo + 5 * MS, lo + 10 * MS, launch_at=lo + 5 * MS - 10 * US)
    a = nsysprobe.analyze(build(ex)).account.main
    assert (a.startup_ns, a.startup_range) == (0, "")


@pytest.mark.parametrize("loop_ms, twice", [(900, False), (1000, True)])
def test_model_construction_is_start_up_however_long_the_loop_after_it(build, loop_ms, twice):
    """'init_model' (once, or twice: a teacher and a student) uploads 2 GB from pageable
    memory over [0, 1000); then a 9 ms kernel every 10 ms for ``loop_ms``, no step ranges.
    The loop is the steady state (its windows start at the first kernel, 1001), the uploads
    start-up."""
    ex = Export()
    halves = [(0, 500), (500, 1000)] if twice else [(0, 1000)]
    for lo, hi in halves:
        ex.nvtx(lo * MS, hi * MS, "init_model")
    for k in range(10):
        ex.memcpy(k * 100 * MS, (k * 100 + 50) * MS, 200 << 20, api="cudaMemcpy_v3020")
    for i in range(loop_ms // 10):
        lo = (1000 + 10 * i) * MS
        ex.kernel(lo + MS, lo + 10 * MS, launch_at=lo)
    report = nsysprobe.analyze(build(ex))
    a = report.account.main
    assert (a.startup_range, a.startup_ns, a.steps[0].start_ns) == (
        "init_model",
        1000 * MS,
        1001 * MS,
    )
    made = {r.id for r in report.recommendations}
    assert not {"pinned_memory", "copy_bound", "multiprocess_loading"} & made


@pytest.mark.parametrize("inner", [True, False])
def test_the_plainest_loader_loop_is_an_input_pipeline(build, inner):
    """`for x, y in loader:` with num_workers=0: 15 ms of host work, then each step uploads
    its batch (pinned, 1 ms) and runs a 4 ms kernel. The step range holds the loading
    (``inner``: the range wraps the whole iteration) or not; no range is named for input,
    but every step has its input copy: DataLoader advice, 15 of every 20 ms."""
    ex = Export()
    for i in range(30):
        lo = i * 20 * MS
        ex.nvtx(lo if inner else lo + 15 * MS, lo + 20 * MS, f"train_step {i}")
        ex.memcpy(lo + 15 * MS, lo + 16 * MS, 64 << 20, src=1, api="cudaMemcpyAsync_v3020",
                  api_span=(lo + 15 * MS, lo + 15 * MS + 10 * US))  # fmt: skip
        ex.kernel(lo + 16 * MS, lo + 20 * MS, launch_at=lo + 15 * MS + 20 * US)
    first = nsysprobe.analyze(build(ex)).recommendations[0]
    assert first.id == "multiprocess_loading"
    assert first.evidence["input_pipeline"].startswith("an input copy in each")


@pytest.mark.parametrize("where", ["load_layer_weights", "dequantize_layer"])
def test_weights_read_from_disk_get_no_dataloader_advice(build, where):
    """Each 10 ms 'forward #' step reads the next layer's weights in ``where`` (6 ms, inside
    read()), uploads them (pinned, 2 ms) and runs a 2 ms kernel: no DataLoader, no range
    named for input; the read is the thread's own OS call."""
    ex = Export()
    for i in range(30):
        lo = i * 10 * MS
        ex.nvtx(lo, lo + 10 * MS, f"forward {i}")
        ex.nvtx(lo, lo + 6 * MS + 10 * US, where)
        ex.osrt(lo, lo + 6 * MS, "read")
        ex.memcpy(lo + 6 * MS + 20 * US, lo + 8 * MS, 100 << 20, src=1, api="cudaMemcpyAsync_v3020",
                  api_span=(lo + 6 * MS + 10 * US, lo + 6 * MS + 20 * US))  # fmt: skip
        ex.kernel(lo + 8 * MS, lo + 10 * MS, launch_at=lo + 6 * MS + 30 * US)
    recs = nsysprobe.analyze(build(ex)).recommendations
    assert "multiprocess_loading" not in [r.id for r in recs]
    assert all("DataLoader" not in r.advice for r in recs)
    assert recs[0].id in ("os_runtime_stall", "cpu_overhead")
