# Over 500 lines: one procedure read top to bottom (``_Copy``: open the export, create the
# allow-listed tables, copy each in blocks through the scrubber, publish), with the limits that
# guard every write of it (growth, disk, file size, signals) beside the writes they bound;
# what each value becomes is ``scrub_values.py``, the secrets ``secrets/``.
"""Scrub an export before sharing it: a new database holding only what nsysprobe reads.

nsys stores far more in a report than its events: the profiled process's whole environment
and command line (``META_DATA_CAPTURE``, ``TARGET_INFO_SYSTEM_ENV``, process arguments), its
program output (``StringIds``), NVTX payloads, diagnostics naming local files, the user and
host names. Public traces were found holding live API tokens. Deleting the known places is a
losing game (every nsys version adds some), so scrub works the other way round, from an
allow-list:

- a new, empty SQLite database gets the tables and columns the analyses read
  (``nsysprobe.trace.schema``, the list the reader reads from) and nothing else: no other
  table, column, view, trigger or index, and no SQL taken from the export's schema;
- integers and reals are copied as they are; ``StringIds`` rows are copied only when a kept
  column names them (kernel, API, OS-call and thread names); other text only where the
  analyses show or match it (NVTX names, GPU names, enum labels, the nsys version), and all
  kept text goes through ``secrets.scrubber.scrub_text``, which replaces secrets (the value
  after a name such as ``password``/``HF_TOKEN``/``api_key``/``session`` and any separator, up
  to the next whitespace no quotes hold whatever punctuation it holds; ``Bearer ...``,
  ``Cookie: ...``, the password flags of common tools, known key formats and long random
  strings, inside words too), local paths, e-mail addresses, URLs, host names and IP
  addresses, and leaves names such as ``aten::add``, ``Batch 12`` or
  ``ncclDevKernel_AllReduce_Sum_f32_RING_LL`` as they are;
- the Python samples' payloads (``trace.payloads``: NVTX marks of a sampling domain) are
  copied on those marks only, rewritten to hold their frames and nothing else; each frame's
  function keeps its name (scrubbed as other text) and its file the folders before the
  library folder or base name as a placeholder (``<path:kqzvwmbtxyaq>/gc_collect.py``,
  ``<path:...>/site-packages/torch/serialization.py``);
- rows keep their rowids and values their types, and each replaced part becomes a
  placeholder carrying a keyed hash of it (``<path:kqzvwmbtxyaq>``), so names that were equal
  stay equal, names that were different stay different, and names grouped by their range
  pattern (digits masked) group as before: every analysis gives the same figures on the copy
  as on the original.

The export is read as the reader reads it (``Trace``: the tables SQLite calls plain tables,
never a view or a virtual table; a WAL export with a pending ``-wal`` from a private copy, so
nothing appears beside it), through a read-only attachment, so none of its triggers can fire,
and within the reader's work budget (``connection.WorkBudget``). The copy is built in a private
folder beside the output (``nsysprobe.common.writer.scratch_dir``) and holds only scrubbed
content at every moment; it is linked into place when complete (``publish``), so a run that is
killed leaves no unscrubbed byte behind and two runs never both write one file. SQLite keeps no
journal and its temporary table in memory within a page limit; text values are limited to 16
MiB, and the copy to twice the export's size plus the text's growth by placeholders (at most
``MAX_TEXT_GROWTH`` times the export's size): a crafted export cannot make scrub write
gigabytes. A full disk, the file size limit (``ulimit -f``) and the growth limit are each a
one-line error that says which one it was.

What each kept value becomes (the SQL functions the copy calls) is ``scrub_values``. This
module is the copy itself, read top to bottom: opening it, the tables, the one-line errors.
It is one module (a little over 500 lines) because those errors read the copy's own state:
its sizes and limits, the output, the work budget.
"""

from __future__ import annotations

