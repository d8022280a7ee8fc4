"""The report's tables as DataFrames, as a notebook takes them: ``report.steps.to_pandas()``,
``report.account.main.to_pandas("steps")``, ``report.gaps.to_pandas()``, ... Each frame is
held to a frame computed here from the export itself, with ``sqlite3`` and the interval
helpers of ``independent`` (no nsysprobe code), on real H200 captures:

    baseline     pageable host-to-device copies, the training thread loads the batches
    pinned       pinned host-to-device copies, eight loader workers
    checkpoint   device-to-host read-backs, a checkpoint every fourth step

What SQL cannot say is named where it is checked otherwise: the causes of idle time (the
account's attribution rules) are checked to fill each step's idle exactly, the kernel classes
(a name classifier) to hold every kernel once, and the recommendations to name the verdict the
capture was made to show (``sample_traces/manifest.json``) with its gain over the measured time.
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest
from independent import (
    completion_windows,
    final_count,
    gpu_ops,
    gpu_pids,
    gpu_work,
    inside,
    intersect,
    minus,
    query,
    startup_count,
    step_ranges,
    tables,
    union,
)

import nsysprobe
from nsysprobe.analyses.account import DEFAULT_MIN_GAP_NS
from nsysprobe.analyses.gaps import LONGEST_GAPS_LISTED
from nsysprobe.errors import InputError, MissingDependency

from conftest import SAMPLE_TRACES
from exports import ladder_rung

TRACES = ["h200_baseline.sqlite", "h200_pinned.sqlite", "h200_checkpoint.sqlite"]
# Copy kinds and memory kinds as exported (NSYS_FACTS.md), checked against the ENUM tables.
COPY_KINDS = {1: ("CUDA_MEMCPY_KIND_HTOD", "HtoD"), 2: ("CUDA_MEMCPY_KIND_DTOH", "DtoH")}
MEM_KINDS = {0: "Pageable", 1: "Pinned", 2: "Device"}


@pytest.fixture(scope="module", params=TRACES)
def case(request):
    path = SAMPLE_TRACES / request.param
    return path, nsysprobe.analyze(path)


def frame(columns: dict[str, tuple[str, list]]) -> pd.DataFrame:
    """A frame from {column: (dtype, values)}."""
    return pd.DataFrame({c: pd.Series(v, dtype=t) for c, (t, v) in columns.items()})


def same(got: pd.DataFrame, expected: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(got.reset_index(drop=True), expected.reset_index(drop=True))


def the_pid(path) -> int:
    (pid,) = gpu_pids(path)
    return pid


def windows(path) -> tuple[list[tuple[str, int, int]], list[tuple[str, int, int]], int, int]:
    """The steps' CPU ranges, their windows, and the start-up and final step counts."""
    ranges = step_ranges(path, the_pid(path))
    wins = completion_windows(path, ranges, the_pid(path))
    walls = [e - s for _, s, e in wins]
    startup = startup_count(walls)
    return ranges, wins, startup, final_count(walls, startup)


def mem_label(path, kind: int) -> str:
    labels = dict(query(path, "SELECT id, label FROM ENUM_CUDA_MEM_KIND"))
    assert labels[kind] == MEM_KINDS[kind]
    return MEM_KINDS[kind]


def copy_label(path, kind: int) -> str:
    names = dict(query(path, "SELECT id, name FROM ENUM_CUDA_MEMCPY_OPER"))
    assert names[kind] == COPY_KINDS[kind][0]
    return COPY_KINDS[kind][1]


# -- steps ---------------------------------------------------------------------------------


def launched(path, pid: int) -> list[tuple[int, int, int]]:
    """(start of the launching call, start, end) of every kernel, copy and memset of ``pid``,
    joined to its call on the process and the correlation id."""
    rows = []
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY"):
        rows += query(
            path,
            f"SELECT min(r.start), g.start, g.end FROM {table} g "
            "JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = g.correlationId "
            "AND (r.globalTid >> 24) & 16777215 = (g.globalPid >> 24) & 16777215 "
            "WHERE (g.globalPid >> 24) & 16777215 = ? GROUP BY g.rowid",
            (pid,),
        )
    if "CUPTI_ACTIVITY_KIND_MEMSET" in tables(path):
        rows += query(
            path,
            "SELECT min(r.start), g.start, g.end FROM CUPTI_ACTIVITY_KIND_MEMSET g "
            "JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = g.correlationId "
            "AND (r.globalTid >> 24) & 16777215 = (g.globalPid >> 24) & 16777215 "
            "WHERE (g.globalPid >> 24) & 16777215 = ? GROUP BY g.rowid",
            (pid,),
        )
    return rows


