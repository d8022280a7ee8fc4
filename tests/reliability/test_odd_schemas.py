"""Odd schemas (issue 33): real sample traces mutated with sqlite3 so that an id the analyses
group or join by (``globalPid``, ``globalTid``, ``deviceId``, ``streamId``, ``correlationId``)
is absent, renamed, NULL, not an integer or out of range, and so that ``StringIds`` holds a
million strings nothing refers to.

The report must name the table, the column and how many rows, leave no row to a made-up
process, thread or GPU (``pid_of(-1)`` is 16777215), join no two unusable correlation ids,
and read only the strings it shows.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from nsysprobe.analyses.events import Events
from nsysprobe.analyses.health import analyze_health
from nsysprobe.report.analyze import analyze
from nsysprobe.report.saved import to_json
from nsysprobe.trace.reader import Trace
from nsysprobe.trace.values import as_text, pid_of

from .hostile import crafted, run_cli
from conftest import SAMPLE_TRACES, SHARED_TRACES

BASE = SAMPLE_TRACES / "h200_baseline.sqlite"  # one process, one GPU
GRAPHS = SAMPLE_TRACES / "h200_gpu_bound_graph.sqlite"  # graph replays, no kernel rows
CTXSW = SAMPLE_TRACES / "h200_multiworker-cpuctxsw.sqlite"  # SCHED_EVENTS
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
GRAPH = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
OSRT = "OSRT_API"
NVTX = "NVTX_EVENTS"
RANGES = "eventType IN (59, 60)"
CLOSED = '"end" IS NOT NULL AND "end" >= "start"'
# What a row with no usable process or thread id used to be given to: pid_of(-1).
MADE_UP_PID = 0xFFFFFF
# The tables' frames in ``Events``.
FRAME = {KERNEL: "kernels", MEMCPY: "memcpy", MEMSET: "memset", GRAPH: "graphs"}


def mutated(folder: Path, *sql: str, base: Path = BASE) -> Path:
    """A copy of ``base`` (h200_baseline unless told) changed by ``sql``."""
    return crafted(folder, *sql, base=base)


def unconstrained(table: str) -> list[str]:
    """SQL rebuilding ``table`` without its NOT NULL constraints (CREATE ... AS keeps the
    declared types), rows in the same order."""
    return [
        f"CREATE TABLE copied AS SELECT * FROM {table} ORDER BY rowid",
        f"DROP TABLE {table}",
        f"ALTER TABLE copied RENAME TO {table}",
    ]


def count(path: Path, table: str, where: str) -> int:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        return db.execute(f"SELECT count(*) FROM {table} WHERE {where}").fetchone()[0]


def loaded(path: Path, sched: bool = False):
    """(events, {finding id: finding}), the trace closed."""
    with Trace(path) as trace:
        events = Events.load(trace, sched=sched)
        findings = {f.id: f for f in analyze_health(events)}
        # what the analyses group by, read while the trace is open
        facts = (events.device_ids, events.gpu_pids, dict(events.device_pids))
    return events, findings, facts


def report_json(path: Path) -> dict:
    return json.loads(to_json(analyze(path)))


def assert_nothing_made_up(path: Path) -> dict:
    """The report names no made-up process (16777215) and no GPU -1; returns it."""
    report = report_json(path)
    text = json.dumps(report)
    assert str(MADE_UP_PID) not in text
    assert "GPU -1" not in text
    assert '"device_id": -1' not in text
    return report


# (table, SET clause, rows, base): an owner id made unusable in some rows
OWNER_CASES = {
    "kernel-pid-null": (KERNEL, "globalPid = NULL", "rowid % 5 = 0", BASE),
    "kernel-pid-text": (KERNEL, "globalPid = 'rank0'", "rowid % 7 = 0", BASE),
    "kernel-pid-real": (KERNEL, "globalPid = 1.5", "rowid % 7 = 1", BASE),
    "kernel-pid-negative": (KERNEL, "globalPid = -1", "rowid % 9 = 0", BASE),
    "memcpy-pid-null": (MEMCPY, "globalPid = NULL", "rowid % 2 = 0", BASE),
    "memset-pid-null": (MEMSET, "globalPid = NULL", "rowid % 3 = 0", BASE),
    "graph-pid-null": (GRAPH, "globalPid = NULL", "rowid % 4 = 0", GRAPHS),
    "kernel-device-null": (KERNEL, "deviceId = NULL", "rowid % 5 = 0", BASE),
    "kernel-device-int64-max": (KERNEL, "deviceId = 9223372036854775807", "rowid % 5 = 1", BASE),
    "kernel-device-2^31": (KERNEL, "deviceId = 2147483648", "rowid % 5 = 2", BASE),
    "kernel-device-negative": (KERNEL, "deviceId = -2", "rowid % 5 = 3", BASE),
    "memset-device-blob": (MEMSET, "deviceId = x'00'", "rowid % 2 = 1", BASE),
}


@pytest.mark.parametrize("case", list(OWNER_CASES))
def test_gpu_rows_without_a_usable_process_or_gpu_are_left_out_and_named(case, tmp_path):
    table, change, rows, base = OWNER_CASES[case]
    column = change.split(" = ")[0]
    events, findings, (devices, pids, _) = loaded(base)
    before = len(getattr(events, FRAME[table]))
    path = mutated(
        tmp_path, *unconstrained(table), f"UPDATE {table} SET {change} WHERE {rows}", base=base
    )
    path_rows = count(path, table, rows)
    assert path_rows
    events, findings, facts = loaded(path)
    assert facts == (devices, pids, {devices[0]: set(pids)})  # the one process on the one GPU
    assert len(getattr(events, FRAME[table])) == before - path_rows
    assert "gpu_shared" not in findings
    message = findings["rows_without_owner"].message
    assert f"{table}.{column} is NULL, not an integer or out of range in " in message
    assert f" {path_rows:,} of {before:,} rows" in message
    assert findings["rows_without_owner"].severity == "warning"
    report = assert_nothing_made_up(path)
    assert report["trace"]["processes"] == 1
    assert "rows_without_owner" in {f["id"] for f in report["findings"]}


@pytest.mark.parametrize(
    "table, rows",
    [(RUNTIME, "rowid % 4 = 0"), (OSRT, "rowid % 2 = 0"), (NVTX, f"{RANGES} AND rowid % 3 = 0")],
)
def test_calls_and_ranges_without_a_usable_thread_are_left_out_and_named(table, rows, tmp_path):
    frame = {RUNTIME: "runtime", OSRT: "osrt", NVTX: "nvtx"}[table]
    events, _, _ = loaded(BASE)
    total = len(getattr(events, frame))
    path = mutated(
        tmp_path, *unconstrained(table), f"UPDATE {table} SET globalTid = NULL WHERE {rows}"
    )
    left = count(path, table, f"({rows}) AND {CLOSED}")
    assert left
    events, findings, _ = loaded(path)
    assert len(getattr(events, frame)) == total - left
    assert (getattr(events, frame)["globalTid"] >= 0).all()
    message = findings["rows_without_owner"].message
    assert f"{table}.globalTid is NULL, not an integer or out of range in {left:,} of " in message
    assert f" of {total:,} rows" in message
    assert "no thread or process to give them to" in message
    assert_nothing_made_up(path)


def test_a_renamed_or_dropped_owner_column_is_named_not_guessed(tmp_path):
    # Every GPU table loses its process id: no GPU work is analyzed, and the report says why
    # instead of calling the capture empty.
    path = mutated(
        tmp_path,
        f'ALTER TABLE {KERNEL} RENAME COLUMN "globalPid" TO "pid_renamed"',
        *unconstrained(MEMCPY),
        f"ALTER TABLE {MEMCPY} DROP COLUMN globalPid",
        f'ALTER TABLE {MEMSET} RENAME COLUMN "globalPid" TO "globalPid_old"',
    )
    events, findings, _ = loaded(path)
    assert not events.has_gpu_activity and events.gpu_pids == []
    message = findings["rows_without_owner"].message
    for table in (KERNEL, MEMCPY, MEMSET):
        assert f"{table} has no globalPid column: all {count(path, table, '1'):,} rows" in message
    assert "no_gpu_activity" not in findings and "capture_not_started" not in findings
    assert_nothing_made_up(path)


def test_a_renamed_device_column_is_named(tmp_path):
    path = mutated(tmp_path, f'ALTER TABLE {MEMSET} RENAME COLUMN "deviceId" TO "device"')
    events, findings, (devices, _, _) = loaded(path)
    assert len(events.memset) == 0 and len(events.kernels) == count(path, KERNEL, "1")
    assert devices == [0]
    message = findings["rows_without_owner"].message
    assert f"{MEMSET} has no deviceId column: all {count(path, MEMSET, '1'):,} rows" in message
    assert "no GPU to put them on" in message
    assert_nothing_made_up(path)


def test_unusable_correlation_ids_join_nothing_and_are_named(tmp_path):
    # One kernel and one CUDA call lose their correlation ids: the kernel stays busy time but
    # is launched by no call (not by the call that lost its id too).
    path = mutated(
        tmp_path,
        *unconstrained(KERNEL),
        *unconstrained(RUNTIME),
        f"UPDATE {KERNEL} SET correlationId = NULL WHERE rowid = 100",
        f"UPDATE {RUNTIME} SET correlationId = 'x' WHERE rowid IN (SELECT rowid FROM {RUNTIME} "
        "WHERE nameId IN (SELECT id FROM StringIds WHERE value LIKE 'cudaLaunchKernel%') "
        "LIMIT 1 OFFSET 200)",
    )
    kernels = count(path, KERNEL, "1")
    with Trace(path) as trace:
        events = Events.load(trace)
        findings = {f.id: f for f in analyze_health(events)}
        k = events.kernels
        assert len(k) == kernels
        lost = k["correlationId"] < 0
        assert int(lost.sum()) == 1
        row = events.issuing_rows(pid_of(k["globalPid"][lost]), k["correlationId"][lost])
        assert row.tolist() == [-1]
        # every other kernel still finds its call
        found = events.issuing_rows(pid_of(k["globalPid"]), k["correlationId"]) >= 0
        assert int(found.sum()) >= kernels - 2
    message = findings["ids_unusable"].message
    assert f"{KERNEL}.correlationId is NULL, not an integer or out of range in 1 of " in message
    assert "not tied to the CUDA call that launched them" in message
    assert f"{RUNTIME}.correlationId is NULL, not an integer or out of range in 1 of " in message
    assert "rows_without_owner" not in findings


def busy_ns(events: Events) -> dict[int, int]:
    return {d: int((events.device_busy(d)[1] - events.device_busy(d)[0]).sum()) for d in [0]}


def test_unusable_stream_ids_keep_their_busy_time_and_are_named(tmp_path):
    events, _, _ = loaded(BASE)
    busy = busy_ns(events)
    path = mutated(
        tmp_path, *unconstrained(KERNEL), f"UPDATE {KERNEL} SET streamId = -7 WHERE rowid % 3 = 0"
    )
    events, findings, _ = loaded(path)
    assert busy_ns(events) == busy
    message = findings["ids_unusable"].message
    assert f"{KERNEL}.streamId is NULL, not an integer or out of range in " in message
    assert "counted as GPU busy time" in message


def test_scheduling_events_without_a_usable_thread_are_left_out_and_named(tmp_path):
    path = mutated(
        tmp_path,
        *unconstrained("SCHED_EVENTS"),
        "UPDATE SCHED_EVENTS SET globalTid = NULL WHERE rowid % 10 = 0",
        base=CTXSW,
    )
    left = count(path, "SCHED_EVENTS", "rowid % 10 = 0")
    events, findings, _ = loaded(path, sched=True)
    assert len(events.lookups.sched) == count(path, "SCHED_EVENTS", "1") - left
    assert (events.lookups.sched["globalTid"] >= 0).all()
    assert f"SCHED_EVENTS.globalTid is NULL, not an integer or out of range in {left:,} of " in (
        findings["rows_without_owner"].message
    )


NORMAL = sorted(SAMPLE_TRACES.glob("*.sqlite")) + sorted(SHARED_TRACES.glob("*.sqlite"))


@pytest.mark.parametrize("path", NORMAL, ids=[p.name for p in NORMAL])
def test_normal_exports_have_every_id(path):
    events, findings, _ = loaded(path)
    assert events.lookups.unusable_ids == ()
    assert events.left_out == {}
    assert not {"rows_without_owner", "ids_unusable"} & set(findings)


# -- strings nothing refers to ---------------------------------------------------------------

JUNK_ROWS = 1_000_000


def with_junk_strings(folder: Path) -> Path:
    """A copy of ``BASE`` with ``JUNK_ROWS`` more StringIds rows that no column names."""
    return crafted(
        folder,
        "INSERT INTO StringIds (id, value) WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL "
        f"SELECT i + 1 FROM c WHERE i < {JUNK_ROWS}) SELECT (SELECT max(id) FROM StringIds) + i, "
        "printf('an unreferenced string, number %d, of some length %s', i, hex(randomblob(8))) "
        "FROM c",
        name="junk.sqlite",
        base=BASE,
    )


def without_path(stdout: str) -> dict:
    report = json.loads(stdout)
    report["trace"].pop("path")
    return report


def test_unreferenced_strings_cost_no_memory(tmp_path):
    junk = with_junk_strings(tmp_path)
    plain = run_cli("analyze", str(BASE), "--format", "json", "--no-history")
    bloated = run_cli("analyze", str(junk), "--format", "json", "--no-history")
    assert plain.code == bloated.code == 0, bloated.stderr
    assert without_path(bloated.stdout) == without_path(plain.stdout)
    # Reading every string took some 250 MiB more per million rows.
    assert bloated.peak_rss_mib < plain.peak_rss_mib + 40, (plain, bloated)


def test_strings_are_the_same_read_by_id(tmp_path):
    """Names read by id are those of the whole table, on a real export and on a copy whose
    StringIds has no index on ``id`` (an id held by two rows names the last one's text)."""
    unindexed = mutated(
        tmp_path,
        "CREATE TABLE copied AS SELECT id, value FROM StringIds ORDER BY rowid",
        "DROP TABLE StringIds",
        "ALTER TABLE copied RENAME TO StringIds",
        "INSERT INTO StringIds SELECT id, 'renamed ' || value FROM StringIds WHERE id % 2 = 0",
        "INSERT INTO StringIds VALUES ('7', 'an id that is text'), (8.0, 'an id that is a real')",
    )
    for path in (BASE, unindexed):
        with Trace(path) as trace:
            # the whole table as the reader took it before issue 33, through its connection
            rows = trace._db.execute("SELECT id, value FROM StringIds").fetchall()
            whole = {i: as_text(v) for i, v in rows if isinstance(i, int)}
            strings = trace.strings
            ids = [*whole, max(whole) + 1, -1, 1 << 62]
            assert [strings.get(i, "<unknown>") for i in ids] == [
                *whole.values(),
                *["<unknown>"] * 3,
            ]
            assert 7 not in whole or strings[7] == whole[7]
            with pytest.raises(KeyError):
                strings[max(whole) + 1]
            events = Events.load(trace)
            names = {events.name_of(i) for i in set(events.kernels["nameId"].tolist())}
            assert names == {whole[i] for i in set(events.kernels["nameId"].tolist())}
