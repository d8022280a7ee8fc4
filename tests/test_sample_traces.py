"""The project's own H200 captures (sample_traces/): the ladder and the training mistakes.
Each trace's diagnosis and the bucket behind it, and the ladder's figures against SQL run here
on the export."""

from __future__ import annotations

import json
import sqlite3
import statistics

import independent
import pytest

import nsysprobe
from nsysprobe.diagnose.common import GPU_BOUND_IDLE_RATIO, MIN_GAIN_RATIO
from nsysprobe.numa import load_recorded

from conftest import SAMPLE_TRACES

_MANIFEST = json.loads((SAMPLE_TRACES / "manifest.json").read_text())
ALL = _MANIFEST["traces"]
# Captured for the issues on causes and gains: their diagnoses are those issues' work, their
# steps are timed now.
PATHOLOGIES = _MANIFEST["pathologies"]["traces"]
# The ladder rungs; the mistakes' traces have a "workload" instead of a "rung".
MANIFEST = {n: t for n, t in ALL.items() if "rung" in t}
MISTAKES = {n: t for n, t in ALL.items() if "workload" in t}


def sql(path, query):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return db.execute(query).fetchall()
    finally:
        db.close()


def test_the_manifest_lists_every_sample_trace():
    listed = sorted([*ALL, *PATHOLOGIES])
    assert sorted(p.name for p in SAMPLE_TRACES.glob("*.sqlite")) == listed
    assert len(ALL) == 23 and set(MANIFEST) | set(MISTAKES) == set(ALL)


def steps_over_time(windows: list[tuple[int, int]]) -> float:
    return len(windows) * 1e9 / (windows[-1][1] - windows[0][0])


TIMED = sorted(
    n
    for n, t in {**ALL, **PATHOLOGIES}.items()
    if "steps_per_s_printed" in t and t.get("step_ranges", True)
)


@pytest.mark.parametrize("name", TIMED)
def test_steps_per_s_is_the_workloads_own_clock(name):
    """The workload timed its profiled steps itself (a synchronize before and after them);
    the analysis, from the trace alone, must agree within 5 %, whichever side bounds the loop
    (the GPU-bound loops run their CPU ranges many times faster than that)."""
    facts = {**ALL, **PATHOLOGIES}[name]
    steps = nsysprobe.analyze(SAMPLE_TRACES / name).steps
    assert steps.steps_per_s == pytest.approx(facts["steps_per_s_printed"], rel=0.05)
    if "steady_steps_per_s_printed" in facts:  # the first step compiled: an outlier
        assert steps.first_step_outlier
        assert steps.steady_steps_per_s == pytest.approx(
            facts["steady_steps_per_s_printed"], rel=0.05
        )


@pytest.mark.parametrize("name", sorted(ALL))
def test_each_trace_gets_its_verdict_from_its_largest_bucket(name):
    report = nsysprobe.analyze(SAMPLE_TRACES / name)
    expected = ALL[name]
    assert report.verdict.id == expected["expected_verdict"]
    assert report.trace.nsys_version == "2025.3.2.0"
    account = report.account.main
    others = [b for b in account.buckets if b.name != "compute"]
    if expected["expected_verdict"] == "gpu_bound":
        assert max(account.buckets, key=lambda b: b.total_ns).name == "compute"
        assert account.idle_ratio < GPU_BOUND_IDLE_RATIO
        assert all(b.share_ratio < MIN_GAIN_RATIO for b in others)
    else:
        top = max(others, key=lambda b: b.total_ns)
        assert top.name == expected["expected_top_bucket"]
        assert top.name in report.verdict.evidence["buckets"].split(", ")
        assert report.verdict.expected_gain_ratio >= MIN_GAIN_RATIO