def children(path, pid: int, ranges) -> list[dict[str, int]]:
    """Per step, the CPU time of each direct child range of its range on the main thread,
    numbers in names masked (``copy 3`` -> ``copy #``)."""
    rows = query(
        path,
        "SELECT coalesce(n.text, s.value), n.start, n.end FROM NVTX_EVENTS n "
        "LEFT JOIN StringIds s ON s.id = n.textId WHERE n.eventType IN (59, 60) "
        "AND (n.globalTid >> 24) & 16777215 = ? AND n.globalTid & 16777215 = ? "
        "ORDER BY n.start, n.end DESC",
        (pid, pid),
    )
    out = []
    for _, lo, hi in ranges:
        times: dict[str, int] = defaultdict(int)
        reach = -1
        for name, s, e in rows:
            if s < lo or e > hi or (s, e) == (lo, hi):
                continue
            if e <= reach:  # inside an earlier child
                continue
            reach = e
            times[re.sub(r"\d+", "#", name)] += e - s
        out.append(dict(times))
    return out


def test_step_rows_are_the_sql_windows_work_and_children(case):
    path, report = case
    pid = the_pid(path)
    ranges, wins, _, _ = windows(path)
    starts, ends = gpu_work(path)
    every = union(zip(starts.tolist(), ends.tolist()))
    ops = launched(path, pid)
    mine = [[(s, e) for call, s, e in ops if lo <= call < hi] for _, lo, hi in ranges]
    busy = [inside(every, lo, hi) for _, lo, hi in wins]
    kids = children(path, pid, ranges)
    expected = frame(
        {
            "index": ("int64", list(range(len(wins)))),
            "name": ("object", [n for n, _, _ in ranges]),
            "start_ns": ("int64", [lo for _, lo, _ in wins]),
            "wall_ns": ("int64", [hi - lo for _, lo, hi in wins]),
            "gpu_busy_ns": ("int64", busy),
            "gpu_idle_ns": ("int64", [hi - lo - b for (_, lo, hi), b in zip(wins, busy)]),
            "cpu_start_ns": ("int64", [lo for _, lo, _ in ranges]),
            "cpu_ns": ("int64", [hi - lo for _, lo, hi in ranges]),
            "gpu_start_ns": ("Int64", [min(s for s, _ in m) if m else None for m in mine]),
            "gpu_end_ns": ("Int64", [max(e for _, e in m) if m else None for m in mine]),
            "gpu_ops": ("int64", [len(m) for m in mine]),
        }
    )
    for name in sorted({n for k in kids for n in k}):
        expected[f"children.{name}"] = pd.Series([k.get(name, 0) for k in kids], dtype="int64")
    got = report.steps.to_pandas()
    assert list(got.columns[:11]) == list(expected.columns[:11])
    assert sorted(got.columns) == sorted(expected.columns)
    same(got[expected.columns], expected)

    summary = report.steps.to_pandas("children")
    assert list(summary.columns) == ["name", "median_ns", "share_ratio"]
    wall = sum(hi - lo for _, lo, hi in wins)
    for row in summary.itertuples():
        per_step = [k.get(row.name, 0) for k in kids]
        assert row.median_ns == int(np.median(per_step))
        assert row.share_ratio == pytest.approx(sum(per_step) / wall, rel=1e-12)


# -- the step account ------------------------------------------------------------------------


