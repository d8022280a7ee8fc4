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
        "command": command,
        "paths": json.dumps(
            {k: str(Path(v).resolve()) for k, v in paths.items() if v is not None},
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
    fields = {f.name for f in dataclasses.fields(RunMetrics)}
    values = {k: row.get(k) for k in fields if k != "step_wall_ns"}
    values["step_wall_ns"] = tuple(json.loads(row.get("step_wall_ns") or "[]"))
    values["busy_basis"] = values["busy_basis"] or "none"
    values["trace"] = values["trace"] or ""
    return Entry(
        id=int(row["id"]),
        recorded_utc=row["recorded_utc"],
        command=row["command"],
        paths=json.loads(row.get("paths") or "{}"),
        nsys_version=row.get("nsys_version"),
        metrics=RunMetrics(**values),
    )