@pytest.mark.parametrize("name", sorted(n for n in MISTAKES if "processes" not in MISTAKES[n]))
def test_mistake_steps_are_the_workloads_steps(name):
    """20 profiled steps (or the manifest's ``steps``), found from the NVTX range each script
    names its steps with, or 10 equal windows where the script has none (CUB's own ranges are
    not steps); each step from the last one's completion to its own, by SQL."""
    path = SAMPLE_TRACES / name
    n = MISTAKES[name].get("steps", 20)
    account = nsysprobe.analyze(path).account.main
    if MISTAKES[name].get("step_ranges") is False:
        assert account.step_count == 10 and "equal windows" in account.windows
        return
    top = sql(
        path,
        "SELECT coalesce(n.text, s.value), count(*), sum(n.end - n.start) FROM NVTX_EVENTS n "
        "LEFT JOIN StringIds s ON s.id = n.textId WHERE n.eventType = 59 "
        "GROUP BY 1 ORDER BY 2 DESC",
    )
    # Each script's step ranges: numbered ones (n distinct names) or one name n times.
    numbered = [row for row in top if row[1] == 1]
    same = [row for row in top if row[1] == n]
    assert len(numbered) >= n or same
    if same and len(numbered) < n:
        like = same[0][0]
    else:  # the n longest numbered ranges: "Batch 5" ... -> "Batch %"
        longest = sorted(numbered, key=lambda row: row[2])[-n:]
        (like,) = {row[0].rstrip("0123456789") + "%" for row in longest}
    windows = independent.step_windows(path, like)
    assert account.step_count == len(windows) == n
    assert [(s.start_ns, s.wall_ns) for s in account.steps] == [(a, b - a) for a, b in windows]
    assert account.wall_ns == windows[-1][1] - windows[0][0]


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_steps_match_the_nvtx_ranges(name):
    path = SAMPLE_TRACES / name
    windows = independent.step_windows(path, "Batch %")
    walls = [e - s for s, e in windows]
    steps = nsysprobe.analyze(path).steps
    assert steps.count == len(walls) == 20
    assert steps.median_step_ns == int(statistics.median(walls))
    assert steps.steps_per_s == pytest.approx(steps_over_time(windows), rel=1e-9)
    assert [c.name for c in steps.children][:3] and {c.name for c in steps.children} <= {
        "get batch",
        "copy batch",
        "Compute",
    }


@pytest.mark.parametrize("name", sorted(ALL))
def test_counts_are_the_exports_rows(name):
    """Per device, the kernel, memcpy and memset rows; per (kind, source, destination), the
    copies and their bytes; the OS-runtime calls: each exactly the export's own count."""
    path = SAMPLE_TRACES / name
    report = nsysprobe.analyze(path)
    expected: dict[int, list[int]] = {}
    if "CUPTI_ACTIVITY_KIND_GRAPH_TRACE" in independent.tables(path):  # replays, no kernel rows
        for (device,) in sql(path, "SELECT DISTINCT deviceId FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE"):
            expected[device] = [0, 0, 0]
    for i, table in enumerate(independent.GPU_TABLES):
        if table in independent.tables(path):
            rows = sql(path, f"SELECT deviceId, count(*) FROM {table} GROUP BY deviceId")
            for device, count in rows:
                expected.setdefault(device, [0, 0, 0])[i] = count
    assert {
        d.device_id: [d.kernel_count, d.memcpy_count, d.memset_count] for d in report.gaps.devices
    } == expected
    copies = independent.row_count(path, "CUPTI_ACTIVITY_KIND_MEMCPY")
    assert report.transfers.memcpy_count == copies
    groups = (
        sql(
            path,
            "SELECT o.name, s.label, d.label, count(*), sum(m.bytes) "
            "FROM CUPTI_ACTIVITY_KIND_MEMCPY m JOIN ENUM_CUDA_MEMCPY_OPER o ON o.id = m.copyKind "
            "JOIN ENUM_CUDA_MEM_KIND s ON s.id = m.srcKind "
            "JOIN ENUM_CUDA_MEM_KIND d ON d.id = m.dstKind GROUP BY 1, 2, 3",
        )
        if copies
        else []
    )
    assert sorted(
        (f"CUDA_MEMCPY_KIND_{r.copy_kind.upper()}", r.src_kind, r.dst_kind, r.count, r.bytes)
        for r in report.transfers.rows
    ) == sorted(groups)
    assert report.transfers.pageable_htod_count == sum(
        g[3] for g in groups if g[:2] == ("CUDA_MEMCPY_KIND_HTOD", "Pageable")
    )
    assert report.osrt.call_count == independent.row_count(path, "OSRT_API") > 0
    # The gaps are idle time of their device: no GPU work of any process in them, so a
    # device's gap time is part of its idle time.
    for d in report.gaps.devices:
        work = [
            row
            for table in independent.GPU_TABLES
            if table in independent.tables(path)
            for row in sql(path, f"SELECT start, end FROM {table} WHERE deviceId = {d.device_id}")
        ]
        gaps = [
            (int(s), int(e))
            for a in report.account.accounts
            if a.device_id == d.device_id
            for s, e in zip(a.idle_gaps.start_ns, a.idle_gaps.end_ns)
        ]
        assert independent.intersect(independent.union(gaps), independent.union(work)) == []
        assert d.gap_ns == sum(e - s for s, e in independent.union(gaps)) <= d.idle_ns


