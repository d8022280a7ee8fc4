"""``nsysprobe scrub`` leaves no secret: an allow-list copy, read-only input, one writer (#12).

Real exports (every trace in sample_traces/, and the three in ../shared/traces/ where present)
get a distinct secret planted in every text column of every table, text in the number columns,
tables and columns a future nsys might add (process arguments, ``jsonText``, a BLOB, an unused
column of a table the analyses read), and the kinds found in public traces, each where nsys
puts it. The scrubbed copy's bytes, and every file left in its folder, must hold none of them,
while ``nsysprobe analyze`` gives the same figures on the copy as on the original, and the copy
holds every column the reader reads (recorded through SQLite's authorizer) and none it reads in
no export. Then the hostile cases: triggers and views in the
input, SIGTERM and SIGKILL in the middle of a scrub, two scrubs racing for one ``-o``, and an
``-o`` that is a FIFO, a device or the input.

Secrets in text the analyses show (NVTX, kernel, thread, process and GPU names, metadata that
is kept) are shaped as real ones are (``HF_TOKEN=hf_...``, ``Bearer ...``, a home path); the
others are plain markers that only an allow-list removes.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import re
import secrets
import shutil
import signal
import sqlite3
import stat
import string
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nsysprobe.cli import main
from nsysprobe.trace import schema

from conftest import SAMPLE_TRACES, SHARED_TRACES
from exports import VM, gpid, gtid, ladder_rung

REPO = Path(__file__).resolve().parents[2]
TOPOLOGY = SAMPLE_TRACES / "h200_topology"


def _real_traces() -> list[Path]:
    shared = sorted(SHARED_TRACES.glob("*.sqlite")) if SHARED_TRACES.is_dir() else []
    return sorted(SAMPLE_TRACES.glob("*.sqlite")) + shared


TRACES = _real_traces()

# Text the analyses show or match: kept (scrubbed), so what is planted there is shaped as a
# secret a scrubber must recognise. Everything else gets a plain marker.
SHOWN = {
    ("NVTX_EVENTS", "text"),
    ("StringIds", "value"),
    ("PROCESSES", "name"),
    ("TARGET_INFO_GPU", "name"),
    ("TARGET_INFO_GPU", "busLocation"),
    ("TARGET_INFO_CUDA_DEVICE", "name"),
    ("TARGET_INFO_CUDA_GPU", "name"),
    ("ENUM_CUDA_MEM_KIND", "label"),
    ("ENUM_CUDA_MEMCPY_OPER", "name"),
    ("DIAGNOSTIC_EVENT", "text"),
    ("META_DATA_EXPORT", "name"),
    ("META_DATA_EXPORT", "value"),
    ("EXPORT_META_DATA", "name"),
    ("EXPORT_META_DATA", "value"),
    ("META_DATA_CAPTURE", "name"),
    ("META_DATA_CAPTURE", "value"),
}

# How secrets look in real traces: each takes a marker (letters and digits).
SHAPES = (
    lambda m: f"HF_TOKEN=hf_{m}",
    lambda m: f"--hf-token=hf_{m}",
    lambda m: f"Authorization: Bearer {m}",
    lambda m: f"env WANDB_API_KEY={m} python train.py",
    lambda m: f"aws_secret_access_key={m}",
    lambda m: f"/home/{m}/project/train.py",
    lambda m: f"C:\\Users\\{m}\\run",
    lambda m: f"{m}@example.com",
    lambda m: f"export OPENAI_API_KEY=sk-proj-{m}",
    lambda m: f"password: {m}",
    lambda m: f"https://{m}.example.com/v1",
    lambda m: f"ghp_{m}",
    lambda m: f"~/{m}/.netrc",
    lambda m: f"/tmp/{m}/out.log",
    lambda m: f"--api-key {m}",
    # forms a hostile tester found surviving (r10): any separator after a secret's name
    lambda m: f"password:\n  {m}",
    lambda m: f'password="{m}',
    lambda m: f':password => "{m}"',
    lambda m: f"api_key := {m}",
    lambda m: f'$env:OPENAI_API_KEY="{m}"',
    lambda m: f"PGPASSWORD=({m})",
    lambda m: f"sshpass -p {m} ssh host",
    lambda m: f"password\u00a0=\u00a0{m}",
    lambda m: f"AccountKey={m}==;",
)


# How nsys declares the tables planted into where an export lacks them.
DDL = {
    "StringIds": "id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL",
    "META_DATA_CAPTURE": "name TEXT NOT NULL, value TEXT",
    "META_DATA_EXPORT": "name TEXT NOT NULL, value TEXT",
    "ANALYSIS_FILE": "id INTEGER PRIMARY KEY, filename TEXT, contentId INTEGER, "
    "globalPid INTEGER NOT NULL",
    "ProcessStreams": "globalPid INTEGER NOT NULL, filenameId INTEGER NOT NULL, "
    "contentId INTEGER NOT NULL",
    "TARGET_INFO_SYSTEM_ENV": "globalVid INTEGER, devStateName TEXT NOT NULL, "
    "name TEXT NOT NULL, nameEnum INTEGER NOT NULL, value TEXT NOT NULL",
    "NVTX_EVENTS": "start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, text TEXT, "
    "globalTid INTEGER, textId INTEGER, domainId INTEGER",
    "DIAGNOSTIC_EVENT": "timestamp INTEGER NOT NULL, timestampType INTEGER NOT NULL, "
    "source INTEGER NOT NULL, severity INTEGER NOT NULL, text TEXT NOT NULL, globalPid INTEGER",
    "PROCESSES": "globalPid INTEGER, pid INTEGER, name TEXT",
    "ThreadNames": "nameId INTEGER NOT NULL, priority INTEGER, globalTid INTEGER",
}


class Planted:
    """Distinct secrets, each holding a marker that no export holds by chance."""

    def __init__(self):
        self.where: dict[str, str] = {}

    def marker(self, where: str) -> str:
        # A key's form: 18 hex digits with a letter among them. The scrubber reads a run of
        # digits as one ``#`` (its plans are kept per pattern), so ``zq`` and 18 decimal
        # digits (one draw in ~4,700) reads as ``zq#``: behind ``ghp_``, three characters, no
        # GitHub token (a fresh-clone test run of 6b24aa0 drew one, 2026-12-05).
        m = "zq" + secrets.token_hex(9)
        while m[2:].isdigit():
            m = "zq" + secrets.token_hex(9)
        self.where[m] = where
        return m

    def shaped(self, where: str) -> str:
        return SHAPES[len(self.where) % len(SHAPES)](self.marker(where))

    def plain(self, where: str) -> str:
        return f"planted {self.marker(where)}"

    def text(self, table: str, column: str, where: str) -> str:
        return self.shaped(where) if (table, column) in SHOWN else self.plain(where)

    def found_in(self, data: bytes) -> list[str]:
        return [f"{w} ({m})" for m, w in self.where.items() if m.encode() in data]


def _tables(db: sqlite3.Connection) -> list[str]:
    rows = db.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
    )
    return [name for (name,) in rows]


def _columns(db: sqlite3.Connection, table: str) -> list[tuple[str, str, int]]:
    """(name, declared type, pk) of the table's columns."""
    info = db.execute(f'PRAGMA table_info("{table}")').fetchall()
    return [(row[1], (row[2] or "").upper(), row[5]) for row in info]


def _is_number(declared: str) -> bool:
    return "INT" in declared or declared in ("REAL", "FLOAT", "DOUBLE", "NUMERIC")


def _ensure(db: sqlite3.Connection, table: str) -> None:
    """``table`` as nsys makes it: created, or given the columns it lacks (a scrubbed sample
    keeps only the columns nsysprobe reads, e.g. an empty ``DIAGNOSTIC_EVENT("text")``)."""
    if table not in _tables(db):
        db.execute(f'CREATE TABLE "{table}" ({DDL[table]})')
        return
    present = {row[1] for row in db.execute(f'PRAGMA table_info("{table}")')}
    for column in DDL[table].split(", "):
        name = column.split()[0]
        if name not in present:
            db.execute(f'ALTER TABLE "{table}" ADD COLUMN "{name}"')


