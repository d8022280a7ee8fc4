"""The local history of analyses: every ``analyze`` and ``run`` records one entry.

An entry holds when, the command, the paths involved (trace, export, HTML, run folder) and the
run's headline figures (``nsysprobe.metrics``, per-step wall times included, so ``compare`` can
test an entry against a new run without its trace). The database is SQLite, written through
sqlite-utils, at the first of:

    --history PATH                      (the commands' option)
    $NSYSPROBE_HISTORY
    $XDG_DATA_HOME/nsysprobe/history.db
    ~/.local/share/nsysprobe/history.db

``--no-history`` records nothing. Environment variables of the profiled process are never
stored; the trace's own tables are not copied.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import sqlite_utils

from nsysprobe.errors import InputError
from nsysprobe.metrics import RunMetrics, metrics_of
from nsysprobe.report import Report

TABLE = "runs"
ENV = "NSYSPROBE_HISTORY"


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
    }
    path = Path(history_path) if history_path is not None else default_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with _open(path) as db, db.conn:
        table = db[TABLE]
        table.insert(row, pk="id", alter=True, columns=_COLUMNS)
        return int(table.last_pk)


def entries(history_path: str | os.PathLike | None = None, limit: int | None = None) -> list[Entry]:
    """Entries, newest first (all, or the newest ``limit``)."""
    path = Path(history_path) if history_path is not None else default_path()
    if not path.exists():
        return []
    with _open(path) as db:
        if TABLE not in db.table_names():
            return []
        return [_entry(r) for r in db[TABLE].rows_where(order_by="id desc", limit=limit)]


def get(entry_id: int, history_path: str | os.PathLike | None = None) -> Entry:
    path = Path(history_path) if history_path is not None else default_path()
    found = []
    if path.exists():
        with _open(path) as db:
            if TABLE in db.table_names():
                found = list(db[TABLE].rows_where("id = ?", [entry_id]))
    if not found:
        raise InputError(
            f"history id {entry_id}: no such entry in {path}; list them with `nsysprobe history`"
        )
    return _entry(found[0])


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
}


@contextmanager
def _open(path: Path) -> Iterator[sqlite_utils.Database]:
    db = None
    try:
        db = sqlite_utils.Database(path)
        db.execute("PRAGMA busy_timeout = 5000")
        yield db
    except sqlite3.Error as exc:
        raise InputError(
            f"{path}: cannot use it as the history database ({exc}); pass --history PATH to "
            f"another file, or --no-history"
        ) from exc
    finally:
        if db is not None:
            db.close()


def _entry(row: dict) -> Entry:
    """An entry from its row, whatever a hand edit left there: a value of the wrong type or
    JSON that does not parse reads as missing (None, empty), never as an error."""
    values = {}
    for f in dataclasses.fields(RunMetrics):
        if f.name == "step_wall_ns":
            walls = _json(row.get(f.name), list)
            values[f.name] = tuple(w for w in walls if _is_int(w))
        else:
            values[f.name] = _typed(row.get(f.name), _COLUMNS[f.name])
    values["busy_basis"] = values["busy_basis"] or "none"
    values["trace"] = values["trace"] or ""
    paths = _json(row.get("paths"), dict)
    return Entry(
        id=int(row["id"]),
        recorded_utc=str(row.get("recorded_utc") or ""),
        command=str(row.get("command") or ""),
        paths={str(k): str(v) for k, v in paths.items()},
        nsys_version=_typed(row.get("nsys_version"), str),
        metrics=RunMetrics(**values),
    )


def _typed(value: object, kind: type) -> object:
    """``value`` as ``kind`` (int, float or str) when it is one, else None."""
    if kind is str:
        return value if isinstance(value, str) else None
    if kind is int:
        return value if _is_int(value) else None
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return float(value) if ok and math.isfinite(value) else None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _json(text: object, kind: type):
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        value = None
    return value if isinstance(value, kind) else kind()


def _storable(text: str) -> str:
    """``text`` as SQLite can store it: a file name's undecodable bytes (surrogates) written
    as ``\\xff`` escapes."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
