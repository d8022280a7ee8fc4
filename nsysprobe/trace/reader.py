"""A read-only view over any Nsight Systems SQLite export, 2020.3 to 2026.2.

This is the only module that opens SQLite. It hides what changed between nsys versions:

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
- SQLite's limits bound one value (``_MAX_VALUE_BYTES``) and a budget bounds the work of all
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

Times are integer nanoseconds on the report's one clock.
"""

from __future__ import annotations

import html
import math
import os
import re
import shutil
import sqlite3
import tempfile
import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from nsysprobe.common.files import open_regular, read_head
from nsysprobe.common.safetext import NAME_CHARS
from nsysprobe.common.safetext import name as _name
from nsysprobe.common.table import Labels, Table, concat, first_seen
from nsysprobe.errors import InputError, TraceError
from nsysprobe.trace.blocks import NULL_TIME, BlockQuery, Gathered, NulInText
from nsysprobe.trace.payloads import (
    NVTX_MARK,
    SAMPLING_DOMAINS,
    blob_frames,
    blob_layouts,
    json_frames,
)
from nsysprobe.trace.schema import (
    CAPTURE_EVENT_TYPE,
    CAPTURE_EVENT_TYPES,
    CAPTURE_FLAGS,
    NVTX_DOMAIN_CREATE,
    NVTX_PUSH_POP,
    NVTX_START_END,
    SQLITE_MAGIC,
    STRING_TABLE,
)

# Memory kinds as exported (ENUM_CUDA_MEM_KIND); raw CUPTI numbers them differently.
MEM_KIND_LABELS = {
    0: "Pageable",
    1: "Pinned",
    2: "Device",
    3: "Array",
    4: "Managed",
    5: "Device Static",
    6: "Managed Static",
    7: "Unknown",
}
COPY_KIND_LABELS = {
    0: "Unknown",
    1: "HtoD",
    2: "DtoH",
    3: "HtoA",
    4: "AtoH",
    5: "AtoA",
    6: "AtoD",
    7: "DtoA",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
    11: "UVM HtoD",
    12: "UVM DtoH",
    13: "UVM DtoD",
}


# Runs of digits, as ``range_pattern`` masks them.
_DIGITS = re.compile(r"\d+")


def range_pattern(name: str) -> str:
    """An NVTX name with its numbers replaced, so ``Batch 12`` and ``Batch 13`` group."""
    return _DIGITS.sub("#", name)


def pid_of(global_id: np.ndarray) -> np.ndarray:
    """The process id packed in a ``globalTid``/``globalPid`` (bits 24-47)."""
    out = np.right_shift(np.asarray(global_id, dtype=np.int64), 24)
    out &= 0xFFFFFF  # in place: one array, not two, over tables of millions of rows
    return out


def tid_of(global_tid: np.ndarray) -> np.ndarray:
    """The thread id packed in a ``globalTid`` (bits 0-23)."""
    return np.asarray(global_tid, dtype=np.int64) & 0xFFFFFF


def as_text(value: object) -> str:
    """Text of a value that should be text, as a name (``safetext.name``): BLOBs and numbers
    are decoded or formatted."""
    if isinstance(value, bytes):
        return _text(value)
    return _name(value if isinstance(value, str) else str(value))


def as_int(value: object) -> int | None:
    """An integer column's value, or None for NULL, text, a BLOB or a number that is not an
    int64 (what a damaged or hand-edited export may hold)."""
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(value) or not float(value).is_integer():
            return None
        value = int(value)
    if isinstance(value, (int, np.integer)) and _INT64_MIN <= value <= _INT64_MAX:
        return int(value)
    return None