def busy_kinds(path, pid: int, device: int) -> dict[str, list[tuple[int, int]]]:
    """Busy time by kind, each kind less the kinds before it (compute, copies by copy kind and
    host memory kind, memsets): the account's busy buckets, from SQL."""
    ops = gpu_ops(path)[(pid, device)]
    assert not ops["nccl"]
    copies: dict[str, list[tuple[int, int]]] = defaultdict(list)
    rows = query(
        path,
        "SELECT copyKind, srcKind, dstKind, start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY "
        "WHERE (globalPid >> 24) & 16777215 = ? AND deviceId = ?",
        (pid, device),
    )
    for kind, src, dst, s, e in rows:
        host = src if kind == 1 else dst
        copies[f"memcpy {copy_label(path, kind)} {mem_label(path, host)}"].append((s, e))
    assert len(copies) == 1  # one copy kind: no order among copy kinds to know
    memsets = query(
        path,
        "SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMSET "
        "WHERE (globalPid >> 24) & 16777215 = ? AND deviceId = ?",
        (pid, device),
    )
    compute = union(ops["compute"])
    ((copy_name, copy_ops),) = copies.items()
    copy = minus(union(copy_ops), compute)
    return {
        "compute": compute,
        copy_name: copy,
        "memset": minus(minus(union(memsets), compute), union(copy_ops)),
    }


def test_account_step_and_bucket_frames_are_the_sql_windows_and_busy_time(case):
    path, report = case
    main = report.account.main
    pid, device = the_pid(path), main.device_id
    _, wins, startup, final = windows(path)
    kinds = busy_kinds(path, pid, device)
    ops = gpu_ops(path)[(pid, device)]
    every = union(ops["compute"] + ops["other"])
    busy = [inside(every, lo, hi) for _, lo, hi in wins]
    steady = [startup <= i < len(wins) - final for i in range(len(wins))]
    expected = frame(
        {
            "index": ("int64", list(range(len(wins)))),
            "name": ("object", [n for n, _, _ in wins]),
            "start_ns": ("int64", [lo for _, lo, _ in wins]),
            "wall_ns": ("int64", [hi - lo for _, lo, hi in wins]),
            "busy_ns": ("int64", busy),
            "idle_ns": ("int64", [hi - lo - b for (_, lo, hi), b in zip(wins, busy)]),
        }
        | {
            f"buckets.{k}": ("int64", [inside(spans, lo, hi) for _, lo, hi in wins])
            for k, spans in kinds.items()
        }
        | {
            "communication_ns": ("int64", [0] * len(wins)),
            "communication_overlapped_ns": ("int64", [0] * len(wins)),
            "startup": ("bool", [i < startup for i in range(len(wins))]),
            "final": ("bool", [i >= len(wins) - final for i in range(len(wins))]),
        }
    )
    steps = main.to_pandas("steps")
    same(steps[expected.columns], expected)
    # The idle causes (the account's rules, not SQL's): they fill each step's idle exactly.
    causes = [c for c in steps.columns if c.startswith("buckets.") and c not in expected]
    assert causes and (steps[causes].sum(axis=1) == expected["idle_ns"]).all()

    buckets = main.to_pandas()
    assert list(buckets.columns) == ["name", "kind", "total_ns", "median_ns", "share_ratio"]
    wall = sum(hi - lo for (_, lo, hi), keep in zip(wins, steady) if keep)
    assert buckets["total_ns"].sum() == wall
    assert set(buckets.loc[buckets["kind"] == "busy", "name"]) == set(kinds) - {
        k for k, spans in kinds.items() if not spans
    }
    for row in buckets.itertuples():
        assert row.share_ratio == pytest.approx(row.total_ns / wall, rel=1e-12)
        if row.kind == "busy":
            per_step = [inside(kinds[row.name], lo, hi) for _, lo, hi in wins]
        else:
            per_step = steps[f"buckets.{row.name}"].tolist()
        per_step = [v for v, keep in zip(per_step, steady) if keep]
        assert row.total_ns == sum(per_step), row.name
        assert row.median_ns == int(np.median(per_step)), row.name

    accounts = report.account.to_pandas()
    assert accounts[["pid", "device_id", "step_count", "wall_ns", "busy_ns"]].values.tolist() == [
        [pid, device, sum(steady), wall, sum(b for b, keep in zip(busy, steady) if keep)]
    ]
    assert accounts["idle_ratio"].iloc[0] == pytest.approx(1 - accounts["busy_ns"][0] / wall)


