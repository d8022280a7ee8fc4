"""Each analysis on a small export whose answers are worked out by hand below.

Timeline of the scenario (ms), device 0, one process, main thread M and worker thread W:

    GPU   kernels [0,10) s7, [5,12) s9 | HtoD pageable [20,25), memset [25,26)
          kernel [40,50), pinned HtoD [42,44) s9
    busy union [0,12) [20,26) [40,50) = 28 ms of a 50 ms span; gaps [12,20) 8 ms, [26,40) 14 ms
    M     NVTX Batch 0 [0,20) > get batch [10,20)
               Batch 1 [20,41) > copy batch [20,25), Compute [26,41)
          poll [12,18); cudaMemcpy [20,25); munmap [27,35); cudaLaunchKernel at 39
    W     munmap [0,3)

The steps (Batch 0 [0,20), Batch 1 [20,50) to its kernel's end) and what M did in each gap,
by the step account's rules: [12,18) poll before the copy it then issued: loader_wait;
[18,20) its own code in 'get batch' before that copy: loading; [26,27) and [35,39) its own
code in 'Compute': cpu; [27,35) munmap: os_call; [39,40) inside the launch: launch.
"""

from __future__ import annotations

import threading
from functools import cached_property

import pytest
from independent import query

from nsysprobe.analyses import rows as rows_module
from nsysprobe.analyses.account import analyze_account
from nsysprobe.analyses.events import Events
from nsysprobe.analyses.gaps import analyze_gaps, gap_intervals
from nsysprobe.analyses.health import analyze_health
from nsysprobe.analyses.osrt import analyze_osrt
from nsysprobe.analyses.overlap import analyze_overlap
from nsysprobe.analyses.steps import analyze_steps
from nsysprobe.analyses.transfers import analyze_transfers
from nsysprobe.errors import InputError
from nsysprobe.trace import arrow, nvtx
from nsysprobe.trace.reader import Trace

from conftest import SAMPLE_TRACES
from exports import MAIN_TID, WORKER_TID, Export

MS = 1_000_000


def scenario() -> Export:
    ex = Export()
    ex.thread_name("main")
    ex.kernel(0, 10 * MS, stream=7)
    ex.kernel(5 * MS, 12 * MS, stream=9)
    ex.memcpy(20 * MS, 25 * MS, 10_000_000, src=0, api="cudaMemcpy_v3020")
    ex.memset(25 * MS, 26 * MS)
    ex.kernel(40 * MS, 50 * MS, launch_at=39 * MS)
    ex.memcpy(
        42 * MS,
        44 * MS,
        2_000_000,
        src=1,
        stream=9,
        api="cudaMemcpyAsync_v3020",
        api_span=(41 * MS, 41 * MS + 5_000),
    )
    ex.nvtx(0, 20 * MS, "Batch 0")
    ex.nvtx(10 * MS, 20 * MS, "get batch")
    ex.nvtx(20 * MS, 41 * MS, "Batch 1")
    ex.nvtx(20 * MS, 25 * MS, "copy batch")
    ex.nvtx(26 * MS, 41 * MS, "Compute")
    ex.osrt(12 * MS, 18 * MS, "poll")
    ex.osrt(27 * MS, 35 * MS, "munmap")
    ex.osrt(0, 3 * MS, "munmap", tid=WORKER_TID)
    return ex


@pytest.fixture
def events(build):
    trace = Trace(build(scenario()))
    yield Events.load(trace)
    trace.close()


@pytest.fixture(params=[1 << 20, 2], ids=["one block", "blocks of 2 rows"])
def rows_per_block(request, monkeypatch):
    """Tables are read a block of rows at a time; the answers must not depend on the cut."""
    monkeypatch.setattr(rows_module, "ROWS_PER_BLOCK", request.param)


def gaps_of(events, min_gap_ns: int):
    return analyze_gaps(events, analyze_account(events, min_gap_ns=min_gap_ns), min_gap_ns)


