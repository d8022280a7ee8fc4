"""Causes found through the trace's own links, not the nearest range.

A pageable batch's buffer is given back to the OS (``munmap``) when the training thread drops
it, before it copies the next one: that time is the pageable copies' cost (a pinned batch is
kept by PyTorch's caching host allocator) and goes with pinned memory, so it is charged to
the copies (``blocking_copy``), never to ``os_runtime_stall``. Held to SQL: the main thread's
``munmap`` calls followed by a pageable host-to-device copy it issued, in the GPU's idle
time that the thread caused: not the idle before work issued earlier (the GPU started it
late: ``queued``), nor nsys's own overhead."""

from __future__ import annotations

import pytest
from independent import (
    LAUNCHED_TABLES,
    PID_OF,
    completion_windows,
    gpu_pids,
    inside,
    minus,
    query,
    step_ranges,
    tables,
    union,
)

import nsysprobe

from conftest import SAMPLE_TRACES

PAGEABLE_COPY_CALLS = """
SELECT r.start FROM CUPTI_ACTIVITY_KIND_MEMCPY m
JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = m.correlationId
 AND (r.globalTid >> 24) & 16777215 = (m.globalPid >> 24) & 16777215
WHERE m.copyKind = 1 AND m.srcKind = 0
 AND (r.globalTid >> 24) & 16777215 = ? AND r.globalTid & 16777215 = ?
"""
ALL_WORK = " UNION ALL ".join(
    f"SELECT start, end FROM {t} WHERE {PID_OF.format(col='globalPid')} = :pid"
    for t in (
        "CUPTI_ACTIVITY_KIND_KERNEL",
        "CUPTI_ACTIVITY_KIND_MEMCPY",
        "CUPTI_ACTIVITY_KIND_MEMSET",
    )
)
OS_CALLS = """
SELECT o.start, o.end FROM OSRT_API o JOIN StringIds s ON s.id = o.nameId
WHERE s.value LIKE ?
 AND (o.globalTid >> 24) & 16777215 = ? AND o.globalTid & 16777215 = ?
"""


def _main_thread_calls(path, like: str) -> list[tuple[int, int]]:
    """The main thread's (tid == pid) OS calls named like ``like``."""
    (pid,) = gpu_pids(path)
    return query(path, OS_CALLS, (like, pid, pid))


def _munmap_idle_before_copies(path) -> int:
    (pid,) = gpu_pids(path)
    last_copy = max(t for (t,) in query(path, PAGEABLE_COPY_CALLS, (pid, pid)))
    calls = [(s, e) for s, e in _main_thread_calls(path, "munmap%") if s < last_copy]
    return _caused_idle_in(path, calls)


def _caused_idle_in(path, calls) -> int:
    """The GPU's idle time in the steps inside ``calls`` that the process's threads caused:
    not before work issued earlier (``queued``), nor nsys's own overhead."""
    (pid,) = gpu_pids(path)
    ranges = step_ranges(path, pid)
    windows = completion_windows(path, ranges, pid)
    lo, hi = windows[0][1], windows[-1][2]
    # Each GPU operation with the start of the call that launched it.
    ops = []
    for table in LAUNCHED_TABLES:
        if table in tables(path):
            ops += query(
                path,
                f"SELECT g.start, g.end, min(r.start) FROM {table} g "
                "LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = g.correlationId "
                f"AND {PID_OF.format(col='r.globalTid')} = {PID_OF.format(col='g.globalPid')} "
                f"WHERE {PID_OF.format(col='g.globalPid')} = ? GROUP BY g.rowid",
                (pid,),
            )
    busy = union([(s, e) for s, e, _ in ops])
    # The idle gaps, each ended by the first operation to start at its end.
    launched = {}
    for s, _, call in sorted(ops):
        launched.setdefault(s, call)
    gaps = minus([(lo, hi)], busy)
    caused = [
        (s, e) for s, e in gaps if e in launched and launched[e] is not None and launched[e] >= s
    ]
    overhead = query(
        path,
        f"SELECT start, end FROM PROFILER_OVERHEAD WHERE {PID_OF.format(col='globalTid')} = ?",
        (pid,),
    )
    idle = minus(minus(union(caused), union(overhead)), minus([(lo, hi)], union(calls)))
    return inside(idle, lo, hi)