# -- GPU activity and gaps -------------------------------------------------------------------


def device_gaps(path, device: int, min_gap_ns: int = DEFAULT_MIN_GAP_NS) -> list[tuple[int, int]]:
    """The step account's gaps on ``device``: idle stretches between operations (one process
    per trace here) within its steady steps, cut at their edges, longer than ``min_gap_ns``;
    none before the first operation or after the last (no work on one side)."""
    rows = []
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY"):
        rows += query(path, f"SELECT start, end FROM {table} WHERE deviceId = ?", (device,))
    rows += query(
        path, "SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMSET WHERE deviceId = ?", (device,)
    )
    _, wins, startup, final = windows(path)
    steady = wins[startup : len(wins) - final]
    busy = union(rows)
    lo, hi = max(steady[0][1], busy[0][0]), min(steady[-1][2], busy[-1][1])
    idle = minus([(lo, hi)], busy)
    return [(s, e) for s, e in idle if e - s > min_gap_ns]


def test_gpu_devices_and_longest_gaps_are_the_sql_unions(case):
    path, report = case
    devices = sorted(
        d for (d,) in query(path, "SELECT DISTINCT deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL")
    )
    cols: dict[str, tuple[str, list]] = {
        c: ("int64", [])
        for c in (
            "device_id kernel_count memcpy_count memset_count busy_ns kernel_busy_ns "
            "memcpy_busy_ns span_ns"
        ).split()
    }
    cols["busy_ratio"] = ("float64", [])
    for c in ("idle_ns", "gap_count", "gap_ns"):
        cols[c] = ("int64", [])
    for dev in devices:
        work = {
            t: query(
                path, f"SELECT start, end FROM CUPTI_ACTIVITY_KIND_{t} WHERE deviceId = ?", (dev,)
            )
            for t in ("KERNEL", "MEMCPY", "MEMSET")
        }
        busy = union(work["KERNEL"] + work["MEMCPY"] + work["MEMSET"])
        span = busy[-1][1] - busy[0][0]
        gaps = device_gaps(path, dev)
        total = inside(busy, busy[0][0], busy[-1][1])
        for c, v in (
            ("device_id", dev),
            ("kernel_count", len(work["KERNEL"])),
            ("memcpy_count", len(work["MEMCPY"])),
            ("memset_count", len(work["MEMSET"])),
            ("busy_ns", total),
            ("kernel_busy_ns", inside(union(work["KERNEL"]), busy[0][0], busy[-1][1])),
            ("memcpy_busy_ns", inside(union(work["MEMCPY"]), busy[0][0], busy[-1][1])),
            ("span_ns", span),
            ("busy_ratio", total / span),
            ("idle_ns", span - total),
            ("gap_count", len(gaps)),
            ("gap_ns", sum(e - s for s, e in gaps)),
        ):
            cols[c][1].append(v)
    same(report.gaps.to_pandas(), frame(cols))

    gaps = sorted(
        ((dev, s, e) for dev in devices for s, e in device_gaps(path, dev)),
        key=lambda g: (g[1] - g[2], g[0], g[1]),
    )[:LONGEST_GAPS_LISTED]
    longest = report.gaps.to_pandas("longest")
    assert list(longest.columns) == [
        "device_id",
        "pid",
        "start_ns",
        "end_ns",
        "duration_ns",
        "cause",
        "name",
    ]
    same(
        longest[["device_id", "start_ns", "end_ns", "duration_ns"]],
        frame(
            {
                "device_id": ("int64", [g[0] for g in gaps]),
                "start_ns": ("int64", [g[1] for g in gaps]),
                "end_ns": ("int64", [g[2] for g in gaps]),
                "duration_ns": ("int64", [g[2] - g[1] for g in gaps]),
            }
        ),
    )
    # Every gap's time is in one cause, as the account names it.
    every_gap = sum(e - s for dev in devices for s, e in device_gaps(path, dev))
    assert report.gaps.to_pandas("by_name")["idle_ns"].sum() == every_gap
    assert report.gaps.to_pandas("by_cause")["idle_ns"].sum() == every_gap


