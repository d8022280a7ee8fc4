"""The local history of analyses: every ``analyze`` and ``run`` records one entry.

An entry holds when, the command, the paths involved (trace, export, HTML, run folder) and the
run's headline figures (``nsysprobe.report.metrics``, per-step wall times included, so
``compare`` can test an entry against a new run without its trace). The database is SQLite,
one table ``runs`` written with Python's ``sqlite3``, at the first of:

    --history PATH                      (the commands' option)
    $NSYSPROBE_HISTORY
    $XDG_DATA_HOME/nsysprobe/history.db
    ~/.local/share/nsysprobe/history.db

``--no-history`` records nothing. Environment variables of the profiled process are never
stored; the trace's own tables are not copied.

The file at that path may be anybody's. A database nsysprobe did not make is refused before
anything is read or written (``check_schema``: a view or trigger anywhere, or a ``runs`` that
is not a plain table keyed by ``id INTEGER PRIMARY KEY``), so no SQL of its schema ever runs.
Rows are read bounded: text is cut in SQL (``command`` to ``COMMAND_CHARS``, names to
``safetext.NAME_CHARS``) and escaped (``safetext.name``), a value of the wrong type or out of
range (``metrics.FIGURES``) reads as missing, ids are SQLite integers (1 to 2**63 - 1).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from nsysprobe.common.safetext import NAME_CHARS, name
from nsysprobe.common.writer import is_input
from nsysprobe.errors import InputError
from nsysprobe.report.analyze import Report
from nsysprobe.report.metrics import (
    BUSY_BASES,
    CPU_RANGE,
    FIGURES,
    INT64_MAX,
    PATH_CHARS,
    STEP_TIMINGS,
    RunMetrics,
    figure,
    metrics_of,
    parse_json,
)

TABLE = "runs"
ENV = "NSYSPROBE_HISTORY"
MAX_ID = INT64_MAX
# A command is shown whole up to this many characters: a real one with its paths and options
# fits; a pasted megabyte does not.
COMMAND_CHARS = 1_000
# The JSON columns are read up to this many characters; a longer value reads as missing.
# 10,000 step times (the most a report lists) are some 200,000 characters, four paths 20,000.
STEPS_CHARS = 1 << 20
PATHS_CHARS = 1 << 16


@dataclass(frozen=True)
class Entry:
    id: int
    recorded_utc: str  # ISO 8601, seconds
    command: str
    paths: dict[str, str]
    nsys_version: str | None
    metrics: RunMetrics


def default_path() -> Path:
    if os.environ.get(ENV):
        return Path(os.environ[ENV]).expanduser()
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home) / "nsysprobe" / "history.db"


def record(
    report: Report,
    command: str,
    paths: dict[str, str | os.PathLike],
    history_path: str | os.PathLike | None = None,
) -> int:
    """Record ``report`` with the command that made it and its paths; returns the entry id.

    ``paths`` maps a role (``trace``, ``sqlite``, ``html``, ``folder``) to a path, stored
    absolute. The library hook behind ``analyze`` and ``run``.
    """
    metrics = metrics_of(report)
    row = {
        "recorded_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": _storable(command),
        "paths": json.dumps(
            {k: _storable(str(Path(v).resolve())) for k, v in paths.items() if v is not None},
            sort_keys=True,
        ),
        "nsys_version": report.trace.nsys_version,
        **{
            f.name: getattr(metrics, f.name)
            for f in dataclasses.fields(metrics)
            if f.name != "step_wall_ns"
        },
        "step_wall_ns": json.dumps(list(metrics.step_wall_ns)),
        "gap_basis": ACCOUNT_GAPS,
    }
    path = Path(history_path) if history_path is not None else default_path()
    for role, other in paths.items():
        if other is not None and is_input(path, [other]):
            raise InputError(
                f"{path}: the history database would be the {role} itself or a file SQLite "
                f"keeps beside it; give --history another file (or --no-history)"
            )
    path.parent.mkdir(parents=True, exist_ok=True)
    with _open(path) as db, db:
        present = _columns(db)
        if not present:
            # The entry's columns in its order, then the key (as the table has always been).
            made = [f"[{c}] {_SQL_TYPES[_COLUMNS[c]]}" for c in row]
            db.execute(f"CREATE TABLE [{TABLE}] ({', '.join(made)}, [id] INTEGER PRIMARY KEY)")
        for column in row:
            if present and column not in present:  # a history an older nsysprobe made
                db.execute(
                    f"ALTER TABLE [{TABLE}] ADD COLUMN [{column}] {_SQL_TYPES[_COLUMNS[column]]}"
                )
        names = ", ".join(f"[{c}]" for c in row)
        marks = ", ".join("?" for _ in row)
        done = db.execute(f"INSERT INTO [{TABLE}] ({names}) VALUES ({marks})", list(row.values()))
        return int(done.lastrowid)


def entries(history_path: str | os.PathLike | None = None, limit: int | None = None) -> list[Entry]:
    """Entries, newest first (all, or the newest ``limit``)."""
    path = Path(history_path) if history_path is not None else default_path()
    if not path.exists():
        return []
    with _open(path) as db:
        present = _columns(db)
        if not present:
            return []
        bound = "" if limit is None else f" LIMIT {int(limit)}"
        rows = _rows(db, f"SELECT {_select(present)} FROM [{TABLE}] ORDER BY id DESC{bound}")
        return [e for e in map(_entry, rows) if e is not None]


@dataclass(frozen=True)
class Listing:
    """One database's newest entries, newest first: what ``nsysprobe history`` shows."""

    path: Path
    entries: tuple[Entry, ...]


