"""A GPU shared with another process: the time the other process's work held it is not idle.
The account moves it out of the idle causes only where this process's work was already issued
and waited (``other_process``); where the thread had no work ready, its own cause stands, so
no rule promises what running alone would not give. The gaps lie where no process ran work,
in a report of every process and in the view of one (``--ranks``, ``analyze(pid=)``)."""

from __future__ import annotations

from independent import intersect, query, queued_gaps, union

import nsysprobe
from nsysprobe.analyses.account import QUEUED_START_NS

from conftest import SAMPLE_TRACES
from exports import MS, Export

US = 1_000
OTHER = 777


def cpu_bound(with_other: bool) -> Export:
    """Each step: 3 ms of the thread's own code ('forward prep'), then a 4 ms kernel it
    launches at its end; the other process's 3 ms kernel runs during that code."""
    ex = Export()
    t = 1000 * MS
    for i in range(10):
        ex.nvtx(t, t + 7 * MS, f"Batch {i}")
        ex.nvtx(t, t + 3 * MS, "forward prep")
        ex.kernel(t + 3 * MS, t + 7 * MS, launch_at=t + 3 * MS - 5 * US)
        if with_other:
            ex.kernel(t + 10 * US, t + 3 * MS - 10 * US, pid=OTHER, tid=OTHER, launch_at=t)
        t += 7 * MS
    return ex


def test_the_other_process_s_work_under_the_thread_s_own_code_leaves_its_cause(build):
    """Alone on its GPU the step takes as long: the thread's code is the cause, not the other
    job, and nothing is promised for moving it."""
    alone = nsysprobe.analyze(build(cpu_bound(False), "alone.sqlite"))
    shared = nsysprobe.analyze(build(cpu_bound(True), "shared.sqlite"))
    assert shared.account.main.buckets == alone.account.main.buckets
    assert alone.account.main.ns("cpu") == 10 * (3 * MS - 5 * US)  # as built
    ids = [r.id for r in shared.recommendations]
    assert ids == [r.id for r in alone.recommendations] and "shared_gpu" not in ids
    assert shared.account.main.ns("other_process") == 0


def stalled(with_other: bool) -> Export:
    """Tiny kernels queued 3 us apart, with one 400 us wait in each step; the other process
    runs 5 us kernels every 8 us inside that wait."""
    ex = Export()
    t = 1_000_000 * US
    for i in range(4):
        start = t + 300 * US
        for j in range(100):
            if j == 50:
                b = start + 3 * US
                while with_other and b + 8 * US <= start + 400 * US:
                    ex.kernel(b, b + 5 * US, pid=OTHER, name="other", stream=3)
                    b += 8 * US
                start += 400 * US
            elif j:
                start += 3 * US
            ex.kernel(start, start + 4 * US, launch_at=t + j * 2 * US)
            start += 4 * US
        ex.nvtx(t, start, f"Batch {i}")
        t = start + 100 * US
    return ex


def test_kernel_starts_are_judged_by_the_process_s_own_stretches(build):
    """The other process's kernels inside the 400 us wait cut it into 3 us pieces: not this
    process's kernel starts. kernel_gaps saves the same with or without them."""
    alone = build(stalled(False), "alone.sqlite")
    shared = build(stalled(True), "shared.sqlite")
    starts = queued_gaps(shared, 1, QUEUED_START_NS)
    assert starts == 4 * 98 * 3 * US
    for path in (alone, shared):
        recs = {r.id: r for r in nsysprobe.analyze(path).recommendations}
        assert recs["kernel_gaps"].saved_ns == starts, path.name
    held = query(
        shared,
        "SELECT SUM(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL "
        "WHERE (globalPid >> 24) & 16777215 = ?",
        (OTHER,),
    )[0][0]
    assert nsysprobe.analyze(shared).account.main.ns("other_process") == held


def test_a_view_of_one_process_keeps_the_other_s_work_on_its_gpu():
    """``--ranks`` and ``analyze(pid=)`` see one process's events, but the GPU was still
    held by the other's: the same account, and no gap over any GPU work (SQL)."""
    path = SAMPLE_TRACES / "h200_shared_gpu.sqlite"
    work = union(
        [
            row
            for t in ("KERNEL", "MEMCPY", "MEMSET")
            for row in query(path, f"SELECT start, end FROM CUPTI_ACTIVITY_KIND_{t}")
        ]
    )
    every = {a.pid: a for a in nsysprobe.analyze(path, min_gap_ms=0).account.accounts}
    assert len(every) == 2
    for pid, whole in every.items():
        view = nsysprobe.analyze(path, pid=pid, min_gap_ms=0)
        a = view.account.main
        assert a.pid == pid and a.buckets == whole.buckets and a.ns("other_process") > 0
        gaps = union(zip(a.idle_gaps.start_ns.tolist(), a.idle_gaps.end_ns.tolist()))
        assert gaps and intersect(gaps, work) == []