def test_busy_is_a_union_and_gaps_are_attributed(events, rows_per_block):
    g = gaps_of(events, MS)
    (dev,) = g.devices
    assert (dev.busy_ns, dev.kernel_busy_ns, dev.memcpy_busy_ns) == (28 * MS, 22 * MS, 7 * MS)
    assert (dev.span_ns, dev.idle_ns, dev.gap_count, dev.gap_ns) == (50 * MS, 22 * MS, 2, 22 * MS)
    assert dev.busy_ratio == pytest.approx(28 / 50)
    assert (dev.kernel_count, dev.memcpy_count, dev.memset_count) == (3, 2, 1)
    causes = {(c.cause, c.name): c.idle_ns for c in g.by_name}
    assert causes == {
        ("os_call", "munmap"): 8 * MS,
        ("loader_wait", "poll"): 6 * MS,
        ("cpu", "Compute"): 5 * MS,
        ("loading", "get batch"): 2 * MS,
        ("launch", "cudaLaunchKernel"): 1 * MS,
    }
    assert [(c.cause, c.idle_ns) for c in g.by_cause] == [
        ("os_call", 8 * MS),
        ("loader_wait", 6 * MS),
        ("cpu", 5 * MS),
        ("loading", 2 * MS),
        ("launch", 1 * MS),
    ]
    # The same causes as the account's buckets: every idle stretch here is a gap.
    assert g.idle_ns == g.gap_ns == 22 * MS
    longest = g.longest[0]
    assert (longest.start_ns, longest.end_ns, longest.cause, longest.name) == (
        26 * MS,
        40 * MS,
        "os_call",
        "munmap",
    )
    assert (g.longest[1].cause, g.longest[1].name) == ("loader_wait", "poll")
    assert [(o.name, o.overlap_ns) for o in longest.osrt] == [("munmap", 8 * MS)]
    assert {o.name for o in longest.nvtx} == {"Batch 1", "Compute"}
    assert [(o.name, o.overlap_ns) for o in longest.cuda_api] == [("cudaLaunchKernel", 1_000)]


def test_threshold_is_strict_and_changes_no_cause(events):
    assert gaps_of(events, 8 * MS).gap_count == 1  # the 8 ms gap is not > 8 ms
    assert gaps_of(events, 8 * MS - 1).gap_count == 2
    assert gaps_of(events, 14 * MS).gap_count == 0
    wide = analyze_account(events, min_gap_ns=14 * MS).main
    assert wide.buckets == analyze_account(events, min_gap_ns=0).main.buckets


def test_transfers_by_kind_and_issuing_api(events):
    t = analyze_transfers(events)
    rows = {(r.copy_kind, r.src_kind, r.dst_kind): r for r in t.rows}
    pageable = rows[("HtoD", "Pageable", "Device")]
    assert (pageable.count, pageable.bytes, pageable.duration_ns) == (1, 10_000_000, 5 * MS)
    assert pageable.gbps == pytest.approx(2.0)
    assert t.pinned_htod_gbps == pytest.approx(1.0)
    assert (t.memcpy_busy_ns, t.kernel_busy_ns) == (7 * MS, 22 * MS)
    assert t.memcpy_kernel_ratio == pytest.approx(7 / 22)
    apis = {(a.api, a.src_kind): a.synchronous for a in t.by_api}
    assert apis == {("cudaMemcpy", "Pageable"): True, ("cudaMemcpyAsync", "Pinned"): False}
    assert (t.sync_copy_count, t.sync_copy_ns, t.unmatched_count) == (1, 5 * MS, 0)


def test_copy_compute_overlap_is_union_based(events):
    o = analyze_overlap(events)
    assert (o.htod_ns, o.overlapped_ns, o.exposed_ns) == (7 * MS, 2 * MS, 5 * MS)
    assert o.overlap_ratio == pytest.approx(2 / 7)


def test_osrt_per_function_and_thread_with_time_in_gaps(events, rows_per_block):
    o = analyze_osrt(events, gap_intervals(analyze_account(events, min_gap_ns=MS)))
    rows = {(r.function, r.thread.split(" (")[0]): r for r in o.rows}
    munmap_main = rows[("munmap", "main")]
    assert (munmap_main.count, munmap_main.total_ns, munmap_main.in_gap_ns) == (1, 8 * MS, 8 * MS)
    assert rows[("poll", "main")].in_gap_ns == 6 * MS
    worker = [r for r in o.rows if r.thread == f"thread 4242/{WORKER_TID}"]
    assert [(r.function, r.in_gap_ns) for r in worker] == [("munmap", 0)]
    fns = {f.function: f for f in o.functions}
    assert (fns["munmap"].count, fns["munmap"].total_ns, fns["munmap"].max_ns) == (
        2,
        11 * MS,
        8 * MS,
    )
    assert o.rows[0].function == "munmap"  # most time in gaps first


