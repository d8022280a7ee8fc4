"""The step account: conservation on real traces against SQL, and hand-made scenarios.

Part 1 recomputes, on each real export, every account's windows (the step-named top-level
NVTX ranges of the main thread, each timed from the last one's completion to its own:
``independent.completion_windows``; else ten equal windows over the account's GPU work) and
the busy time in them with plain SQL and a Python sweep (no nsysprobe code): the union of the
process's kernels, copies, memsets and graph replays on the device, clipped to each window,
and its split into compute and exposed NCCL communication.

Part 2 builds tiny timelines with ``exports.Export`` whose buckets are worked out by hand in
the comments (times in us; ``L`` a 1 us cudaLaunchKernel call; ``[a, b)`` half open).

Part 3 draws random timelines and checks conservation and the busy split cell by cell.
"""

from __future__ import annotations

import itertools
import re
import tempfile
import threading
import time
from bisect import bisect_right
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from independent import (
    GLOBAL_PID,
    completion_windows,
    final_count,
    fixed_windows,
    gpu_ops,
    inside,
    intersect,
    nccl_issued,
    query,
    startup_count,
    union,
)
from independent import step_ranges as step_windows

from nsysprobe import analyze as nsysprobe_analyze
from nsysprobe.analyses import intervals as iv
from nsysprobe.analyses import rows as rows_module
from nsysprobe.analyses.account import analyze_account
from nsysprobe.analyses.account import arrays as account_module
from nsysprobe.analyses.account import copies as copies_module
from nsysprobe.analyses.account.tally import DETAILS_LISTED
from nsysprobe.analyses.communication import collective_of, is_communication_kernel
from nsysprobe.analyses.events import Events
from nsysprobe.common.table import Table
from nsysprobe.trace.reader import Trace

from conftest import SAMPLE_TRACES, shared_trace
from exports import MAIN_TID, PID, WORKER_TID, Export, gtid

US = 1_000
MS = 1_000_000
MB64 = 64 << 20

# -- part 1: real traces against SQL -------------------------------------------------------

H200 = sorted(p.name for p in SAMPLE_TRACES.glob("h200_*.sqlite"))
SHARED = ["nsysai_mfu_2gpu_before_nsys2026.2.sqlite", "cs336_h100_train_nsys2023.4.sqlite"]


def real_trace(name: str) -> Path:
    return SAMPLE_TRACES / name if name in H200 else shared_trace(name)


@pytest.mark.parametrize("name", H200 + SHARED)
def test_account_conserves_time_and_matches_sql_busy(name):
    path = real_trace(name)
    ops = gpu_ops(path)
    with Trace(path) as trace:
        result = analyze_account(Events.load(trace))
    accounts = {(a.pid, a.device_id): a for a in result.accounts}
    assert set(accounts) == set(ops)
    for key, a in accounts.items():
        mine = ops[key]
        ranges = step_windows(path, key[0])
        windows = completion_windows(path, ranges, key[0]) if ranges else fixed_windows(mine)
        assert len(windows) >= 8
        every = union(mine["compute"] + mine["nccl"] + mine["other"])
        compute = union(mine["compute"])
        nccl = union(mine["nccl"])
        under = intersect(nccl, compute)
        assert [(s.name, s.start_ns, s.wall_ns) for s in a.steps] == [
            (n, s, e - s) for n, s, e in windows
        ]
        # Leading windows over 3x every later one are start-up: in no total of the account.
        walls = [e - s for _, s, e in windows]
        startup = startup_count(walls) if ranges else 0
        final = final_count(walls, startup) if ranges else 0
        stop = len(windows) - final
        assert [s.startup for s in a.steps] == [i < startup for i in range(len(windows))]
        assert [s.final for s in a.steps] == [i >= stop for i in range(len(windows))]
        assert (a.startup_steps, a.final_steps) == (startup, final)
        assert a.final_ns == sum(walls[stop:])
        # And, with steps, the GPU work before the first one when it spans more than a step.
        first_op = min(s for kind in mine.values() for s, _ in kind)
        longest = max(walls[startup:stop])
        before = windows[0][1] - first_op if ranges else 0
        before = before if before > longest else 0
        assert a.startup_ns == sum(e - s for _, s, e in windows[:startup]) + before
        overlapped = 0
        for step, (_, lo, hi) in zip(a.steps, windows):
            wall = hi - lo
            buckets = dict(step.buckets)
            assert sum(buckets.values()) == step.wall_ns == wall
            assert step.busy_ns + step.idle_ns == wall
            assert abs(step.busy_ns - inside(every, lo, hi)) <= wall / 1000
            assert step.busy_ns == inside(every, lo, hi)  # exact, in fact
            assert buckets.get("compute", 0) == inside(compute, lo, hi)
            exposed = inside(nccl, lo, hi) - inside(under, lo, hi)
            assert buckets.get("communication", 0) == exposed
            assert step.communication_ns == inside(nccl, lo, hi)
            assert step.communication_overlapped_ns == inside(under, lo, hi)
            overlapped += 0 if step.startup or step.final else inside(under, lo, hi)
        steady = windows[startup:stop]
        assert a.communication_overlapped_ns == overlapped
        assert a.communication_ns == sum(inside(nccl, lo, hi) for _, lo, hi in steady)
        assert a.wall_ns == sum(hi - lo for _, lo, hi in steady)
        assert sum(b.total_ns for b in a.buckets) == a.wall_ns
        assert a.busy_ns == sum(inside(every, lo, hi) for _, lo, hi in steady)
        assert a.busy_ns + a.idle_ns == a.wall_ns


def test_steps_given_as_a_function_are_asked_for_once_the_operations_are_made(monkeypatch):
    # A report of one process: its step windows are found on the other core meanwhile
    # (``report.declared``), so the account asks for them only after its own work is made.
    from nsysprobe.analyses.account import scope as scope_module
    from nsysprobe.analyses.steps import find_steps

    path = SAMPLE_TRACES / "h200_baseline.sqlite"
    order = []
    made = scope_module.gpu_ops
    monkeypatch.setattr(scope_module, "gpu_ops", lambda *a: order.append("ops") or made(*a))
    with Trace(path) as trace:
        events = Events.load(trace)
        windows = find_steps(events, None).windows(events)

        def steps():
            order.append("steps")
            return windows

        (a,) = analyze_account(events, steps=steps).accounts
    assert order == ["ops", "steps"]
    expected = completion_windows(path, step_windows(path, a.pid), a.pid)
    assert [(s.name, s.start_ns, s.wall_ns) for s in a.steps] == [
        (n, s, e - s) for n, s, e in expected
    ]


COPY_RANGES = [
    "h200_baseline.sqlite",
    "h200_cpu_optimizer.sqlite",
    "h200_grad_accumulation.sqlite",
    "h200_offload_inference.sqlite",
    "h200_worker_respawn.sqlite",
]


def test_the_idle_pieces_made_on_two_threads_sum_as_those_made_in_one(monkeypatch):
    # The account's idle pieces come a run of 64 intervals (or calls) at a time from a thread
    # of their own and from the account's (``common.ahead.in_order``), each run's texts coded apart;
    # made in the caller's thread alone, in order, the report is the same.
    from nsysprobe.analyses.account import process
    from nsysprobe.report.saved import to_json

    monkeypatch.setattr(account_module, "INTERVALS_PER_RUN", 64)
    monkeypatch.setattr(rows_module, "CALLS_PER_SWEEP", 64)
    prepared_on, made_on, account_on = [], [], []
    idle_pieces, account = process.idle_pieces, process.account

    def account_recorded(*args, **kwargs):
        # (whichever of the report's two threads takes the account first: run_all)
        account_on.append(threading.current_thread().name)
        return account(*args, **kwargs)

    def recorded(*args):
        prepared_on.append(threading.current_thread().name)
        readback_bytes, texts, n, make, finish = idle_pieces(*args)

        def made(k):
            made_on.append(threading.current_thread().name)
            if made_on[-1] == "nsysprobe-ahead":
                time.sleep(0.005)  # a slow second core: the account's thread takes runs too
            return make(k)

        return readback_bytes, texts, n, made, finish

    monkeypatch.setattr(process, "idle_pieces", recorded)
    monkeypatch.setattr(process, "account", account_recorded)
    trace = real_trace("h200_pinned.sqlite")
    two = to_json(nsysprobe_analyze(trace))
    assert account_on[0] != "nsysprobe-ahead"
    assert set(made_on) == {"nsysprobe-ahead", account_on[0]}

    @contextmanager
    def in_this_thread(prepare):
        head, n, make = prepare()
        yield itertools.chain([head], (make(k) for k in range(n)))

    monkeypatch.setattr(process, "in_order", in_this_thread)
    made_on.clear()
    one = to_json(nsysprobe_analyze(trace))
    assert prepared_on == ["nsysprobe-ahead", account_on[1]]
    assert set(made_on) == {account_on[1]}
    assert two == one