def _lenient_text(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("utf-8", errors="replace")


def _text(raw: bytes) -> str:
    """Every text the main connection reads: decoded leniently, as a name."""
    return _name(_lenient_text(raw[:_MAX_NAME_BYTES]))


@dataclass(frozen=True)
class GpuInfo:
    device_id: int
    name: str
    bus_id: str


@dataclass(frozen=True)
class UnusableIds:
    """Rows of an event table whose id ``column`` (one of ``ID_BOUNDS``) reads as ``NO_ID``:
    ``unusable`` of its ``rows`` read; ``absent``: the table has no such column."""

    table: str
    column: str
    rows: int
    unusable: int
    absent: bool


@dataclass(frozen=True)
class Frame:
    function: str  # as Python names it (``step``, ``<module>``)
    file: str  # the path as exported, its last ``NAME_CHARS`` characters
    line: int


@dataclass(frozen=True)
class PythonSamples:
    """Every Python sampling mark of the export (``trace.payloads``), in time order: when,
    which thread it sampled, and its stack (an index into ``stacks``, -1 where the export
    holds no readable frames for it)."""

    start_ns: np.ndarray  # int64
    thread: np.ndarray  # globalTid, int64
    stack: np.ndarray  # int32
    stacks: tuple[tuple[Frame, ...], ...]  # each innermost frame first
    form: str  # "json", "blobs", or "" where no mark has a payload

    def __len__(self) -> int:
        return int(self.start_ns.size)

    @property
    def readable(self) -> int:
        return int(np.count_nonzero(self.stack >= 0))

    @classmethod
    def empty(cls) -> PythonSamples:
        none = np.empty(0, dtype=np.int64)
        return cls(none, none, none.astype(np.int32), (), "")


class Trace:
    """An open export. Use as a context manager or call :meth:`close`."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        wal = _check_sqlite_file(self.path)
        self._copy: Path | None = None
        source = self.path
        self._uri = source.resolve().as_uri() + "?mode=ro"
        if wal and not Path(f"{self.path}-wal").exists():
            # A read-only reader of a WAL database would create -wal and -shm files beside the
            # user's trace; with no -wal file there is nothing pending, so read it as immutable.
            self._uri += "&immutable=1"
        elif wal:
            self._copy = _private_copy(self.path)
            self._uri = (self._copy / self.path.name).as_uri() + "?mode=ro"
        self._budget = WorkBudget(self.path, os.path.getsize(self.path))
        try:
            self._db = self._connect(_text)
            kinds = table_kinds(self._db)
        except sqlite3.DatabaseError as exc:
            self.close()
            self._budget.resume(exc)
            if _is_locked(exc):
                raise TraceError(_locked_message(self.path, exc)) from exc
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
        self._opened: list[sqlite3.Connection] = []
        self._ids: dict[tuple[str, str], UnusableIds] = {}
        self._python_samples: dict[int | None, PythonSamples] = {}
        if "StringIds" not in self.tables and not self.tables & _EVENT_TABLES:
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
            db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, _MAX_VALUE_BYTES)
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
        for db in [getattr(self, "_db", None), *getattr(self, "_opened", ())]:
            if db is not None:
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

    def _intervals(
        self,
        table: str,
        wanted: Iterable[str],
        aliases: dict[str, Iterable[str]] | None = None,
        where: str = "",
        raw: dict[str, str] | None = None,
        named_by: tuple[str, str | None] | None = None,
    ):
        """Integer interval rows: ``start``, ``end`` and ``wanted`` integer columns as int64
        (the ids of ``_IDS`` as int32 when every value fits).

        Rows whose start or end is NULL, not an integer or out of range, or whose interval is
        reversed, are left out and counted in the table's ``dropped``; a NULL or a value that is
        not an integer in another column reads as -1, a column this version lacks as -1 too,
        and so does an id out of ``ID_BOUNDS`` (those rows are counted: ``unusable_ids``).

        ``raw`` gives some of ``wanted`` as SQL expressions of integers (``rowid``). With
        ``named_by`` (the columns ``text`` and ``textId``, or None where it has none), the
        result is ``(table, (codes, names))``: the table's ``textId`` is -2 where the row's
        name is in ``text``; ``names`` are the distinct texts, digits masked (see
        ``blocks.masked``), and ``codes`` each row's index into them.
        """
        cols = ["start", "end", *wanted]
        raw = raw or {}
        if table not in self.tables:
            df = Table.empty(cols)
            return (df, (np.empty(0, np.int64), [])) if named_by else df
        named = [c for c in cols if c not in raw]
        found = dict(zip(named, self._resolve(table, named, aliases)))
        if found["start"] is None or found["end"] is None:
            raise TraceError(
                f"{self.path}: table {table} has no start/end columns; this is not an "
                f"Nsight Systems export nsysprobe can read: re-export the report with "
                f"`nsys export --type sqlite`"
            )
        read = [c for c in cols if c in raw or found[c] or (named_by and c == "textId")]
        try:
            blocks = self._rowid_blocks(table)
            query = self._block_query(table, read, found, raw, where, named_by, bool(blocks))
            gathered = self._int_columns(query, blocks)
            arrays, total = gathered.columns_read(), gathered.total
            if total is None:
                total = self.count_where(table, where) if where else self.count(table)
        except (sqlite3.DatabaseError, OverflowError, ValueError) as exc:
            raise TraceError(self._read_failed(table, exc)) from exc
        got = dict(zip(read, arrays))  # with ``named_by``, the names' codes come after
        rows = len(arrays[0])
        data = {c: got[c] if c in got else np.full(rows, -1, dtype=np.int64) for c in cols}
        for c in ID_BOUNDS.keys() & data.keys():
            self._note_ids(table, c, data[c], absent=c not in got)
        data = {c: _narrow(v) if c in _IDS else v for c, v in data.items()}
        df = Table(data, dropped=int(total - rows))
        return (df, (arrays[-1], gathered.names)) if named_by else df

    def _block_query(
        self,
        table: str,
        read: list[str],
        found: dict[str, str | None],
        raw: dict[str, str],
        where: str,
        named_by: tuple[str, str | None] | None,
        in_blocks: bool,
    ) -> BlockQuery:
        """The exact and the fast query of ``read`` (``blocks.BlockQuery``), over a range of
        rowids when ``in_blocks``; ``textId`` is the name's source when ``named_by`` is given.
        The fast query is built only where the declared types keep SQLite from storing a
        number as text: INTEGER affinity for every integer column, TEXT affinity for
        ``text``."""
        declared = self._declared(table)
        text_col, id_col = named_by or (None, None)
        exact, fast = [], []
        for c in read:
            if c == "textId" and named_by:
                id_expr = _int_expr(id_col) if id_col else "-1"
                exact.append(
                    f"CASE typeof(\"{text_col}\") WHEN 'null' THEN {id_expr} "
                    "WHEN 'text' THEN -2 WHEN 'blob' THEN -2 ELSE -3 END"
                )
                fast.append(f'ifnull("{id_col}", -1)' if id_col else "-1")
            elif c in raw:
                exact.append(raw[c])
                fast.append(raw[c])
            else:
                exact.append(_int_expr(found[c], *_BOUNDS.get(c, ())))
                null = NULL_TIME if c in ("start", "end") else -1
                fast.append(f'ifnull("{found[c]}", {null})')
        checked = [f for c, f in zip(read, fast) if c not in raw]
        typed = [found[c] for c in read if c not in raw and found.get(c)]  # textId's included
        fast_ok = all("INT" in declared.get(c, "") for c in typed) and (
            not named_by or _text_affinity(declared.get(text_col, ""))
        )
        aggs = [f"group_concat({e})" for e in exact]
        fast_aggs = ["count(*)", f"max(max({', '.join(checked)}))"]
        if named_by:
            aggs.append(f"group_concat(coalesce(\"{text_col}\", ''), char(0))")
            fast_aggs += [f'count("{text_col}")', f'min("{text_col}")']
        fast_aggs += [f"group_concat({e})" for e in fast]
        if named_by:
            fast_aggs.append(f'group_concat(coalesce("{text_col}", char(1)), char(0))')
        valid = _valid_interval(found["start"], found["end"])
        ranged = f" AND {self._rowid_name(table)} BETWEEN ? AND ?" if in_blocks else ""
        exact_where = valid + (f" AND ({where})" if where else "")
        return BlockQuery(
            # NOT INDEXED: rows in rowid order, whatever index the file brings (an index on
            # start or end would let SQLite order the exact query's rows by it).
            exact=(
                f'SELECT {", ".join(aggs)} FROM "{table}" NOT INDEXED WHERE {exact_where}{ranged}'
            ),
            fast=(
                f'SELECT {", ".join(fast_aggs)} FROM "{table}" NOT INDEXED '
                f"WHERE ({where or 1}){ranged}"
                if fast_ok
                else None
            ),
            columns=len(read),
            text=bool(named_by),
            max_time=_MAX_TIME_NS,
            bounds={k: _BOUNDS[c] for k, c in enumerate(read) if c in _BOUNDS},
            text_id=read.index("textId") if named_by else None,
        )

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

    def _declared(self, table: str) -> dict[str, str]:
        """column -> its declared type, upper case."""
        rows = self._fetch(table, f'PRAGMA table_info("{table}")')
        return {str(r[1]): str(r[2] or "").upper() for r in rows}

    def _int_columns(self, query: BlockQuery, blocks: list[tuple[int, int]] | None) -> Gathered:
        """The columns of ``query`` (``blocks.Gathered``), read a block of ``blocks`` (rowid
        ranges, ``_rowid_blocks``) at a time or, with None, in one query; with its ``text``,
        also each row's masked name (``blocks.masked``); and the rows of the table (matching
        the caller's ``where``) before the interval test, None if a block was read exactly.

        Python's sqlite3 builds a tuple of integer objects per row, which costs more than the
        reading itself on tables of millions of rows. Instead SQLite formats each column of a
        block of rows as one comma-separated text (``group_concat`` in a single scan, so the
        columns stay aligned) that numpy parses. Blocks of rowids bound the text's size, and
        are read on one connection per core: SQLite runs without Python's lock.
        """
        capacity = None if blocks is None else sum(hi - lo + 1 for lo, hi in blocks)
        gathered = Gathered(query.columns, query.text, capacity)
        if blocks is None:
            gathered.take(query.run(self._raw))
        elif len(blocks) <= 1 and not query.text:
            for b in blocks:
                gathered.take(query.run(self._raw, b))
        else:
            self._read_blocks(query, blocks, gathered.take)
        return gathered

    @cached_property
    def _raw(self) -> sqlite3.Connection:
        """A connection whose text comes back as bytes, whole: for the joined columns."""
        self._opened.append(self._connect(bytes))
        return self._opened[-1]

    def _read_blocks(self, query: BlockQuery, blocks: list[tuple[int, int]], take) -> None:
        """``take`` each block's result, in the order of ``blocks``, as it is read."""
        local = threading.local()
        opened: list[sqlite3.Connection] = []

        def read(block: tuple[int, int]) -> tuple[list, int | None]:
            if not hasattr(local, "db"):
                local.db = self._connect(bytes)
                if hasattr(local.db, "setlimit"):  # Python 3.11+
                    # A block's joined names stay under this; past it the caller reads by rows.
                    local.db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, _MAX_BLOCK_TEXT)
                opened.append(local.db)
            return query.run(local.db, block)

        workers = max(1, min(_READERS, len(blocks)))
        try:
            with ThreadPoolExecutor(workers, thread_name_prefix="nsysprobe-read") as pool:
                results = pool.map(read, blocks)
                try:
                    for result in results:
                        take(result)
                except (KeyboardInterrupt, SystemExit) as exc:  # a signal: stop every reader
                    self._budget.interrupted = self._budget.interrupted or exc
                    raise
                finally:
                    results.close()  # the blocks not yet read are not read
        finally:
            for db in opened:
                db.close()

    def _rowid_name(self, table: str) -> str | None:
        """The name that reaches the table's rowid (a column may take ``rowid``), or None for
        a table without rowids, or one whose columns take all three names."""
        # Generated columns are left out of ``columns`` but still take a name.
        xinfo = self._fetch(table, f'PRAGMA table_xinfo("{table}")')
        taken = {str(row[1]).lower() for row in xinfo}
        return next((n for n in ("rowid", "_rowid_", "oid") if n not in taken), None)

    def _rowid_blocks(self, table: str) -> list[tuple[int, int]] | None:
        """Rowid ranges of about ``_BLOCK_ROWS`` rows, or None for a table read in one query:
        no rowids, or rowids so sparse that blocks would be mostly empty."""
        rowid = self._rowid_name(table)
        if rowid is None:
            return None
        # Two queries: SQLite answers a lone min() or max() of the rowid without a scan.
        try:
            (lo,) = self._db.execute(f'SELECT min({rowid}) FROM "{table}"').fetchone()
            (hi,) = self._db.execute(f'SELECT max({rowid}) FROM "{table}"').fetchone()
        except sqlite3.DatabaseError as exc:
            self._budget.resume(exc)
            return None
        if lo is None:
            return []
        if not isinstance(lo, int) or not isinstance(hi, int):
            return None
        spans = (hi - lo) // _BLOCK_ROWS + 1
        if spans > _DENSE_SPANS and spans > 4 * (self.count(table) // _BLOCK_ROWS + 1):
            return None
        return [(b, min(b + _BLOCK_ROWS - 1, hi)) for b in range(lo, hi + 1, _BLOCK_ROWS)]

    def _fetch(self, table: str, sql: str, params: tuple = ()) -> list[tuple]:
        try:
            return self._db.execute(sql, params).fetchall()
        except sqlite3.DatabaseError as exc:
            raise TraceError(self._read_failed(table, exc)) from exc

    def _read_failed(self, table: str, exc: Exception) -> str:
        self._budget.resume(exc)
        if self._budget.spent:
            return self._budget.explain(exc)
        return _read_failed(self.path, table, exc)

    # -- strings and metadata -------------------------------------------------------------

    @cached_property
    def strings(self) -> Strings:
        """``StringIds``: string id -> text, read as asked (``Strings``)."""
        return Strings(self)

    def names(self, ids: Iterable) -> list[str]:
        """Map string ids (values of a ``textId`` column, as ``_number`` reads them) to text;
        unknown ids and values that are no number give ``"<unknown>"``."""
        numbers = [_number(i) for i in ids]
        keys = [None if n is None else int(n) for n in numbers]
        strings = self.strings
        strings.load(k for k in keys if k is not None)
        return ["<unknown>" if k is None else strings.get(k, "<unknown>") for k in keys]

    @cached_property
    def export_meta(self) -> dict[str, str]:
        for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
            if table in self.tables:
                df = self._select(table, ["name", "value"])
                return {
                    as_text(k): as_text(v)
                    for k, v in zip(df["name"], df["value"])
                    if k is not None and v is not None
                }
        return {}

    @cached_property
    def nsys_version(self) -> str | None:
        return self.export_meta.get("EXPORT_PRODUCT_VERSION")

    @cached_property
    def schema_version(self) -> str | None:
        return self.export_meta.get("EXPORT_SCHEMA_VERSION")

    @cached_property
    def requested_traces(self) -> frozenset[str] | None:
        """What the capture asked to trace (``cuda``, ``nvtx``, ``osrt``), or None if unknown.

        Read from the capture options only (``CAPTURE_EVENT_TYPE`` and the per-process
        ``COLLECT_*_TRACE`` flags); old exports do not record them.
        """
        if "META_DATA_CAPTURE" not in self.tables:
            return None
        found: set[str] = set()
        df = self._select("META_DATA_CAPTURE", ["name", "value"])
        for name, value in zip(df["name"], df["value"]):
            key = as_text(name).rsplit(":", 1)[-1]
            if (
                key == CAPTURE_EVENT_TYPE
                and isinstance(value, str)
                and (value in CAPTURE_EVENT_TYPES)
            ):
                found.add(CAPTURE_EVENT_TYPES[value])
            elif key in CAPTURE_FLAGS and str(value).lower() == "true":
                found.add(CAPTURE_FLAGS[key])
        return frozenset(found)

    @cached_property
    def session_start_utc_ns(self) -> int | None:
        if "TARGET_INFO_SESSION_START_TIME" not in self.tables:
            return None
        df = self._select("TARGET_INFO_SESSION_START_TIME", ["utcEpochNs"], where="LIMIT 1")
        return as_int(df["utcEpochNs"][0]) if df["utcEpochNs"] else None

    def gpus(self) -> list[GpuInfo]:
        """GPUs the report describes: ``TARGET_INFO_GPU`` (2021.3+), ``TARGET_INFO_CUDA_GPU``
        (2020.3) or ``TARGET_INFO_CUDA_DEVICE`` (2025.1+)."""
        for table, id_cols, bus_cols in (
            ("TARGET_INFO_GPU", ("cuDevice", "id"), ("busLocation",)),
            ("TARGET_INFO_CUDA_DEVICE", ("cudaId", "id"), ("busLocation", "pciBusId")),
            ("TARGET_INFO_CUDA_GPU", ("cudaId", "id"), ("busLocation", "pciBusId")),
        ):
            if table not in self.tables or self.count(table) == 0:
                continue
            df = self._select(
                table,
                ["device_id", "name", "bus_id"],
                aliases={"device_id": id_cols, "name": ("name",), "bus_id": bus_cols},
            )
            return [
                GpuInfo(
                    device_id=i if as_int(device) is None else as_int(device),
                    name=as_text(name) if _present(name) else "unknown GPU",
                    bus_id=as_text(bus) if _present(bus) else "",
                )
                for i, (device, name, bus) in enumerate(
                    zip(df["device_id"], df["name"], df["bus_id"])
                )
            ]
        return []

    def thread_names(self) -> dict[int, str]:
        """globalTid -> thread name, where the export recorded one."""
        if "ThreadNames" not in self.tables:
            return {}
        df = self._select("ThreadNames", ["globalTid", "nameId"])
        pairs = list(zip(map(as_int, df["globalTid"]), map(as_int, df["nameId"])))
        strings = self.strings
        strings.load(n for _, n in pairs if n is not None)
        return {t: strings.get(n, "") for t, n in pairs if t is not None and n is not None}

    def process_names(self) -> dict[int, str]:
        """pid -> process name."""
        if "PROCESSES" not in self.tables:
            return {}
        df = self._select("PROCESSES", ["pid", "name"])
        pairs = zip(map(as_int, df["pid"]), df["name"])
        return {p: as_text(n) for p, n in pairs if p is not None}

    def mem_kind_labels(self) -> dict[int, str]:
        return self._enum_labels("ENUM_CUDA_MEM_KIND", MEM_KIND_LABELS)

    def copy_kind_labels(self) -> dict[int, str]:
        """copyKind -> ``HtoD``, ``DtoH``, ... from ``ENUM_CUDA_MEMCPY_OPER`` when the export
        has it (its names, ``CUDA_MEMCPY_KIND_HTOD``, shortened), else the documented
        numbering."""
        return self._enum_labels(
            "ENUM_CUDA_MEMCPY_OPER", COPY_KIND_LABELS, column="name", label=_copy_kind_label
        )

    def _enum_labels(
        self, table: str, default: dict[int, str], column: str = "label", label=None
    ) -> dict[int, str]:
        """id -> the text of ``column`` in an ``ENUM_*`` table (through ``label`` when given),
        over ``default`` for ids the table lacks or when the export has no such table."""
        if table not in self.tables:
            return dict(default)
        df = self._select(table, ["id", column])
        labels = dict(default)
        convert = label or (lambda text: text)
        pairs = zip(map(as_int, df["id"]), df[column])
        labels.update({i: convert(as_text(v)) for i, v in pairs if i is not None and v is not None})
        return labels

    # -- events ---------------------------------------------------------------------------

    def kernels(self) -> Table:
        """Columns: start, end, deviceId, streamId, correlationId, globalPid, nameId."""
        return self._gpu_ops(
            "CUPTI_ACTIVITY_KIND_KERNEL",
            ["nameId"],
            aliases={"nameId": ("shortName", "demangledName")},
        )

    def memcpy(self) -> Table:
        """Columns: start, end, deviceId, streamId, correlationId, globalPid, bytes, copyKind,
        srcKind, dstKind."""
        return self._gpu_ops(
            "CUPTI_ACTIVITY_KIND_MEMCPY", ["bytes", "copyKind", "srcKind", "dstKind"]
        )

    def memset(self) -> Table:
        """Columns: start, end, deviceId, streamId, correlationId, globalPid, bytes, memKind."""
        return self._gpu_ops("CUPTI_ACTIVITY_KIND_MEMSET", ["bytes", "memKind"])

    def _gpu_ops(
        self, table: str, extra: list[str], aliases: dict[str, Iterable[str]] | None = None
    ) -> Table:
        cols = ["deviceId", "streamId", "correlationId", "globalPid", *extra]
        return self._intervals(
            table, cols, aliases={"globalPid": ("globalPid", "processId"), **(aliases or {})}
        )

    def runtime(self) -> Table:
        """CUDA runtime and driver API calls. Columns: start, end, globalTid, correlationId,
        nameId."""
        frames = [
            self._intervals(t, ["globalTid", "correlationId", "nameId"])
            for t in ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER")
            if t in self.tables
        ]
        if len(frames) == 1:
            return frames[0]
        if not frames:
            return self._intervals(
                "CUPTI_ACTIVITY_KIND_RUNTIME", ["globalTid", "correlationId", "nameId"]
            )
        return concat(frames)

    def osrt(self) -> Table:
        """OS-runtime calls. Columns: start, end, globalTid, nameId."""
        return self._intervals("OSRT_API", ["globalTid", "nameId"])

    def profiler_overhead(self) -> Table:
        """nsys's own overhead on the profiled threads (buffer flushes, CUPTI
        instrumentation). Columns: start, end, globalTid."""
        cols = ["globalTid"]
        return self._optional(cols, lambda: self._intervals("PROFILER_OVERHEAD", cols))

    def graph_launches(self) -> Table:
        """CUDA graph replays recorded whole (``--cuda-graph-trace=graph``, nsys's default):
        one row per replay and no kernel rows for its nodes. Columns: start, end, deviceId,
        streamId, correlationId, globalPid."""
        cols = ["deviceId", "streamId", "correlationId", "globalPid"]
        return self._optional(cols, lambda: self._gpu_ops("CUPTI_ACTIVITY_KIND_GRAPH_TRACE", []))

    @staticmethod
    def _optional(cols: list[str], read) -> Table:
        """A table the analyses can do without: one that cannot be read is left out (empty)
        instead of failing the report."""
        try:
            return read()
        except TraceError:
            return Table.empty(["start", "end", *cols])

    def diagnostics(self, like: Iterable[str]) -> list[str]:
        """Texts of ``DIAGNOSTIC_EVENT`` rows matching any of the SQL ``LIKE`` patterns
        (bound as parameters), at most 100."""
        table = "DIAGNOSTIC_EVENT"
        patterns = list(like)
        if table not in self.tables or "text" not in self.columns(table) or not patterns:
            return []
        cond = " OR ".join("text LIKE ?" for _ in patterns)
        rows = self._fetch(table, f"SELECT text FROM {table} WHERE {cond} LIMIT 100", patterns)
        return [as_text(t) for (t,) in rows if t is not None]

    def sched_events(self) -> Table:
        """Thread scheduling events from ``--cpuctxsw``. Columns: start, cpu, isSchedIn,
        globalTid (all int64)."""
        cols = ["start", "cpu", "isSchedIn", "globalTid"]
        if "SCHED_EVENTS" not in self.tables:
            return Table.empty(cols)
        exprs = ", ".join(_int_expr(c) for c in cols)
        present = set(self.columns("SCHED_EVENTS"))
        if not set(cols) <= present:
            return Table.empty(cols)
        try:
            cur = self._db.execute(
                f"SELECT {exprs} FROM SCHED_EVENTS WHERE typeof(\"start\") = 'integer' "
                f'ORDER BY "start"'
            )
            records = np.fromiter(cur, dtype=np.dtype([(c, np.int64) for c in cols]))
        except (sqlite3.DatabaseError, OverflowError, ValueError) as exc:
            raise TraceError(self._read_failed("SCHED_EVENTS", exc)) from exc
        out = Table({c: records[c] for c in cols})
        tids = out["globalTid"]
        tids[tids < 0] = NO_ID
        self._note_ids("SCHED_EVENTS", "globalTid", tids, absent=False)
        return out

    def nvtx_counts(self) -> dict[int, int]:
        """eventType -> row count in NVTX_EVENTS (to tell "no ranges" from "no NVTX")."""
        if "NVTX_EVENTS" not in self.tables:
            return {}
        if "eventType" not in self.columns("NVTX_EVENTS"):
            return {}
        rows = self._fetch(
            "NVTX_EVENTS", "SELECT eventType, count(*) FROM NVTX_EVENTS GROUP BY eventType"
        )
        counts: dict[int, int] = {}
        for event_type, n in rows:
            key = as_int(event_type)
            if key is not None:
                counts[key] = counts.get(key, 0) + int(n)
        return counts

    @cached_property
    def nvtx_domains(self) -> dict[tuple[int, int], str]:
        """(pid, domainId) -> the domain's name, from the domain-creation rows (eventType 75;
        domain ids are per process)."""
        if "NVTX_EVENTS" not in self.tables or "domainId" not in self.columns("NVTX_EVENTS"):
            return {}
        df = self._select(
            "NVTX_EVENTS",
            ["globalTid", "domainId", "text", "textId"],
            where=f"WHERE eventType = {NVTX_DOMAIN_CREATE} LIMIT 10000",
        )
        out: dict[tuple[int, int], str] = {}
        names = self.names(df["textId"])
        for tid, dom, text, name in zip(df["globalTid"], df["domainId"], df["text"], names):
            tid, dom = as_int(tid), as_int(dom)
            label = as_text(text) if text is not None else name
            if tid is not None and dom is not None and isinstance(label, str):
                out[((tid >> 24) & 0xFFFFFF, dom)] = label
        return out

    def nvtx_ranges(self) -> Table:
        """Closed NVTX push/pop and start/end ranges.

        Columns: start, end, globalTid, domainId, ``pattern`` (the name with its numbers
        masked, ``Batch #``: ``Labels``, its categories sorted) and ``row`` (what
        :meth:`nvtx_names` and :meth:`nvtx_details` take). The name comes from ``text`` or,
        when that is NULL, from ``textId``.

        A PyTorch trace holds millions of ranges with a name each (``aten::add, seq = 12,
        op_id = 3401``), nearly all distinct: no per-row name is built. SQLite joins each
        block's names into one text; its digits are masked at once; only the distinct masked
        names become strings.
        """
        table = "NVTX_EVENTS"
        where = f"eventType IN ({NVTX_PUSH_POP}, {NVTX_START_END})"
        if table not in self.tables or "text" not in self.columns(table):
            return self._nvtx_by_rows(where)
        if not self._has_rowid(table):
            return self._nvtx_by_rows(where)
        text_id = "textId" if "textId" in self.columns(table) else None
        try:
            df, names = self._intervals(
                table,
                ["globalTid", "domainId", "rowid", "textId"],
                where=where,
                raw={"rowid": self._rowid_name(table)},
                # textId -2: the name is in ``text``; -3: ``text`` holds a number (read by rows)
                named_by=("text", text_id),
            )
        except (NulInText, TraceError):
            # A NUL in a name, or a block of names too long for one SQLite text: row by row
            # (an export that is damaged fails there with its own one-line error).
            return self._nvtx_by_rows(where)
        text_ids = df.pop("textId")
        has_text = text_ids == -2
        if (text_ids == -3).any():
            return self._nvtx_by_rows(where)
        codes, seen = names  # each row's code into the distinct masked names
        # The pattern of the name as every output shows it (cut, escaped), as for textId.
        text_patterns = [range_pattern(_name(_lenient_text(m))) for m in seen]
        id_values, id_codes = first_seen(text_ids[~has_text])
        strings = self.strings
        strings.load(id_values.tolist())
        id_patterns = [range_pattern(strings.get(int(i), "<unknown>")) for i in id_values]
        codes[~has_text] = id_codes + len(text_patterns)
        df["pattern"] = _sorted_labels(codes, text_patterns + id_patterns)
        df["row"] = df.pop("rowid")
        return df

    def nvtx_names(self, rows: Iterable[int]) -> list[str]:
        """The names of the NVTX ranges whose ``row`` (from :meth:`nvtx_ranges`) is given, in
        that order."""
        return [name for name, _ in self.nvtx_details(rows)]

    def nvtx_details(self, rows: Iterable[int]) -> list[tuple[str, int]]:
        """(name, color) of the NVTX ranges whose ``row`` is given, in that order; the color
        is ARGB, -1 when none."""
        rows = [int(r) for r in rows]
        if self._nvtx_row_names is not None:
            return [self._nvtx_row_names[r] for r in rows]
        got: list[tuple] = []
        wanted = sorted(set(rows))
        columns = self.columns("NVTX_EVENTS")
        color = "color" if "color" in columns else "NULL"
        text_id = "textId" if "textId" in columns else "NULL"
        rowid = self._rowid_name("NVTX_EVENTS")
        for lo in range(0, len(wanted), _NAMES_PER_QUERY):
            chunk = wanted[lo : lo + _NAMES_PER_QUERY]
            marks = ", ".join("?" * len(chunk))
            sql = (
                f"SELECT {rowid}, text, {text_id}, {color} FROM NVTX_EVENTS "
                f"WHERE {rowid} IN ({marks})"
            )
            got += self._fetch("NVTX_EVENTS", sql, tuple(chunk))
        strings = self.strings
        strings.load(sid for _, text, sid, _ in got if text is None and isinstance(sid, int))
        found: dict[int, tuple[str, int]] = {}
        for row, text, sid, argb in got:
            if text is not None:
                name = as_text(text)
            elif isinstance(sid, int):
                name = strings.get(sid, "<unknown>")
            else:
                name = "<unknown>"
            argb = as_int(argb)
            found[row] = (name, -1 if argb is None else argb)
        return [found.get(r, ("<unknown>", -1)) for r in rows]

    _nvtx_row_names: list[tuple[str, int]] | None = None

    def _nvtx_by_rows(self, where: str) -> Table:
        """The NVTX ranges read row by row: for exports the block reader cannot take (no
        ``text`` column, no rowids, text that is a number or holds NUL). Slow, and exact."""
        ints = ["start", "end", "globalTid", "color", "domainId"]
        df = self._select("NVTX_EVENTS", [*ints, "text", "textId"], where=_interval_where(where))
        dropped = self.count_where("NVTX_EVENTS", where) - len(df["start"])
        ints = {c: np.array([_lenient_int(v) for v in df[c]], dtype=np.int64) for c in ints}
        tids = ints["globalTid"]
        tids[tids < 0] = NO_ID
        absent = "globalTid" not in self.columns("NVTX_EVENTS")
        self._note_ids("NVTX_EVENTS", "globalTid", tids, absent=absent)
        by_id = self.names(df["textId"])
        names = [as_text(t) if t is not None else n for t, n in zip(df["text"], by_id)]
        self._nvtx_row_names = list(zip(names, ints["color"].tolist()))
        distinct: dict[str, int] = {}
        codes = np.array([distinct.setdefault(n, len(distinct)) for n in names], dtype=np.int64)
        out = Table({c: ints[c] for c in ("start", "end", "globalTid", "domainId")})
        out["pattern"] = _sorted_labels(codes, [range_pattern(str(n)) for n in distinct])
        out["row"] = np.arange(len(out), dtype=np.int64)
        for col in ("domainId", "row"):
            out[col] = _narrow(out[col])
        out.dropped = int(dropped)
        return out

    def _has_rowid(self, table: str) -> bool:
        return self._rowid_blocks(table) is not None

    def python_samples(self, thread: int | None = None) -> PythonSamples:
        """The Python sampling marks (``PythonSamples``) of the sampling domains
        (``payloads.SAMPLING_DOMAINS``, per process), of one ``thread`` (a ``globalTid``) or
        of all; each distinct payload decoded once (a sampler repeats a few hundred stacks).
        Read once per thread asked for.

        nsys samples every Python thread of the process tree (DataLoader workers too), 60,000
        marks a minute each at 1 kHz: the analyses ask for the one thread they explain. Read
        row by row (Python builds each row's payload: 604,233 marks took 1.3 s; joining a
        block's payloads in SQLite, as ``nvtx_ranges`` joins names, took longer)."""
        if thread not in self._python_samples:
            self._python_samples[thread] = self._read_python_samples(thread)
        return self._python_samples[thread]

    def _read_python_samples(self, thread: int | None) -> PythonSamples:
        table = "NVTX_EVENTS"
        pairs = {key for key, name in self.nvtx_domains.items() if name in SAMPLING_DOMAINS}
        columns = set(self.columns(table))
        if not pairs or not {"start", "eventType", "domainId", "globalTid"} <= columns:
            return PythonSamples.empty()
        if thread is not None:
            pairs = {(pid, d) for pid, d in pairs if pid == (thread >> 24) & 0xFFFFFF}
            if not pairs or as_int(thread) is None:
                return PythonSamples.empty()
        json_col, blob_col = (f'"{c}"' if c in columns else "NULL" for c in _PAYLOADS)
        marks = " OR ".join(
            f'((("globalTid" >> 24) & {0xFFFFFF}) = {pid} AND "domainId" = {domain})'
            for pid, domain in sorted(pairs)
        )
        one = "" if thread is None else f' AND "globalTid" = {int(thread)}'
        sql = (
            f'SELECT "start", "globalTid", "domainId", {json_col}, {blob_col} FROM "{table}" '
            f'WHERE "eventType" = {NVTX_MARK} AND typeof("start") = \'integer\' '
            f"AND typeof(\"globalTid\") = 'integer' AND typeof(\"domainId\") = 'integer' "
            f'AND "start" BETWEEN {-_MAX_TIME_NS} AND {_MAX_TIME_NS} AND "globalTid" >= 0 '
            f"AND ({marks}){one}"
        )
        reader = _Samples(self)
        try:
            reader.take_rows(self._raw.execute(sql))
        except (sqlite3.DatabaseError, OverflowError, ValueError) as exc:
            raise TraceError(self._read_failed(table, exc)) from exc
        return reader.result()

    def _named_stacks(self, raw: list[tuple]) -> tuple[tuple[tuple[Frame, ...], ...], np.ndarray]:
        """The stacks of string ids as frames of names, equal stacks once; and each raw
        stack's index among them."""
        strings = self.strings
        strings.load(f for stack in raw for f, _, _ in stack)
        files = {
            i: _name(html.unescape(text))
            for i, text in self._string_tails({p for stack in raw for _, p, _ in stack}).items()
        }
        functions: dict[int, str] = {}
        named: dict[tuple[Frame, ...], int] = {}
        renumber = np.empty(len(raw), dtype=np.int64)
        for i, stack in enumerate(raw):
            frames = []
            for f, p, line in stack:
                if f not in functions:
                    # The export writes a function's < and > as entities (``&lt;module&gt;``).
                    functions[f] = _name(html.unescape(strings.get(f, "<unknown>")))
                frames.append(Frame(functions[f], files.get(p, "<unknown>"), int(line)))
            renumber[i] = named.setdefault(tuple(frames), len(named))
        return tuple(named), renumber

    def _string_tails(self, ids: set[int]) -> dict[int, str]:
        """id -> the last ``NAME_CHARS`` characters of its ``StringIds`` text (a frame's file:
        its base name, and the library folder before it, are at the end)."""
        if not ids or STRING_TABLE not in self.tables:
            return {}
        out: dict[int, str] = {}
        wanted = sorted(i for i in ids if _INT64_MIN <= i <= _INT64_MAX)
        for lo in range(0, len(wanted), _NAMES_PER_QUERY):
            chunk = wanted[lo : lo + _NAMES_PER_QUERY]
            sql = (
                f"SELECT id, CASE WHEN length(value) > {NAME_CHARS} THEN "
                f"substr(value, -{NAME_CHARS}) ELSE value END FROM {STRING_TABLE} "
                f"WHERE id IN ({', '.join('?' * len(chunk))})"
            )
            for i, value in self._fetch(STRING_TABLE, sql, tuple(chunk)):
                if isinstance(i, int) and value is not None:
                    out[i] = as_text(value)
        return out

    def payload_layouts(self) -> dict:
        """The layouts of the sampling schemas the export describes (``payloads.blob_layouts``)."""
        tables = ("NVTX_PAYLOAD_SCHEMAS", "NVTX_PAYLOAD_SCHEMA_ENTRIES")
        if not all(t in self.tables for t in tables):
            return {}
        schemas = self._select(tables[0], ["domainId", "schemaId", "payloadSize"])
        entries = self._select(tables[1], ["domainId", "schemaId", "name", "type", "offset"])

        def rows(df: dict, names: list[str]) -> list[tuple]:
            return [
                tuple(as_text(v) if c == "name" and v is not None else as_int(v) for c, v in row)
                for row in zip(*([(c, v) for v in df[c]] for c in names))
            ]

        return blob_layouts(
            rows(schemas, ["domainId", "schemaId", "payloadSize"]),
            rows(entries, ["domainId", "schemaId", "name", "type", "offset"]),
        )

    def count_where(self, table: str, where: str) -> int:
        if table not in self.tables:
            return 0
        sql = f'SELECT count(*) FROM "{table}" WHERE {where}'
        return int(self._fetch(table, sql)[0][0])


class _Samples:
    """The Python sampling marks as ``Trace.python_samples`` reads them, a block of rows at
    a time, each distinct payload decoded once."""

    def __init__(self, trace: Trace):
        self.trace = trace
        self.starts: list[np.ndarray] = []
        self.threads: list[np.ndarray] = []
        self.stacks: list[np.ndarray] = []
        self.texts: dict[bytes, int] = {}  # JSON payload -> raw stack index (-1: none)
        self.blobs: dict[tuple[int, bytes], int] = {}  # (domain, binary payload) -> the same
        self.raw: list[tuple] = []
        self.forms: set[str] = set()
        self.layouts: dict | None = None

    def take_rows(self, cursor) -> None:
        known = self.texts.get
        while rows := cursor.fetchmany(_SAMPLE_ROWS):
            n = len(rows)
            self.starts.append(np.fromiter((r[0] for r in rows), np.int64, n))
            self.threads.append(np.fromiter((r[1] for r in rows), np.int64, n))
            self.stacks.append(
                np.fromiter(
                    (
                        i if (i := known(r[3])) is not None else self._stack(r[3], r[4], r[2])
                        for r in rows
                    ),
                    np.int64,
                    n,
                )
            )

    def _stack(self, text, blob, domain: int) -> int:
        """The raw stack index of a payload not seen yet (JSON ``text``, else the ``blob``),
        -1 for none."""
        if isinstance(text, bytes) and text:
            self.forms.add("json")
            frames = json_frames(text)
            cache, key = self.texts, text
        elif isinstance(blob, bytes) and blob:
            if (domain, blob) in self.blobs:
                return self.blobs[domain, blob]
            self.forms.add("blobs")
            if self.layouts is None:
                self.layouts = self.trace.payload_layouts()
            frames = blob_frames(blob, domain, self.layouts)
            cache, key = self.blobs, (domain, blob)
        else:
            return -1
        index = -1 if frames is None else len(self.raw)
        if frames is not None:
            self.raw.append(tuple(frames))
        cache[key] = index
        return index

    def result(self) -> PythonSamples:
        if not self.starts:
            return PythonSamples.empty()
        start = np.concatenate(self.starts)
        stack = np.concatenate(self.stacks)
        stacks, renumber = self.trace._named_stacks(self.raw)
        if self.raw:
            stack = np.where(stack >= 0, renumber[np.maximum(stack, 0)], -1)
        order = np.argsort(start, kind="stable")  # 2025.6+: rows in no guaranteed order
        return PythonSamples(
            start_ns=start[order],
            thread=np.concatenate(self.threads)[order],
            stack=stack[order].astype(np.int32),
            stacks=stacks,
            form="json" if "json" in self.forms else "blobs" if self.forms else "",
        )


class Strings:
    """``StringIds`` by id, read as the analyses ask: only the ids their columns name (kernels,
    CUDA and OS calls, NVTX ranges and domains, threads) are read and kept, at most
    ``_NAMES_PER_QUERY`` ids a query, with the ids found missing: what is held grows with the
    names shown, not with the table. An export may hold millions of strings nothing refers
    to: 5 M of them added to a 1.6 MB sample took its analysis from 41 MiB and 0.3 s to
    1.2 GiB and 13 s (2026-12-04, this project's 2-core machine) when the whole table was read.

    nsys makes ``id`` the table's INTEGER PRIMARY KEY, so each id is one lookup. Where a
    rebuilt table has no index on it, its ids and rowids are read once, ``_ID_ROWS`` rows at
    a time, into two arrays of 8 bytes a row each (no text), and each name is then read by its
    rowid: 5 M such rows took 2.8 s and 280 MiB. An id held by several rows names the last
    one's text, as it did when the table was read whole."""

    def __init__(self, trace: Trace):
        self._trace = trace
        self._known: dict[int, str] = {}
        self._missing: set[int] = set()
        self._indexed: bool | None = None
        self._rowids: tuple[np.ndarray, np.ndarray] | None = None  # ids sorted, their rowids

    def load(self, ids: Iterable) -> None:
        """Read the text of those of ``ids`` not read yet (a value that is no int64 is
        skipped)."""
        wanted = {as_int(i) for i in ids}
        wanted.discard(None)
        wanted.difference_update(self._known, self._missing)
        if not wanted:
            return
        found = self._read(sorted(wanted)) if self._trace.has(STRING_TABLE) else {}
        self._known.update(found)
        self._missing.update(wanted.difference(found))

    def get(self, key, default=None):
        i = as_int(key)
        if i is None:
            return default
        if i not in self._known and i not in self._missing:
            self.load([i])
        return self._known.get(i, default)

    def __getitem__(self, key) -> str:
        text = self.get(key)
        if text is None:
            raise KeyError(key)
        return text

    def __contains__(self, key) -> bool:
        return self.get(key) is not None

    def _read(self, ids: list[int]) -> dict[int, str]:
        trace, table = self._trace, STRING_TABLE
        if self._indexed is None:
            plan = trace._fetch(table, f"EXPLAIN QUERY PLAN SELECT value FROM {table} WHERE id = 0")
            self._indexed = any(str(row[-1]).startswith("SEARCH") for row in plan)
        rowid = None if self._indexed else trace._rowid_name(table)
        key = "id"
        if rowid is not None:
            ids = self._rowids_of(rowid, ids)
            key = rowid
        out: dict[int, str] = {}
        for lo in range(0, len(ids), _NAMES_PER_QUERY):
            chunk = ids[lo : lo + _NAMES_PER_QUERY]
            marks = ", ".join("?" * len(chunk))
            sql = f"SELECT id, value FROM {table} WHERE {key} IN ({marks})"
            for i, value in trace._fetch(table, sql, tuple(chunk)):
                if isinstance(i, int):
                    out[i] = as_text(value)
        return out

    def _rowids_of(self, rowid: str, ids: list[int]) -> list[int]:
        """The rowid of the last row holding each of ``ids`` that a row holds."""
        if self._rowids is None:
            self._rowids = self._index(rowid)
        keys, rows = self._rowids
        want = np.asarray(ids, dtype=np.int64)
        at = np.minimum(np.searchsorted(keys, want), max(keys.size - 1, 0))
        hit = keys[at] == want if keys.size else np.zeros(want.size, dtype=bool)
        return rows[at[hit]].tolist()

    def _index(self, rowid: str) -> tuple[np.ndarray, np.ndarray]:
        """Every integer id of the table, sorted, and the rowid of its last row (the scan
        goes in rowid order; a stable sort keeps that order within an id)."""
        trace, table = self._trace, STRING_TABLE
        size = trace.count(table)
        keys, rowids = np.empty(size, np.int64), np.empty(size, np.int64)
        n = 0
        try:
            cur = trace._raw.execute(
                f"SELECT id, {rowid} FROM {table} NOT INDEXED WHERE typeof(id) = 'integer'"
            )
            while rows := cur.fetchmany(_ID_ROWS):
                block = np.array(rows, dtype=np.int64).reshape(-1, 2)
                keys[n : n + len(block)] = block[:, 0]  # more rows than counted: ValueError
                rowids[n : n + len(block)] = block[:, 1]
                n += len(block)
        except (sqlite3.DatabaseError, OverflowError, ValueError) as exc:
            raise TraceError(trace._read_failed(table, exc)) from exc
        order = np.argsort(keys[:n], kind="stable")
        keys = keys[order]
        last = np.append(keys[1:] != keys[:-1], True) if n else np.zeros(0, dtype=bool)
        return keys[last], rowids[order[last]]


_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
# Timestamps beyond 73 years from the report's origin are damage, not data; bounding them keeps
# every difference of two timestamps within int64.
_MAX_TIME_NS = 1 << 61
# The SQLite header up to its file format bytes.
_HEADER_BYTES = 20

# Rows per block when reading integer columns (each column's text is ~20 bytes a row). Small
# enough that the C heap serves each block's buffers from the last one's memory, below the
# threshold of ``common.heap``. Measured on this project's 2-core machine (2026-12-02, 09:40
# UTC, two runs each of ``nsysprobe analyze`` on the NVTX-heavy 1e6 replica of
# ``benchmarks/README.md``): 7.1-7.4 s and 514-517 MiB at 1 << 18 rows, 6.9-7.0 s and
# 458-467 MiB at 1 << 15. Smaller still, the two readers share a small table's blocks more
# evenly (Python parses a block holding the GIL): the 100,080 NVTX ranges of the deep-nesting
# export read in 87 ms at 1 << 15, 71 ms at 1 << 13 (best of five, 14:10 UTC), and loading
# the NVTX-heavy 1e6 replica took 3.78 s and 3.81 s.
_BLOCK_ROWS = 1 << 13
# Up to this many blocks (4 M rowids), a table's rowids are taken as dense without counting
# its rows.
_DENSE_SPANS = 512
# Rowids per query when looking NVTX names up, and string ids per query (``Strings``).
_NAMES_PER_QUERY = 900  # under SQLite's oldest limit of 999 bound values
# Python sampling marks fetched at once (``python_samples``), and their payload columns.
_SAMPLE_ROWS = 1 << 14
_PAYLOADS = ("jsonText", "binaryData")
# Rows of (id, rowid) read at once when ``StringIds`` has no index on ``id``.
_ID_ROWS = 1 << 16
# The longest text one block query may build (SQLite's own limit is 1e9 bytes).
_MAX_BLOCK_TEXT = 1 << 28
# The longest value any query may build or return (a name is cut far below).
_MAX_VALUE_BYTES = _MAX_BLOCK_TEXT
# Bytes of a text read to make a name of NAME_CHARS characters (4 bytes a character at most).
_MAX_NAME_BYTES = 4 * (NAME_CHARS + 1)
# A pending -wal larger than this many times its database (plus the room) is refused.
_MAX_WAL_RATIO = 4
_WAL_ROOM_BYTES = 256 << 20
# The work budget: SQLite VM steps per byte of the export, and the steps between checks.
_OPS_PER_BYTE = 100
_MIN_OPS = 1 << 30
OPS_PER_CHECK = 1 << 16
# Connections reading blocks at once.
_READERS = max(1, min(4, os.cpu_count() or 1))

_EVENT_TABLES = frozenset(
    {
        "CUPTI_ACTIVITY_KIND_KERNEL",
        "CUPTI_ACTIVITY_KIND_MEMCPY",
        "CUPTI_ACTIVITY_KIND_RUNTIME",
        "NVTX_EVENTS",
        "OSRT_API",
    }
)


def _copy_kind_label(enum_name: str) -> str:
    """``CUDA_MEMCPY_KIND_HTOD`` -> ``HtoD``, ``..._UVM_DTOH`` -> ``UVM DtoH``."""
    parts = enum_name.removeprefix("CUDA_MEMCPY_KIND_").split("_")
    out = []
    for part in parts:
        if len(part) == 4 and part[1:3] == "TO":
            out.append(f"{part[0]}to{part[3]}")
        elif part == "UVM":
            out.append(part)
        else:
            out.append(part.capitalize())
    return " ".join(out)


def _sorted_labels(codes: np.ndarray, values: list[str]) -> Labels:
    """The labels ``values[codes]`` whose categories are the distinct values, sorted."""
    categories = sorted(set(values))
    where = {v: i for i, v in enumerate(categories)}
    remap = np.array([where[v] for v in values], dtype=np.int32)
    return Labels(remap[codes] if remap.size else codes.astype(np.int32), categories)


# Sizes no real copy or memset has, read as unknown (-1): a TiB per copy is beyond any GPU's
# memory, and sums over millions of rows stay far from overflowing.
_MAX_OP_BYTES = 1 << 40
# The ids the analyses group or join rows by, and the values each can have: a process or
# thread id packs pids into a non-negative int64, CUPTI numbers streams and correlations from
# 0 up, and no machine has 2^31 GPUs. Any other value (and NULL, text, a REAL, a column this
# version lacks) reads as ``NO_ID``: the row has no usable id, and is counted, never guessed.
MAX_DEVICE_ID = (1 << 31) - 1
NO_ID = -1
ID_BOUNDS = {
    "deviceId": (0, MAX_DEVICE_ID),
    **{c: (0, _INT64_MAX) for c in ("globalPid", "globalTid", "streamId", "correlationId")},
}
_BOUNDS = {"bytes": (0, _MAX_OP_BYTES), **ID_BOUNDS}

# Id columns read as int32 when every value fits: half the memory of tables of millions of
# rows. Timestamps, byte counts and global thread/process ids (pid << 24) stay int64.
_IDS = frozenset({"deviceId", "streamId", "correlationId", "nameId", "domainId", "rowid"})


def _narrow(values: np.ndarray) -> np.ndarray:
    """``values`` as int32 when they all fit, else as they are."""
    if values.size and (values.min() < -(1 << 31) or values.max() >= 1 << 31):
        return values
    return values.astype(np.int32)


def _present(value: object) -> bool:
    """Not NULL (nor a float NaN, which SQLite cannot hold but a crafted value may)."""
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def _number(value: object) -> int | float | None:
    """A value of a column of numbers as a number: integers and finite floats as they are,
    text that spells a number parsed; None for NULL, a BLOB or anything else."""
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            try:
                value = float(text)
            except ValueError:
                return None
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)) and math.isfinite(value):
        return float(value)
    return None