import errno
import os
import signal
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from nsysprobe.common.writer import check_output, publish, scratch_dir
from nsysprobe.errors import InputError, TraceError
from nsysprobe.trace import schema
from nsysprobe.trace.connection import WorkBudget, table_kinds
from nsysprobe.trace.payloads import (
    NVTX_MARK,
    SAMPLING_DOMAINS,
)
from nsysprobe.trace.reader import Trace
from nsysprobe.trace.scrub_values import (
    MAX_TEXT_BYTES,
    MAX_VALUE_BYTES,
    KeptValues,
    ident,
    mib,
    number_sql,
    text_sql,
)

try:
    import resource
except ImportError:  # Windows
    resource = None  # type: ignore[assignment]

SCHEMA_VERSION = 1

# The copy may not grow past this multiple of the export's size (plus some room) ...
MAX_GROWTH = 2
# ... plus what placeholders add to the text they replace, at most this multiple of it.
MAX_TEXT_GROWTH = 8
_ROOM_BYTES = 16 << 20
_PAGE_BYTES = 4096
# Free space under which a write that failed is put down to a full disk.
_FULL_DISK_BYTES = 1 << 20
# Rows copied by one statement (signals wait at most that long), and at most this many blocks.
_BLOCK_ROWS = 1 << 18
_MAX_BLOCKS = 256
# Tables whose ``value`` holds the nsys version, kept as it is when it is a version number.
_VERSION_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")
_DEFERRED_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)


@dataclass(frozen=True)
class ScrubResult:
    output: Path
    tables_kept: tuple[str, ...]  # the tables copied, from the allow-list
    tables_dropped: int  # tables of the export not copied
    objects_dropped: int  # views, triggers and indexes, never copied
    columns_dropped: int  # columns of kept tables not copied
    rows_dropped: int  # rows of partly read tables (metadata, diagnostics) not copied
    strings_dropped: int  # StringIds rows no kept column names
    texts_scrubbed: int  # kept text values in which something was replaced


def scrub(source: str | Path, output: str | Path, *, force: bool = False) -> ScrubResult:
    """Write to ``output`` a copy of the export ``source`` holding only what the analyses
    read, its text scrubbed. ``source`` is never written; ``output`` is replaced only with
    ``force``, and never when it is ``source`` (or its ``-wal``, ``-shm`` or ``-journal``
    file), a folder, a FIFO, a device or a link."""
    source, output = Path(source), Path(output)
    inputs = [source]  # its -wal, -shm and -journal files too (``nsysprobe.common.writer``)
    # The same checks and one-line errors as analyze (a FIFO included), and the same reading:
    # the copy attaches the URI the reader reads through, while the trace is open.
    with Trace(source) as trace:
        check_output(output, force=force, inputs=inputs, option="-o")
        with scratch_dir(output) as scratch:
            tmp = scratch / "scrubbed.sqlite"
            copy = _Copy(trace, tmp, output)
            try:
                counts = copy.run()
            finally:
                copy.close()
            _sync(tmp, output)
            publish(tmp, output, force=force, inputs=inputs, option="-o")
    return ScrubResult(output, **counts)