@pytest.mark.parametrize("name", COPY_RANGES)
def test_copy_ranges_are_the_innermost_nvtx_range_around_each_issuing_call(name):
    # By SQL: each host-to-device copy of the account's process and GPU starting in the steady
    # steps, its CUDA call (same process, same correlation id), the NVTX range on the call's
    # thread holding the call's start that started last (nested ranges: the innermost), its
    # name with digits masked; copy time summed per name, largest first.
    path = SAMPLE_TRACES / name
    with Trace(path) as trace:
        result = analyze_account(Events.load(trace))
    a = result.accounts[result.primary]
    steady = [s for s in a.steps if not s.startup and not s.final]
    lo, hi = steady[0].start_ns, steady[-1].start_ns + steady[-1].wall_ns
    strings = dict(query(path, "SELECT id, value FROM StringIds"))
    ranges: dict[int, list[tuple[int, int, str]]] = {}
    for start, end, tid, text, text_id in query(
        path,
        "SELECT start, end, globalTid, text, textId FROM NVTX_EVENTS "
        "WHERE eventType IN (59, 60) AND end > start ORDER BY start, end DESC",
    ):
        ranges.setdefault(tid, []).append((start, end, text or strings.get(text_id)))
    copies = query(
        path,
        "SELECT m.start, m.end, r.globalTid, r.start FROM CUPTI_ACTIVITY_KIND_MEMCPY m "
        "LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = m.correlationId "
        "AND (r.globalTid >> 24) & 16777215 = (m.globalPid >> 24) & 16777215 "
        "WHERE m.copyKind = 1 AND m.deviceId = ? AND (m.globalPid >> 24) & 16777215 = ? "
        "AND m.start >= ? AND m.start < ?",
        (a.device_id, a.pid, lo, hi),
    )
    totals: dict[str, int] = {}
    for start, end, tid, at in copies:
        held = [r for r in ranges.get(tid, []) if r[0] <= at < r[1]]
        label = re.sub(r"\d+", "#", held[-1][2]) if held else "(no NVTX range)"
        totals[label] = totals.get(label, 0) + end - start
    expected = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:DETAILS_LISTED]
    assert copies and [(d.name, d.ns) for d in a.copy_ranges] == expected


@given(
    st.lists(st.tuples(st.booleans(), st.integers(0, 2)), max_size=60),
    st.lists(
        st.one_of(st.integers(0, 70).map(lambda k: k * 10), st.integers(0, 700)),
        min_size=1,
        max_size=12,
    ),
    st.integers(1, 9),
)
def test_copy_ranges_look_only_at_the_ranges_holding_a_call(actions, calls, block):
    # Three threads push and pop NVTX ranges at 0, 10, 20 ... (a range left open ends at 700),
    # rows in the order they closed; the calls land on starts and ends too. By hand: a range
    # [start, end) of the thread holds a call where start <= call < end, and a call's range is
    # the one started last of those holding it.
    open_: dict[int, list[int]] = {0: [], 1: [], 2: []}
    rows = []
    for k, (push, tid) in enumerate(actions):
        if push or not open_[tid]:
            open_[tid].append(k * 10)
        else:
            rows.append((open_[tid].pop(), k * 10, tid))
    rows += [(start, 700, tid) for tid, starts in open_.items() for start in starts]
    nv = Table(
        {
            name: np.array([r[i] for r in rows], dtype=np.int64)
            for i, name in enumerate(("start", "end", "globalTid"))
        }
    )
    points = np.sort(np.array(calls, dtype=np.int64))
    old = copies_module.HOLDING_BLOCK
    copies_module.HOLDING_BLOCK = block
    try:
        for tid in (0, 1, 2):
            held = copies_module._holding(nv, tid, points)
            assert held.tolist() == [
                i for i, (s, e, t) in enumerate(rows) if t == tid and any(s <= p < e for p in calls)
            ]
            j = iv.innermost_cover(nv["start"][held], nv["end"][held], points)
            found = [int(held[x]) if x >= 0 else -1 for x in j.tolist()]
            for p, row in zip(points.tolist(), found):
                holders = [i for i, (s, e, t) in enumerate(rows) if t == tid and s <= p < e]
                assert row == (max(holders, key=lambda i: rows[i][0]) if holders else -1)
    finally:
        copies_module.HOLDING_BLOCK = old


def test_the_two_gpu_trace_has_one_account_per_rank_with_exposed_nccl():
    path = shared_trace(SHARED[0])
    with Trace(path) as trace:
        result = analyze_account(Events.load(trace))
    # The export's two processes, each on its own GPU, with NCCL kernels on one stream each.
    assert [(a.pid, a.device_id, a.step_count) for a in result.accounts] == [
        (144, 0, 10),
        (145, 1, 10),
    ]
    assert all(a.ns("communication") > 0 for a in result.accounts)


# -- part 2: scenarios ---------------------------------------------------------------------


def steps(ex: Export, *edges_us: int) -> None:
    """``Batch i`` NVTX ranges on the main thread between consecutive edges (us)."""
    for i, (a, b) in enumerate(zip(edges_us, edges_us[1:])):
        ex.nvtx(a * US, b * US, f"Batch {i}")


def launch(ex: Export, at_us: float, start_us: float, end_us: float, **kw) -> None:
    """A kernel [start, end) issued by a 1 us cudaLaunchKernel call at ``at_us``."""
    ex.kernel(int(start_us * US), int(end_us * US), launch_at=int(at_us * US), **kw)


def accounts_of(build, ex: Export):
    with Trace(build(ex)) as trace:
        result = analyze_account(Events.load(trace))
    for a in result.accounts:
        assert sum(b.total_ns for b in a.buckets) == a.wall_ns
        for s in a.steps:
            assert sum(ns for _, ns in s.buckets) == s.wall_ns
    return result


def the_account(build, ex: Export):
    (a,) = accounts_of(build, ex).accounts
    return a


def totals(a) -> dict[str, int]:
    return {b.name: b.total_ns for b in a.buckets}


def per_step(a) -> list[dict[str, int]]:
    return [dict(s.buckets) for s in a.steps]


def us(**buckets: float) -> dict[str, int]:
    return {k.replace("__", " "): int(round(v * US)) for k, v in buckets.items()}


def details(a, bucket: str) -> dict[str, int]:
    return {d.name: d.ns for d in a.bucket(bucket).details}


def test_sync_drain_charges_the_idle_after_the_sync_to_it(build):
    #  t (us)  10 20 30      100       2000      4000 4020        7020 7030           12000
    #  GPU                   [k1 .....)[k2 .....)                      [k3 ...........)
    #  main    L  L  [cudaStreamSynchronize .......)[log .........)L
    #  steps                 [Batch 0 ...................................)[Batch 1 ....)
    # idle [4000, 7030): [4000, 4020) inside the sync, [4020, 7020) the host work after a sync
    # that drained the GPU and [7020, 7030) its launch, before the thread got ahead again:
    # sync 3030, of which the launch's 10 falls in Batch 1, whose range launched k3.
    ex = Export()
    launch(ex, 10, 100, 2000)
    launch(ex, 20, 2000, 4000)
    ex.api(30 * US, 4020 * US, "cudaStreamSynchronize_v3020")
    ex.nvtx(4020 * US, 7020 * US, "log")
    launch(ex, 7020, 7030, 12000)
    steps(ex, 100, 7020, 12000)
    a = the_account(build, ex)
    assert per_step(a) == [us(compute=3900, sync=3020), us(sync=10, compute=4970)]
    assert totals(a) == us(compute=8870, sync=3030)
    assert (a.wall_ns, a.busy_ns, a.idle_ns) == (11900 * US, 8870 * US, 3030 * US)
    assert all("cudaStreamSynchronize" in d for d in details(a, "sync"))
    assert sum(details(a, "sync").values()) == 3030 * US
    assert a.readbacks.count == 0