@pytest.mark.parametrize("min_gap_ms", [0, 0.05, 50])
@pytest.mark.parametrize("trace", ["h200_pinned.sqlite", "h200_init_in_capture.sqlite"])
def test_gaps_are_the_accounts_idle_over_the_threshold(trace, min_gap_ms):
    """--min-gap-ms chooses which of the account's idle stretches are listed (held to SQL:
    those of the steady steps, the init capture's start-up step left out), and changes no
    bucket or recommendation; with 0, every idle stretch between two pieces of GPU work is a
    gap: the account's idle but for the stretches before the first piece and after the last,
    each cause's gap time within its idle bucket."""
    path = SAMPLE_TRACES / trace
    report = nsysprobe.analyze(path, min_gap_ms=min_gap_ms)
    default = nsysprobe.analyze(path)
    gaps = device_gaps(path, 0, int(round(min_gap_ms * 1e6)))
    assert (report.gaps.gap_count, report.gaps.gap_ns) == (
        len(gaps),
        sum(e - s for s, e in gaps),
    )
    assert report.account.main.buckets == default.account.main.buckets
    assert report.recommendations == default.recommendations
    if min_gap_ms == 0:
        a = report.account.main
        _, wins, startup, final = windows(path)
        steady = wins[startup : len(wins) - final]
        work = union(
            [
                row
                for t in ("KERNEL", "MEMCPY", "MEMSET")
                for row in query(path, f"SELECT start, end FROM CUPTI_ACTIVITY_KIND_{t}")
            ]
        )
        edges = max(0, work[0][0] - steady[0][1]) + max(0, steady[-1][2] - work[-1][1])
        assert report.gaps.gap_ns == a.idle_ns - edges == report.gaps.idle_ns - edges
        idle = {b.name: b.total_ns for b in a.buckets if b.kind == "idle"}
        assert all(c.idle_ns <= idle[c.cause] for c in report.gaps.by_cause)


def test_overlap_frame_is_the_sql_htod_copies_under_kernels(case):
    path, report = case
    rows = []
    for dev in sorted(
        {d for (d,) in query(path, "SELECT deviceId FROM CUPTI_ACTIVITY_KIND_MEMCPY")}
    ):
        htod = union(
            query(
                path,
                "SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY "
                "WHERE deviceId = ? AND copyKind = 1",
                (dev,),
            )
        )
        if not htod:
            continue
        kernels = union(
            query(
                path, "SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE deviceId = ?", (dev,)
            )
        )
        total = sum(e - s for s, e in htod)
        under = sum(e - s for s, e in intersect(htod, kernels))
        rows.append((dev, total, under, total - under, under / total))
    expected = frame(
        {
            name: (dtype, [r[i] for r in rows])
            for i, (name, dtype) in enumerate(
                [
                    ("device_id", "int64"),
                    ("htod_ns", "int64"),
                    ("overlapped_ns", "int64"),
                    ("exposed_ns", "int64"),
                    ("overlap_ratio", "float64"),
                ]
            )
        }
    )
    got = report.overlap.to_pandas()
    same(got[got["htod_ns"] > 0], expected)


# -- transfers and OS-runtime calls ------------------------------------------------------------