def _insert(db: sqlite3.Connection, table: str, **values) -> int:
    cols = ", ".join(f'"{c}"' for c in values)
    marks = ", ".join("?" * len(values))
    return db.execute(
        f'INSERT INTO "{table}" ({cols}) VALUES ({marks})', tuple(values.values())
    ).lastrowid


def _string(db: sqlite3.Connection, text: str) -> int:
    (top,) = db.execute("SELECT coalesce(max(id), 0) FROM StringIds").fetchone()
    db.execute("INSERT INTO StringIds (id, value) VALUES (?, ?)", (top + 1, text))
    return top + 1


def plant_where_nsys_puts_them(db: sqlite3.Connection, p: Planted) -> None:
    """The kinds of secrets found in shared traces, each in the table nsys stores it in."""
    tid, pid = gtid(), gpid()
    _ensure(db, "StringIds")
    _ensure(db, "META_DATA_CAPTURE")
    capture = {
        "PROCESS_0:ARGUMENT_1": f"--hf-token=hf_{p.marker('process arguments')}",
        "PROCESS_0:COMMAND": f"env WANDB_API_KEY={p.marker('command line')} python train.py",
        "PROCESS_0:ENVIRONMENT_VARIABLE": f"aws_secret_access_key={p.marker('lower-case aws')}",
        "PROCESS_0:WORKING_DIR": f"/home/{p.marker('home path')}/project",
        "PROCESS_0:USER_NAME": p.marker("capture user name"),
        "DEVICE_DISPLAY_NAME": f"{p.marker('capture host name')}-workstation",
        # a kept option whose name carries text before its key
        f"{p.marker('capture option prefix')}:COLLECT_CUDA_TRACE": "true",
    }
    for name, value in capture.items():
        _insert(db, "META_DATA_CAPTURE", name=name, value=value)
    meta = "EXPORT_META_DATA" if "EXPORT_META_DATA" in _tables(db) else "META_DATA_EXPORT"
    if meta not in _tables(db):
        _ensure(db, "META_DATA_EXPORT")
    for name, value in {
        "EXPORT_USER": p.marker("EXPORT_USER"),
        "EXPORT_HOST": p.marker("EXPORT_HOST"),
        "EXPORT_PARAM_INPUT_PATH_ABS": f"C:\\Users\\{p.marker('C:/Users path')}\\r.nsys-rep",
        "ANALYSIS_FILE": f"/tmp/nvidia/{p.marker('ANALYSIS_FILE metadata')}/stdout.log",
    }.items():
        _insert(db, meta, name=name, value=value)
    _ensure(db, "ANALYSIS_FILE")
    output = _string(db, f"wandb: logged in with {p.marker('program output')}")
    _insert(
        db,
        "ANALYSIS_FILE",
        filename=f"/tmp/nvidia/nsight_systems/{p.marker('ANALYSIS_FILE')}/pid_1_stdout.log",
        contentId=output,
        globalPid=pid,
    )
    _ensure(db, "ProcessStreams")
    _insert(
        db,
        "ProcessStreams",
        globalPid=pid,
        filenameId=_string(db, f"/tmp/{p.marker('stream file name')}/stdout"),
        contentId=_string(db, f"curl -H 'Authorization: Bearer {p.marker('Bearer output')}'"),
    )
    _string(db, f"HOME=/home/x\x00HF_TOKEN={p.marker('environment block')}\x00PATH=/usr/bin")
    _string(db, f"export HF_TOKEN={p.marker('export HF_TOKEN')}")
    _ensure(db, "TARGET_INFO_SYSTEM_ENV")
    for name, value in {
        "HF_TOKEN": f"export HF_TOKEN={p.marker('system env')}",
        "Hostname": p.marker("system env host name"),
    }.items():
        _insert(
            db,
            "TARGET_INFO_SYSTEM_ENV",
            globalVid=VM,
            devStateName="Local",
            name=name,
            nameEnum=1,
            value=value,
        )
    _ensure(db, "NVTX_EVENTS")
    nvtx = {c for c, _, _ in _columns(db, "NVTX_EVENTS")}
    for col, ddl in (("jsonText", "TEXT"), ("binaryData", "TEXT"), ("payload", "BLOB")):
        if col not in nvtx:
            db.execute(f'ALTER TABLE NVTX_EVENTS ADD COLUMN "{col}" {ddl}')
    t0 = 1_000_000
    rows = [
        dict(eventType=34, text=p.plain("NVTX mark")),
        dict(eventType=59, text=f"load /home/{p.marker('NVTX range path')}/data"),
        dict(eventType=59, text=f"save C:\\Users\\{p.marker('NVTX C:/Users path')}\\ckpt.pt"),
        dict(eventType=59, textId=_string(db, f"step Bearer {p.marker('NVTX registered name')}")),
        dict(eventType=75, text=f"team {p.marker('NVTX domain name')}@example.com"),
        dict(
            eventType=59,
            text="Batch 0",
            jsonText=json.dumps({"api_key": p.marker("NVTX jsonText")}),
            binaryData=p.plain("NVTX binaryData"),
            payload=p.plain("NVTX BLOB payload").encode(),
        ),
    ]
    for i, row in enumerate(rows):
        _insert(db, "NVTX_EVENTS", start=t0 + i, end=t0 + i + 10, globalTid=tid, domainId=0, **row)
    _ensure(db, "DIAGNOSTIC_EVENT")
    for text in (
        f"Process was launched by the profiler, see /tmp/nvidia/{p.marker('DIAGNOSTIC_EVENT')}"
        "/pid_1_stdout.log",
        f"Number of incomplete CUPTI events dropped: 3 (HF_TOKEN={p.marker('kept diagnostic')})",
    ):
        _insert(
            db,
            "DIAGNOSTIC_EVENT",
            timestamp=0,
            timestampType=0,
            source=0,
            severity=1,
            text=text,
            globalPid=pid,
        )
    _ensure(db, "PROCESSES")
    _insert(
        db,
        "PROCESSES",
        globalPid=pid,
        pid=4242,
        name=f"/home/{p.marker('process name')}/.venv/bin/python",
    )
    _ensure(db, "ThreadNames")
    _insert(
        db,
        "ThreadNames",
        nameId=_string(db, f"loader of {p.marker('thread name')}@corp.example.com"),
        priority=0,
        globalTid=tid,
    )
    # Tables and columns a future nsys might add.
    db.execute(
        "CREATE TABLE PROCESS_ARGUMENTS (globalPid INTEGER, idx INTEGER, argument TEXT, raw BLOB)"
    )
    _insert(
        db,
        "PROCESS_ARGUMENTS",
        globalPid=pid,
        idx=1,
        argument=f"--hf-token=hf_{p.marker('PROCESS_ARGUMENTS')}",
        raw=p.plain("PROCESS_ARGUMENTS blob").encode(),
    )
    if "CUPTI_ACTIVITY_KIND_KERNEL" in _tables(db):
        db.execute("ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL ADD COLUMN launchCommand TEXT")
        db.execute(
            "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET launchCommand = ? "
            "WHERE rowid = (SELECT min(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL)",
            (p.plain("unused column of a read table"),),
        )


