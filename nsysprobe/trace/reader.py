"""A read-only view over any Nsight Systems SQLite export, 2020.3 to 2026.2: ``Trace``, the one
class users open (``with Trace(path) as trace:``).

This package is the only code that opens SQLite, and this module the only one that connects:
``Trace`` holds the connections and what was learnt of the file (its tables, row counts, the
ids found unusable) and offers every reader of the package as a method. Each reader lives in
the module of its concern, as a function of the open ``Trace``:

- ``connection``: opening read-only within limits (the private copy of a WAL export, the work
  budget, which tables are read);
- ``values``: what one value reads as (names, integers, ids, valid times);
- ``intervals``: the integer interval rows of an event table, read as Arrow batches through
  ADBC's SQLite driver (``arrow``);
- ``tables``: the event tables (kernels, copies, memsets, CUDA and OS calls, scheduling);
- ``nvtx``: NVTX ranges, their names, domains and counts;
- ``metadata``: ``StringIds``, the export's metadata, GPUs, threads and processes;
- ``sampling``: Python sampling marks and their stacks.

It hides what changed between nsys versions:

- tables are absent when empty (exports are "lazy"), so every reader returns an empty table
  with the documented columns rather than failing;
- columns are selected by name (they were inserted mid-table across versions) and optional
  ones are filled with NULL when a version lacks them;
- NVTX text sits in ``text`` or in ``textId`` (-> ``StringIds``), both within one file;
- metadata lives in ``META_DATA_EXPORT``/``META_DATA_CAPTURE`` (2023.4+), ``EXPORT_META_DATA``
  (2022.4) or nowhere (older);
- text may not be UTF-8 (a Windows export held cp1251 bytes): it is decoded leniently;
- ``StringIds`` is read by id, only for the ids the analyses name (``Strings``): an export may
  hold millions of strings nothing refers to;
- an id the analyses group or join by (``ID_BOUNDS``: process, thread, device, stream,
  correlation) that is absent, NULL, not an integer or out of range reads as ``NO_ID`` and
  is counted per table and column (``unusable_ids``), never guessed.

Files from strangers are read within limits that are part of the design:

- only the file's tables are read: a view, a virtual table or a generated column (which run
  SQL of the file's author, e.g. a recursive view) counts as absent and is named in
  ``ignored``; nothing is written, so the file's triggers never run;
- SQLite's limits bound one value (``MAX_VALUE_BYTES``) and a budget bounds the work of all
  queries on one export (``_OPS_PER_BYTE`` VM steps per byte of the file): an export past them
  is a one-line error, not a hang;
- every text becomes a name (``nsysprobe.common.safetext.name``): at most ``NAME_CHARS`` characters,
  control and format characters escaped, so nothing downstream prints a 20 MB name or a
  terminal escape;
- the path must be a regular file (a FIFO named ``x.sqlite`` would block ``open``); a WAL
  database with a pending ``-wal`` file is read from a private copy, so no ``-shm`` appears
  beside it.

Python sampling (``python_samples``) is read from the NVTX marks' payload, in whichever form
the export holds it (``trace.payloads``): JSON (``--include-json``) or binary
(``--include-blobs``); a plain export holds the marks without their frames, which
``PythonSamples.form`` tells.

The environment nsys stores in a report (``TARGET_INFO_SYSTEM_ENV``, parts of
``META_DATA_CAPTURE``) is never read here, so nothing downstream can copy it.

Times are integer nanoseconds on the report's one clock. The package's modules use the
underscored members of ``Trace`` (``_fetch``, ``_select``, ``_raw``...); nothing outside it does.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from nsysprobe.common.ahead import shut_down
from nsysprobe.errors import TraceError
from nsysprobe.trace import arrow, metadata, nvtx, sampling, tables
from nsysprobe.trace.arrow import Driver
from nsysprobe.trace.connection import (
    MAX_VALUE_BYTES,
    WorkBudget,
    check_sqlite_file,
    is_locked,
    locked_message,
    private_copy,
    read_failed,
    settle_copy,
    table_kinds,
)
from nsysprobe.trace.metadata import Strings
from nsysprobe.trace.sampling import PythonSamples
from nsysprobe.trace.tables import EVENT_TABLES
from nsysprobe.trace.values import text_from_bytes


@dataclass(frozen=True)
class UnusableIds:
    """Rows of an event table whose id ``column`` (one of ``ID_BOUNDS``) reads as ``NO_ID``:
    ``unusable`` of its ``rows`` read; ``absent``: the table has no such column."""

    table: str
    column: str
    rows: int
    unusable: int
    absent: bool


class Trace:
    """An open export. Use as a context manager or call :meth:`close`."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        wal = check_sqlite_file(self.path)
        self._copy: Path | None = None
        source = self.path
        self._uri = source.resolve().as_uri() + "?mode=ro"
        if wal and not Path(f"{self.path}-wal").exists():
            # A read-only reader of a WAL database would create -wal and -shm files beside the
            # user's trace; with no -wal file there is nothing pending, so read it as immutable.
            self._uri += "&immutable=1"
        elif wal:
            self._copy = private_copy(self.path)
            copy = self._copy / self.path.name
            # Its pending pages written into it, the copy is a plain file nothing changes.
            settled = settle_copy(copy)
            self._uri = copy.as_uri() + ("?mode=ro&immutable=1" if settled else "?mode=ro")
        self._budget = WorkBudget(self.path, os.path.getsize(self.path))
        # The export read through ADBC's SQLite driver (``arrow``), on the same URI; it
        # connects on the first read, a connection per reading thread.
        self._arrow = Driver(self._uri, self._charge)
        # One sqlite3 connection of each kind per thread (``_db``, ``_raw``): two threads on
        # one connection deadlock, one in SQLite waiting for Python's lock in the budget's
        # callback, the other holding it while it waits for the connection.
        self._local = threading.local()
        self._opened: list[sqlite3.Connection] = []
        try:
            kinds = table_kinds(self._db)
        except sqlite3.DatabaseError as exc:
            self.close()
            self._budget.resume(exc)
            if is_locked(exc):
                raise TraceError(locked_message(self.path, exc)) from exc
            if self._budget.spent:
                raise TraceError(self._budget.explain(exc)) from exc
            raise TraceError(
                f"{self.path}: cannot read it as SQLite ({exc}); re-export it with "
                f"`nsys export --type sqlite`"
            ) from exc
        self.tables: frozenset[str] = frozenset(n for n, k in kinds.items() if k == "table")
        # Views and virtual tables run the author's SQL when read: never read, named here.
        self.ignored: tuple[str, ...] = tuple(
            sorted(n for n, k in kinds.items() if k in ("view", "virtual"))
        )
        self._counts: dict[str, int] = {}
        self._ids: dict[tuple[str, str], UnusableIds] = {}
        self._python_samples: dict[int | None, PythonSamples] = {}
        if "StringIds" not in self.tables and not self.tables & EVENT_TABLES:
            self.close()
            raise TraceError(
                f"{self.path}: an SQLite file but not an Nsight Systems export (no StringIds "
                f"and no event tables); export the report with `nsys export --type sqlite`"
            )

    def _connect(self, text_factory) -> sqlite3.Connection:
        """A read-only connection within the limits and the work budget of this export."""
        db = sqlite3.connect(self._uri, uri=True, check_same_thread=False)
        db.text_factory = text_factory
        if hasattr(db, "setlimit"):  # Python 3.11+
            db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
        self._budget.watch(db)
        return db

    def __enter__(self) -> Trace:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def uri(self) -> str:
        """The read-only URI the export is read through (``nsysprobe scrub`` attaches it)."""
        return self._uri

    def close(self) -> None:
        if getattr(self, "_arrow", None) is not None:
            self._arrow.close()
        for db in getattr(self, "_opened", ()):
            db.close()
        if self._copy is not None:
            shutil.rmtree(self._copy, ignore_errors=True)
            self._copy = None

    # -- schema ---------------------------------------------------------------------------

    def has(self, table: str) -> bool:
        return table in self.tables

    def columns(self, table: str) -> list[str]:
        if table not in self.tables:
            return []
        return [row[1] for row in self._fetch(table, f'PRAGMA table_info("{table}")')]

    def count(self, table: str) -> int:
        if table not in self.tables:
            return 0
        if table not in self._counts:  # a scan of the table; the export does not change
            self._counts[table] = int(self._fetch(table, f'SELECT count(*) FROM "{table}"')[0][0])
        return self._counts[table]

    def rowid_bounds(self, table: str) -> tuple[int, int] | None:
        """The least and the largest rowid of ``table`` (each found in the table's tree, not by
        a scan); None where it has no rows or no rowid. A damaged tree: ``TraceError``."""
        if table not in self.tables or (rowid := self._rowid_name(table)) is None:
            return None
        # (min and max in one query would be a scan)
        low = self._fetch(table, f'SELECT min({rowid}) FROM "{table}"')[0][0]
        high = self._fetch(table, f'SELECT max({rowid}) FROM "{table}"')[0][0]
        if not isinstance(low, int) or not isinstance(high, int):
            return None
        return low, high

    def _resolve(
        self, table: str, wanted: list[str], aliases: dict[str, Iterable[str]] | None
    ) -> list[str | None]:
        """The column each wanted name has in this export, or None where it has none."""
        present = set(self.columns(table))
        found = []
        for col in wanted:
            candidates = list((aliases or {}).get(col, ())) or [col]
            found.append(next((c for c in candidates if c in present), None))
        return found

    def _select(
        self,
        table: str,
        wanted: Iterable[str],
        where: str = "",
        aliases: dict[str, Iterable[str]] | None = None,
    ) -> dict[str, list]:
        """Select ``wanted`` columns by name, as column -> its values (lists); those a version
        lacks come back as NULL (None).

        ``aliases`` maps an output column to the names it has had across versions.
        """
        wanted = list(wanted)
        if table not in self.tables:
            return {c: [] for c in wanted}
        exprs = [
            f'"{src}" AS "{col}"' if src else f'NULL AS "{col}"'
            for col, src in zip(wanted, self._resolve(table, wanted, aliases))
        ]
        sql = f'SELECT {", ".join(exprs)} FROM "{table}" {where}'
        rows = self._fetch(table, sql)
        return {c: [r[k] for r in rows] for k, c in enumerate(wanted)}

    def _note_ids(self, table: str, column: str, values: np.ndarray, absent: bool) -> None:
        """Count the rows of ``table`` whose id ``column`` is ``NO_ID`` (a table read again
        replaces its count)."""
        bad = int(np.count_nonzero(values < 0))
        self._ids[table, column] = UnusableIds(table, column, int(values.size), bad, absent)

    @property
    def unusable_ids(self) -> tuple[UnusableIds, ...]:
        """The id columns of the event tables read so far that hold ``NO_ID`` in some rows, by
        table and column."""
        return tuple(u for _, u in sorted(self._ids.items()) if u.unusable)

    def read_together(self, readers: dict[str, Callable[[], object]]) -> dict[str, object]:
        """Each reader's result, the readers run ``arrow.READERS`` at a time: the driver reads
        without Python's lock, so two tables read at once on two cores. A signal (Ctrl-C)
        stops every reader at its next batch; the first reader to fail fails the call."""
        if arrow.READERS == 1:
            return {k: read() for k, read in readers.items()}
        pool = ThreadPoolExecutor(arrow.READERS, thread_name_prefix="nsysprobe-read")
        futures = {k: pool.submit(read) for k, read in readers.items()}
        try:
            return {k: f.result() for k, f in futures.items()}
        except BaseException as exc:
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                self._budget.interrupted = self._budget.interrupted or exc
            for f in futures.values():
                f.cancel()
            raise
        finally:
            shut_down(pool, futures.values())  # (the readers stop at their next batch)

    @cached_property
    def _utf8(self) -> bool:
        """Whether the database's text is UTF-8 (nsys writes it so; a crafted file may be
        UTF-16, whose text ``CAST(... AS BLOB)`` gives as UTF-16 bytes)."""
        return str(self._fetch("sqlite_master", "PRAGMA encoding")[0][0]).upper() == "UTF-8"

    def _charge(self, ops: int) -> bool:
        """The driver's work, counted against the budget (False once spent); raises the signal
        the budget kept while SQLite worked, if any."""
        if self._budget.interrupted is not None:
            raise self._budget.interrupted
        return self._budget.charge(ops)

    @property
    def _db(self) -> sqlite3.Connection:
        """This thread's connection, its text read as names (``text_from_bytes``)."""
        return self._thread_connection("db", text_from_bytes)

    @property
    def _raw(self) -> sqlite3.Connection:
        """This thread's connection whose text comes back as bytes, whole."""
        return self._thread_connection("raw", bytes)

    def _thread_connection(self, kind: str, text_factory) -> sqlite3.Connection:
        db = getattr(self._local, kind, None)
        if db is None:
            db = self._connect(text_factory)
            setattr(self._local, kind, db)
            self._opened.append(db)
        return db

    def _rowid_name(self, table: str) -> str | None:
        """The name that reaches the table's rowid (a column may take ``rowid``), or None for
        a table without rowids, or one whose columns take all three names."""
        # Generated columns are left out of ``columns`` but still take a name.
        xinfo = self._fetch(table, f'PRAGMA table_xinfo("{table}")')
        taken = {str(row[1]).lower() for row in xinfo}
        return next((n for n in ("rowid", "_rowid_", "oid") if n not in taken), None)

    def _fetch(self, table: str, sql: str, params: tuple = ()) -> list[tuple]:
        try:
            return self._db.execute(sql, params).fetchall()
        except sqlite3.DatabaseError as exc:
            raise TraceError(self._read_failed(table, exc)) from exc

    def _read_failed(self, table: str, exc: Exception) -> str:
        self._budget.resume(exc)
        if self._budget.spent:
            return self._budget.explain(exc)
        return read_failed(self.path, table, exc)

    def count_where(self, table: str, where: str) -> int:
        if table not in self.tables:
            return 0
        sql = f'SELECT count(*) FROM "{table}" WHERE {where}'
        return int(self._fetch(table, sql)[0][0])

    @cached_property
    def strings(self) -> Strings:
        """``StringIds``: string id -> text, read as asked (``Strings``)."""
        return Strings(self)

    # -- the readers, each a function of its module, offered here as a method ---------------

    # metadata: names by id, what the export says about itself
    names = metadata.names
    export_meta = cached_property(metadata.export_meta)
    nsys_version = cached_property(metadata.nsys_version)
    schema_version = cached_property(metadata.schema_version)
    requested_traces = cached_property(metadata.requested_traces)
    session_start_utc_ns = cached_property(metadata.session_start_utc_ns)
    gpus = metadata.gpus
    thread_names = metadata.thread_names
    process_names = metadata.process_names
    mem_kind_labels = metadata.mem_kind_labels
    copy_kind_labels = metadata.copy_kind_labels

    # the event tables
    kernels = tables.kernels
    memcpy = tables.memcpy
    memset = tables.memset
    runtime = tables.runtime
    osrt = tables.osrt
    profiler_overhead = tables.profiler_overhead
    graph_launches = tables.graph_launches
    diagnostics = tables.diagnostics
    sched_events = tables.sched_events

    # NVTX
    nvtx_counts = nvtx.nvtx_counts
    nvtx_domains = cached_property(nvtx.nvtx_domains)
    nvtx_ranges = nvtx.nvtx_ranges
    nvtx_names = nvtx.nvtx_names
    nvtx_details = nvtx.nvtx_details
    # The names and colours of every range, by row, where ``nvtx_ranges`` read them row by row.
    _nvtx_row_names: list[tuple[str, int]] | None = None

    # Python sampling
    python_samples = sampling.python_samples
    payload_layouts = sampling.payload_layouts