def read_back(ex: Export, nbytes: int, k1_end: int, sync_end: int, numpy_end: int) -> None:
    """k1 [100, k1_end) launched at 10; a DtoH copy of ``nbytes`` [k1_end, k1_end + 10)
    issued by cudaMemcpyAsync [20, 25); cudaStreamSynchronize [30, sync_end); own code
    ``numpy`` [sync_end, numpy_end); then k2 [numpy_end + 10, 9000) launched at numpy_end;
    Batch 0 [100, numpy_end), Batch 1 (which launches k2) up to 9000."""
    launch(ex, 10, 100, k1_end)
    ex.memcpy(
        k1_end * US,
        (k1_end + 10) * US,
        nbytes,
        copy_kind=2,
        src=2,
        dst=0,
        api="cudaMemcpyAsync_v3020",
        api_span=(20 * US, 25 * US),
    )
    ex.api(30 * US, sync_end * US, "cudaStreamSynchronize_v3020")
    ex.nvtx(sync_end * US, numpy_end * US, "numpy")
    launch(ex, numpy_end, numpy_end + 10, 9000)
    steps(ex, 100, numpy_end, 9000)


@pytest.mark.parametrize("nbytes", [4, MB64])
@pytest.mark.parametrize("with_enum", [False, True])
def test_readback_is_the_idle_after_a_draining_device_to_host_copy(build, nbytes, with_enum):
    #  t (us)  10 20 25 30    100       2000 2010 2030         5030 5040          9000
    #  GPU                    [k1 .....)[DtoH)                      [k2 ..........)
    #  main    L  [cpy) [cudaStreamSynchronize .)[numpy .......)L
    #  steps                  [Batch 0 ...................................)[Batch 1 .)
    # The copy (issued by cudaMemcpyAsync at 20) ends the GPU work; the sync drained it: the
    # thread waited in the sync from 30 to 2010 = 1980. Idle [2010, 5040) in time order:
    # 20 in the sync + 1960 of the numpy = the drain's 1980; the rest of the numpy 1040 = cpu;
    # the launch [5030, 5040) = launch 10, in Batch 1 (its range launched k2). The drain is a
    # read-back: readback for 64 MB, sync for 4 B (under READBACK_MIN_BYTES, .item()), which
    # ``readbacks`` does not count.
    ex = Export()
    if with_enum:
        ex.memcpy_kind_enum()
    read_back(ex, nbytes, k1_end=2000, sync_end=2030, numpy_end=5030)
    a = the_account(build, ex)
    drain = "readback" if nbytes == MB64 else "sync"
    step0 = us(compute=1900, memcpy__DtoH__Pageable=10, cpu=1040, **{drain: 1980})
    assert per_step(a) == [step0, us(launch=10, compute=3960)]
    assert totals(a) == us(
        compute=5860, memcpy__DtoH__Pageable=10, cpu=1040, launch=10, **{drain: 1980}
    )
    counted = (1, nbytes, nbytes) if nbytes == MB64 else (0, 0, 0)
    assert (a.readbacks.count, a.readbacks.median_bytes, a.readbacks.total_bytes) == counted
    assert all(d.startswith("read back") for d in details(a, drain))
    assert sum(details(a, drain).values()) == 1980 * US
    assert details(a, "cpu") == {"numpy": 1040 * US}


@pytest.mark.parametrize("nbytes", [4, MB64])
def test_the_whole_idle_after_a_read_back_is_its_own_when_the_thread_waited_longer(build, nbytes):
    #  t (us)  10 20 25 30    100       4000 4010 4030   5030 5040          9000
    #  GPU                    [k1 .....)[DtoH)                [k2 ..........)
    #  main    L  [cpy) [cudaStreamSynchronize .)[numpy .)L
    #  steps                  [Batch 0 .............................)[Batch 1 .)
    # The test above with k1 up to 4000 and 1000 of numpy: the thread waited in the sync from
    # 30 to 4010 = 3980, more than the idle after the drain [4010, 5040): 20 in the sync +
    # 1000 numpy + 10 launch = 1030, all the read-back's (readback for 64 MB, sync for 4 B);
    # the launch's 10 in Batch 1.
    ex = Export()
    read_back(ex, nbytes, k1_end=4000, sync_end=4030, numpy_end=5030)
    a = the_account(build, ex)
    drain = "readback" if nbytes == MB64 else "sync"
    step0 = us(compute=3900, memcpy__DtoH__Pageable=10, **{drain: 1020})
    assert per_step(a) == [step0, us(compute=3960, **{drain: 10})]
    assert totals(a) == us(compute=7860, memcpy__DtoH__Pageable=10, **{drain: 1030})
    counted = (1, nbytes, nbytes) if nbytes == MB64 else (0, 0, 0)
    assert (a.readbacks.count, a.readbacks.median_bytes, a.readbacks.total_bytes) == counted
    assert all(d.startswith("read back") for d in details(a, drain))


def blocking_read_back(ex: Export, nbytes: int, k1_end: int, call_end: int) -> None:
    """k1 [100, k1_end) launched at 10; a cudaMemcpy [20, call_end) whose DtoH copy of
    ``nbytes`` (pinned) runs [k1_end, k1_end + 10); own code ``numpy`` [call_end, 5030);
    k2 [5040, 9000) launched at 5030; Batch 0 [100, 5030), Batch 1 [5030, 9000)."""
    launch(ex, 10, 100, k1_end)
    ex.memcpy(
        k1_end * US,
        (k1_end + 10) * US,
        nbytes,
        copy_kind=2,
        src=2,
        dst=1,
        api="cudaMemcpy_v3020",
        api_span=(20 * US, call_end * US),
    )
    ex.nvtx(call_end * US, 5030 * US, "numpy")
    launch(ex, 5030, 5040, 9000)
    steps(ex, 100, 5030, 9000)


def test_readback_through_a_blocking_copy_call(build):
    #  t (us)  10 20       100       2000 2010 2030         5030 5040          9000
    #  GPU                 [k1 .....)[DtoH)                      [k2 ..........)
    #  main    L  [cudaMemcpy (waits, copies) ..)[numpy .......)L
    # The same as above with no sync: the synchronous copy call itself drained the GPU. The
    # thread waited in the cudaMemcpy from 20 to 2010 = 1990; idle [2010, 5040): 20 in the
    # call + 1970 of the numpy = the drain's 1990, a read-back of 4 B: sync (not counted in
    # ``readbacks``); the rest of the numpy 1030 = cpu; launch 10.
    ex = Export()
    blocking_read_back(ex, 4, k1_end=2000, call_end=2030)
    a = the_account(build, ex)
    assert totals(a) == us(compute=5860, memcpy__DtoH__Pinned=10, sync=1990, cpu=1030, launch=10)
    assert all(d.startswith("read back") for d in details(a, "sync"))
    assert (a.readbacks.count, a.readbacks.median_bytes) == (0, 0)


@pytest.mark.parametrize("nbytes", [4, MB64])
def test_readback_through_a_blocking_copy_call_that_waited_longer_than_the_work_after(
    build, nbytes
):
    #  t (us)  10 20       100       4000 4010 4030   5030 5040          9000
    #  GPU                 [k1 .....)[DtoH)                [k2 ..........)
    #  main    L  [cudaMemcpy (waits, copies) ..)[numpy .)L
    # The thread waited in the cudaMemcpy from 20 to 4010 = 3990, more than the idle after
    # the drain [4010, 5040): 20 in the call + 1000 numpy + 10 launch = 1030, all the
    # read-back's: readback for 64 MB (counted), sync for 4 B (not counted); the launch's 10
    # in Batch 1.
    ex = Export()
    blocking_read_back(ex, nbytes, k1_end=4000, call_end=4030)
    a = the_account(build, ex)
    drain = "readback" if nbytes == MB64 else "sync"
    assert per_step(a) == [
        us(compute=3900, memcpy__DtoH__Pinned=10, **{drain: 1020}),
        us(compute=3960, **{drain: 10}),
    ]
    assert totals(a) == us(compute=7860, memcpy__DtoH__Pinned=10, **{drain: 1030})
    counted = (1, nbytes) if nbytes == MB64 else (0, 0)
    assert (a.readbacks.count, a.readbacks.median_bytes) == counted


def test_a_readback_in_no_step_is_not_counted(build):
    #  t (us)  10 20 25 30    100       2000 2010 2030         5030 5040          9000
    #  GPU                    [k1 .....)[DtoH)                      [k2 ..........)
    #  main    L  [cpy) [cudaStreamSynchronize .)[numpy .......)L
    #  steps                  [Batch 0 ..........)                   [Batch 1 .....)
    # The readback of the test above, but its idle [2010, 5040) lies between the steps:
    # the readback bucket has none of it, so ``readbacks`` ("as readback counts them") must
    # not count the copy either -- as it does not when the same idle lies after the last step.
    ex = Export()
    launch(ex, 10, 100, 2000)
    ex.memcpy(
        2000 * US,
        2010 * US,
        4,
        copy_kind=2,
        src=2,
        dst=0,
        api="cudaMemcpyAsync_v3020",
        api_span=(20 * US, 25 * US),
    )
    ex.api(30 * US, 2030 * US, "cudaStreamSynchronize_v3020")
    launch(ex, 5030, 5040, 9000)
    ex.nvtx(100 * US, 2010 * US, "Batch 0")
    ex.nvtx(5040 * US, 9000 * US, "Batch 1")
    a = the_account(build, ex)
    assert a.ns("readback") == 0
    assert (a.readbacks.count, a.readbacks.total_bytes) == (0, 0)