def _lenient_int(value: object) -> int:
    """An integer column's value read leniently (``_number``, floats cut toward zero), -1
    where it is no number or beyond int64."""
    n = _number(value)
    if n is None:
        return -1
    n = int(n)
    return n if _INT64_MIN <= n <= _INT64_MAX else -1


def _text_affinity(declared: str) -> bool:
    """Whether SQLite gives a column of this declared type TEXT affinity (a number stored in
    it becomes text)."""
    return "INT" not in declared and any(k in declared for k in ("CHAR", "CLOB", "TEXT"))


def _interval_where(extra: str) -> str:
    return f"WHERE {_valid_interval('start', 'end')} AND ({extra})"


def _valid_interval(start: str, end: str) -> str:
    """SQL true for a row whose start and end are integers within ``_MAX_TIME_NS`` of the
    report's clock origin, end not before start."""
    return (
        f"typeof(\"{start}\") = 'integer' AND typeof(\"{end}\") = 'integer' AND "
        f'"{end}" >= "{start}" AND "{start}" >= {-_MAX_TIME_NS} AND "{end}" <= {_MAX_TIME_NS}'
    )


def _int_expr(column: str, low: int | None = None, high: int | None = None) -> str:
    """The column's value where it is an integer (within [low, high] when given), else -1
    (NULL, text, BLOB, real, or out of bounds)."""
    test = f"typeof(\"{column}\") = 'integer'"
    if low is not None:
        test += f' AND "{column}" BETWEEN {low} AND {high}'
    return f'CASE WHEN {test} THEN "{column}" ELSE -1 END'