def test_osrt_figures_add_up_over_many_calls(build, rows_per_block):
    # 60 calls of two functions on two threads, of every length, some across the gap's edges;
    # each (function, thread) spans many blocks of 2 rows.
    ex = Export()
    ex.kernel(0, 10 * MS, launch_at=0)
    ex.kernel(30 * MS, 40 * MS, launch_at=29 * MS)
    calls = []
    for i in range(60):
        start, end = i * 650_000, i * 650_000 + (i % 7 + 1) * 400_000
        name, tid = ("poll", MAIN_TID) if i % 3 else ("munmap", WORKER_TID)
        ex.osrt(start, end, name, tid=tid)
        calls.append((name, tid, start, end))
    with Trace(build(ex)) as trace:
        events = Events.load(trace)
        o = analyze_osrt(events, gap_intervals(analyze_account(events, min_gap_ns=MS)))
    got = {(r.function, r.thread): (r.count, r.total_ns, r.max_ns, r.in_gap_ns) for r in o.rows}
    want = {}
    for name, tid, start, end in calls:
        in_gap = max(0, min(end, 30 * MS) - max(start, 10 * MS))
        count, total, longest, gap = want.get((name, tid), (0, 0, 0, 0))
        dur = end - start
        want[(name, tid)] = (count + 1, total + dur, max(longest, dur), gap + in_gap)
    assert got == {(n, f"thread 4242/{tid}"): v for (n, tid), v in want.items()}
    by_fn = {f.function: (f.count, f.total_ns, f.max_ns, f.in_gap_ns) for f in o.functions}
    assert by_fn == {n: v for (n, _), v in want.items()}


def test_steps_breakdown(events):
    # Batch 0 [0, 20) launched nothing (its kernels have no call): done at 20. Batch 1's range
    # [20, 41) issued the cudaMemcpy at 20 and the kernel [40, 50) at 39: its window runs from
    # 20 to the kernel's end, 50; busy there: the copy 5, the memset 1, the kernel 10 (the
    # pinned copy [42, 44) under it, issued at 41, after the range ended).
    s = analyze_steps(events)
    assert (s.range_pattern, s.count) == ("Batch #", 2)
    assert [(r.start_ns, r.wall_ns, r.gpu_busy_ns, r.gpu_idle_ns) for r in s.rows] == [
        (0, 20 * MS, 12 * MS, 8 * MS),
        (20 * MS, 30 * MS, 16 * MS, 14 * MS),
    ]
    assert [
        (r.cpu_start_ns, r.cpu_ns, r.gpu_start_ns, r.gpu_end_ns, r.gpu_ops) for r in s.rows
    ] == [
        (0, 20 * MS, None, None, 0),
        (20 * MS, 21 * MS, 20 * MS, 50 * MS, 2),
    ]
    assert [dict((c.name, c.cpu_ns) for c in r.children) for r in s.rows] == [
        {"get batch": 10 * MS},
        {"copy batch": 5 * MS, "Compute": 15 * MS},
    ]
    assert (s.span_ns, s.median_step_ns, s.median_cpu_ns) == (50 * MS, 25 * MS, 20_500_000)
    assert s.steps_per_s == pytest.approx(2 / 0.050)
    assert s.gpu_busy_ratio == pytest.approx(28 / 50)
    assert s.gpu_lag_ns == 9 * MS  # Batch 1's work ended 9 ms after its range
    assert (s.cpu_ahead_steps, s.paced_by) == (0, "cpu")  # idle 22 of 50 ms
    assert s.thread == f"main (4242/{MAIN_TID})"


def test_step_range_override_and_unknown_name(events):
    assert analyze_steps(events, "Batch 7").range_pattern == "Batch #"
    with pytest.raises(InputError) as err:
        analyze_steps(events, "train_step")
    assert str(err.value) == (
        "--step-range 'train_step': no top-level NVTX range has that name; top-level ranges "
        "here: Batch #"
    )