def plant_everywhere(db: sqlite3.Connection, p: Planted) -> None:
    """A secret in every text column of every table (the first row), and a row whose every
    column holds one (text in the number columns too)."""
    for table in _tables(db):
        cols = _columns(db, table)
        texts = [c for c, declared, _ in cols if not _is_number(declared)]
        if texts and db.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]:
            sets = ", ".join(f"\"{c}\" = coalesce(\"{c}\" || ' ', '') || ?" for c in texts)
            db.execute(
                f'UPDATE "{table}" SET {sets} WHERE rowid = (SELECT min(rowid) FROM "{table}")',
                [p.text(table, c, f"{table}.{c}") for c in texts],
            )
        row = {}
        for c, declared, pk in cols:
            if pk and declared.startswith("INT") and sum(1 for *_, k in cols if k) == 1:
                row[c] = db.execute(
                    f'SELECT coalesce(max("{c}"), 0) + 1 FROM "{table}"'
                ).fetchone()[0]
            elif _is_number(declared):
                row[c] = p.plain(f"text in {table}.{c}")
            else:
                row[c] = p.text(table, c, f"{table}.{c} (new row)")
        _insert(db, table, **row)


def planted_copy(trace: Path, folder: Path) -> tuple[Path, Planted]:
    folder.mkdir(parents=True, exist_ok=True)
    src = folder / trace.name
    shutil.copyfile(trace, src)
    p = Planted()
    db = sqlite3.connect(src)
    plant_where_nsys_puts_them(db, p)
    plant_everywhere(db, p)
    db.commit()
    db.close()
    return src, p


def folder_bytes(folder: Path) -> bytes:
    """Every byte of every file under ``folder`` (those that vanish meanwhile are skipped)."""
    parts = []
    for path in sorted(folder.rglob("*")):
        try:
            if path.is_file() and not path.is_symlink():
                parts.append(path.read_bytes())
        except FileNotFoundError:
            continue
    return b"\0".join(parts)


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def one_error_line(output: str) -> str:
    lines = output.splitlines()
    assert len(lines) == 1 and lines[0].startswith("nsysprobe: error: "), output
    return lines[0]


@pytest.mark.parametrize("trace", TRACES, ids=lambda p: p.stem)
def test_no_planted_secret_survives_in_the_copy_or_its_folder(trace, tmp_path):
    src, planted = planted_copy(trace, tmp_path / "in")
    assert len(planted.where) > 60
    out = tmp_path / "out" / "shared.sqlite"
    out.parent.mkdir()
    result = invoke("scrub", str(src), "-o", str(out))
    assert result.exit_code == 0, result.output
    survivors = planted.found_in(folder_bytes(out.parent))
    assert not survivors, f"{len(survivors)} secrets survived: {survivors}"
    assert [p.name for p in out.parent.iterdir()] == ["shared.sqlite"]
    report = invoke("analyze", str(out), "--format", "json", "--no-history")
    assert report.exit_code == 0, report.output
    assert not planted.found_in(report.output.encode())


def _synthetic(version: str, shape: str = ""):
    """A built export of ``version`` with every table the reader reads; ``shape``:
    ``old-names`` (kernels named by ``demangledName`` only, GPUs by ``id``) or
    ``cuda-device`` (GPUs only in ``TARGET_INFO_CUDA_DEVICE``, as 2025.1+ may leave them)."""

    def build(folder: Path) -> Path:
        ex = ladder_rung("multiworker", version=version)
        ex.memcpy_kind_enum()
        ex.gpu("0000:19:00.0")
        if version == "2020.3":
            ex.tables.pop("TARGET_INFO_GPU")
            ex.row("TARGET_INFO_CUDA_GPU", cudaId=0, name="NVIDIA H200", busLocation="0000:19:00.0")
        if shape == "old-names":
            for row in ex.tables["CUPTI_ACTIVITY_KIND_KERNEL"]:
                row.pop("shortName")
            for row in ex.tables["TARGET_INFO_GPU"]:
                row.pop("cuDevice")
        if shape == "cuda-device":
            ex.tables.pop("TARGET_INFO_GPU")
            ex.row("TARGET_INFO_CUDA_DEVICE", gpuId=0, cudaId=0, pid=4242)
        ex.row("TARGET_INFO_SESSION_START_TIME", utcEpochNs=1_700_000_000 * 10**9, utcTime="x")
        ex.row("ANALYSIS_DETAILS", globalVid=VM, duration=10**10, startTime=0, stopTime=10**10)
        ex.row(
            "CUPTI_ACTIVITY_KIND_DRIVER",
            start=2_000_000,
            end=2_100_000,
            globalTid=gtid(),
            correlationId=1,
            nameId=ex.sid("cuLaunchKernel"),
        )
        ex.overhead(3_000_000, 3_500_000)
        ex.graph(4_000_000, 5_000_000, launch_span=(3_900_000, 3_910_000))
        ex.memset(6_000_000, 6_100_000)
        ex.sched(0, 10**9, cpu=3)
        ex.thread_name("pt_data_worker", tid=4250)
        ex.row("PROCESSES", globalPid=gpid(), pid=4242, name="python3")
        ex.nvtx(0, 0, "NCCL", event_type=75, inline_text=True)
        for text in ("Hardware tracing used for CUDA tracing", "Number of events dropped: 12"):
            ex.row(
                "DIAGNOSTIC_EVENT", timestamp=0, source=1, severity=2, text=text, globalPid=gpid()
            )
        name = "_".join(filter(None, ("synthetic", version, shape)))
        return ex.save(folder / f"{name}.sqlite")

    build.__name__ = "_".join(filter(None, ("synthetic", version, shape)))
    return build


def _real(trace: Path):
    def build(folder: Path) -> Path:
        return trace

    build.__name__ = trace.stem
    return build


def _batches_renamed(suffix_sql: str, name: str):
    """h200_pinned with ``suffix_sql`` (SQL of the string's ``id``) added to each ``Batch n``
    range name, as r11 did: names that differ only by a path or a secret."""

    def build(folder: Path) -> Path:
        src = folder / f"{name}.sqlite"
        shutil.copyfile(SAMPLE_TRACES / "h200_pinned.sqlite", src)
        db = sqlite3.connect(src)
        db.execute(f"UPDATE StringIds SET value = value || {suffix_sql} WHERE value LIKE 'Batch %'")
        db.commit()
        db.close()
        return src

    build.__name__ = name
    return build


CASES = [_real(t) for t in TRACES] + [
    _synthetic("2020.3"),
    _synthetic("2022.4"),
    _synthetic("2026.2"),
    _synthetic("2023.4", "old-names"),
    _synthetic("2026.2", "cuda-device"),
    # every name its own path: no step range on the original, none on the copy (r11 found 20)
    _batches_renamed(
        "' /data/train/' || char(97 + id % 26) || char(97 + (id / 26) % 26) || '.jpg'",
        "batches_with_distinct_paths",
    ),
    # paths and secrets that differ by their digits only: one step range, on both
    _batches_renamed("' /data/train/' || (id % 7) || '.jpg token=' || id", "batches_numbered"),
    # a secret that differs by a letter: no step range on either
    _batches_renamed("' password=' || char(97 + id % 26) || 'x'", "batches_with_secrets"),
]


def _reads_recorded(reads: set[tuple[str, str]]):
    """``sqlite3.connect`` whose connections record every (table, column) SQLite reads."""
    connect = sqlite3.connect

    def record(action, table, column, _db, _trigger):
        if (
            action == sqlite3.SQLITE_READ
            and column
            and column.lower() not in ("rowid", "_rowid_", "oid")
            and not table.startswith("sqlite_")
        ):
            reads.add((table, column))
        return sqlite3.SQLITE_OK

    def recording(*args, **kwargs):
        db = connect(*args, **kwargs)
        db.set_authorizer(record)
        return db

    return recording


def _arrow_reads_recorded(recording):
    """``Driver.batches`` that first prepares its query on a ``recording`` connection: the
    event tables are read through ADBC's driver, which SQLite's authorizer on sqlite3's
    connections does not see; preparing the same SQL shows it every column the query reads."""
    from nsysprobe.trace.arrow import Driver

    batches = Driver.batches

    def recorded(self, sql, rows):
        db = recording(self._uri, uri=True)
        try:
            db.execute(f"EXPLAIN {sql}").fetchall()
        finally:
            db.close()
        return batches(self, sql, rows)

    return recorded