def _is_locked(exc: sqlite3.DatabaseError) -> bool:
    return "locked" in str(exc)


def _locked_message(path: Path, exc: sqlite3.DatabaseError) -> str:
    return (
        f"{path}: another program holds it locked ({exc}); wait until it has finished "
        f"writing the file, or analyze a copy of it"
    )


def _read_failed(path: Path, table: str, exc: Exception) -> str:
    if isinstance(exc, sqlite3.DatabaseError) and _is_locked(exc):
        return _locked_message(path, exc)
    return (
        f"{path}: reading {table} failed ({exc}); the export is damaged or not one nsysprobe "
        f"knows: re-export the report with `nsys export --type sqlite`"
    )


def _check_sqlite_file(path: Path) -> bool:
    """Raise InputError unless ``path`` is a regular file that starts like an SQLite file;
    True if it is in WAL mode."""
    head = read_head(path, _HEADER_BYTES)
    if head[: len(SQLITE_MAGIC)] != SQLITE_MAGIC:
        what = "an empty file" if not head else "not an SQLite file"
        raise InputError(
            f"{path}: {what}; give a .sqlite export (`nsys export --type sqlite REPORT`) "
            f"or a .nsys-rep report"
        )
    # Bytes 18 and 19 of the header are the write and read format versions: 2 means WAL.
    return head[18:20] == b"\x02\x02"