@pytest.mark.parametrize("rows_in_time_order", [True, False], ids=["rows in order", "reversed"])
@pytest.mark.parametrize("calls_per_sweep", [1 << 20, 1], ids=["one run", "a run per interval"])
def test_a_drain_chain_over_several_idle_intervals_is_charged_up_to_the_wait(
    build, monkeypatch, calls_per_sweep, rows_in_time_order
):
    #  t (us)  10 30    100      2000 2010   2500 2510 2600  3500 3510 3600  4500 4510   9000
    #  GPU              [k1 ....)          [k2 )          [k3 )          [k4 .......)
    #  main    L  [cudaStreamSynchronize)   L               L               L
    #  steps            [Batch 0 ...........................................)[Batch 1)
    # The thread waited in the sync from 30 to 2000 = 1970 and never gets ahead again, so the
    # three idle intervals [2000, 2510) [2600, 3510) [3600, 4510) are one episode. In time
    # order: 10 in the sync, 490 own code, 10 launch (510); 900 own, 10 launch (1420); then
    # 550 of the own code reach 1970, all sync; the other 350 stay cpu, the last launch 10
    # (in Batch 1, which launches k4).
    # Made a run of intervals at a time, the chain's charge carries from run to run, and so
    # do the calls and ranges still open.
    # The export's rows in time order or reversed (tables out of start order are sorted).
    monkeypatch.setattr(rows_module, "CALLS_PER_SWEEP", calls_per_sweep)
    monkeypatch.setattr(account_module, "INTERVALS_PER_RUN", calls_per_sweep)
    ex = Export()
    rows = [
        lambda: launch(ex, 10, 100, 2000),
        lambda: ex.api(30 * US, 2010 * US, "cudaStreamSynchronize_v3020"),
        lambda: launch(ex, 2500, 2510, 2600),
        lambda: launch(ex, 3500, 3510, 3600),
        lambda: launch(ex, 4500, 4510, 9000),
        lambda: ex.nvtx(100 * US, 4500 * US, "Batch 0"),
        lambda: ex.nvtx(4500 * US, 9000 * US, "Batch 1"),
    ]
    for add in rows if rows_in_time_order else rows[::-1]:
        add()
    a = the_account(build, ex)
    assert per_step(a) == [us(compute=2080, sync=1970, cpu=350), us(launch=10, compute=4490)]
    assert totals(a) == us(compute=6570, sync=1970, cpu=350, launch=10)
    # The step range open over every run still names the own code in the last one.
    assert details(a, "cpu") == {"Batch #": 350 * US}


def test_allocator_charges_the_free_the_malloc_and_the_work_after(build):
    #  t (us)  10 30     100       2000 2020    2520           5020 5030        9000
    #  GPU               [k1 .....)                                 [k2 .......)
    #  main    L  [cudaFree ..........)[cudaMalloc)[own code ....)L
    #  steps             [Batch 0 .........................................)[Batch 1 .)
    # The thread waited in the cudaFree from 30 to 2000 = 1970. Idle [2000, 5030) in time
    # order: in cudaFree 20 + in cudaMalloc 500 + 1450 of the own code after them = the
    # drain's 1970 (allocator); the rest of the own code 2500 - 1450 = 1050 = cpu; the launch
    # after it = launch 10 (Batch 1's).
    ex = Export()
    launch(ex, 10, 100, 2000)
    ex.api(30 * US, 2020 * US, "cudaFree_v3020")
    ex.api(2020 * US, 2520 * US, "cudaMalloc_v3020")
    launch(ex, 5020, 5030, 9000)
    steps(ex, 100, 5020, 9000)
    a = the_account(build, ex)
    step0 = us(compute=1900, allocator=1970, cpu=1050)
    assert per_step(a) == [step0, us(launch=10, compute=3970)]
    assert totals(a) == us(compute=5870, allocator=1970, cpu=1050, launch=10)
    assert details(a, "cpu") == {"Batch #": 1050 * US}  # the own code's innermost range


def test_allocator_charges_the_whole_idle_after_a_free_that_waited_longer(build):
    #  t (us)  10 30     100       4000 4020    4520  5020 5030        9000
    #  GPU               [k1 .....)                        [k2 .......)
    #  main    L  [cudaFree ..........)[cudaMalloc)[own)L
    #  steps             [Batch 0 ................................)[Batch 1 .)
    # The test above with k1 up to 4000: the thread waited in the cudaFree from 30 to 4000
    # = 3970, more than the idle after the drain [4000, 5030): in cudaFree 20 + in cudaMalloc
    # 500 + own code 500 + the launch 10 (in Batch 1) = 1030, all allocator.
    ex = Export()
    launch(ex, 10, 100, 4000)
    ex.api(30 * US, 4020 * US, "cudaFree_v3020")
    ex.api(4020 * US, 4520 * US, "cudaMalloc_v3020")
    launch(ex, 5020, 5030, 9000)
    steps(ex, 100, 5020, 9000)
    a = the_account(build, ex)
    assert per_step(a) == [us(compute=3900, allocator=1020), us(allocator=10, compute=3970)]
    assert totals(a) == us(compute=7870, allocator=1030)


def test_loading_loader_wait_os_wait_and_os_call(build):
    #  t (ms)  0         3  4        10        13 14       20        23        30        33   40
    #  GPU               [H)[k .....)           [H)[k .....)          [k ......)          [k ..)
    #  main    [get batch)C  L      [poll ....)C  L       [poll ....)L        [munmap ..)L
    #  steps   [Batch 0 ...........)[Batch 1 ...........)[Batch 2 ..........)[Batch 3 .......)
    # C: cudaMemcpyAsync [t, t + 10 us) issuing a pinned HtoD copy [t, t + 1 ms) (so no idle
    # inside the call); L at t + 20 us for the kernel after a copy, else at t, its kernel
    # starting 9 us later (launch 9 us). Idle: [0, 3) own code before an HtoD copy: loading;
    # [10, 13) poll before a copy: loader_wait; [20, 23) poll before a launch: os_wait;
    # [30, 33) munmap: os_call.
    ex = Export()
    ms = 1000  # us
    ex.nvtx(0, 3 * ms * US, "get batch")
    for t0, wait in ((0, None), (10 * ms, "poll")):
        if wait:
            ex.osrt(t0 * US, (t0 + 3 * ms) * US, wait)
        c = t0 + 3 * ms
        ex.memcpy(
            c * US,
            (c + ms) * US,
            MB64,
            src=1,
            api="cudaMemcpyAsync_v3020",
            api_span=(c * US, (c + 10) * US),
        )
        launch(ex, c + 20, c + ms, t0 + 10 * ms)
    for t0, call in ((20 * ms, "poll"), (30 * ms, "munmap")):
        ex.osrt(t0 * US, (t0 + 3 * ms) * US, call)
        launch(ex, t0 + 3 * ms, t0 + 3 * ms + 9, t0 + 10 * ms)
    steps(ex, 0, 10 * ms, 20 * ms, 30 * ms, 40 * ms)
    a = the_account(build, ex)
    copy = "memcpy HtoD Pinned"
    assert per_step(a) == [
        {"loading": 3000 * US, copy: 1000 * US, "compute": 6000 * US},
        {"loader_wait": 3000 * US, copy: 1000 * US, "compute": 6000 * US},
        us(os_wait=3000, launch=9, compute=6991),
        us(os_call=3000, launch=9, compute=6991),
    ]
    assert totals(a) == {
        "compute": 25982 * US,
        copy: 2000 * US,
        "loading": 3000 * US,
        "loader_wait": 3000 * US,
        "os_wait": 3000 * US,
        "os_call": 3000 * US,
        "launch": 18 * US,
    }
    assert details(a, "loading") == {"get batch": 3000 * US}
    assert details(a, "loader_wait") == {"poll": 3000 * US}
    assert details(a, "os_wait") == {"poll": 3000 * US}
    assert details(a, "os_call") == {"munmap": 3000 * US}