def test_transfer_rows_are_the_sql_copies_by_kind(case):
    path, report = case
    rows = query(
        path,
        "SELECT copyKind, srcKind, dstKind, count(*), sum(bytes), sum(end - start) "
        "FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY copyKind, srcKind, dstKind "
        "ORDER BY sum(end - start) DESC",
    )
    expected = frame(
        {
            "copy_kind": ("object", [copy_label(path, r[0]) for r in rows]),
            "src_kind": ("object", [mem_label(path, r[1]) for r in rows]),
            "dst_kind": ("object", [mem_label(path, r[2]) for r in rows]),
            "count": ("int64", [r[3] for r in rows]),
            "bytes": ("int64", [r[4] for r in rows]),
            "duration_ns": ("int64", [r[5] for r in rows]),
            "gbps": ("float64", [r[4] / r[5] for r in rows]),
        }
    )
    same(report.transfers.to_pandas(), expected)

    apis = query(
        path,
        "SELECT s.value, m.copyKind, m.srcKind, count(*), sum(m.bytes), sum(m.end - m.start) "
        "FROM CUPTI_ACTIVITY_KIND_MEMCPY m JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
        "ON r.correlationId = m.correlationId "
        "AND (r.globalTid >> 24) & 16777215 = (m.globalPid >> 24) & 16777215 "
        "JOIN StringIds s ON s.id = r.nameId "
        "GROUP BY s.value, m.copyKind, m.srcKind ORDER BY sum(m.end - m.start) DESC",
    )
    names = [re.sub(r"_v\d+$", "", r[0]) for r in apis]
    expected = frame(
        {
            "api": ("object", names),
            "copy_kind": ("object", [copy_label(path, r[1]) for r in apis]),
            "src_kind": ("object", [mem_label(path, r[2]) for r in apis]),
            "count": ("int64", [r[3] for r in apis]),
            "bytes": ("int64", [r[4] for r in apis]),
            "duration_ns": ("int64", [r[5] for r in apis]),
            "synchronous": (
                "bool",
                [
                    ("Memcpy" in n and "Async" not in n) or (r[1], r[2]) == (1, 0)
                    for n, r in zip(names, apis)
                ],
            ),
        }
    )
    same(report.transfers.to_pandas("by_api"), expected)


def test_os_runtime_rows_are_the_sql_calls_per_function_and_thread(case):
    path, report = case
    gaps = union(
        g
        for (dev,) in query(path, "SELECT DISTINCT deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL")
        for g in device_gaps(path, dev)
    )
    names = dict(query(path, "SELECT id, value FROM StringIds"))
    threads = {tid: names[n] for n, tid in query(path, "SELECT nameId, globalTid FROM ThreadNames")}
    calls = query(path, "SELECT nameId, globalTid, start, end FROM OSRT_API ORDER BY start")
    per: dict[tuple[int, int], list] = {}
    for name, tid, s, e in calls:
        row = per.setdefault((name, tid), [0, 0, 0, 0, s])
        row[0] += 1
        row[1] += e - s
        row[2] = max(row[2], e - s)
        row[3] += inside(gaps, s, e)

    def label(tid: int) -> str:
        pid, own = (tid >> 24) & 0xFFFFFF, tid & 0xFFFFFF
        return f"{threads[tid]} ({pid}/{own})" if tid in threads else f"thread {pid}/{own}"

    ordered = sorted(per.items(), key=lambda kv: (-kv[1][3], -kv[1][1], kv[1][4]))
    got = report.osrt.to_pandas()
    expected = frame(
        {
            "function": ("object", [names[k[0]] for k, _ in ordered]),
            "thread": ("object", [label(k[1]) for k, _ in ordered]),
            "count": ("int64", [v[0] for _, v in ordered]),
            "total_ns": ("int64", [v[1] for _, v in ordered]),
            "max_ns": ("int64", [v[2] for _, v in ordered]),
            "in_gap_ns": ("int64", [v[3] for _, v in ordered]),
        }
    )
    same(got, expected.head(len(got)))
    assert len(got) == min(len(expected), 30)

    by_function: dict[str, list[int]] = {}
    for (name, _), (count, total, longest, in_gap, _) in per.items():
        row = by_function.setdefault(names[name], [0, 0, 0, 0])
        row[0] += count
        row[1] += total
        row[2] = max(row[2], longest)
        row[3] += in_gap
    functions = report.osrt.to_pandas("functions")
    assert functions["total_ns"].is_monotonic_decreasing
    same(
        functions.sort_values("function"),
        frame(
            {
                "function": ("object", sorted(by_function)),
                **{
                    c: ("int64", [by_function[f][i] for f in sorted(by_function)])
                    for i, c in enumerate(["count", "total_ns", "max_ns", "in_gap_ns"])
                },
            }
        ),
    )


# -- kernels and recommendations --------------------------------------------------------------