def test_pageable_copies_only_below_the_pinned_rung():
    pageable = {}
    for name in MANIFEST:
        tables = independent.tables(SAMPLE_TRACES / name)
        if "CUPTI_ACTIVITY_KIND_MEMCPY" not in tables:  # lazy export: the cached rung copies
            pageable[MANIFEST[name]["rung"]] = 0  # nothing while it is profiled
            continue
        (count, bytes_) = sql(
            SAMPLE_TRACES / name,
            "SELECT count(*), coalesce(sum(m.bytes), 0) FROM CUPTI_ACTIVITY_KIND_MEMCPY m "
            "JOIN ENUM_CUDA_MEM_KIND k ON k.id = m.srcKind WHERE m.copyKind = 1 "
            "AND k.label = 'Pageable'",
        )[0]
        report = nsysprobe.analyze(SAMPLE_TRACES / name)
        big = [
            r for r in report.transfers.rows if (r.copy_kind, r.src_kind) == ("HtoD", "Pageable")
        ]
        assert sum(r.count for r in big) == report.transfers.pageable_htod_count == count
        assert sum(r.bytes for r in big) == report.transfers.pageable_htod_bytes == bytes_
        pageable[MANIFEST[name]["rung"]] = count
    # Below the pinned rung each of the 20 steps copies its images and its labels pageable.
    assert pageable == {
        "baseline": 40,
        "multiworker": 40,
        "pinned": 0,
        "streams": 0,
        "prefetch": 0,
        "cached": 0,
    }


def test_the_ladder_climbs_to_the_compute_ceiling():
    rate = {
        MANIFEST[n]["rung"]: steps_over_time(independent.step_windows(SAMPLE_TRACES / n, "Batch %"))
        for n in MANIFEST
        if "extra" not in MANIFEST[n]
    }
    assert rate["baseline"] < rate["multiworker"] < rate["pinned"]
    assert rate["prefetch"] >= 0.97 * rate["cached"]


def test_copies_overlap_compute_once_pipelined():
    ratio = {
        MANIFEST[n]["rung"]: nsysprobe.analyze(SAMPLE_TRACES / n).overlap.overlap_ratio
        for n in ("h200_pinned.sqlite", "h200_streams.sqlite", "h200_prefetch.sqlite")
    }
    assert ratio["pinned"] == 0.0
    assert ratio["streams"] > 0.9 and ratio["prefetch"] > 0.9


def test_placement_replayed_with_the_recorded_topology():
    topology = load_recorded(SAMPLE_TRACES / "h200_topology")
    report = nsysprobe.analyze(
        SAMPLE_TRACES / "h200_multiworker-cpuctxsw.sqlite", topology=topology
    )
    p = report.placement
    assert p.numa_nodes == 1 and p.note.startswith("one NUMA node")
    roles = {r.role: r for r in p.roles}
    assert roles["training thread"].verdict == "local"
    # Threads the scheduler ran: the GPU process's (the training thread and the rest) and
    # the 8 loader processes' threads, counted from SCHED_EVENTS.
    path = SAMPLE_TRACES / "h200_multiworker-cpuctxsw.sqlite"
    (gpu_pid,) = independent.gpu_pids(path)
    ((in_gpu, _), (loader, loaders)) = (
        independent.query(
            path,
            "SELECT count(DISTINCT globalTid), count(DISTINCT (globalTid >> 24) & 16777215) "
            f"FROM SCHED_EVENTS WHERE ((globalTid >> 24) & 16777215) {op} ?",
            (gpu_pid,),
        )[0]
        for op in ("=", "!=")
    )
    assert loaders == 8
    assert [(r.role, r.threads) for r in p.roles] == [
        ("training thread", 1),
        ("training process", in_gpu - 1),
        ("loader processes", loader),
    ]
    assert "numa_binding" not in [r.id for r in report.recommendations]


def test_compare_over_the_ladder_reproduces_its_table():
    from nsysprobe.runs.compare import compare_runs, load_run

    names = [n for n in MANIFEST if "extra" not in MANIFEST[n]]
    order = ["baseline", "multiworker", "pinned", "streams", "prefetch", "cached"]
    names.sort(key=lambda n: order.index(MANIFEST[n]["rung"]))
    comparison = compare_runs([load_run(str(SAMPLE_TRACES / n)) for n in names])

    def rate(name: str) -> float:
        return steps_over_time(independent.step_windows(SAMPLE_TRACES / name, "Batch %"))

    first = rate(names[0])
    for name, run, diff in zip(names, comparison.runs, comparison.differences):
        rate_ = rate(name)
        assert run.metrics.steps_per_s == pytest.approx(rate_, rel=1e-3)
        assert run.metrics.top_recommendation == MANIFEST[name]["expected_verdict"]
        if diff is not None:
            assert diff.speedup == pytest.approx(rate_ / first, rel=1e-3)
    verdicts = {MANIFEST[n]["rung"]: d.verdict for n, d in zip(names, comparison.differences) if d}
    assert verdicts["multiworker"] == verdicts["pinned"] == "faster"