def test_item_at_each_step_end_of_the_ladder_baseline_leaves_the_loading_loading(build):
    #  t (ms, from S = the step's start)
    #           0            300        340   360   380   400 +10us +20us
    #  GPU                   [HtoD .....)[k0 )[k1 )[k2 )[DtoH)
    #  main     [get batch ..)[cudaMemcpyAsync)L L L c [cudaStreamSynchronize ....)
    #  steps    [Batch i .....................................................)[Batch i+1
    # The ladder's baseline (300 ms of own code in ``get batch``, a pageable 64 MB HtoD copy
    # blocking its call for 40 ms, three 20 ms kernels launched 2 us apart) with ``.item()``
    # at the step's end: c = cudaMemcpyAsync [S+340.006, S+340.008) ms of a 4-byte DtoH
    # copy [S+400, S+400.010) ms, then cudaStreamSynchronize [S+340.010, S+400.020) ms issued
    # while 60 ms of kernels are still queued. Each step lasts 400.020 ms, the next starts
    # when the sync returns. The thread waited in the sync from 340.010 to 400.010 = 60 ms;
    # idle after the drain [S+400.010, S'+300) (S' = S + 400.020): 10 us in the sync (the
    # end of step i) = sync; then 300 ms of get batch before the batch's HtoD copy (step
    # i+1), which keeps its cause (loading is in KEPT_AFTER_DRAINS: the thread makes the
    # batch whether or not it waited first, and worker processes remove it either way).
    # Every step: loading 300 ms, sync 10 us.
    ex = Export()
    ms = 1000  # us
    n, step = 6, 400 * ms + 20
    for i in range(n):
        s = 1000 * ms + i * step
        ex.nvtx(s * US, (s + 300 * ms) * US, "get batch")
        c = s + 300 * ms
        ex.memcpy(c * US, (c + 40 * ms) * US, MB64, src=0, api="cudaMemcpyAsync_v3020")
        ex.nvtx(c * US, (c + 40 * ms) * US, "copy batch")
        g = c + 40 * ms
        for k in range(3):
            launch(ex, g + 2 * k, g + 20 * ms * k, g + 20 * ms * (k + 1))
        ex.memcpy(
            (g + 60 * ms) * US,
            (g + 60 * ms + 10) * US,
            4,
            copy_kind=2,
            src=2,
            dst=0,
            api="cudaMemcpyAsync_v3020",
            api_span=((g + 6) * US, (g + 8) * US),
        )
        ex.api((g + 10) * US, (s + step) * US, "cudaStreamSynchronize_v3020")
        ex.nvtx(g * US, (s + step) * US, "Compute")
        ex.nvtx(s * US, (s + step) * US, f"Batch {i}")
    a = the_account(build, ex)
    busy = us(memcpy__HtoD__Pageable=40 * ms, compute=60 * ms, memcpy__DtoH__Pageable=10)
    every = {**busy, **us(loading=300 * ms, sync=10)}
    assert per_step(a) == [every] * n
    # loading 6 x 300 = 1800 ms; sync 6 x 10 us = 60 us
    assert totals(a) == {
        **us(memcpy__HtoD__Pageable=240 * ms, compute=360 * ms, memcpy__DtoH__Pageable=60),
        **us(loading=1800 * ms, sync=60),
    }
    assert a.wall_ns == n * step * US
    assert details(a, "loading") == {"get batch": 1800 * ms * US}
    assert all(d.startswith("read back") for d in details(a, "sync"))
    assert (a.readbacks.count, a.readbacks.total_bytes) == (0, 0)  # 4 B: sync, not readback


def test_launch_bound_gaps_are_launch_and_a_long_host_stretch_is_cpu(build):
    #  t (us)  8i 8i+2 8i+4 8i+8 8i+10 ... 394  396    1396         5396 5406         6000
    #  GPU        [k_i)          [k_i+1)   [k49)                         [k50 .......)
    #  main    L_i              L_i+1                  ..own code..     L
    #  NVTX    [Batch 0 from 2 .............................)[Batch 1 ...............)
    #                                          [optimizer .........)
    #                                                 [zero_grad ..)
    # 50 kernels of 2 us, 8 us apart, each launched 2 us before it starts: 49 gaps of 6 us,
    # all launch (shorter than 100 us) = 294. Then [396, 5396) own code: cpu 5000 (zero_grad
    # 4000, optimizer 1000), and [5396, 5406) in the launch call of Batch 1: launch 10.
    ex = Export()
    for i in range(50):
        launch(ex, 8 * i, 8 * i + 2, 8 * i + 4)
    ex.nvtx(396 * US, 5396 * US, "optimizer")
    ex.nvtx(1396 * US, 5396 * US, "zero_grad")
    launch(ex, 5396, 5406, 6000)
    steps(ex, 2, 5396, 6000)
    a = the_account(build, ex)
    assert per_step(a) == [us(compute=100, launch=294, cpu=5000), us(launch=10, compute=594)]
    assert totals(a) == us(compute=694, launch=304, cpu=5000)
    cpu = a.bucket("cpu").details
    assert [(d.name, d.ns) for d in cpu] == [("zero_grad", 4000 * US), ("optimizer", 1000 * US)]


def test_an_empty_nvtx_range_does_not_rename_the_host_work_around_it(build):
    #  t (us)  0        100       1000      3000      5000 5010           6000
    #  GPU     [k ......)                                  [k ...........)
    #  main    L        [optimizer ....................)L
    #                             [zero_grad ..........)
    #                                       | an empty range "mark" [3000, 3000)
    #  steps   [Batch 0 ...................................)[Batch 1 ....)
    # cpu [100, 5000): optimizer 900, zero_grad 4000 (an empty range holds no time).
    ex = Export()
    launch(ex, 0, 0, 100)
    ex.nvtx(100 * US, 5000 * US, "optimizer")
    ex.nvtx(1000 * US, 5000 * US, "zero_grad")
    ex.nvtx(3000 * US, 3000 * US, "mark")
    launch(ex, 5000, 5010, 6000)
    steps(ex, 0, 5010, 6000)
    a = the_account(build, ex)
    assert totals(a) == us(compute=1090, cpu=4900, launch=10)
    assert details(a, "cpu") == {"zero_grad": 4000 * US, "optimizer": 900 * US}


@pytest.mark.parametrize("gap_ns, cause", [(100_000 - 1, "launch"), (100_000, "cpu")])
def test_launch_gap_threshold(build, gap_ns, cause):
    # k1 [100, 200) us, then a gap of gap_ns before k2; k2's launch call begins 2 us before
    # k2 starts. Shorter than 100 us: all launch; 100 us: the part before the call is cpu.
    ex = Export()
    launch(ex, 90, 100, 200)
    k2 = 200 * US + gap_ns
    ex.kernel(k2, k2 + 100 * US, launch_at=k2 - 2 * US)
    ex.nvtx(100 * US, k2, "Batch 0")
    ex.nvtx(k2, k2 + 100 * US, "Batch 1")
    a = the_account(build, ex)
    expected = {"compute": 200 * US, "launch": 2 * US}
    expected[cause] = expected.get(cause, 0) + gap_ns - 2 * US
    assert totals(a) == expected


@pytest.mark.parametrize(
    "windows, expected",
    [
        # Batch 0 [100, 5000), Batch 1 [5000, 12000): the edge cuts the idle.
        (
            [(100, 5000), (5000, 12000)],
            [us(compute=3900, sync=1000), us(sync=2030, compute=4970)],
        ),
        # Batch 0 [100, 5000), Batch 1 [6000, 12000): [5000, 6000), between the ranges, is
        # in Batch 1's window (from Batch 0's completion).
        (
            [(100, 5000), (6000, 12000)],
            [us(compute=3900, sync=1000), us(sync=2030, compute=4970)],
        ),
    ],
)
def test_an_idle_stretch_split_by_step_edges(build, windows, expected):
    # The sync-drain timeline above, idle [4000, 7030) (sync to 7020, launch after), with
    # other step edges.
    ex = Export()
    launch(ex, 10, 100, 2000)
    launch(ex, 20, 2000, 4000)
    ex.api(30 * US, 4020 * US, "cudaStreamSynchronize_v3020")
    launch(ex, 7020, 7030, 12000)
    for i, (a, b) in enumerate(windows):
        ex.nvtx(a * US, b * US, f"Batch {i}")
    a = the_account(build, ex)
    assert per_step(a) == expected
    assert a.wall_ns == (windows[-1][1] - windows[0][0]) * US