class WorkBudget:
    """SQLite's progress handler: stops every query of one export once they have run more VM
    steps together than an export of its size needs (a damaged file that loops), and carries
    a signal out of SQLite.

    Python runs a signal's handler (Ctrl-C's KeyboardInterrupt, the CLI's SIGTERM) inside this
    callback while SQLite works, and the sqlite3 module swallows the exception, reporting the
    query "interrupted" as if the export were damaged. The reader raises it again instead
    (``resume``): the exception itself when it was raised inside the callback's ``try``, else a
    KeyboardInterrupt (most often it is raised as the callback is entered)."""

    def __init__(self, path: Path, size_bytes: int):
        self.path = path
        self.ops = max(_MIN_OPS, _OPS_PER_BYTE * size_bytes)
        self._checks_left = self.ops // OPS_PER_CHECK
        self.spent = False
        self.interrupted: BaseException | None = None

    def watch(self, db: sqlite3.Connection) -> None:
        """Count ``db``'s work against this budget."""
        db.set_progress_handler(self, OPS_PER_CHECK)

    def __call__(self) -> int:
        try:
            if self.interrupted is not None:
                return 1
            self._checks_left -= 1
            if self._checks_left < 0:
                self.spent = True
                return 1  # SQLite stops the query: "interrupted"
            return 0
        except BaseException as exc:  # noqa: BLE001 -- a signal, raised here
            self.interrupted = exc
            return 1

    def resume(self, exc: Exception) -> None:
        """Raise the signal that stopped SQLite, if that is what ``exc`` (SQLite's error) was:
        one kept here, or one that escaped before this callback could keep it (SQLite says
        "interrupted" with the budget unspent)."""
        if self.interrupted is not None:
            raise self.interrupted
        if isinstance(exc, sqlite3.OperationalError) and "interrupt" in str(exc):
            if not self.spent:
                raise KeyboardInterrupt from exc

    def explain(self, exc: Exception) -> str:
        if not self.spent:
            return str(exc)
        return (
            f"{self.path}: reading it took more than {self.ops:.3g} SQLite steps, far more "
            f"than an export of its size needs; the file is damaged or built to hang readers: "
            f"re-export the report with `nsys export --type sqlite`"
        )