def test_correlation_ids_are_joined_per_process(build):
    ex = Export()
    # The same correlation id in two processes: rank A's copy is async from pinned memory,
    # rank B made a synchronous cudaMemcpy with that id. A join on the id alone would call
    # rank A's copy synchronous.
    ex.memcpy(0, MS, 1000, src=1, api=None, pid=100)
    ex.tables["CUPTI_ACTIVITY_KIND_MEMCPY"][-1]["correlationId"] = 5
    ex.api(0, MS, "cudaMemcpyAsync_v3020", corr=5, pid=100, tid=100)
    ex.api(0, MS, "cudaMemcpy_v3020", corr=5, pid=200, tid=200)
    with Trace(build(ex)) as trace:
        t = analyze_transfers(Events.load(trace))
    assert [(a.api, a.synchronous) for a in t.by_api] == [("cudaMemcpyAsync", False)]
    assert t.sync_copy_count == 0


def test_health_on_a_complete_capture_reports_nothing(events):
    assert analyze_health(events) == ()


@pytest.mark.parametrize(
    "setup, ids",
    [
        ("empty", {"capture_not_started"}),
        ("nvtx_only", {"no_gpu_activity", "no_osrt"}),
        # the kernel was not launched by any traced call: no CUDA API rows
        ("domains_only_2023", {"nvtx_missing", "no_cuda_api"}),
    ],
)
def test_health_findings(build, setup, ids):
    ex = Export()
    if setup == "nvtx_only":
        ex.nvtx(0, 10, "x")
    if setup == "domains_only_2023":
        ex.capture = {"PROCESS_0:COLLECT_NVTX_TRACE": "true"}
        ex.kernel(0, 10)
        ex.osrt(0, 5, "poll")
        ex.nvtx(0, 0, "domain", event_type=75)
    with Trace(build(ex)) as trace:
        found = analyze_health(Events.load(trace))
    assert {f.id for f in found} == ids
    if setup == "domains_only_2023":
        nvtx = next(f for f in found if f.id == "nvtx_missing")
        assert "nvtx package 0.2.12 and later records no ranges under nsys 2023.x" in nvtx.message
        assert nvtx.fix.startswith("pip install 'nvtx>=0.2.10,<0.2.12'")


def test_nvtx_missing_names_the_nvtx_package_only_when_domain_rows_exist(build):
    """nsys 2023.x, NVTX asked for, no ranges and no domain rows: the workload emitted none."""
    ex = Export()
    ex.capture = {"PROCESS_0:COLLECT_NVTX_TRACE": "true"}
    ex.kernel(0, 10, launch_at=0)
    with Trace(build(ex)) as trace:
        found = {f.id: f for f in analyze_health(Events.load(trace))}
    assert "the workload emitted no NVTX ranges" in found["nvtx_missing"].message
    assert "0.2.12" not in found["nvtx_missing"].message


def test_dropped_cuda_records_and_whole_graphs_are_flagged(build):
    ex = Export(version="2026.2")
    ex.kernel(0, 10, launch_at=0)
    ex.graph(20, 30)
    ex.row(
        "DIAGNOSTIC_EVENT",
        timestamp=5,
        timestampType=1,
        source=1,
        severity=2,
        text="Number of incomplete CUPTI events dropped: 1234",
        globalPid=None,
    )
    with Trace(build(ex)) as trace:
        found = {f.id: f for f in analyze_health(Events.load(trace))}
    assert "1234" in found["cuda_records_dropped"].message
    assert found["cuda_records_dropped"].fix.startswith("profile with -t cuda-sw")
    assert found["cuda_graphs_whole"].message.startswith("1 CUDA graph replays")


def test_empty_trace_gives_empty_results(build):
    with Trace(build(Export())) as trace:
        ev = Events.load(trace)
        assert analyze_gaps(ev, None).devices == ()
        assert analyze_transfers(ev).rows == ()
        assert analyze_overlap(ev).htod_ns == 0
        assert analyze_osrt(ev, {}).rows == ()
        assert analyze_steps(ev) is None