def test_the_issuing_thread_decides_not_the_step_thread(build):
    #  t (us)  10 30       100       2000   2500        2990 3000        5000 5010
    #  GPU                 [k1 .....)                        [k2 ........)
    #  main    L  [cudaStreamSynchronize ...................................)
    #  worker                        [munmap)  own code    L
    #  steps               [Batch 0 ............................)[Batch 1 ..)
    # k2 is launched by the worker: the idle [2000, 3000) is what the worker did:
    # os_call 500, cpu 490 (no NVTX range on it), launch 10; not the main thread's sync.
    ex = Export()
    launch(ex, 10, 100, 2000)
    ex.api(30 * US, 5010 * US, "cudaStreamSynchronize_v3020")
    ex.osrt(2000 * US, 2500 * US, "munmap", tid=WORKER_TID)
    launch(ex, 2990, 3000, 5000, tid=WORKER_TID)
    steps(ex, 100, 3000, 5000)
    a = the_account(build, ex)
    assert totals(a) == us(compute=3900, os_call=500, cpu=490, launch=10)
    assert details(a, "cpu") == {"(no NVTX range)": 490 * US}


def test_work_with_no_issuing_call_is_charged_to_the_step_thread(build):
    #  t (us)  10        100       2000      2600      3000        5000
    #  GPU               [k1 .....)                    [k2 ........)   (k2: no API row)
    #  main    L                   [poll ....)own code
    #  steps             [Batch 0 ......................)[Batch 1 ..)
    ex = Export()
    launch(ex, 10, 100, 2000)
    ex.kernel(3000 * US, 5000 * US)
    ex.osrt(2000 * US, 2600 * US, "poll")
    steps(ex, 100, 3000, 5000)
    a = the_account(build, ex)
    assert totals(a) == us(compute=3900, os_wait=600, cpu=400)


def test_work_issued_before_the_idle_is_queued(build):
    #  t (us)  10 20 30      100       2000      3000        5000 5010
    #  GPU                   [k1 .....)          [k2 .......)
    #  main    L  L  [cudaStreamSynchronize ....................)
    #  steps                 [Batch 0 ..........)[Batch 1 ..)
    # k2 was launched at 20, before the idle [2000, 3000) began: queued 1000, whatever the
    # thread does meanwhile.
    ex = Export()
    launch(ex, 10, 100, 2000)
    launch(ex, 20, 3000, 5000)
    ex.api(30 * US, 5010 * US, "cudaStreamSynchronize_v3020")
    steps(ex, 100, 3000, 5000)
    a = the_account(build, ex)
    assert per_step(a) == [us(compute=1900, queued=1000), us(compute=2000)]
    assert totals(a) == us(compute=3900, queued=1000)


def test_profiler_overhead_in_the_process_wins_over_the_thread_state(build):
    #  t (us)  0   500 700 1000 1500 1800 1900 2000 2500 2700 3000    4000 4010        8000
    #  GPU                                                                 [k ........)
    #  main    own code ...........................[poll .........)own    L
    #  ovh         [other)  [main ..)   [wrk)           [main)
    #  steps   [Batch 0 ....................................................)[Batch 1 ..)
    # Overhead of the process (any of its threads) over own code and over the poll:
    # 500 + 100 + 200 = 800; another process's overhead [500, 700) is not this one's.
    # poll 1000 - 200 = 800 os_wait; own code 4000 - 800 - 800 = 2400 cpu; launch 10 (Batch
    # 1's).
    ex = Export()
    ex.overhead(500 * US, 700 * US, pid=999, tid=999)
    ex.overhead(1000 * US, 1500 * US)
    ex.overhead(1800 * US, 1900 * US, tid=WORKER_TID)
    ex.overhead(2500 * US, 2700 * US, name="CUDA profiling data flush")
    ex.osrt(2000 * US, 3000 * US, "poll")
    launch(ex, 4000, 4010, 8000)
    steps(ex, 0, 4000, 8000)
    a = the_account(build, ex)
    step0 = us(profiler_overhead=800, os_wait=800, cpu=2400)
    assert per_step(a) == [step0, us(launch=10, compute=3990)]
    assert totals(a) == us(profiler_overhead=800, os_wait=800, cpu=2400, launch=10, compute=3990)


def test_profiler_overhead_inside_the_issuing_call_is_overhead(build):
    #  t (us)  0         100 110   140 150 160                    1000             2000
    #  GPU                                 [k ...................................)
    #  main    own code  [cudaLaunchKernel)
    #  ovh                   [main )
    #  steps   [Batch 0 ........................................)[Batch 1 ......)
    # The overhead [110, 140) overlaps the idle while the thread is inside the launch call:
    # profiler_overhead 30, launch 60 - 30 = 30; own code [0, 100): cpu 100.
    ex = Export()
    corr = ex.api(100 * US, 150 * US, "cudaLaunchKernel_v7000")
    ex.kernel(160 * US, 2000 * US, corr=corr)
    ex.overhead(110 * US, 140 * US)
    steps(ex, 0, 1000, 2000)
    a = the_account(build, ex)
    assert totals(a) == us(profiler_overhead=30, launch=30, cpu=100, compute=1840)


def test_cuda_graph_replays_are_compute(build):
    #  t (us)  0  40 50  200         500 510   900  1000                2000
    #  GPU               [graph 1 ...............)  [graph 2 ..........)
    #  main       [GL)              [GL)
    #  ranges  [Batch 0 ............)[Batch 1 )
    #  windows [Batch 0 ...........................)[Batch 1 ..........)
    # GL: cudaGraphLaunch. No kernel rows at all. The CPU runs ahead: each step's window ends
    # with its replay. Idle [0, 200): cpu 40, launch 160 (the call on); [900, 1000): graph 2
    # was launched at 500: queued 100.
    ex = Export()
    ex.graph(200 * US, 900 * US, launch_span=(40 * US, 50 * US))
    ex.graph(1000 * US, 2000 * US, graph_id=2, launch_span=(500 * US, 510 * US))
    steps(ex, 0, 500, 600)
    a = the_account(build, ex)
    assert [(s.start_ns, s.wall_ns) for s in a.steps] == [(0, 900 * US), (900 * US, 1100 * US)]
    assert per_step(a) == [us(cpu=40, launch=160, compute=700), us(queued=100, compute=1000)]
    assert totals(a) == us(cpu=40, launch=160, compute=1700, queued=100)
    assert a.busy_ns == 1700 * US


@pytest.mark.parametrize("second_device", [1, 0])
def test_two_processes_are_two_accounts(build, second_device):
    #  t (us)       0     400  500     1000  1200  1500       2000
    #  pid 100 dev 0 [k ........)        [k ......)
    #  pid 200 dev d       [k ..........)      [k ...............)
    #  each: Batch 0 [0, 990), Batch 1 [990, 2000) on its main thread, each kernel launched
    # 5 us before it starts; pid 200's Batch 0 completes at 1000, with its kernel
    # busy 1000 and 1400; a union of both would be 2000 on one GPU.
    ex = Export()
    for pid, dev, ks in (
        (100, 0, [(0, 500), (1000, 1500)]),
        (200, second_device, [(400, 1000), (1200, 2000)]),
    ):
        for s, e in ks:
            ex.kernel(s * US, e * US, device=dev, pid=pid, launch_at=max(s - 5, 0) * US, tid=pid)
        for i, (a, b) in enumerate(((0, 990), (990, 2000))):
            ex.nvtx(a * US, b * US, f"Batch {i}", pid=pid, tid=pid)
    result = accounts_of(build, ex)
    got = {(a.pid, a.device_id): (a.wall_ns, a.busy_ns, a.ns("compute")) for a in result.accounts}
    assert got == {
        (100, 0): (2000 * US, 1000 * US, 1000 * US),
        (200, second_device): (2000 * US, 1400 * US, 1400 * US),
    }
    steps_busy = {(a.pid, a.device_id): [s.busy_ns for s in a.steps] for a in result.accounts}
    assert steps_busy == {
        (100, 0): [500 * US, 500 * US],
        (200, second_device): [600 * US, 800 * US],
    }


def test_one_process_on_two_gpus_is_two_accounts(build):
    # The same kernels as above, both from pid 4242: dev 0 busy 1000, dev 1 busy 1400.
    ex = Export()
    for dev, ks in ((0, [(0, 500), (1000, 1500)]), (1, [(400, 1000), (1200, 2000)])):
        for s, e in ks:
            ex.kernel(s * US, e * US, device=dev, launch_at=max(s - 5, 0) * US)
    steps(ex, 0, 1000, 2000)
    result = accounts_of(build, ex)
    got = {(a.pid, a.device_id): (a.wall_ns, a.busy_ns, a.ns("compute")) for a in result.accounts}
    assert got == {
        (PID, 0): (2000 * US, 1000 * US, 1000 * US),
        (PID, 1): (2000 * US, 1400 * US, 1400 * US),
    }
    assert result.main.device_id == 1  # the busiest GPU of the step thread's process