def table_kinds(db: sqlite3.Connection, schema: str = "main") -> dict[str, str]:
    """Each table-like object of ``schema``: "table" (plain, the only kind read), "view",
    "virtual" or "shadow" (a virtual table's own storage), as SQLite itself says
    (``pragma_table_list``, SQLite 3.37+; before that, from each ``CREATE`` statement, read
    as SQLite parses it: any case, any whitespace). SQLite's own tables are left out."""
    try:
        rows = db.execute(
            "SELECT name, type FROM pragma_table_list WHERE schema = ?", (schema,)
        ).fetchall()
    except sqlite3.OperationalError:  # older SQLite
        rows = [
            (name, "virtual" if kind == "table" and _VIRTUAL.match(sql) else kind)
            for name, kind, sql in db.execute(
                f"SELECT name, type, coalesce(sql, '') FROM \"{schema}\".sqlite_master "
                "WHERE type IN ('table', 'view')"
            )
        ]
    return {str(n): str(k) for n, k in rows if not str(n).lower().startswith("sqlite_")}


_VIRTUAL = re.compile(r"\s*create\s+virtual\b", re.IGNORECASE)


def _private_copy(path: Path) -> Path:
    """A folder only this user can read holding a copy of the WAL database ``path`` and its
    ``-wal`` file: reading it there leaves nothing beside the original. The ``-wal`` must be
    a regular file no larger than ``_MAX_WAL_RATIO`` times the database (plus some room)."""
    checkpoint = f"checkpoint it first: sqlite3 {path.name} 'PRAGMA wal_checkpoint'"
    sources = []
    try:
        for suffix in ("", "-wal"):
            fd = open_regular(Path(f"{path}{suffix}"), InputError, checkpoint)
            if fd is None:
                raise InputError(f"{path}{suffix}: gone while being read; {checkpoint}")
            sources.append(os.fdopen(fd, "rb"))
        base, wal = (os.fstat(f.fileno()).st_size for f in sources)
        if wal > _MAX_WAL_RATIO * base + _WAL_ROOM_BYTES:
            raise InputError(
                f"{path}-wal: {wal / 1e9:.1f} GB of pending writes for a {base / 1e9:.1f} GB "
                f"database, more than a real export holds; {checkpoint}"
            )
        folder = Path(tempfile.mkdtemp(prefix="nsysprobe-wal-"))
        try:
            for source, suffix in zip(sources, ("", "-wal")):
                with open(folder / f"{path.name}{suffix}", "wb") as out:
                    shutil.copyfileobj(source, out, 1 << 20)
        except OSError as exc:
            shutil.rmtree(folder, ignore_errors=True)
            raise InputError(
                f"{path}: a WAL database with a pending -wal file, and copying it to read a "
                f"snapshot failed ({exc.strerror or exc}); free space in "
                f"{tempfile.gettempdir()} (or set TMPDIR), or {checkpoint}"
            ) from None
    finally:
        for source in sources:
            source.close()
    return folder