@pytest.mark.parametrize("get_ms, copy_ms", [(6, 1), (4, 3)])
def test_a_gaps_time_is_split_by_the_range_that_held_it(build, get_ms, copy_ms):
    # GPU idle [10, 20) ms in step 'Batch 2'; the thread runs its own code through it (no
    # copy issued: cpu), in 'get batch' for get_ms, in 'copy batch' for copy_ms until the
    # launch 10 us before 20 ms, and in the step range alone between; the gap is named by the
    # range that held most of it.
    ex = Export()
    ex.kernel(0, 10 * MS, launch_at=0)
    ex.kernel(20 * MS, 30 * MS, launch_at=20 * MS - 10_000)
    ex.nvtx(0, 9 * MS, "Batch 1")
    ex.nvtx(9 * MS, 30 * MS, "Batch 2")
    ex.nvtx(10 * MS, (10 + get_ms) * MS, "get batch")
    ex.nvtx(20 * MS - copy_ms * MS, 20 * MS, "copy batch")
    with Trace(build(ex)) as trace:
        g = gaps_of(Events.load(trace), MS)
    assert {(c.cause, c.name): c.idle_ns for c in g.by_name} == {
        ("cpu", "get batch"): get_ms * MS,
        ("cpu", "Batch #"): (10 - get_ms - copy_ms) * MS,
        ("cpu", "copy batch"): copy_ms * MS - 10_000,
        ("launch", "cudaLaunchKernel"): 10_000,
    }
    assert [(x.cause, x.name) for x in g.longest] == [("cpu", "get batch")]


def test_gaps_under_deeply_nested_ranges_go_to_the_innermost(build, monkeypatch):
    # Three GPU idle gaps of 10 ms, each under 300 ranges nested over the whole run and a
    # step range of its own; the account is made a few intervals at a time.
    from nsysprobe.analyses.account import arrays

    monkeypatch.setattr(arrays, "INTERVALS_PER_RUN", 1)
    ex = Export()
    for i in range(4):
        ex.kernel(i * 20 * MS, (i * 20 + 10) * MS, launch_at=i * 20 * MS - 10_000)
    for depth in range(300):
        ex.nvtx(-MS + depth, 80 * MS - depth, f"layer {depth}")
    for i in range(3):
        ex.nvtx((i * 20 + 5) * MS, (i * 20 + 25) * MS, f"Batch {i}")
    with Trace(build(ex)) as trace:
        g = gaps_of(Events.load(trace), MS)
    assert [(c.cause, c.name, c.idle_ns) for c in g.by_name] == [
        ("cpu", "Batch #", 30 * MS - 30_000),
        ("launch", "cudaLaunchKernel", 30_000),
    ]
    assert [(x.start_ns, x.name) for x in g.longest] == [
        (10 * MS, "Batch #"),
        (30 * MS, "Batch #"),
        (50 * MS, "Batch #"),
    ]
    # Every range open over the longest gap is listed with the time it overlapped it.
    assert {o.overlap_ns for o in g.longest[0].nvtx} == {10 * MS}


def test_a_gpu_shared_by_two_processes_is_flagged(build):
    ex = Export()
    ex.kernel(0, 10, launch_at=0)
    ex.kernel(20, 30, pid=4300, launch_at=15)
    ex.kernel(40, 50, device=1, pid=4301, launch_at=35)
    with Trace(build(ex)) as trace:
        found = {f.id: f for f in analyze_health(Events.load(trace))}
    assert "GPU 0: processes 4242, 4300" in found["gpu_shared"].message
    assert "GPU 1" not in found["gpu_shared"].message


@pytest.mark.parametrize("spacing_ms, found", [(10, True), (13, False)])
def test_steps_must_cover_half_their_span(build, rows_per_block, spacing_ms, found):
    # Ten "Batch i" ranges of 6 ms every 10 ms cover 60 of 96 ms (0.63): steps; every 13 ms,
    # 60 of 123 ms (0.49): not steps. Counted over blocks of 2 rows, the same.
    ex = Export()
    for i in range(10):
        ex.nvtx(i * spacing_ms * MS, (i * spacing_ms + 6) * MS, f"Batch {i}")
    with Trace(build(ex)) as trace:
        steps = analyze_steps(Events.load(trace))
    assert (steps is not None) == found
    if found:
        # The first step's window is its range, each other from the last range's end to its
        # own: 10 ms, gap included; 10 steps over 96 ms.
        assert (steps.range_pattern, steps.count, steps.median_step_ns) == ("Batch #", 10, 10 * MS)
        assert steps.steps_per_s == pytest.approx(10 / 0.096)