def newest(history_path: str | os.PathLike | None = None, limit: int | None = None) -> Listing:
    """The newest ``limit`` entries (all without a limit) of the database at
    ``history_path``, else at ``default_path()``."""
    path = Path(history_path) if history_path is not None else default_path()
    return Listing(path, tuple(entries(path, limit)))


def entry_id(text: str) -> int:
    """A history id from its digits; InputError unless it is one SQLite can hold."""
    digits = text.lstrip("0") if text.isascii() and text.isdigit() else ""
    if not digits or len(digits) > len(str(MAX_ID)) or int(digits) > MAX_ID:
        raise InputError(
            f"history id {name(text, 40)}: ids are whole numbers from 1 to {MAX_ID}; list "
            f"them with `nsysprobe history`"
        )
    return int(digits)


def get(entry_id: int, history_path: str | os.PathLike | None = None) -> Entry:
    path = Path(history_path) if history_path is not None else default_path()
    found = []
    if path.exists() and 1 <= entry_id <= MAX_ID:
        with _open(path) as db:
            present = _columns(db)
            if present:
                sql = f"SELECT {_select(present)} FROM [{TABLE}] WHERE id = ?"
                found = [e for e in map(_entry, _rows(db, sql, (entry_id,))) if e is not None]
    if not found:
        raise InputError(
            f"history id {entry_id}: no such entry in {path}; list them with `nsysprobe history`"
        )
    return found[0]


_COLUMNS = {
    "id": int,
    "recorded_utc": str,
    "command": str,
    "paths": str,
    "nsys_version": str,
    "trace": str,
    "step_count": int,
    "steps_per_s": float,
    "median_step_ns": int,
    "gpu_busy_ratio": float,
    "busy_basis": str,
    "idle_per_step_ns": int,
    "gap_ns": int,
    "pageable_htod_bytes": int,
    "exposed_copy_ns": int,
    "top_recommendation": str,
    "top_gain_ratio": float,
    "step_wall_ns": str,
    "step_timing": str,
    "gpus": str,
    "gap_basis": str,
}
# What an entry's gap_ns measures: the step accounts' gaps (report schema 3); an entry an older
# nsysprobe wrote has none, and its gap_ns (the devices' idle over the capture) reads as None.
ACCOUNT_GAPS = "account"
_SQL_TYPES = {int: "INTEGER", float: "REAL", str: "TEXT"}


@contextmanager
def _open(path: Path) -> Iterator[sqlite3.Connection]:
    fix = "pass --history PATH to another file, or --no-history"
    if path.exists() and not path.is_file():
        raise InputError(f"{path}: not a regular file, so not a history database; {fix}")
    db = None
    try:
        db = sqlite3.connect(path)
        # Text that is not UTF-8 (a hand edit) reads with replacement characters.
        db.text_factory = lambda raw: raw.decode("utf-8", "replace")
        db.execute("PRAGMA busy_timeout = 5000")
        why = check_schema(db)
        if why:
            raise InputError(
                f"{path}: not a history database nsysprobe made ({why}); nothing was read or "
                f"written; {fix}"
            )
        yield db
    except sqlite3.Error as exc:
        raise InputError(f"{path}: cannot use it as the history database ({exc}); {fix}") from exc
    finally:
        if db is not None:
            db.close()


_CHECK = re.compile(r"\bCHECK\s*\(", re.I)