def _read_everything(path: Path) -> None:
    """Every reading of the reader that takes no argument, beyond what ``analyze`` asks."""
    from functools import cached_property

    from nsysprobe.trace.reader import Trace

    with Trace(path) as trace:
        for name, attr in vars(Trace).items():
            if name.startswith("_") or name == "close":
                continue
            if isinstance(attr, (property, cached_property)):
                getattr(trace, name)
            elif callable(attr) and attr.__code__.co_argcount == 1:
                getattr(trace, name)()


def _analysis(path: Path, *options: str) -> dict:
    args = ["analyze", str(path), "--format", "json", "--no-history", *options]
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    report["trace"].pop("path")
    return report


# A placeholder as a report shows it: in a range pattern its digits are ``#``.
_SHOWN_PLACEHOLDER = re.compile(r"<(?:secret|path|address|url|host):[a-z]{12}(?:[0-9]{12}|#)?>")


def assert_same_figures(copy, original, where: str = "report") -> None:
    """``copy`` (a report's JSON) is ``original`` but for names holding placeholders, each
    of which must be the original's name with some parts replaced."""
    if isinstance(copy, dict) and isinstance(original, dict):
        assert list(copy) == list(original), where
        for key in copy:
            assert_same_figures(copy[key], original[key], f"{where}.{key}")
    elif isinstance(copy, list) and isinstance(original, list):
        assert len(copy) == len(original), where
        for i, (c, o) in enumerate(zip(copy, original)):
            assert_same_figures(c, o, f"{where}[{i}]")
    elif isinstance(copy, str) and isinstance(original, str) and copy != original:
        literal = _SHOWN_PLACEHOLDER.split(copy)
        assert len(literal) > 1, f"{where}: {copy!r} != {original!r}"
        assert re.fullmatch(".+".join(map(re.escape, literal)), original, re.S), where
    else:
        assert copy == original, f"{where}: {copy!r} != {original!r}"


def _table_columns(path: Path) -> set[tuple[str, str]]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {(t, c) for t in _tables(db) for c, _, _ in _columns(db, t)}
    finally:
        db.close()


class Original:
    """A case's input, its report, and the (table, column) pairs the reader read from it."""

    def __init__(self, src: Path, options: tuple[str, ...]):
        self.src, self.options = src, options
        self.reads: set[tuple[str, str]] = set()
        self.report: dict = {}


