"""Real exports, mutated: whatever a download, another nsys or a crashed run leaves, analyze
ends in a report (flagging the rows it skipped) or a one-line error with exit code 2.

The mutations are applied with sqlite3 to a copy of a trace in sample_traces/ (2025.3 schema):
tables dropped, renamed or emptied; columns dropped or renamed; NULLs, text, BLOBs, non-UTF-8
text, floats, negative and huge integers, megabytes-long strings and terminal escapes written
into chosen rows; intervals reversed; rows duplicated (duplicate ids); a table replaced by a
never-ending recursive view or by a virtual table; triggers that would grow a table on any
write; an expensive generated column hiding the rowid; 20,000 NVTX ranges nested in one
another; the journal switched to WAL; then the file truncated or overwritten in places.
Hypothesis is derandomized, so CI tries the same cases on every run.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from .checks import check_analyze
from .conftest import CASES

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
BASES = ("h200_baseline.sqlite", "h200_multiworker-cpuctxsw.sqlite", "h200_streams.sqlite")

# The tables the reader reads, and the columns worth aiming at (others are drawn too).
TABLES = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "NVTX_EVENTS",
    "OSRT_API",
    "PROFILER_OVERHEAD",
    "SCHED_EVENTS",
    "StringIds",
    "ThreadNames",
    "PROCESSES",
    "TARGET_INFO_GPU",
    "TARGET_INFO_CUDA_DEVICE",
    "TARGET_INFO_SESSION_START_TIME",
    "ANALYSIS_DETAILS",
    "META_DATA_EXPORT",
    "META_DATA_CAPTURE",
    "ENUM_CUDA_MEM_KIND",
)
KEY_COLUMNS = (
    "start",
    "end",
    "globalTid",
    "globalPid",
    "deviceId",
    "streamId",
    "correlationId",
    "nameId",
    "shortName",
    "text",
    "textId",
    "eventType",
    "id",
    "value",
    "name",
    "bytes",
    "copyKind",
    "srcKind",
    "dstKind",
    "cpu",
    "isSchedIn",
    "color",
    "pid",
    "label",
    "utcEpochNs",
    "startTime",
    "stopTime",
)
VALUES = (
    "NULL",
    "0",
    "-1",
    "-9223372036854775808",
    "9223372036854775807",
    "4611686018427387904",
    "'abc'",
    "'12abc'",
    "''",
    "1.5e300",
    "-0.5",
    "CAST(x'fffe80' AS TEXT)",
    "x'ff00fe'",
    "'''; DROP TABLE StringIds; --'",
    # what a hostile name holds: terminal escapes, a carriage return, bidi marks
    "char(27) || ']0;owned' || char(7) || char(27) || '[2J' || char(13) || char(8238) || 'x'",
    # a name of megabytes
    "printf('%.*c', 3000000, 'n')",
)
ROWS = ("1", "rowid % 7 = 0", "rowid % 2 = 1", "rowid = (SELECT min(rowid) FROM {t})")


def _columns() -> dict[str, tuple[str, ...]]:
    found: dict[str, set[str]] = {}
    for name in BASES:
        with sqlite3.connect(f"file:{SAMPLES / name}?mode=ro", uri=True) as db:
            for table in TABLES:
                cols = [r[1] for r in db.execute(f'PRAGMA table_info("{table}")')]
                found.setdefault(table, set()).update(cols)
    return {t: tuple(sorted(c)) for t, c in found.items() if c}


COLUMNS = _columns()


@st.composite
def mutations(draw):
    table = draw(st.sampled_from(sorted(COLUMNS)))
    cols = COLUMNS[table]
    keys = [c for c in KEY_COLUMNS if c in cols]
    column = draw(st.sampled_from(keys) if keys and draw(st.booleans()) else st.sampled_from(cols))
    kind = draw(
        st.sampled_from(
            ("set", "set", "set", "reverse", "duplicate", "drop_table", "rename_table")
            + ("empty_table", "drop_column", "rename_column")
            + ("view", "virtual", "trigger", "generated", "nest")
        )
    )
    return kind, table, column, draw(st.sampled_from(VALUES)), draw(st.sampled_from(ROWS))


def _recreate(db: sqlite3.Connection, table: str, columns: list[str]) -> None:
    """Rebuild ``table`` with only ``columns`` and no constraints (ids may then repeat)."""
    cols = ", ".join(f'"{c}"' for c in columns)
    db.execute(f'CREATE TABLE "{table}__new" AS SELECT {cols} FROM "{table}"')
    db.execute(f'DROP TABLE "{table}"')
    db.execute(f'ALTER TABLE "{table}__new" RENAME TO "{table}"')


def _update(db: sqlite3.Connection, table: str, present: list[str], change: str, where: str):
    try:
        db.execute(f'UPDATE "{table}" SET {change} WHERE {where}')
    except sqlite3.IntegrityError:  # a NOT NULL or UNIQUE column: drop the constraints
        _recreate(db, table, present)
        db.execute(f'UPDATE "{table}" SET {change} WHERE {where}')


NESTED = 20_000


def _nest(db: sqlite3.Connection, present: list[str]) -> None:
    """``NESTED`` push/pop ranges, each inside the one before, over the whole table's span, on
    the thread of its first range."""
    extra = [c for c in ("eventType", "text", "globalTid", "domainId") if c in present]
    values = {"eventType": "59", "text": "'nest ' || i", "globalTid": "tid", "domainId": "0"}
    tid = "(SELECT globalTid FROM NVTX_EVENTS LIMIT 1)" if "globalTid" in present else "0"
    db.execute(
        f"INSERT INTO NVTX_EVENTS (start, end{''.join(', ' + c for c in extra)}) "
        f"WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < {NESTED - 1}) "
        f"SELECT lo + i, hi - i{''.join(', ' + values[c] for c in extra)} FROM n, "
        f"(SELECT min(start) AS lo, max(end) AS hi, "
        f"{tid} AS tid "
        f"FROM NVTX_EVENTS WHERE typeof(start) = 'integer' AND typeof(end) = 'integer') "
        f"WHERE lo IS NOT NULL AND hi - lo > {2 * NESTED}"
    )


def apply(db: sqlite3.Connection, mutation) -> None:
    kind, table, column, value, rows = mutation
    (sql,) = db.execute(
        "SELECT coalesce(max(sql), '') FROM sqlite_master WHERE name = ? AND type = 'table'",
        (table,),
    ).fetchone()
    if not sql.upper().startswith("CREATE TABLE"):
        return  # an earlier mutation removed it or made it a view or a virtual table
    present = [r[1] for r in db.execute(f'PRAGMA table_info("{table}")')]
    if column not in present:
        return  # an earlier mutation removed it
    where = rows.format(t=f'"{table}"')
    if kind == "set":
        _update(db, table, present, f'"{column}" = {value}', where)
    elif kind == "reverse" and {"start", "end"} <= set(present):
        _update(db, table, present, '"start" = "end", "end" = "start"', where)
    elif kind == "duplicate":
        _recreate(db, table, present)
        db.execute(f'INSERT INTO "{table}" SELECT * FROM "{table}" WHERE {where}')
    elif kind == "drop_table":
        db.execute(f'DROP TABLE "{table}"')
    elif kind == "rename_table":
        db.execute(f'ALTER TABLE "{table}" RENAME TO "{table}_old"')
    elif kind == "empty_table":
        db.execute(f'DELETE FROM "{table}"')
    elif kind == "drop_column":
        _recreate(db, table, [c for c in present if c != column])
    elif kind == "rename_column":
        db.execute(f'ALTER TABLE "{table}" RENAME COLUMN "{column}" TO "{column}_old"')
    elif kind == "view":  # read, it never ends
        db.execute(f'ALTER TABLE "{table}" RENAME TO "{table}__raw"')
        db.execute(
            f'CREATE VIEW "{table}" AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 '
            f'FROM n) SELECT "{table}__raw".* FROM n, "{table}__raw"'
        )
    elif kind == "virtual":
        db.execute(f'ALTER TABLE "{table}" RENAME TO "{table}__raw"')
        db.execute(f'CREATE VIRTUAL TABLE "{table}" USING fts5({", ".join(present)})')
    elif kind == "trigger":  # on any write, the table doubles
        for event in ("INSERT", "UPDATE", "DELETE"):
            db.execute(
                f'CREATE TRIGGER IF NOT EXISTS "{table}_{event}" AFTER {event} ON "{table}" BEGIN '
                f'INSERT INTO "{table}" SELECT * FROM "{table}"; END'
            )
    elif kind == "generated" and "rowid" not in {
        r[1] for r in db.execute(f'PRAGMA table_xinfo("{table}")')
    }:  # 200 MB each time a row's "rowid" is read
        db.execute(
            f"ALTER TABLE \"{table}\" ADD COLUMN \"rowid\" AS (printf('%.*c', 200000000, 'z'))"
        )
    elif kind == "nest" and table == "NVTX_EVENTS" and {"start", "end"} <= set(present):
        _nest(db, present)


def mutated_copy(folder: Path, base: str, changes, wal: bool) -> Path:
    path = folder / "trace.sqlite"
    shutil.copyfile(SAMPLES / base, path)
    db = sqlite3.connect(path, isolation_level=None)
    try:
        # Triggers last: the other mutations write, and would fire them.
        for change in sorted(changes, key=lambda change: change[0] == "trigger"):
            apply(db, change)
        if wal:
            db.execute("PRAGMA journal_mode=WAL")
    finally:
        db.close()
    assert not [p for p in folder.iterdir() if p != path], "a mutation left a sidecar"
    return path


FORMATS = st.sampled_from(("text", "json", "markdown", "html"))
SETTINGS = settings(
    deadline=None,
    derandomize=True,
    # No shrinking: a case takes a second or more, and derandomized runs repeat the failing one.
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _analyze(path: Path, fmt: str) -> str:
    CASES["generated"] += 1
    if fmt != "html":
        return check_analyze(path, fmt=fmt)
    out = Path(tempfile.mkdtemp(prefix="html-")) / "report.html"
    try:
        return check_analyze(path, "--html", str(out), fmt="json")
    finally:
        shutil.rmtree(out.parent)


@settings(SETTINGS, max_examples=300)
@given(
    base=st.sampled_from(BASES),
    changes=st.lists(mutations(), min_size=1, max_size=4),
    wal=st.booleans(),
    fmt=FORMATS,
)
# Each new kind of hostile file at least once, whatever hypothesis draws.
@example(BASES[0], [("view", "NVTX_EVENTS", "text", "0", "1")], False, "text")
@example(BASES[1], [("view", "StringIds", "value", "0", "1")], True, "json")
@example(BASES[2], [("virtual", "CUPTI_ACTIVITY_KIND_KERNEL", "start", "0", "1")], False, "json")
@example(BASES[0], [("trigger", "StringIds", "value", "0", "1")], False, "html")
@example(BASES[0], [("generated", "NVTX_EVENTS", "text", "0", "1")], False, "json")
@example(BASES[1], [("generated", "CUPTI_ACTIVITY_KIND_RUNTIME", "start", "0", "1")], False, "text")
@example(BASES[0], [("nest", "NVTX_EVENTS", "start", "0", "1")], False, "json")
@example(BASES[2], [("set", "StringIds", "value", VALUES[-1], "1")], False, "markdown")
@example(BASES[0], [("set", "NVTX_EVENTS", "text", VALUES[-2], "1")], False, "text")
@example(BASES[1], [("set", "TARGET_INFO_GPU", "name", VALUES[-2], "1")], False, "html")
def test_mutated_exports_end_in_a_report_or_one_line_error(base, changes, wal, fmt):
    with tempfile.TemporaryDirectory() as folder:
        _analyze(mutated_copy(Path(folder), base, changes, wal), fmt)


@settings(SETTINGS, max_examples=150)
@given(
    base=st.sampled_from(BASES),
    cut=st.one_of(st.just(1.0), st.floats(0.0, 1.0)),
    patch=st.lists(st.tuples(st.floats(0.0, 1.0), st.binary(min_size=1, max_size=64)), max_size=3),
    fmt=FORMATS,
)
def test_truncated_and_overwritten_files_end_in_a_report_or_one_line_error(base, cut, patch, fmt):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "trace.sqlite"
        data = bytearray((SAMPLES / base).read_bytes())
        for where, garbage in patch:
            at = int(where * (len(data) - len(garbage)))
            data[at : at + len(garbage)] = garbage
        path.write_bytes(bytes(data[: max(1, int(cut * len(data)))] if cut < 1 else data))
        _analyze(path, fmt)


# -- inputs that are not exports at all -------------------------------------------------------


def _not_sqlite(path: Path) -> Path:
    path.write_text("id,start,end\n1,2,3\n")
    return path


def _empty(path: Path) -> Path:
    path.write_bytes(b"")
    return path


def _directory(path: Path) -> Path:
    path.mkdir()
    return path


def _other_sqlite(path: Path) -> Path:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE notes (id INTEGER, body TEXT)")
    return path


def _only_header(path: Path) -> Path:
    path.write_bytes((SAMPLES / BASES[0]).read_bytes()[:100])
    return path


@pytest.mark.parametrize(
    "make", [_not_sqlite, _empty, _directory, _other_sqlite, _only_header, None]
)
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_files_that_are_not_exports_are_one_line_errors(tmp_path, make, fmt):
    path = tmp_path / "trace.sqlite"
    if make is not None:
        make(path)
    assert check_analyze(path, fmt=fmt) == "error"


def test_a_database_locked_for_writing_is_still_read(tmp_path):
    path = tmp_path / "trace.sqlite"
    shutil.copyfile(SAMPLES / BASES[0], path)
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    try:
        assert check_analyze(path, fmt="json") == "report"
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_a_database_locked_exclusively_is_a_one_line_error(tmp_path):
    path = tmp_path / "trace.sqlite"
    shutil.copyfile(SAMPLES / BASES[0], path)
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN EXCLUSIVE")
    try:
        result = check_analyze(path)
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert result == "error"


@pytest.mark.parametrize("header", [b"NVIDIA Tegra Profiler Report 2099@1@1@11-0v0.\n", b"junk"])
def test_reports_from_a_newer_nsys_or_not_reports_are_one_line_errors(tmp_path, header):
    report = tmp_path / "future.nsys-rep"
    report.write_bytes(header + b"\0" * 4096)
    assert check_analyze(report) == "error"
    assert not report.with_suffix(".sqlite").exists()


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_through_a_real_process(tmp_path, fmt):
    changes = [
        ("set", "CUPTI_ACTIVITY_KIND_KERNEL", "start", "9223372036854775807", "rowid % 7 = 0"),
        ("set", "StringIds", "value", "CAST(x'fffe80' AS TEXT)", "1"),
        ("reverse", "NVTX_EVENTS", "start", "NULL", "rowid % 2 = 1"),
    ]
    assert (
        check_analyze(
            mutated_copy(tmp_path, BASES[0], changes, False), fmt=fmt, subprocess_run=True
        )
        == "report"
    )
    (tmp_path / "trace.sqlite").write_bytes(b"SQLite format 3\x00" + b"\xff" * 4000)
    assert check_analyze(tmp_path / "trace.sqlite", fmt=fmt, subprocess_run=True) == "error"