def test_kernel_classes_hold_every_kernel_of_the_sql_once(case):
    path, report = case
    pid, device = the_pid(path), report.account.main.device_id
    per_name = dict(
        (name, (count, ns))
        for name, count, ns in query(
            path,
            "SELECT s.value, count(*), sum(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k "
            "JOIN StringIds s ON s.id = k.shortName "
            "WHERE (k.globalPid >> 24) & 16777215 = ? AND k.deviceId = ? GROUP BY s.value",
            (pid, device),
        )
    )
    classes = report.kernels.to_pandas()
    assert list(classes.columns) == ["name", "ns", "count", "share_ratio", "top_kernel"]
    total = sum(ns for _, ns in per_name.values())
    assert classes["ns"].sum() == total
    assert classes["count"].sum() == sum(c for c, _ in per_name.values())
    assert classes["ns"].is_monotonic_decreasing and classes["name"].is_unique
    for row in classes.itertuples():
        assert row.share_ratio == pytest.approx(row.ns / total, rel=1e-12)
        assert per_name[row.top_kernel][1] <= row.ns
    assert classes["top_kernel"].is_unique


def test_recommendations_frame_names_the_captured_mistake_with_its_gain(case):
    path, report = case
    manifest = json.loads((SAMPLE_TRACES / "manifest.json").read_text())
    entry = manifest["traces"].get(path.name) or manifest["pathologies"]["traces"][path.name]
    expected_id = entry.get("expected_verdict") or entry["expected_first_recommendation_id"]
    _, wins, startup, final = windows(path)
    wall = sum(hi - lo for _, lo, hi in wins[startup : len(wins) - final])
    recs = report.to_pandas()
    assert list(recs.columns) == [
        "id",
        "title",
        "reason",
        "expected_gain_ratio",
        "saved_ns",
        "advice",
    ]
    assert recs["id"].iloc[0] == expected_id
    assert recs["saved_ns"].is_monotonic_decreasing
    for row in recs.itertuples():
        assert row.expected_gain_ratio == pytest.approx(row.saved_ns / wall, rel=1e-6)


# -- the frames themselves ----------------------------------------------------------------------


def test_an_empty_table_keeps_its_columns_and_types():
    report = nsysprobe.analyze(SAMPLE_TRACES / "h200_baseline.sqlite")
    assert report.findings == ()
    findings = report.to_pandas("findings")
    assert findings.empty and list(findings.columns) == ["id", "severity", "message", "fix"]
    skipped = report.to_pandas("skipped")
    assert set(skipped["analysis"]) == {s.analysis for s in report.skipped}


def test_an_unknown_table_names_the_tables_there_are():
    report = nsysprobe.analyze(SAMPLE_TRACES / "h200_baseline.sqlite")
    with pytest.raises(InputError) as error:
        report.gaps.to_pandas("gaps")
    assert str(error.value) == (
        "to_pandas('gaps'): GapsResult has no such table; one of 'devices', 'longest', "
        "'by_name', 'by_cause'"
    )


def test_without_pandas_the_error_names_the_extra(monkeypatch):
    report = nsysprobe.analyze(SAMPLE_TRACES / "h200_baseline.sqlite")
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas raises ImportError
    with pytest.raises(MissingDependency, match=r"pip install 'nsysprobe\[pandas\]'"):
        report.steps.to_pandas()
    with pytest.raises(ImportError):  # and a notebook's ``except ImportError`` catches it
        report.to_pandas()