def check_schema(db: sqlite3.Connection) -> str | None:
    """Why ``db`` is not a history database nsysprobe made, or None when it may be one.

    nsysprobe makes one plain table, ``runs``, keyed by ``id INTEGER PRIMARY KEY``, and nothing
    else: a view (which ``runs`` may be), a trigger, a CHECK constraint, a DEFAULT or an index
    of its own (each runs its SQL on every insert, in SQLite where no signal reaches it) is
    somebody else's.
    """
    objects = db.execute(
        "SELECT type, name, coalesce(sql, '') FROM sqlite_master "
        "WHERE type IN ('view', 'trigger') OR name = ? COLLATE NOCASE "
        "OR (type = 'index' AND tbl_name = ? COLLATE NOCASE AND sql IS NOT NULL)",
        [TABLE, TABLE],
    ).fetchall()
    for kind, object_name, sql in objects:
        if kind in ("view", "trigger"):
            return f"it holds the {kind} {name(object_name, 40)}"
        if kind == "index" and object_name.lower() == TABLE:
            return f"{TABLE} is an index, not a table"
        if kind == "index":
            return f"{TABLE} has an index nsysprobe does not make ({name(object_name, 40)})"
        if sql.lstrip()[:14].upper() == "CREATE VIRTUAL":
            return f"{TABLE} is a virtual table"
        if _CHECK.search(sql):
            return f"{TABLE} has CHECK constraints"
    if objects:
        columns = db.execute(f"PRAGMA table_xinfo({TABLE})").fetchall()
        keys = [(c[1], str(c[2]).upper()) for c in columns if c[5]]
        if keys != [("id", "INTEGER")]:
            return f"{TABLE} is not keyed by id INTEGER PRIMARY KEY"
        if any(c[6] for c in columns):
            return f"{TABLE} has generated or hidden columns"
        # nsysprobe's columns have no DEFAULT: one would run its SQL on every insert.
        if any(c[4] is not None for c in columns):
            return f"{TABLE} has columns with DEFAULT values"
    return None


# How many characters of each text column are read: one more than is shown, so that the cut
# shows (safetext.name ends it in an ellipsis).
_READ_CHARS = {"command": COMMAND_CHARS + 1, "paths": PATHS_CHARS, "step_wall_ns": STEPS_CHARS}


def _columns(db: sqlite3.Connection) -> list[str]:
    """The columns of ``runs``; none when there is no such table yet."""
    return [str(c[1]) for c in db.execute(f"PRAGMA table_info({TABLE})").fetchall()]


def _rows(db: sqlite3.Connection, sql: str, params: tuple = ()) -> list[dict]:
    cursor = db.execute(sql, params)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, r)) for r in cursor.fetchall()]


def _select(present: list[str]) -> str:
    """The columns of ``runs`` nsysprobe knows (of those ``present``), each read bounded: text
    cut in SQL, a value of the wrong type (a hand edit) read as NULL."""
    parts = []
    for column, kind in _COLUMNS.items():
        if column not in present:
            continue
        if kind is str:
            chars = _READ_CHARS.get(column, NAME_CHARS + 1)
            value = f"CASE WHEN typeof([{column}]) = 'text' THEN substr([{column}], 1, {chars}) END"
        else:
            value = f"CASE WHEN typeof([{column}]) IN ('integer', 'real') THEN [{column}] END"
        parts.append(f"{value} AS [{column}]")
    return ", ".join(parts)


def _entry(row: dict) -> Entry | None:
    """An entry from its row (None without an id), whatever a hand edit left there: a value
    of the wrong type or out of range, or JSON that does not parse, reads as missing (None,
    empty), never as an error."""
    entry_id = row.get("id")
    if not (isinstance(entry_id, int) and 1 <= entry_id <= MAX_ID):
        return None
    walls = _json(row.get("step_wall_ns"), list)
    if not all(figure("step_wall_ns", w) is not None for w in walls):
        walls = []
    basis = row.get("busy_basis")
    # An entry an older nsysprobe wrote has no step_timing: it timed the CPU ranges.
    timing = row.get("step_timing")
    account_gaps = row.get("gap_basis") == ACCOUNT_GAPS
    metrics = RunMetrics(
        trace=_name(row.get("trace")) or "",
        busy_basis=basis if basis in BUSY_BASES else "none",
        top_recommendation=_name(row.get("top_recommendation")),
        step_wall_ns=tuple(walls),
        step_timing=timing if timing in STEP_TIMINGS else CPU_RANGE,
        gpus=_name(row.get("gpus")) or "",
        **{f: figure(f, row.get(f)) for f in FIGURES if f not in ("step_wall_ns", "gap_ns")},
        gap_ns=figure("gap_ns", row.get("gap_ns")) if account_gaps else None,
    )
    paths = _json(row.get("paths"), dict)
    return Entry(
        id=entry_id,
        recorded_utc=_name(row.get("recorded_utc")) or "",
        command=_name(row.get("command"), COMMAND_CHARS) or "",
        paths={name(str(k)): name(str(v), PATH_CHARS) for k, v in paths.items()},
        nsys_version=_name(row.get("nsys_version")),
        metrics=metrics,
    )


def _name(value: object, limit: int = NAME_CHARS) -> str | None:
    """Text from a row as it is shown (cut, escaped); None when there is none."""
    return name(value, limit) if isinstance(value, str) and value else None


def _json(text: object, kind: type):
    try:
        value = parse_json(text.encode()) if isinstance(text, str) else None
    except ValueError:
        value = None
    return value if isinstance(value, kind) else kind()


def _storable(text: str) -> str:
    """``text`` as SQLite can store it: a file name's undecodable bytes (surrogates) written
    as ``\\xff`` escapes."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