def test_nccl_counts_only_its_exposed_part(build):
    #  t (us)  0        400      600      1000              2000
    #  s7      [compute ........)         [compute ........)
    #  s9               [ncclDevKernel_AllReduce ...)
    #  steps   [Batch 0 .................)[Batch 1 ........)
    # communication = [600, 1000) = 400 exposed; [400, 600) = 200 under compute. After the
    # steps, NCCL [2100, 2300) half under compute [2200, 2400): in no step, not counted.
    ex = Export()
    nccl = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
    launch(ex, 0, 0, 600, stream=7)
    launch(ex, 1, 400, 1000, stream=9, name=nccl)
    launch(ex, 1000, 1000, 2000, stream=7)
    launch(ex, 2050, 2100, 2300, stream=9, name=nccl)
    launch(ex, 2060, 2200, 2400, stream=7)
    steps(ex, 0, 1000, 2000)
    a = the_account(build, ex)
    assert totals(a) == us(compute=1600, communication=400)
    assert per_step(a) == [us(compute=600, communication=400), us(compute=1000)]
    assert (a.communication_ns, a.communication_overlapped_ns) == (600 * US, 200 * US)
    assert a.idle_ns == 0


def test_a_generic_nccl_kernel_is_named_by_its_nccl_range(build):
    """NCCL 2.19+ may launch ``ncclDevKernel_Generic``: the ``ncclAllReduce`` range of the NCCL
    domain that issued it names the collective; without a range, the kernel's own name."""
    ex = Export()
    ex.row(
        "NVTX_EVENTS", start=0, end=None, eventType=75, text="NCCL", globalTid=gtid(), domainId=1
    )
    ex.row(
        "NVTX_EVENTS",
        start=0,
        end=10 * US,
        eventType=59,
        text="ncclAllReduce",
        globalTid=gtid(),
        domainId=1,
    )
    launch(ex, 5, 100, 400, stream=9, name="ncclDevKernel_Generic")  # inside the range
    launch(ex, 20, 500, 700, stream=9, name="ncclDevKernel_Generic")  # no range
    launch(ex, 21, 700, 1000, stream=7)
    steps(ex, 0, 1000)
    a = the_account(build, ex)
    assert {(c.name, c.count, c.total_ns) for c in a.collectives} == {
        ("AllReduce", 1, 300 * US),
        ("ncclDevKernel_Generic", 1, 200 * US),
    }


# -- part 3: random timelines against a cell-by-cell model ---------------------------------
# Times in units of 1 us on 0..TIME; every unit cell [t, t + 1) is classified by brute force.

TIME = 240
KINDS = ("compute", "nccl", "htod", "dtoh", "dtod", "memset", "graph")
ISSUER = {
    "compute": "cudaLaunchKernel_v7000",
    "nccl": "cudaLaunchKernel_v7000",
    "graph": "cudaGraphLaunch_v10000",
    "memset": "cudaMemsetAsync_v3020",
}
OTHER_APIS = (
    "cudaStreamSynchronize_v3020",
    "cudaFree_v3020",
    "cudaMalloc_v3020",
    "cudaEventRecord_v3020",
    "cudaMemcpy_v3020",
)
span = st.tuples(st.integers(0, TIME - 1), st.integers(1, 40)).map(
    lambda t: (t[0], min(TIME, t[0] + t[1]))
)
thread = st.sampled_from([MAIN_TID, WORKER_TID])
# copy kind -> (copyKind, srcKind, dstKind) given the host memory kind (0 pageable, 1 pinned)
COPIES = {
    "htod": lambda host: (1, host, 2),
    "dtoh": lambda host: (2, 2, host),
    "dtod": lambda host: (8, 2, 2),
}


@st.composite
def timeline(draw):
    ops = draw(
        st.lists(
            st.tuples(
                st.sampled_from(KINDS),
                span,
                st.sampled_from([7, 9]),
                st.one_of(st.none(), st.tuples(st.integers(0, TIME - 1), thread)),
                st.sampled_from([0, 1]),  # host memory kind of a copy
            ),
            min_size=1,
            max_size=14,
        )
    )
    apis = draw(st.lists(st.tuples(st.sampled_from(OTHER_APIS), span, thread), max_size=5))
    osrt = draw(st.lists(st.tuples(st.sampled_from(["poll", "munmap"]), span, thread), max_size=4))
    ovh = draw(st.lists(st.tuples(span, thread), max_size=2))
    # Steps: 2 to 5 windows, each at least 20 long, with gaps of at most 10 between them.
    n = draw(st.integers(2, 5))
    windows, t = [], draw(st.integers(0, 20))
    for _ in range(n):
        e = t + draw(st.integers(20, 60))
        windows.append((t, e))
        t = e + draw(st.integers(0, 10))
    nested = draw(st.lists(span, max_size=3))
    other = draw(st.lists(st.tuples(span, st.sampled_from([0, 1])), max_size=3))
    return ops, apis, osrt, ovh, windows, nested, other


def build_timeline(tl) -> Export:
    ops, apis, osrt, ovh, windows, nested, other = tl
    ex = Export()
    for kind, (s, e), stream, issued, host in ops:
        a0 = None if issued is None else issued[0]
        tid = MAIN_TID if issued is None else issued[1]
        call = None if a0 is None else (a0 * US, (a0 + 1) * US)
        if kind in ("compute", "nccl"):
            name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL" if kind == "nccl" else "sgemm"
            corr = ex.api(*call, ISSUER[kind], tid=tid) if call else None
            ex.kernel(s * US, e * US, stream=stream, name=name, corr=corr)
        elif kind == "graph":
            ex.graph(s * US, e * US, stream=stream, launch_span=call, tid=tid)
        elif kind == "memset":
            ex.memset(s * US, e * US)
        else:
            copy_kind, src, dst = COPIES[kind](host)
            api = "cudaMemcpyAsync_v3020" if call else None
            ex.memcpy(
                s * US,
                e * US,
                4096,
                copy_kind,
                src,
                dst,
                stream=stream,
                tid=tid,
                api=api,
                api_span=call,
            )
    for name, (s, e), tid in apis:
        ex.api(s * US, e * US, name, tid=tid)
    for name, (s, e), tid in osrt:
        ex.osrt(s * US, e * US, name, tid=tid)
    for (s, e), tid in ovh:
        ex.overhead(s * US, e * US, tid=tid)
    for i, (s, e) in enumerate(windows):
        ex.nvtx(s * US, e * US, f"Batch {i}")
    for s, e in nested:  # ranges inside a step only (a top-level one could be the step)
        for ws, we in windows:
            if ws <= s and e <= we:
                ex.nvtx(s * US, e * US, "inner")
    for (s, e), dev in other:  # another process on this GPU, or this process on GPU 1
        ex.kernel(s * US, e * US, device=dev, pid=PID + 1 if dev == 0 else PID)
    return ex


def cover(intervals) -> list[bool]:
    line = [False] * (TIME + 400)
    for s, e in intervals:
        for t in range(s, e):
            line[t] = True
    return line