def test_two_processes_on_one_gpu_each_against_its_own_clock():
    """Two training processes sharing the H200, one report: each process's steps (its own
    ``step N`` ranges, each to its completion on the GPU, by SQL), its steps/s within 5 % of
    what it printed, and its account over its own windows."""
    path = SAMPLE_TRACES / "h200_shared_gpu.sqlite"
    processes = ALL["h200_shared_gpu.sqlite"]["processes"]
    assert independent.gpu_pids(path) == sorted(int(p) for p in processes)
    accounts = {a.pid: a for a in nsysprobe.analyze(path).account.accounts}
    for pid, facts in processes.items():
        pid = int(pid)
        windows = independent.step_windows(path, "step %", pid)
        assert len(windows) == facts["steps"]
        steps = nsysprobe.analyze(path, pid=pid).steps
        assert steps.count == facts["steps"]
        assert steps.steps_per_s == pytest.approx(steps_over_time(windows), rel=1e-9)
        assert steps.steps_per_s == pytest.approx(facts["steps_per_s_printed"], rel=0.05)
        account = accounts[pid]
        assert [(s.start_ns, s.wall_ns) for s in account.steps] == [(a, b - a) for a, b in windows]


LADDER_RUN = json.loads((SAMPLE_TRACES / "h200_ladder" / "ladder.json").read_text())


@pytest.mark.parametrize("row", LADDER_RUN["rows"], ids=lambda row: row["rung"])
def test_the_ladder_run_reads_its_steps_per_s_from_the_traces(row):
    """``nsysprobe ladder`` on the H200: each rung's steps/s is the analysis of its profiled
    trace (kept, scrubbed, beside ladder.json): steps over time by SQL, within 5 % of the
    workload's own clock in the same run, and its recommendation the expected one."""
    path = SAMPLE_TRACES / "h200_ladder" / f"{row['rung']}.sqlite"
    rate = steps_over_time(independent.step_windows(path, "Batch %"))
    assert row["steps_per_s"] == pytest.approx(rate, rel=1e-9)
    assert row["steps_per_s"] == pytest.approx(row["profiled_steps_per_s"], rel=0.05)
    assert nsysprobe.analyze(path).steps.steps_per_s == pytest.approx(rate, rel=1e-9)
    assert row["top_recommendation"] == row["expected_recommendation"]
    assert LADDER_RUN["problems"] == []


def test_steps_with_no_launch_to_join_say_they_are_timed_by_their_cpu_ranges(tmp_path):
    """The CUDA graph loop without its CUDA API table: its replays cannot be joined to a
    launch, so its steps are its CPU ranges, and the pace line says so."""
    import shutil

    path = tmp_path / "no-api.sqlite"
    shutil.copy(SAMPLE_TRACES / "h200_gpu_bound_graph.sqlite", path)
    db = sqlite3.connect(path)
    db.execute("DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME")
    db.commit()
    db.close()
    steps = nsysprobe.analyze(path).steps
    ranges = independent.nvtx_ranges(path, "step %")
    assert [(r.start_ns, r.cpu_ns, r.gpu_ops) for r in steps.rows][1:] == [
        (ranges[i - 1][1], e - s, 0) for i, (s, e) in enumerate(ranges) if i
    ]
    assert steps.note.endswith(
        "none of the process's GPU work could be joined to a launch in a step range (no CUDA "
        "API calls traced): steps are timed by their CPU ranges"
    )
    assert (
        "timed by their CPU ranges"
        not in nsysprobe.analyze(SAMPLE_TRACES / "h200_gpu_bound_graph.sqlite").steps.note
    )


def test_ranks_that_do_not_communicate_name_the_slower_one():
    """The two processes sharing the H200 (fp32 at 6.5, TF32 at 32.3 steps/s by their own
    clocks): no collectives, so no straggler, and the fp32 one is named slower."""
    from click.testing import CliRunner

    from nsysprobe.cli import main

    path = SAMPLE_TRACES / "h200_shared_gpu.sqlite"
    out = CliRunner().invoke(main, ["analyze", str(path), "--ranks", "--no-history"]).output
    assert "slower than the others pooled: h200_shared_gpu:596 (x" in " ".join(out.split())