class _Copy:
    """One scrub: the new database with the export attached read-only as ``src``."""

    def __init__(self, trace: Trace, tmp: Path, output: Path):
        self.source, self.uri, self.tmp, self.output = trace.path, trace.uri, tmp, output
        # The Python samples' marks (process, domain), their payloads' layouts, and the
        # string ids their frames name (``_payload``).
        self.sampling = sorted(
            k for k, name in trace.nvtx_domains.items() if name in SAMPLING_DOMAINS
        )
        size = sum(_size(p) for p in (self.source, Path(f"{self.source}-wal")))
        text_growth_limit = MAX_TEXT_GROWTH * size + _ROOM_BYTES
        # What each kept value becomes: the SQL functions, their counts and limits.
        self.values = KeptValues(
            trace.payload_layouts() if self.sampling else {}, text_growth_limit, MAX_TEXT_GROWTH
        )
        self.max_pages = (MAX_GROWTH * size + _ROOM_BYTES + text_growth_limit) // _PAGE_BYTES
        # The reader's work budget (a scrub takes about 2 VM steps per byte of the export).
        self.budget = WorkBudget(self.source, size)
        try:
            self.db = sqlite3.connect(tmp.resolve().as_uri(), uri=True, isolation_level=None)
        except sqlite3.Error as exc:
            raise InputError(
                f"-o {output}: cannot write it ({exc}); choose a folder you can write to"
            ) from None

    def _open(self) -> None:
        """Set the limits and pragmas of the new database and attach the export read-only."""
        if hasattr(self.db, "setlimit"):  # Python 3.11+
            self.db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
            self.db.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 1)
        self.budget.watch(self.db)
        self.values.register(self.db)
        # An export attaches only to a database of its text encoding (nsys writes UTF-8).
        encoding = _encoding(self.source)
        self.values.codec = _CODECS[encoding]
        for pragma in (
            f"encoding = '{encoding}'",
            f"page_size = {_PAGE_BYTES}",
            "journal_mode = OFF",  # nothing to roll back: a failed copy is thrown away
            "synchronous = OFF",  # the finished file is synced once, before it is published
            "temp_store = MEMORY",  # no temporary file; the one temporary table is bounded:
            f"temp.max_page_count = {self.max_pages}",
            "cache_size = -16384",
            "trusted_schema = OFF",  # the export's schema may not call our functions
            f"max_page_count = {self.max_pages}",
        ):
            self._sql(lambda p=pragma: self.db.execute(f"PRAGMA {p}"))
        self._sql(lambda: self.db.execute("ATTACH DATABASE ? AS src", (self.uri,)))

    def close(self) -> None:
        self.db.close()

    def run(self) -> dict:
        self._open()
        objects = self._sql(
            lambda: self.db.execute("SELECT type, name FROM src.sqlite_master").fetchall()
        )
        # Plain tables only, as SQLite (not the schema's text) says, and as the reader reads.
        kinds = self._sql(lambda: table_kinds(self.db, "src"))
        tables = {name for name, kind in kinds.items() if kind == "table"}
        exported = {name for kind, name in objects if kind == "table"}
        exported = {name for name in exported if not name.lower().startswith("sqlite_")}
        other = sum(1 for kind, _ in objects if kind != "table")
        kept, columns_dropped, rows_dropped = [], 0, 0
        for name, table in schema.TABLES.items():
            if name == schema.STRING_TABLE or name not in tables:
                continue
            copied = self._copy(name, table)
            if copied is None:
                continue
            kept.append(name)
            columns_dropped += copied[0]
            rows_dropped += copied[1]
        strings_dropped = 0
        if schema.STRING_TABLE in tables:
            copied = self._copy_strings(kept)
            if copied is not None:
                kept.append(schema.STRING_TABLE)
                columns_dropped += copied[0]
                strings_dropped = copied[1]
        return {
            "tables_kept": tuple(kept),
            "tables_dropped": len(exported) - len(kept),
            "objects_dropped": other,
            "columns_dropped": columns_dropped,
            "rows_dropped": rows_dropped,
            "strings_dropped": strings_dropped,
            "texts_scrubbed": self.values.scrubbed,
        }

    # -- tables ---------------------------------------------------------------------------

    def _columns(self, name: str) -> list[str]:
        """The export's plain and stored columns of ``name`` (a virtual generated column is
        computed on every read, by SQL the export chose: never read)."""
        info = self._sql(
            lambda: self.db.execute(f"PRAGMA src.table_xinfo({ident(name)})").fetchall()
        )
        return [row[1] for row in info if row[6] in (0, 3)]

    def _rowid(self, name: str, columns: list[str]) -> str | None:
        taken = {c.lower() for c in columns}
        for candidate in ("rowid", "_rowid_", "oid"):
            if candidate in taken:
                continue
            try:
                self.db.execute(f"SELECT {candidate} FROM src.{ident(name)} LIMIT 0")
            except sqlite3.OperationalError:
                return None  # WITHOUT ROWID
            return candidate
        return None

    def _copy(self, name: str, table: schema.Table) -> tuple[int, int] | None:
        """Copy what is read of ``name``; (columns dropped, rows dropped), None when the
        export's table has none of the columns read."""
        present = self._columns(name)
        wanted = [c for c in table.columns if c in present]
        if not wanted:
            return None
        named = _condition(table.named_rows, present)
        exprs = {}
        for col in wanted:
            if col in table.numbers:
                exprs[col] = number_sql(col)
            elif col in table.string_ids:
                exprs[col] = f"CASE WHEN {named} THEN {number_sql(col)} END"
            elif col in table.keys:
                exprs[col] = text_sql(col, "nsysprobe_key")
            elif col in table.known:
                exprs[col] = text_sql(col, "nsysprobe_known")
            elif col in table.payloads:
                exprs[col] = self._payload_expr(col, present)
            elif name in _VERSION_TABLES and col == "value":
                exprs[col] = f"CASE WHEN {named} THEN {text_sql(col, 'nsysprobe_version')} END"
            else:
                exprs[col] = f"CASE WHEN {named} THEN {text_sql(col)} END"
        where = _condition(table.rows, present) if table.rows else "1"
        self._create(name, wanted)
        self._insert(name, exprs, present, where)
        dropped_rows = 0
        if table.rows:
            dropped_rows = self._count(f"src.{ident(name)}") - self._count(f"main.{ident(name)}")
        return len(present) - len(wanted), dropped_rows

    def _copy_strings(self, kept: list[str]) -> tuple[int, int] | None:
        """Copy the StringIds rows a kept column names; (columns dropped, rows dropped)."""
        name = schema.STRING_TABLE
        table = schema.TABLES[name]
        present = self._columns(name)
        if "id" not in present:
            return None
        self._sql(lambda: self.db.execute("CREATE TEMP TABLE named (id INTEGER PRIMARY KEY)"))
        for t in kept:
            for col in schema.TABLES[t].string_ids:
                if col not in self._main_columns(t):
                    continue
                c = ident(col)
                self._run(
                    f"INSERT OR IGNORE INTO temp.named SELECT {c} FROM main.{ident(t)} "
                    f"WHERE {c} = CAST({c} AS INTEGER)"
                )
        self._name_frames()
        wanted = [c for c in table.columns if c in present]
        exprs = {c: number_sql(c) if c in table.numbers else text_sql(c) for c in wanted}
        if "value" in exprs and self.values.frame_files:
            exprs["value"] = (
                f'CASE WHEN "id" IN (SELECT id FROM temp.files) THEN '
                f"{text_sql('value', 'nsysprobe_file')} ELSE {exprs['value']} END"
            )
        self._create(name, wanted)
        self._insert(name, exprs, present, '"id" IN (SELECT id FROM temp.named)')
        dropped = self._count(f"src.{ident(name)}") - self._count(f"main.{ident(name)}")
        return len(present) - len(wanted), dropped

    def _name_frames(self) -> None:
        """The string ids the copied frames name, among those copied (``temp.named``), the
        files' apart (``temp.files``)."""
        self._sql(lambda: self.db.execute("CREATE TEMP TABLE files (id INTEGER PRIMARY KEY)"))
        for table, ids in (
            ("named", self.values.frame_functions | self.values.frame_files),
            ("files", self.values.frame_files),
        ):
            self._sql(
                lambda t=table, i=ids: self.db.executemany(
                    f"INSERT OR IGNORE INTO temp.{t} VALUES (?)", ((x,) for x in sorted(i))
                )
            )

    def _payload_expr(self, col: str, present: list[str]) -> str:
        """SQL of a payload column: rewritten on the sampling marks, NULL elsewhere."""
        if not self.sampling or not {"eventType", "globalTid", "domainId"} <= set(present):
            return "NULL"
        marks = " OR ".join(
            f'((("globalTid" >> 24) & {0xFFFFFF}) = {int(pid)} AND "domainId" = {int(domain)})'
            for pid, domain in self.sampling
        )
        blob = int(col == "binaryData")
        return (
            f'CASE WHEN "eventType" = {NVTX_MARK} AND typeof("globalTid") = \'integer\' '
            f"AND typeof(\"domainId\") = 'integer' AND ({marks}) "
            f'THEN nsysprobe_payload({ident(col)}, {blob}, "domainId") END'
        )

    def _main_columns(self, name: str) -> list[str]:
        return [r[1] for r in self.db.execute(f"PRAGMA main.table_info({ident(name)})")]

    def _create(self, name: str, columns: list[str]) -> None:
        # No declared types: a column's affinity would convert what is stored (text '12' in an
        # INTEGER column becomes 12), and the reader tells values apart by their type.
        cols = ", ".join(ident(c) for c in columns)
        self._run(f"CREATE TABLE main.{ident(name)} ({cols})")

    def _insert(self, name: str, exprs: dict[str, str], present: list[str], where: str) -> None:
        """INSERT ... SELECT, in blocks of rowids so that a signal is answered between them."""
        rowid = self._rowid(name, present)
        targets = ([rowid] if rowid else []) + [ident(c) for c in exprs]
        values = ([rowid] if rowid else []) + list(exprs.values())
        sql = (
            f"INSERT INTO main.{ident(name)} ({', '.join(targets)}) "
            f"SELECT {', '.join(values)} FROM src.{ident(name)} WHERE ({where})"
        )
        if rowid is None:
            self._run(sql, table=name)
            return
        span = self._sql(
            lambda: self.db.execute(
                f"SELECT min({rowid}), max({rowid}) FROM src.{ident(name)}"
            ).fetchone(),
            table=name,
        )
        if span[0] is None:
            return
        lo, hi = span
        step = max(_BLOCK_ROWS, (hi - lo) // _MAX_BLOCKS + 1)
        for start in range(lo, hi + 1, step):
            self._run(
                f"{sql} AND {rowid} BETWEEN ? AND ? ORDER BY {rowid}",
                (start, min(start + step - 1, hi)),
                table=name,
            )

    def _run(self, sql: str, params: tuple = (), table: str | None = None) -> None:
        """Run one statement, signals deferred to its end (``_signals_deferred``)."""
        with _signals_deferred():
            self._sql(lambda: self.db.execute(sql, params), table=table)

    def _count(self, qualified: str) -> int:
        return int(
            self._sql(lambda: self.db.execute(f"SELECT count(*) FROM {qualified}")).fetchone()[0]
        )

    # -- errors ---------------------------------------------------------------------------

    def _sql(self, action, table: str | None = None):
        """Run ``action``; an SQLite error becomes the one-line error of what went wrong."""
        try:
            return action()
        except sqlite3.Error as exc:
            raise self._failed(exc, table) from None

    def _failed(self, exc: sqlite3.Error, table: str | None) -> Exception:
        # Nothing here asks the new database anything: after a failed write with no journal
        # it may be malformed, and it is thrown away.
        name = getattr(exc, "sqlite_errorname", "")  # Python 3.11+
        text = str(exc)
        self.budget.resume(exc)  # a signal that stopped SQLite ends the run as that signal
        if self.values.too_long is not None:
            return self._too_large(self.values.too_long)
        if self.budget.spent:
            return TraceError(self.budget.explain(exc))
        if name == "SQLITE_TOOBIG" or "too big" in text:
            return InputError(
                f"{self.source}: {table or 'a table'} holds a text longer than "
                f"{MAX_TEXT_BYTES >> 20} MiB, which nsys never writes; the export is damaged "
                f"or crafted: re-export the report with `nsys export --type sqlite`"
            )
        if name == "SQLITE_FULL" or "full" in text:
            return self._full()
        if name.startswith("SQLITE_IOERR") or "disk I/O error" in text:
            return self._write_failed() or InputError(
                f"-o {self.output}: cannot write it ({text}); check the disk's free space and "
                f"the file size limit (ulimit -f), or write to another disk"
            )
        if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in text:
            return TraceError(
                f"{self.source}: another program holds it locked ({text}); wait until it has "
                f"finished writing the file, or scrub a copy of it"
            )
        where = f"reading {table}" if table else "reading it"
        return TraceError(
            f"{self.source}: {where} failed ({text}); the export is damaged or not one "
            f"nsysprobe knows: re-export the report with `nsys export --type sqlite`"
        )

    def _full(self) -> InputError:
        """SQLite's "database or disk is full": the file size limit, the disk, or else the
        growth limit (``max_page_count``)."""
        return self._write_failed() or self._too_large(
            f"its scrubbed copy would be larger than {mib(self.max_pages * _PAGE_BYTES)} "
            f"({MAX_GROWTH}x the export's size, plus up to {MAX_TEXT_GROWTH}x for the "
            f"placeholders in its text)"
        )

    def _too_large(self, what: str) -> InputError:
        return InputError(
            f"{self.source}: {what}, which no export of its size needs; the export is damaged "
            f"or crafted: re-export the report with `nsys export --type sqlite`"
        )

    def _write_failed(self) -> InputError | None:
        """The error of a write stopped by the file size limit or a full disk, if it was."""
        size = _size(self.tmp)
        limit = _file_size_limit()
        if limit is not None and size + (64 << 10) >= limit:
            return InputError(
                f"-o {self.output}: cannot write it (the file size limit, ulimit -f, is "
                f"{limit:,} bytes); raise the limit or write a smaller report"
            )
        if _free_bytes(self.tmp.parent) < _FULL_DISK_BYTES:
            return InputError(
                f"-o {self.output}: cannot write it (no space left on the device); free some "
                f"space or write to another disk"
            )
        return None


@contextmanager
def _signals_deferred() -> Iterator[None]:
    """Defer SIGINT, SIGTERM and SIGHUP while SQLite runs: their handlers raise, and an
    exception raised inside ``nsysprobe_text`` is swallowed by SQLite (the statement fails
    as if the export were damaged). One that arrives meanwhile is raised again after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = {}
    for sig in _DEFERRED_SIGNALS:
        handler = signal.getsignal(sig)
        if handler is not None:
            previous[sig] = signal.signal(sig, lambda signum, _frame: caught.append(signum))
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if caught:
            signal.raise_signal(caught[0])


def _sync(path: Path, output: Path) -> None:
    """Flush the finished copy to the disk before it gets its name."""
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        if exc.errno == errno.EFBIG:
            fix = "raise the file size limit (ulimit -f) or write a smaller report"
        else:
            fix = "free some space or write to another disk"
        raise InputError(f"-o {output}: cannot write it ({exc.strerror or exc}); {fix}") from None


_CODECS = {"UTF-8": "utf-8", "UTF-16le": "utf-16-le", "UTF-16be": "utf-16-be"}


def _encoding(path: Path) -> str:
    """The export's text encoding, from its header (bytes 56-59: 1, 2 or 3)."""
    try:
        with path.open("rb") as fh:
            head = fh.read(60)
    except OSError:
        return "UTF-8"
    code = int.from_bytes(head[56:60], "big") if len(head) == 60 else 1
    return {2: "UTF-16le", 3: "UTF-16be"}.get(code, "UTF-8")


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _file_size_limit() -> int | None:
    """The largest file this process may write (``ulimit -f``), None when unlimited."""
    if resource is None:
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    return None if soft == resource.RLIM_INFINITY else soft


def _free_bytes(folder: Path) -> int:
    try:
        st = os.statvfs(folder)
    except (OSError, AttributeError):
        return 1 << 62
    return st.f_bavail * st.f_frsize


def _condition(rows: schema.Rows | None, present: list[str]) -> str:
    """The SQL condition of ``rows`` ("1" for none; "0" when a column it reads is absent)."""
    if rows is None:
        return "1"
    return f"({rows.sql})" if all(c in present for c in rows.columns) else "0"