def _loaded(code: str, trace: str, modules: tuple[str, ...]) -> list[str]:
    """Which of ``modules`` a fresh Python has loaded after ``code`` ran on a sample trace
    (``sys.argv[1]``; what the code prints to stdout must hold "GPU": the report was made)."""
    import ast
    import subprocess

    check = f"\nprint('loaded:', [m for m in {modules!r} if m in sys.modules])"
    done = subprocess.run(
        [sys.executable, "-c", "import sys\n" + code + check, str(SAMPLE_TRACES / trace)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "GPU" in done.stdout
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("loaded: ")  # the check ran
    return ast.literal_eval(last.removeprefix("loaded: "))


def test_analyze_and_the_report_import_no_pandas():
    # nor pyarrow, on an export of small tables (its import was a quarter of the analysis of the
    # smallest sample trace: nsysprobe/trace/intervals.py ARROW_ENCODE_ROWS)
    code = "import nsysprobe; r = nsysprobe.analyze(sys.argv[1]); print(r._repr_html_())"
    assert _loaded(code, "h200_baseline.sqlite", ("pandas", "pyarrow")) == []


def test_analyze_of_a_small_export_loads_none_of_the_modules_start_up_was_measured_paying():
    # Each was a share of the smallest analysis (README, "Start-up"): numpy.ma through a plain
    # np.unique or np.percentile (7 ms; common/table.py distinct, percentile), hashlib through
    # the report cache's digest (3 ms), importlib.resources through adbc_driver_sqlite's
    # search for its library (5 ms; trace/arrow.py _database), pyarrow (90 ms).
    code = (
        "from nsysprobe.cli import main\n"
        "main(['analyze', sys.argv[1], '--no-history'], standalone_mode=False)"
    )
    modules = ("pandas", "pyarrow", "numpy.ma", "hashlib", "importlib.resources")
    assert _loaded(code, "h200_gpu_bound_graph.sqlite", modules) == []


# -- the report in a notebook -------------------------------------------------------------------

HOSTILE = '<script>alert("x")</script> & <em onmouseover=alert()>'


def test_repr_html_shows_the_verdict_recommendations_and_account_escaped(build):
    ex = ladder_rung("baseline", steps=8)
    ex.strings[HOSTILE] = ex.strings.pop("get batch")  # the range the loading happens in
    ex.thread_name('<img src=x onerror="alert(1)">')
    report = nsysprobe.analyze(build(ex))
    assert report.verdict.id == "multiprocess_loading" and HOSTILE in report.verdict.reason
    html = report._repr_html_()
    assert "<script" not in html and "<img" not in html and "<em" not in html
    escaped = "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; &lt;em onmouseover=alert()&gt;"
    assert html.count(escaped) >= 3  # the verdict's reason, its row, the bucket's details
    assert "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;" in html  # the thread, in the account
    assert "VERDICT: multiprocess_loading" in html
    for rec in report.recommendations:
        assert f"<td>{rec.id}</td>" in html
    for bucket in report.account.main.buckets:
        assert f"<td>{bucket.name}</td>" in html


def test_the_readme_notebook_cell_runs(monkeypatch):
    readme = (SAMPLE_TRACES.parent / "README.md").read_text(encoding="utf-8")
    cell = readme.split("### In a notebook", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(SAMPLE_TRACES.parent)
    namespace: dict = {}
    exec(compile(cell, "README.md", "exec"), namespace)
    assert np.allclose(namespace["shares"].sum(axis=1), 1.0)  # the buckets fill each step
    assert "VERDICT: multiprocess_loading" in namespace["report"]._repr_html_()


# -- the same tables as Arrow ------------------------------------------------------------------


def _with_tables(report) -> list:
    from nsysprobe.common.frames import Tables

    found = [report] + [
        getattr(report, a)
        for a in dir(report)
        if not a.startswith("_") and isinstance(getattr(report, a, None), Tables)
    ]
    return [*found, report.account.main]


def test_every_table_as_arrow_is_its_dataframe(case):
    # ``to_pandas`` is held to SQL above; its Arrow table must hold the same columns, values
    # and nulls, typed as Arrow types them: what ``polars.from_arrow`` takes.
    import pyarrow as pa

    _, report = case
    kinds = {
        "int64": pa.int64(),
        "Int64": pa.int64(),
        "float64": pa.float64(),
        "bool": pa.bool_(),
        "boolean": pa.bool_(),
        "object": pa.string(),
    }
    checked = 0
    for holder in _with_tables(report):
        for name in holder.TABLES:
            frame, table = holder.to_pandas(name), holder.to_arrow(name)
            assert table.column_names == list(frame.columns), (holder, name)
            for column in frame.columns:
                assert table.schema.field(column).type == kinds[str(frame[column].dtype)]
                want = [None if pd.isna(v) else v for v in frame[column].tolist()]
                assert table.column(column).to_pylist() == want, (name, column)
            checked += table.num_rows
    assert checked > 100