def completion(ranges, ops) -> list[tuple[int, int]]:
    """The steps' windows (``windows.py``) worked out from the timeline: the GPU work whose
    launching call started inside a step's range ends it too, and each window runs from the
    last step's completion (the first from its range's start) to its own."""
    done_at = [e for _, e in ranges]
    starts = [s for s, _ in ranges]
    for kind, (_, end), _, issued, _ in ops:
        if issued is None or kind == "memset":  # (a memset is made with no call)
            continue
        i = bisect_right(starts, issued[0]) - 1
        if i >= 0 and issued[0] < ranges[i][1]:
            done_at[i] = max(done_at[i], end)
    out, last = [], None
    for (start, _), done in zip(ranges, done_at):
        lo = start if last is None else last
        last = done if last is None else max(last, done)
        out.append((lo, last))
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(timeline())
# Found by hypothesis in a fresh clone's run (2026-12-06): a kernel at 2-3 ms whose call
# starts at 4 ms, after the idle before it ended, and another process's work at 4-5 ms; the
# piece after the call was [4, 2) and was charged as other_process: 21 ms in a 20 ms step.
@example(
    tl=(
        [
            ("compute", (0, 1), 7, None, 0),
            ("compute", (2, 3), 7, (4, 4242), 0),
            ("compute", (5, 6), 7, (3, 4242), 0),
        ],
        [],
        [],
        [],
        [(0, 20), (20, 40)],
        [],
        [((4, 5), 0)],
    )
)
def test_random_timelines_conserve_time_and_split_busy_by_kind(tl):
    ops, apis, osrt, ovh, windows, _, _ = tl
    layer = {k: cover([se for kind, se, *_ in ops if kind in ks]) for k, ks in (
        ("compute", ("compute", "graph")),
        ("communication", ("nccl",)),
        ("memcpy", ("htod", "dtoh", "dtod")),
        ("memset", ("memset",)),
    )}  # fmt: skip
    overhead = cover([se for se, _ in ovh])
    os_calls = cover([se for _, se, _ in osrt])
    with tempfile.TemporaryDirectory() as tmp:
        path = build_timeline(tl).save(Path(tmp) / "t.sqlite")
        with Trace(path) as trace:
            result = analyze_account(Events.load(trace))
    (a,) = [a for a in result.accounts if (a.pid, a.device_id) == (PID, 0)]
    spans = [se for _, se, *_ in ops]  # all of this process's GPU work, on GPU 0
    ranges, windows = windows, completion(windows, ops)
    if not any(s0 < windows[-1][1] and windows[0][0] < e0 for s0, e0 in spans):
        # No GPU work of this process in any step: the steps are not its steps, and the
        # account falls back to ten equal windows over its GPU work (edges in ns).
        assert "equal windows" in a.windows
        lo, hi = min(s0 for s0, _ in spans) * US, max(e0 for _, e0 in spans) * US
        edges = [lo + i * (hi - lo) // 10 for i in range(11)]
        assert [(st.start_ns, st.wall_ns) for st in a.steps] == [
            (edges[i], edges[i + 1] - edges[i]) for i in range(10)
        ]
        assert all(sum(dict(st.buckets).values()) == st.wall_ns for st in a.steps)
        assert sum(b.total_ns for b in a.buckets) == a.wall_ns == hi - lo
        return
    assert [(s.start_ns, s.wall_ns) for s in a.steps] == [
        (s * US, (e - s) * US) for s, e in windows
    ]
    assert len(windows) == len(ranges)
    for step, (lo, hi) in zip(a.steps, windows):
        got = dict(step.buckets)
        assert sum(got.values()) == (hi - lo) * US
        want = {"compute": 0, "communication": 0, "memcpy": 0, "memset": 0}
        idle_cells = []
        for t in range(lo, hi):
            kind = next((k for k in want if layer[k][t]), None)
            if kind is None:
                idle_cells.append(t)
            else:
                want[kind] += US
        memcpy = sum(ns for name, ns in got.items() if name.startswith("memcpy"))
        split = {k: got.get(k, 0) for k in ("compute", "communication", "memset")}
        assert {**split, "memcpy": memcpy} == want
        assert step.idle_ns == len(idle_cells) * US
        # Idle causes can only come from what was there.
        assert got.get("profiler_overhead", 0) <= sum(overhead[t] for t in idle_cells) * US
        os_causes = sum(got.get(k, 0) for k in ("os_call", "os_wait", "loader_wait"))
        assert os_causes <= sum(os_calls[t] for t in idle_cells) * US
    assert sum(b.total_ns for b in a.buckets) == a.wall_ns


def test_one_rank_nccl_copies_are_communication_named_by_their_range():
    """With one rank NCCL launches no kernel: its ncclAllGather ranges issue device-to-device
    copies (sample_traces/h200_nccl_one_rank.sqlite, NCCL 2.28.9 on the H200)."""
    path = SAMPLE_TRACES / "h200_nccl_one_rank.sqlite"
    issued = nccl_issued(path)
    copies = [
        (s, e)
        for pid, corr, s, e in query(
            path,
            f"SELECT {GLOBAL_PID}, correlationId, start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY",
        )
        if (pid, corr) in issued
    ]
    names = query(
        path,
        "SELECT DISTINCT coalesce(n.text, s.value) FROM NVTX_EVENTS n "
        "LEFT JOIN StringIds s ON s.id = n.textId JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
        "ON r.globalTid = n.globalTid AND n.start <= r.start AND r.start < n.end "
        "JOIN CUPTI_ACTIVITY_KIND_MEMCPY c ON c.correlationId = r.correlationId "
        "WHERE n.domainId = 1 AND n.eventType = 59",
    )
    assert len(copies) == 8 and names == [("ncclAllGather",)]
    assert not query(
        path,
        "SELECT 1 FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName "
        "WHERE s.value LIKE 'nccl%'",
    )
    a = nsysprobe_analyze(path).account.main
    windows = completion_windows(path, step_windows(path), a.pid)
    in_steps = [(s, e) for s, e in copies if any(lo <= s < hi for _, lo, hi in windows)]
    [coll] = a.collectives
    assert (coll.name, coll.count) == ("AllGather", len(in_steps))
    assert coll.total_ns == sum(e - s for s, e in in_steps)
    assert a.communication_ns == sum(inside(union(copies), lo, hi) for _, lo, hi in windows)


@pytest.mark.parametrize(
    "name, comm, collective",
    [
        ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", True, "AllReduce"),
        ("ncclKernel_AllGather_RING_LL_Sum_int8_t", True, "AllGather"),
        ("ncclDevKernel_SendRecv", True, "SendRecv"),
        ("rcclKernel_ReduceScatter", True, "ReduceScatter"),
        ("ncclAllReduceRingLLKernel_sum_f32", True, "AllReduce"),  # NCCL 2.7
        ("ncclKernel_ReduceScatter_RING_LL_Sum_half", True, "ReduceScatter"),
        ("ncclDevKernel_Generic", True, ""),  # named by the NCCL range that issued it
        ("nccl_helper_gemm", False, ""),
        ("sm90_xmma_gemm_nccl_kernel", False, ""),
        ("ncclAllReduce", False, "AllReduce"),  # a range name, not a kernel
        ("ncclGroupEnd", False, ""),
    ],
)
def test_communication_kernel_names(name, comm, collective):
    assert is_communication_kernel(name) is comm
    assert collective_of(name) == collective


@pytest.mark.parametrize(
    "low, high",
    [(0, 6), (0, 1 << 21), (-1, 4), (0, 1 << 40)],  # packed into one integer; rows sorted
)
def test_distinct_copy_kinds_are_the_distinct_rows_in_order(low, high):
    import numpy as np

    rng = np.random.default_rng(7)
    cols = [rng.integers(low, high, 5000) for _ in range(3)]
    rows, index = account_module.distinct_rows(*cols)
    expected = sorted(set(zip(*(c.tolist() for c in cols))))
    assert rows == expected
    position = {r: i for i, r in enumerate(expected)}
    assert index.tolist() == [position[r] for r in zip(*(c.tolist() for c in cols))]


def test_a_copy_before_the_first_step_keeps_its_own_slot_for_the_first_htod(tmp_path):
    #  t (ms)  -6 -5 -4     0    4  5  6  7  8  9  10 ...  (4 steps of 10 ms, each alike)
    #  GPU         [H)           [H)   [H)[k)               H: 1 MiB pinned copies
    #  main                 [poll)C     C  L                 steps [10 i, 10 i + 9)
    # With a DataLoader worker in the report, only each step's first host-to-device copy is
    # its batch: the poll before it is loader_wait. A copy launched before the loop, outside
    # every step range, is nobody's batch and takes no step's slot (it took the last one's).
    def accounts(pre_copy: bool):
        ex = Export()
        ex.thread_name("pt_data_worker", tid=4400, pid=6000)
        if pre_copy:
            ex.memcpy(
                -5 * MS, -4 * MS, 1 << 20, api="cudaMemcpyAsync_v3020", api_span=(-6 * MS, -5 * MS)
            )
        for i in range(4):
            t = i * 10 * MS
            ex.nvtx(t, t + 9 * MS, f"step {i}")
            ex.osrt(t, t + 4 * MS, "poll")
            for a in (4, 6):
                span = (t + a * MS, t + (a + 1) * MS)
                ex.memcpy(*span, 1 << 20, api="cudaMemcpyAsync_v3020", api_span=span)
            ex.kernel(t + 7 * MS, t + 8 * MS, launch_at=t + 7 * MS)
        with Trace(ex.save(tmp_path / f"pre-{pre_copy}.sqlite")) as trace:
            (a,) = analyze_account(Events.load(trace)).accounts
        return per_step(a)

    plain, with_copy = accounts(False), accounts(True)
    assert with_copy == plain
    assert all(step.get("loader_wait") == 4 * MS for step in plain)