@pytest.fixture(scope="module")
def originals(tmp_path_factory, request) -> dict[str, Original]:
    """Every case analyzed once, with every column SQLite reads for the reader recorded."""
    found = {}
    patch = pytest.MonkeyPatch()
    try:
        for case in CASES:
            src = case(tmp_path_factory.mktemp(case.__name__))
            # the traces captured with --cpuctxsw are placed on the machine they came from
            options = ("--topology", str(TOPOLOGY)) if "cpuctxsw" in src.name else ()
            original = Original(src, options)
            recording = _reads_recorded(original.reads)
            patch.setattr(sqlite3, "connect", recording)
            from nsysprobe.trace.arrow import Driver

            patch.setattr(Driver, "batches", _arrow_reads_recorded(recording))
            original.report = _analysis(src, *options)
            _read_everything(src)
            patch.undo()
            found[case.__name__] = original
    finally:
        patch.undo()
    return found


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
def test_the_copy_gives_the_same_figures_and_holds_exactly_what_the_reader_reads(
    case, originals, tmp_path
):
    original = originals[case.__name__]
    out = tmp_path / "shared.sqlite"
    result = invoke("scrub", str(original.src), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert_same_figures(_analysis(out, *original.options), original.report)
    had, kept = _table_columns(original.src), _table_columns(out)
    dropped = sorted(rc for rc in original.reads & had if rc not in kept)
    assert not dropped, f"the reader reads these columns and scrub dropped them: {dropped}"
    read_anywhere = set().union(*(o.reads for o in originals.values()))
    extra = sorted(kept - read_anywhere)
    assert not extra, f"scrub kept columns the reader reads in no export: {extra}"


def _with_traps(src: Path) -> None:
    """Triggers that would write 64 MiB per firing, a never-ending view named like a table
    the reader reads, an index on an expression."""
    db = sqlite3.connect(src)
    db.execute("CREATE TABLE trap_log (x BLOB)")
    grow = (
        "INSERT INTO trap_log SELECT zeroblob(1 << 20) FROM (WITH RECURSIVE c(i) AS "
        "(SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 64) SELECT i FROM c);"
    )
    _ensure(db, "TARGET_INFO_SYSTEM_ENV")
    _insert(
        db,
        "TARGET_INFO_SYSTEM_ENV",
        globalVid=VM,
        devStateName="Local",
        name="HF_TOKEN",
        nameEnum=1,
        value="hf_x",
    )
    _string(db, "HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz")
    for table in ("TARGET_INFO_SYSTEM_ENV", "StringIds", "META_DATA_CAPTURE", "META_DATA_EXPORT"):
        if table in _tables(db):
            for event in ("INSERT", "UPDATE", "DELETE"):
                trigger = f'"grow_{table}_{event}" AFTER {event} ON "{table}"'
                db.execute(f"CREATE TRIGGER {trigger} BEGIN {grow} END")
    db.execute(
        "CREATE VIEW CUPTI_ACTIVITY_KIND_DRIVER AS WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL "
        'SELECT i + 1 FROM c) SELECT i AS start, i + 1 AS "end", 1 AS globalTid, '
        "i AS correlationId, 1 AS nameId FROM c"
    )
    db.execute("CREATE INDEX by_lower ON StringIds (lower(value))")
    db.commit()
    db.close()


def test_triggers_and_views_in_the_input_never_run(tmp_path):
    src = tmp_path / "in" / "traps.sqlite"
    src.parent.mkdir()
    shutil.copyfile(SAMPLE_TRACES / "h200_tiny_layers_graph.sqlite", src)
    _with_traps(src)
    before = src.read_bytes()
    out = tmp_path / "out" / "shared.sqlite"
    out.parent.mkdir()
    started = time.monotonic()
    result = invoke("scrub", str(src), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert time.monotonic() - started < 60
    assert src.read_bytes() == before
    assert sorted(p.name for p in src.parent.iterdir()) == ["traps.sqlite"]
    assert out.stat().st_size <= src.stat().st_size
    db = sqlite3.connect(out)
    kinds = {kind for (kind,) in db.execute("SELECT type FROM sqlite_master")}
    names = set(_tables(db))
    db.close()
    assert kinds == {"table"}
    assert "trap_log" not in names and "CUPTI_ACTIVITY_KIND_DRIVER" not in names


def test_a_text_too_long_for_any_export_is_refused_in_one_line(tmp_path):
    src = tmp_path / "in" / "huge.sqlite"
    src.parent.mkdir()
    shutil.copyfile(SAMPLE_TRACES / "h200_tiny_layers_graph.sqlite", src)
    db = sqlite3.connect(src)
    name = _string(db, "x" * (20 << 20))
    _insert(db, "ThreadNames", nameId=name, priority=0, globalTid=gtid())
    db.commit()
    db.close()
    out = tmp_path / "out" / "shared.sqlite"
    out.parent.mkdir()
    result = invoke("scrub", str(src), "-o", str(out))
    assert result.exit_code == 2
    assert "longer than" in one_error_line(result.output)
    assert list(out.parent.iterdir()) == []


@pytest.fixture(scope="module")
def large_export(tmp_path_factory) -> tuple[Path, Planted]:
    """A real export grown to ~60 MB: 600,000 NVTX ranges named with a token, 200,000
    environment strings, and the secrets of ``plant_where_nsys_puts_them``: a scrub of it
    takes seconds, long enough to be interrupted."""
    folder = tmp_path_factory.mktemp("large")
    src, planted = planted_copy(SAMPLE_TRACES / "h200_tiny_layers.sqlite", folder)
    named, env = planted.marker("NVTX range names"), planted.marker("environment strings")
    db = sqlite3.connect(src)
    db.executemany(
        "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) "
        "VALUES (?, ?, 59, ?, ?, 0)",
        ((i * 1000, i * 1000 + 500, f"step {i} token={named}", gtid()) for i in range(600_000)),
    )
    (top,) = db.execute("SELECT max(id) FROM StringIds").fetchone()
    db.executemany(
        "INSERT INTO StringIds (id, value) VALUES (?, ?)",
        ((top + 1 + i, f"HF_TOKEN={env}{i}") for i in range(200_000)),
    )
    db.commit()
    db.close()
    return src, planted


def _scrub_process(src: Path, out: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "nsysprobe", "scrub", str(src), "-o", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
def test_a_scrub_killed_midway_leaves_no_unscrubbed_byte(large_export, signum, tmp_path):
    src, planted = large_export
    out = tmp_path / "out" / "shared.sqlite"
    out.parent.mkdir()
    run = _scrub_process(src, out)
    try:
        deadline = time.monotonic() + 120
        while run.poll() is None and time.monotonic() < deadline:
            written = [p for p in out.parent.rglob("*") if p.is_file()]
            if any(p.stat().st_size >= 4 << 20 for p in written if p.exists()):
                break
            time.sleep(0.02)
        midway = folder_bytes(out.parent)  # what another user could read at that moment
        assert run.poll() is None, "scrub ended before it was killed: grow large_export"
        run.send_signal(signum)
        _, stderr = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    if signum == signal.SIGTERM:
        assert run.returncode == 128 + signum, stderr
        assert [line for line in stderr.splitlines() if line] == ["nsysprobe: stopped by SIGTERM"]
        assert list(out.parent.iterdir()) == []
    else:
        assert run.returncode == -signum
    for left in out.parent.rglob("*"):
        if left.is_dir():
            assert stat.S_IMODE(left.stat().st_mode) & 0o077 == 0, f"{left} is not private"
    assert not out.exists()
    assert not planted.found_in(midway), "unscrubbed content in the output folder mid-way"
    assert not planted.found_in(folder_bytes(out.parent))


def test_two_scrubs_to_one_output_one_wins_the_other_says_so(large_export, tmp_path):
    src, planted = large_export
    out = tmp_path / "out" / "shared.sqlite"
    out.parent.mkdir()
    runs = [_scrub_process(src, out) for _ in range(2)]
    results = [run.communicate(timeout=300) for run in runs]
    codes = sorted(run.returncode for run in runs)
    assert codes == [0, 2], results
    loser = next(stderr for run, (_, stderr) in zip(runs, results) if run.returncode == 2)
    line = one_error_line(loser)
    assert line.startswith(f"nsysprobe: error: -o {out}: file exists"), line
    assert [p.name for p in out.parent.iterdir()] == ["shared.sqlite"]
    assert not planted.found_in(out.read_bytes())
    db = sqlite3.connect(f"file:{out}?mode=ro", uri=True)
    assert db.execute("SELECT count(*) FROM NVTX_EVENTS").fetchone()[0] > 600_000
    db.close()


def _fifo(folder: Path, src: Path) -> Path:
    path = folder / "pipe.sqlite"
    os.mkfifo(path)
    return path


def _device(folder: Path, src: Path) -> Path:
    path = folder / "null"
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # what /dev/null is
    except PermissionError:
        pytest.skip("creating a device node needs root")
    return path


def _dev_null(folder: Path, src: Path) -> Path:
    return Path(os.devnull)


def _the_input(folder: Path, src: Path) -> Path:
    return src


def _hard_link(folder: Path, src: Path) -> Path:
    path = folder / "link.sqlite"
    os.link(src, path)
    return path


def _symlink(folder: Path, src: Path) -> Path:
    path = folder / "symlink.sqlite"
    path.symlink_to(src)
    return path


@pytest.mark.parametrize(
    "target, force, says",
    [
        (_fifo, False, "is a FIFO"),
        (_fifo, True, "is a FIFO"),
        (_dev_null, False, "is a character device"),
        (_device, True, "is a character device"),
        (_the_input, False, "is an input"),
        (_the_input, True, "is an input"),
        (_hard_link, True, "is an input"),
        (_symlink, True, "is a symbolic link"),
    ],
    ids=[
        "fifo",
        "fifo-force",
        "dev-null",
        "device-force",
        "input",
        "input-force",
        "hard-link-force",
        "symlink-force",
    ],
)
def test_an_output_that_is_not_a_new_regular_file_is_refused_before_any_work(
    target, force, says, tmp_path
):
    folder = tmp_path / "work"
    folder.mkdir()
    src = folder / "trace.sqlite"
    shutil.copyfile(SAMPLE_TRACES / "h200_tiny_layers_graph.sqlite", src)
    out = target(folder, src)
    kind = stat.S_IFMT(os.lstat(out).st_mode)
    before = src.read_bytes()
    listing = sorted(p.name for p in folder.iterdir())
    result = invoke("scrub", str(src), "-o", str(out), *(["--force"] if force else []))
    assert result.exit_code == 2
    line = one_error_line(result.output)
    assert line.startswith(f"nsysprobe: error: -o {out}: {says}"), line
    assert stat.S_IFMT(os.lstat(out).st_mode) == kind
    assert src.read_bytes() == before
    assert sorted(p.name for p in folder.iterdir()) == listing


def _disguised_virtual_table(src: Path, content: str) -> None:
    """NVTX_EVENTS made an fts5 table whose stored schema reads ``CREATE  VIRTUAL`` (two
    spaces, through writable_schema, r01): reading it reads ``content``, a table not on the
    allow-list (``stolen``, holding the environment) or a view over it."""
    db = sqlite3.connect(src, isolation_level=None)
    db.execute(
        "CREATE TABLE stolen (rid INTEGER PRIMARY KEY, start INTEGER, end INTEGER, "
        "eventType INTEGER, text TEXT, globalTid INTEGER, domainId INTEGER)"
    )
    db.execute(
        "INSERT INTO stolen VALUES (1, 0, 10, 59, 'environment of ' || ?, ?, 0)",
        ("XYZZY-stolen-by-fts5", gtid()),
    )
    db.execute("CREATE VIEW stolen_view AS SELECT * FROM stolen")
    db.execute("DROP TABLE IF EXISTS NVTX_EVENTS")
    db.execute(
        "CREATE VIRTUAL TABLE NVTX_EVENTS USING fts5(start, end, eventType, text, globalTid, "
        f"domainId, content={content}, content_rowid=rid)"
    )
    db.execute("PRAGMA writable_schema = ON")
    db.execute(
        "UPDATE sqlite_master SET sql = replace(sql, 'CREATE VIRTUAL', 'CREATE  VIRTUAL') "
        "WHERE name = 'NVTX_EVENTS'"
    )
    db.close()


@pytest.mark.parametrize("content", ["stolen", "stolen_view"])
def test_a_virtual_table_disguised_by_its_schema_text_is_never_read(content, tmp_path):
    src = tmp_path / "in" / "vtab.sqlite"
    src.parent.mkdir()
    shutil.copyfile(SAMPLE_TRACES / "h200_tiny_layers_graph.sqlite", src)
    _disguised_virtual_table(src, content)
    out = tmp_path / "out" / "shared.sqlite"
    out.parent.mkdir()
    result = invoke("scrub", str(src), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert b"XYZZY" not in out.read_bytes()
    db = sqlite3.connect(out)
    assert "NVTX_EVENTS" not in _tables(db)
    db.close()


def _wal_export(folder: Path) -> Path:
    """A WAL export with changes pending in its -wal file (r07): kernels end 1 ns later."""
    folder.mkdir()
    live = folder / "live.sqlite"
    shutil.copyfile(SAMPLE_TRACES / "h200_pinned.sqlite", live)
    db = sqlite3.connect(live, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA wal_autocheckpoint = 0")
    db.execute('UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = "end" + 1')
    src = folder / "wal.sqlite"
    shutil.copyfile(live, src)
    shutil.copyfile(f"{live}-wal", f"{src}-wal")
    db.close()
    for left in folder.glob("live.sqlite*"):
        left.unlink()
    return src


def test_a_wal_export_is_read_as_the_reader_reads_it_and_nothing_appears_beside_it(tmp_path):
    src = _wal_export(tmp_path / "in")
    before = {p.name: p.read_bytes() for p in src.parent.iterdir()}
    assert sorted(before) == ["wal.sqlite", "wal.sqlite-wal"]
    out = tmp_path / "out" / "shared.sqlite"
    out.parent.mkdir()
    result = invoke("scrub", str(src), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert {p.name: p.read_bytes() for p in src.parent.iterdir()} == before  # no -shm
    assert_same_figures(_analysis(out), _analysis(src))  # the pending changes included
    assert {p.name: p.read_bytes() for p in src.parent.iterdir()} == before


@pytest.mark.parametrize("suffix", ["-wal", "-shm", "-journal"])
def test_the_exports_own_files_are_inputs_too(suffix, tmp_path):
    src = _wal_export(tmp_path / "in")
    target = Path(f"{src}{suffix}")
    if not target.exists():
        target.write_bytes(b"")  # a stray -shm or -journal beside the export
    before = {p.name: p.read_bytes() for p in src.parent.iterdir()}
    result = invoke("scrub", str(src), "-o", str(target), "--force")
    assert result.exit_code == 2
    assert one_error_line(result.output) == (
        f"nsysprobe: error: -o {target}: is an input of this command; write to another file"
    )
    assert {p.name: p.read_bytes() for p in src.parent.iterdir()} == before


def test_a_full_disk_is_one_line_and_leaves_nothing(tmp_path):
    """r08: scrub onto a full 400 KiB tmpfs ended in "internal error: DatabaseError: database
    disk image is malformed" (exit 70). Mounted in a namespace of its own (unshare)."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare is not installed")
    mount = tmp_path / "small"
    mount.mkdir()
    script = (
        'mount -t tmpfs -o size=400k tmpfs "$1" || exit 99; '
        '"$2" -m nsysprobe scrub "$3" -o "$1/shared.sqlite"; rc=$?; '
        'echo "left: $(ls -A "$1" | tr "\\n" " ")"; exit $rc'
    )
    src = SAMPLE_TRACES / "h200_pinned.sqlite"
    run = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script, "sh", str(mount), sys.executable, str(src)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    if run.returncode == 99 or "unshare:" in run.stderr:
        pytest.skip(f"cannot mount a small tmpfs here: {run.stderr.strip()}")
    assert run.returncode == 2, run.stderr
    assert one_error_line(run.stderr) == (
        f"nsysprobe: error: -o {mount}/shared.sqlite: cannot write it (no space left on the "
        f"device); free some space or write to another disk"
    )
    assert run.stdout == "left: \n"


def test_the_file_size_limit_is_one_line_and_leaves_nothing(tmp_path):
    import resource

    limit = 200 << 10

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    out = tmp_path / "out" / "shared.sqlite"
    out.parent.mkdir()
    src = SAMPLE_TRACES / "h200_pinned.sqlite"
    run = subprocess.run(
        [sys.executable, "-m", "nsysprobe", "scrub", str(src), "-o", str(out)],
        capture_output=True,
        text=True,
        cwd=REPO,
        preexec_fn=limited,
        timeout=300,
    )
    assert run.returncode == 2, run.stderr
    assert one_error_line(run.stderr) == (
        f"nsysprobe: error: -o {out}: cannot write it (the file size limit, ulimit -f, is "
        f"{limit:,} bytes); raise the limit or write a smaller report"
    )
    assert list(out.parent.iterdir()) == []


def _addresses(src: Path, megabytes: int) -> None:
    """NVTX ranges named with many short e-mail addresses: the scrubbed text is several
    times longer than the original (each ``x@y`` becomes an ``<address:...>``)."""
    db = sqlite3.connect(src)
    name = "x@y " * 1024
    db.executemany(
        "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) "
        "VALUES (?, ?, 59, ?, ?, 0)",
        ((i * 1000, i * 1000 + 500, name, gtid()) for i in range(megabytes * 256)),
    )
    db.commit()
    db.close()


def test_the_growth_limit_counts_what_scrubbing_adds_to_the_text(tmp_path, monkeypatch):
    """A 62 MB export whose scrubbed text grew 2.5x hit "twice the export's size" with 73 GB
    free; here the same, without the limit's fixed room."""
    from nsysprobe.trace import scrub

    monkeypatch.setattr(scrub, "_ROOM_BYTES", 0)
    src = tmp_path / "in" / "addresses.sqlite"
    src.parent.mkdir()
    shutil.copyfile(SAMPLE_TRACES / "h200_tiny_layers_graph.sqlite", src)
    _addresses(src, 3)
    out = tmp_path / "out" / "shared.sqlite"
    out.parent.mkdir()
    result = invoke("scrub", str(src), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert out.stat().st_size > 2 * src.stat().st_size


@pytest.mark.parametrize(
    "limits, addresses, says",
    [
        ({"MAX_TEXT_GROWTH": 1}, 1, "its scrubbed text would be more than"),
        ({"MAX_GROWTH": 0, "MAX_TEXT_GROWTH": 0}, 0, "its scrubbed copy would be larger than"),
    ],
    ids=["text", "copy"],
)
def test_the_growth_limit_says_so_in_one_line_and_leaves_nothing(
    limits, addresses, says, tmp_path, monkeypatch
):
    from nsysprobe.trace import scrub

    monkeypatch.setattr(scrub, "_ROOM_BYTES", 8 << 10)
    for name, value in limits.items():
        monkeypatch.setattr(scrub, name, value)
    src = tmp_path / "in" / "addresses.sqlite"
    src.parent.mkdir()
    shutil.copyfile(SAMPLE_TRACES / "h200_tiny_layers_graph.sqlite", src)
    _addresses(src, addresses)
    out = tmp_path / "out" / "shared.sqlite"
    out.parent.mkdir()
    result = invoke("scrub", str(src), "-o", str(out))
    assert result.exit_code == 2
    line = one_error_line(result.output)
    assert line.startswith(f"nsysprobe: error: {src}: {says}"), line
    assert "no space" not in line
    assert list(out.parent.iterdir()) == []


def test_the_work_budget_ends_a_scrub_in_one_line(tmp_path, monkeypatch):
    from nsysprobe.trace import connection  # scrub works within the reader's budget

    monkeypatch.setattr(connection, "_MIN_OPS", 1000)
    monkeypatch.setattr(connection, "_OPS_PER_BYTE", 0)
    monkeypatch.setattr(connection, "OPS_PER_CHECK", 100)
    src = SAMPLE_TRACES / "h200_tiny_layers_graph.sqlite"
    out = tmp_path / "out" / "shared.sqlite"
    out.parent.mkdir()
    result = invoke("scrub", str(src), "-o", str(out))
    assert result.exit_code == 2
    line = one_error_line(result.output)
    assert line.startswith(f"nsysprobe: error: {src}: reading it took more than 1e+03 SQLite")
    assert list(out.parent.iterdir()) == []


# -- a generated corpus (issue 33) --------------------------------------------------------
#
# A hostile tester found values cut at the first punctuation (``password=Tr0ub4dor&AMPTAIL``
# kept ``&AMPTAIL``) and tokens kept inside longer text. Here Hypothesis writes the secrets:
# names of secrets in every case and spelling, after every separator (``=``, ``: ``, ``＝``,
# ``:=``, headers, URL parameters, JSON, escaped JSON, quotes), with values of any printable
# characters, and tokens of known formats glued into words; each is planted into every text
# column the copy keeps, and none of it may be in the copy.

CORPUS_TRACE = SAMPLE_TRACES / "h200_pinned.sqlite"

_NAMES = (
    "password", "passwd", "passcode", "pass_phrase", "pwd", "secret", "client_secret",
    "token", "access_token", "auth_token", "session", "session_id", "cookie", "auth",
    "credential", "api_key", "private_key", "signature", "sig", "access_key",
    "aws_secret_access_key", "hf_token", "x_api_key", "pg_password",
)  # fmt: skip
# Characters of values: printable, punctuation and other scripts, no whitespace.
_VALUE_CHARS = st.characters(
    blacklist_categories=("Cc", "Cs", "Co", "Cn", "Zs", "Zl", "Zp"),
    blacklist_characters="\x85\u180e\u200b\ufeff",
)
_PUNCTUATION = st.text(
    st.sampled_from(list(",;&|()[]{}<>-=:'\"`!?*^~+/\\@#$%.") + ["é", "€", "—", "你", "＝"])
    | _VALUE_CHARS,
    max_size=4,
)
# A part of a value that must not be in the copy: letters and digits no export holds.
_MARKER = st.text(string.ascii_letters + string.digits, min_size=6, max_size=10).map(
    lambda s: "Zq" + s
)


@st.composite
def _name(draw) -> str:
    words = draw(st.sampled_from(_NAMES)).split("_")
    joiner = draw(st.sampled_from(["_", "-", ".", ""]))
    case = draw(st.sampled_from(["lower", "upper", "title", "camel"]))
    if case == "upper":
        words = [w.upper() for w in words]
    elif case == "title":
        words = [w.capitalize() for w in words]
    elif case == "camel":
        words = words[:1] + [w.capitalize() for w in words[1:]]
    return joiner.join(words)


@st.composite
def _value(draw) -> tuple[str, list[str]]:
    """A value of punctuation and markers (``Tr0ub4dor&AMPTAIL``), and its markers."""
    markers = draw(st.lists(_MARKER, min_size=1, max_size=3))
    parts = [draw(_PUNCTUATION)]
    for marker in markers:
        parts += [marker, draw(_PUNCTUATION)]
    return "".join(parts), markers


def _quoted(value: str, quote: str) -> str:
    return value.replace(quote, "").replace("\\", "")


@st.composite
def _setting(draw) -> tuple[str, list[str]]:
    """A secret's setting in a sentence, and the markers of its value."""
    name = draw(_name())
    value, markers = draw(_value())
    spaced = value + " " + draw(_MARKER)  # what only quotes or a header keep together
    form = draw(
        st.sampled_from(
            [
                "=",
                ": ",
                "\uff1d",
                " := ",
                "header",
                "cookie",
                "bearer",
                "url",
                "url-escaped",
                "json",
                "escaped-json",
                "single-quoted",
                "double-quoted",
            ]
        )  # fmt: skip
    )
    if form in ("json", "escaped-json", "single-quoted", "double-quoted", "cookie", "bearer"):
        markers = markers + [spaced.rsplit(" ", 1)[1]]
    if form == "header":
        setting = f"{name.replace('_', '-').replace('.', '-')}: {value}"
    elif form == "cookie":
        setting = f"Cookie: theme=dark; {name}={spaced}"
    elif form == "bearer":
        setting = f"Authorization: Bearer {spaced}"
    elif form == "url":
        setting = f"GET /v1/items?page=2&{name}={value}&sort=asc"
    elif form == "url-escaped":
        setting = f"GET /v1/items?page=2&%{ord(name[0]):02X}{name[1:]}={value}&sort=asc"
    elif form == "json":
        setting = json.dumps({"user": "bob", name: spaced}, ensure_ascii=False)
    elif form == "escaped-json":
        inner = json.dumps({name: spaced, "user": "bob"}, ensure_ascii=False)
        setting = json.dumps(inner, ensure_ascii=False)
    elif form == "single-quoted":
        setting = f"{name}='{_quoted(spaced, chr(39))}'"
    elif form == "double-quoted":
        setting = f'{name}="{_quoted(spaced, chr(34))}"'
    else:
        setting = f"{name}{form}{value}"
    # Before the name anything but a letter, which would make it another name (``xtoken``).
    before = draw(st.text(_VALUE_CHARS | st.sampled_from(" \t\n"), max_size=12))
    delimiter = draw(st.sampled_from(list(" \t\n([{<,;|&>'\"`=/.#1-—。") + ["\u3000"]))
    after = draw(st.text(_VALUE_CHARS | st.sampled_from(" \t\n"), max_size=12))
    return f"{before}{delimiter}{setting} {after}", markers


def _random_body(seed: bytes, length: int, alphabet: str) -> str:
    """``length`` characters of ``alphabet`` as random as a key's, from ``seed``."""
    out, counter = [], 0
    while len(out) < length:
        digest = hashlib.sha256(seed + counter.to_bytes(4, "big")).digest()
        out.extend(alphabet[b % len(alphabet)] for b in digest)
        counter += 1
    return "".join(out[:length])


_ALNUM = string.ascii_letters + string.digits
_URLSAFE = _ALNUM + "-_"
# Token formats as the services issue them: (prefix, body length, body characters).
_TOKEN_FORMATS = [
    ("AKIA", 16, string.ascii_uppercase + "234567"),
    ("ASIA", 16, string.ascii_uppercase + "234567"),
    ("ghp_", 36, _ALNUM),
    ("gho_", 36, _ALNUM),
    ("ghs_", 36, _ALNUM),
    ("github_pat_", 82, _ALNUM + "_"),
    ("xoxb-", 50, _ALNUM + "-"),
    ("xoxp-", 50, _ALNUM + "-"),
    ("sk_live_", 99, _ALNUM),
    ("rk_live_", 99, _ALNUM),
    ("pk_live_", 99, _ALNUM),
    ("ya29.", 150, _URLSAFE),
    ("AIza", 35, _URLSAFE),
    ("sk-proj-", 120, _URLSAFE),
    ("sk-ant-api03-", 90, _URLSAFE),
    ("hf_", 34, string.ascii_letters),
    ("glpat-", 20, _URLSAFE),
    ("npm_", 36, _ALNUM),
    ("pypi-", 80, _URLSAFE),
    ("eyJ", 0, ""),  # a JWT
    ("", 64, "0123456789abcdef"),  # a hex key (a SHA-256)
]


@st.composite
def _glued_token(draw) -> tuple[str, str]:
    """A token of a known format glued into a word, and the token."""
    prefix, length, alphabet = draw(st.sampled_from(_TOKEN_FORMATS))
    seed = draw(st.binary(min_size=1, max_size=8))
    if prefix == "eyJ":
        parts = [_random_body(seed + bytes([i]), n, _URLSAFE) for i, n in enumerate((33, 60, 43))]
        token = "eyJ" + ".".join(parts)
    else:
        token = prefix + _random_body(seed, length, alphabet)
    before = draw(st.text(string.ascii_letters + string.digits + "_-/:(=", max_size=6))
    after = draw(st.text(string.ascii_letters + string.digits + "_-/:)", max_size=6))
    return f"see {before}{token}{after} here", token


def _token_parts(token: str) -> set[str]:
    """What of ``token`` may not be in the copy: its 8 characters in a row holding a letter."""
    return {
        token[i : i + 8] for i in range(len(token) - 7) if re.search("[A-Za-z]", token[i : i + 8])
    }


def _clone(db: sqlite3.Connection, table: str) -> int:
    """A new row of ``table``: a copy of its first row, or zeros and empty texts."""
    cols = _columns(db, table)
    first = db.execute(f'SELECT * FROM "{table}" LIMIT 1').fetchone()
    row = {}
    for i, (name, declared, pk) in enumerate(cols):
        if pk:
            row[name] = db.execute(
                f'SELECT coalesce(max("{name}"), 0) + 1 FROM "{table}"'
            ).fetchone()[0]
        elif first is not None:
            row[name] = first[i]
        else:
            row[name] = 0 if _is_number(declared) else ""
    return _insert(db, table, **row)


def plant_in_kept_columns(db: sqlite3.Connection, texts: list[str]) -> int:
    """Each of ``texts`` in every column the copy keeps text from (``schema.TABLES``), in a
    row the copy keeps (an NVTX range, a note of dropped events, the export's version); the
    tables an export may lack are made. How many values were planted."""
    planted = 0
    _ensure(db, "StringIds")
    present = set(_tables(db))
    for table, spec in schema.TABLES.items():
        if table == schema.STRING_TABLE or not (spec.texts or spec.string_ids or spec.keys):
            continue
        if table not in present:
            db.execute(f'CREATE TABLE "{table}" ({", ".join(map(repr, spec.columns))})')
        have = {c for c, _, _ in _columns(db, table)}
        for text in texts:
            for column in (*spec.texts, *spec.string_ids, *spec.keys):
                if column not in have:
                    continue
                rowid = _clone(db, table)
                value = _string(db, text) if column in spec.string_ids else text
                kept = {column: value}
                if table == "NVTX_EVENTS":
                    kept["eventType"] = 59
                if table == "DIAGNOSTIC_EVENT":
                    kept[column] = f"Number of events dropped: 3 {text}"
                if table in ("META_DATA_EXPORT", "EXPORT_META_DATA") and column == "value":
                    kept["name"] = "EXPORT_PRODUCT_VERSION"
                if table == "META_DATA_CAPTURE" and column == "value":
                    kept["name"] = "PROCESS_0:COLLECT_CUDA_TRACE"
                sets = ", ".join(f'"{c}" = ?' for c in kept)
                db.execute(f'UPDATE "{table}" SET {sets} WHERE rowid = ?', (*kept.values(), rowid))
                planted += 1
    return planted


def _text_values(path: Path) -> list[str]:
    """Every text value of every table of the export."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        values = []
        for table in _tables(db):
            for column, _, _ in _columns(db, table):
                values += [
                    v
                    for (v,) in db.execute(f'SELECT "{column}" FROM "{table}"')
                    if isinstance(v, str)
                ]
        return values
    finally:
        db.close()


@settings(
    max_examples=40,
    deadline=None,
    # The same examples every run: a run of 20,000 found three rare forms that still leak
    # (README, issue 33's third round); CI must not pass or fail by the draw.
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    st.lists(_setting(), min_size=3, max_size=8),
    st.lists(_glued_token(), min_size=2, max_size=5),
)
def test_a_generated_corpus_planted_in_every_kept_column_never_survives(settings_, tokens):
    texts = [text for text, _ in settings_] + [text for text, _ in tokens]
    markers = {m for _, ms in settings_ for m in ms}
    parts = set().union(*(_token_parts(token) for _, token in tokens))
    with tempfile.TemporaryDirectory() as folder:
        src, out = Path(folder) / "in.sqlite", Path(folder) / "out" / "shared.sqlite"
        shutil.copyfile(CORPUS_TRACE, src)
        db = sqlite3.connect(src)
        assert plant_in_kept_columns(db, texts) > 20 * len(texts)
        db.commit()
        db.close()
        out.parent.mkdir()
        result = invoke("scrub", str(src), "-o", str(out))
        assert result.exit_code == 0, result.output
        raw = out.read_bytes()
        values = "\0".join(_text_values(out))
    found = sorted(s for s in markers | parts if s.encode() in raw or s in values)
    assert found == [], f"{len(found)} planted secrets survived: {found}"


# The time and memory one scrub may take: bounds several times what was measured on 2 shared
# cores (a 16 MiB value: 6 s, 252 MiB at peak; 4,096 values of 4 KiB: 13 s, 55 MiB).
_SCRUB_SECONDS = 120
_SCRUB_PEAK_BYTES = 1 << 30
# The child's peak from VmHWM: getrusage's ru_maxrss keeps, across exec, the peak of the
# process it was forked from (this test process, grown by the tests before it).
_MEASURED = (
    "import json, re, sys, time\n"
    "from nsysprobe.trace.scrub import scrub\n"
    "started = time.monotonic()\n"
    "scrub(sys.argv[1], sys.argv[2])\n"
    "status = open('/proc/self/status').read()\n"
    "peak = int(re.search(r'VmHWM:\\s+(\\d+) kB', status).group(1)) * 1024\n"
    "print(json.dumps({'seconds': time.monotonic() - started, 'peak_bytes': peak}))\n"
)


def _long_values(src: Path, values: list[str]) -> None:
    db = sqlite3.connect(src)
    db.executemany(
        "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) "
        "VALUES (?, ?, 59, ?, ?, 0)",
        ((i * 1000, i * 1000 + 500, value, gtid()) for i, value in enumerate(values)),
    )
    db.commit()
    db.close()


def _a_long_value(size: int, seed: int) -> str:
    """``size`` characters of one run a key's rules read whole: a secret glued to random
    base64 (``+``, ``/``, no word, no whitespace) up to the end."""
    rng = random.Random(seed)
    head = "step 1 Tr0ub4dorAMPTAILx9q"
    body = base64.b64encode(rng.randbytes(size * 3 // 4)).decode()[: size - len(head)]
    return head + body


def _many_values(count: int, size: int) -> list[str]:
    """``count`` texts of ``size`` characters in the forms a scrub reads: settings, tokens,
    addresses, quotes and words."""
    piece = (
        'password="a b"&c  token=Zq9;x  ghp_Zq9abcdefghijklmnopqrstuvwxyz0123  fe80::1%eth0 '
        'ncclDevKernel_AllReduce_Sum_f32_RING_LL  /home/alice/run.log  {"api_key": "K"}  '
    )
    text = (piece * (size // len(piece) + 1))[:size]
    return [f"{i} {text}"[:size] for i in range(count)]


def _quadratic_shapes(size: int) -> list[str]:
    """Texts of ``size`` characters in the shapes that once took quadratic time (a run of
    dashes after ``token``: 60,000 took 36 s), a secret after each."""
    units = ["-", "-$", "$-", "%3D", "\ufffd", "\u200b", "</s", "keys[3]"]
    return [
        "token " + (unit * size)[: size - 40] + " password=Tr0ub4dorAMPTAILx9q" for unit in units
    ]


@pytest.mark.parametrize(
    "values",
    [
        lambda: [_a_long_value((16 << 20) - 1024, 33)],
        lambda: _many_values(4096, 4096),
        lambda: _quadratic_shapes(1 << 20),
    ],
    ids=["one-16-MiB-value", "4096-values-of-4-KiB", "quadratic-shapes-of-1-MiB"],
)
def test_a_scrub_of_long_values_takes_bounded_time_and_memory(values, tmp_path):
    src, out = tmp_path / "long.sqlite", tmp_path / "out" / "shared.sqlite"
    shutil.copyfile(SAMPLE_TRACES / "h200_tiny_layers_graph.sqlite", src)
    _long_values(src, values())
    out.parent.mkdir()
    run = subprocess.run(
        [sys.executable, "-c", _MEASURED, str(src), str(out)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=2 * _SCRUB_SECONDS,
    )
    assert run.returncode == 0, run.stderr
    measured = json.loads(run.stdout)
    assert measured["seconds"] < _SCRUB_SECONDS, measured
    assert measured["peak_bytes"] < _SCRUB_PEAK_BYTES, measured
    raw = out.read_bytes()
    for secret in (b"Tr0ub4dor", b"AMPTAILx9q", b"Zq9", b"alice"):
        assert secret not in raw