@pytest.mark.parametrize("evaluation", ["val step", "eval_step", "test iteration"])
def test_training_steps_win_over_a_longer_evaluation_loop(build, evaluation):
    """10 training steps of 100 us, then 40 evaluation steps of 50 us: both repeat and are
    numbered, the evaluation loop covers more time, the training steps are the steps."""
    ex = Export()
    t = 0
    for i in range(10):
        ex.nvtx(t, t + 100_000, f"train step {i}")
        t += 100_000
    for i in range(40):
        ex.nvtx(t, t + 50_000, f"{evaluation} {i}")
        t += 50_000
    with Trace(build(ex)) as trace:
        steps = analyze_steps(Events.load(trace))
    assert steps.range_pattern == "train step #"
    assert steps.count == 10


def test_windows_do_not_move_with_the_clock_and_rates_round_trip(tmp_path):
    """A real capture with every timestamp moved 100 s before the clock's zero gives the same
    steps (a negative GPU end is an end, not 'no work'); steps 1 ns apart give a rate over
    1e9 steps/s that ``compare`` reads back from the JSON nsysprobe wrote."""
    import json
    import shutil
    import sqlite3

    from click.testing import CliRunner

    from nsysprobe.cli import main

    from conftest import SAMPLE_TRACES

    source = SAMPLE_TRACES / "h200_gpu_bound_sync.sqlite"
    moved = tmp_path / "moved.sqlite"
    shutil.copy(source, moved)
    db = sqlite3.connect(moved)
    tables = [t for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    for table in tables:
        columns = {row[1] for row in db.execute(f'PRAGMA table_info("{table}")')}
        for column in ("start", "end"):
            if column in columns:
                db.execute(f'UPDATE "{table}" SET "{column}" = "{column}" - 100000000000')
    db.commit()
    db.close()
    a, b = analyze_steps_of(source), analyze_steps_of(moved)
    assert b.steps_per_s == pytest.approx(a.steps_per_s, rel=1e-12)
    assert [(r.start_ns + 100_000_000_000, r.wall_ns, r.gpu_ops) for r in b.rows] == [
        (r.start_ns, r.wall_ns, r.gpu_ops) for r in a.rows
    ]
    assert all(r.gpu_end_ns is not None and r.gpu_end_ns < 0 for r in b.rows)

    ex = Export()
    for i in range(5):
        ex.nvtx(10 * MS + i, 10 * MS + i, f"step {i}")  # zero-length, 1 ns apart
    ex.kernel(0, MS, launch_at=0)
    path = ex.save(tmp_path / "dense.sqlite")
    run = tmp_path / "run"
    run.mkdir()
    out = CliRunner().invoke(
        main, ["analyze", str(path), "--step-range", "step #", "--format", "json", "--no-history"]
    )
    assert json.loads(out.output)["steps"]["steps_per_s"] == pytest.approx(5 / 4e-9)
    (run / "analysis.json").write_text(out.output)
    compared = CliRunner().invoke(main, ["compare", str(run), str(run), "--format", "json"])
    assert compared.exit_code == 0, compared.output


def analyze_steps_of(path):
    import nsysprobe

    return nsysprobe.analyze(path).steps


def test_the_nvtx_domains_are_read_beside_the_event_tables(monkeypatch):
    # Their scan of the NVTX table runs on a reading thread, with the tables; its result is
    # the domain-creation row's (by SQL: its process, domain and text).
    path = SAMPLE_TRACES / "h200_empty_cache.sqlite"
    threads = []

    def domains(trace):
        threads.append(threading.current_thread().name)
        return nvtx.nvtx_domains(trace)

    monkeypatch.setattr(arrow, "READERS", 2)
    monkeypatch.setattr(Trace, "nvtx_domains", cached_property(domains), raising=True)
    Trace.nvtx_domains.__set_name__(Trace, "nvtx_domains")
    with Trace(path) as trace:
        events = Events.load(trace)
    (pid, domain, text), *_ = query(
        path,
        "SELECT (globalTid >> 24) & 16777215, domainId, text FROM NVTX_EVENTS WHERE eventType = 75",
    )
    assert events.lookups.nvtx_domains == {(pid, domain): text}
    assert len(threads) == 1 and threads[0].startswith("nsysprobe-read")