@pytest.mark.parametrize("name", ["h200_multiworker.sqlite", "h200_ladder/multiworker.sqlite"])
def test_a_munmap_before_a_pageable_copy_is_the_copy_s_cost(name):
    path = SAMPLE_TRACES / name
    expected = _munmap_idle_before_copies(path)
    assert expected > 10_000_000  # the rung's 100 MB batches: tens of ms of it
    report = nsysprobe.analyze(path)
    a = report.account.main
    details = {d.name: d.ns for d in a.bucket("blocking_copy").details}
    assert details["munmap (before a pageable copy)"] == pytest.approx(expected, rel=0.01)
    os_call = a.bucket("os_call")
    assert os_call is None or os_call.total_ns < expected / 100
    first = report.recommendations[0]
    assert first.id == "pinned_memory"
    assert "munmap (before a pageable copy)" in first.reason
    assert first.saved_ns >= expected
    assert "os_runtime_stall" not in [r.id for r in report.recommendations]


@pytest.mark.parametrize(
    ("name", "where", "drain"),
    [
        ("h200_dtoh_numpy.sqlite", "metrics on host", "readback"),
        ("h200_host_postprocess.sqlite", "postprocess", "readback"),
    ],
)
def test_the_host_work_after_a_drain_is_named_by_the_range_it_runs_in(name, where, drain):
    """The host work after a read-back is the read-back's (up to what the thread waited in
    it) and keeps the NVTX range it ran in: "read back 67 MB in 'metrics on host'". All the
    idle inside that range (by SQL: the range less the GPU's busy time) is named by it, as the
    range itself (``cpu``) or as the drain's work in it, less what nsys's overhead and late
    starts (``queued``) take."""
    path = SAMPLE_TRACES / name
    (pid,) = gpu_pids(path)
    windows = completion_windows(path, step_ranges(path, pid), pid)
    busy = union([(s, e) for s, e in query(path, ALL_WORK, {"pid": pid})])
    ranges = query(
        path,
        "SELECT n.start, n.end FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId "
        "WHERE n.eventType = 59 AND coalesce(n.text, s.value) = ? "
        f"AND {PID_OF.format(col='n.globalTid')} = ?",
        (where, pid),
    )
    idle_in_range = inside(minus(union(ranges), busy), windows[0][1], windows[-1][2])
    a = nsysprobe.analyze(path).account.main
    top = a.bucket(drain).details[0]
    assert top.name.endswith(f" in '{where}'") and top.name.startswith("read back")
    named = sum(
        d.ns
        for b in a.buckets
        if b.kind == "idle"
        for d in b.details
        if d.name == where or d.name.endswith(f" in '{where}'")
    )
    assert 0.95 * idle_in_range <= named <= idle_in_range


def test_every_micro_batch_waits_for_the_loader_not_only_a_step_s_first():
    """h200_grad_accumulation takes 4 micro-batches a step from 3 loader workers, each copied
    to the GPU: the training thread's waits (poll) before each of those copies are the
    loader's, not an OS stall; by SQL, the GPU idle inside the main thread's poll calls."""
    path = SAMPLE_TRACES / "h200_grad_accumulation.sqlite"
    expected = _caused_idle_in(path, _main_thread_calls(path, "poll%"))
    report = nsysprobe.analyze(path)
    a = report.account.main
    polls = {d.name: d.ns for d in a.bucket("loader_wait").details}["poll"]
    assert polls == pytest.approx(expected, rel=0.01)
    ids = [r.id for r in report.recommendations]
    assert "multiprocess_loading" in ids and "os_runtime_stall" not in ids


def test_an_optimizer_on_the_host_stays_one_when_the_trace_has_loader_workers(tmp_path):
    """h200_cpu_optimizer (AdamW on the host between gradients down and weights up) with two
    idle DataLoader worker processes added to the report: the thread's code before its
    uploads is still the optimizer's (its range 'cpu optimizer'), not batch production."""
    import shutil
    import sqlite3

    path = tmp_path / "cpu_optimizer_with_workers.sqlite"
    shutil.copy(SAMPLE_TRACES / "h200_cpu_optimizer.sqlite", path)
    db = sqlite3.connect(path)
    (new,) = db.execute("SELECT max(id) + 1 FROM StringIds").fetchone()
    db.execute("INSERT INTO StringIds (id, value) VALUES (?, 'pt_data_worker')", (new,))
    (pid,) = gpu_pids(path)
    (main_tid,) = db.execute("SELECT globalTid FROM ThreadNames LIMIT 1").fetchone()
    high = main_tid >> 48 << 48  # nsys: the machine's bits, then pid << 24 | tid
    for worker in (pid + 1000, pid + 1001):
        tid = high | worker << 24 | worker
        db.execute("INSERT INTO ThreadNames (globalTid, nameId) VALUES (?, ?)", (tid, new))
        db.execute("INSERT INTO PROCESSES (pid, name) VALUES (?, 'pt_data_worker')", (worker,))
    db.commit()
    db.close()
    report = nsysprobe.analyze(path)
    assert report.account.main.loader_processes == 2
    ids = [r.id for r in report.recommendations]
    assert ids[0] == "cpu_optimizer" and "multiprocess_loading" not in ids
