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
  kept text goes through :func:`scrub_text`, which replaces secrets (``token=...``,
  ``Bearer ...``, known key formats, long random strings), local paths, e-mail addresses,
  URLs and host names, and leaves names such as ``aten::add``, ``Batch 12`` or
  ``ncclDevKernel_AllReduce_Sum_f32_RING_LL`` as they are;
- rows keep their rowids and values their types, so every analysis gives the same figures on
  the copy as on the original.

The export is only read (``mode=ro``), so none of its triggers can fire. The copy is built in a
private folder beside the output (``nsysprobe.writer.scratch_dir``) and holds only scrubbed
content at every moment; it is linked into place when complete (``publish``), so a run that is
killed leaves no unscrubbed byte behind and two runs never both write one file. SQLite keeps no
journal and its temporary table in memory, text values are limited to 16 MiB and the copy to
twice the export's size: a crafted export cannot make scrub write gigabytes.
"""

from __future__ import annotations

import functools
import os
import re
import signal
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from nsysprobe.errors import InputError, TraceError
from nsysprobe.trace import schema
from nsysprobe.trace.reader import Trace
from nsysprobe.writer import check_output, publish, scratch_dir

SCHEMA_VERSION = 1

SECRET = "<secret>"
LOCAL_PATH = "<path>"
ADDRESS = "<address>"
URL = "<url>"
HOST = "<host>"

# The longest text value copied; nsys writes none near it (long C++ kernel names are KiBs).
MAX_TEXT_BYTES = 16 << 20
# The copy may not grow past this multiple of the export's size (plus some room).
MAX_GROWTH = 2
_ROOM_BYTES = 16 << 20
# Values scrubbed once and remembered: NVTX names repeat across millions of rows.
_CACHED_TEXT_BYTES = 256
_HEADER_BYTES = 20
_PAGE_BYTES = 4096
# Rows copied by one statement (signals wait at most that long), and at most this many blocks.
_BLOCK_ROWS = 1 << 18
_MAX_BLOCKS = 256
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
    ``force``, and never when it is ``source``, a folder, a FIFO, a device or a link."""
    source, output = Path(source), Path(output)
    Trace(source).close()  # the same checks and one-line errors as analyze (a FIFO included)
    check_output(output, force=force, inputs=[source], option="-o")
    with scratch_dir(output) as scratch:
        tmp = scratch / "scrubbed.sqlite"
        copy = _Copy(source, tmp, output)
        try:
            counts = copy.run()
        finally:
            copy.close()
        _sync(tmp, output)
        publish(tmp, output, force=force, inputs=[source], option="-o")
    return ScrubResult(output, **counts)


class _Copy:
    """One scrub: the new database with the export attached read-only as ``src``."""

    def __init__(self, source: Path, tmp: Path, output: Path):
        self.source, self.tmp, self.output = source, tmp, output
        self.scrubbed = 0
        size = sum(_size(p) for p in (source, Path(f"{source}-wal")))
        self.limit_bytes = MAX_GROWTH * size + _ROOM_BYTES
        try:
            self.db = sqlite3.connect(tmp.resolve().as_uri(), uri=True, isolation_level=None)
        except sqlite3.Error as exc:
            raise InputError(
                f"-o {output}: cannot write it ({exc}); choose a folder you can write to"
            ) from None

    def _open(self) -> None:
        """Set the limits and pragmas of the new database and attach the export read-only."""
        if hasattr(self.db, "setlimit"):  # Python 3.11+
            self.db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_TEXT_BYTES + (1 << 20))
            self.db.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 1)
        self.db.create_function("nsysprobe_text", 2, self._text, deterministic=True)
        self.db.create_function("nsysprobe_key", 2, self._key, deterministic=True)
        # An export attaches only to a database of its text encoding (nsys writes UTF-8).
        encoding = _encoding(self.source)
        self.codec = _CODECS[encoding]
        for pragma in (
            f"encoding = '{encoding}'",
            f"page_size = {_PAGE_BYTES}",
            "journal_mode = OFF",  # nothing to roll back: a failed copy is thrown away
            "synchronous = OFF",  # the finished file is synced once, before it is published
            "temp_store = MEMORY",
            "cache_size = -16384",
            "trusted_schema = OFF",  # the export's schema may not call our functions
            f"max_page_count = {self.limit_bytes // _PAGE_BYTES}",
        ):
            self._sql(lambda p=pragma: self.db.execute(f"PRAGMA {p}"))
        self._sql(
            lambda: self.db.execute("ATTACH DATABASE ? AS src", (_read_only_uri(self.source),))
        )

    def close(self) -> None:
        self.db.close()

    def run(self) -> dict:
        self._open()
        objects = self._sql(
            lambda: self.db.execute("SELECT type, name, sql FROM src.sqlite_master").fetchall()
        )
        tables = {
            name: sql or ""
            for kind, name, sql in objects
            if kind == "table" and not name.startswith("sqlite_")
        }
        other = sum(1 for kind, name, _ in objects if kind != "table")
        kept, columns_dropped, rows_dropped = [], 0, 0
        for name, table in schema.TABLES.items():
            if name == schema.STRING_TABLE or name not in tables:
                continue
            if tables[name].lstrip().upper().startswith("CREATE VIRTUAL"):
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
            "tables_dropped": len(tables) - len(kept),
            "objects_dropped": other,
            "columns_dropped": columns_dropped,
            "rows_dropped": rows_dropped,
            "strings_dropped": strings_dropped,
            "texts_scrubbed": self.scrubbed,
        }

    # -- tables ---------------------------------------------------------------------------

    def _columns(self, name: str) -> list[str]:
        """The export's plain and stored columns of ``name`` (a virtual generated column is
        computed on every read, by SQL the export chose: never read)."""
        info = self._sql(
            lambda: self.db.execute(f"PRAGMA src.table_xinfo({_ident(name)})").fetchall()
        )
        return [row[1] for row in info if row[6] in (0, 3)]

    def _rowid(self, name: str, columns: list[str]) -> str | None:
        taken = {c.lower() for c in columns}
        for candidate in ("rowid", "_rowid_", "oid"):
            if candidate in taken:
                continue
            try:
                self.db.execute(f"SELECT {candidate} FROM src.{_ident(name)} LIMIT 0")
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
                exprs[col] = _number(col)
            elif col in table.string_ids:
                exprs[col] = f"CASE WHEN {named} THEN {_number(col)} END"
            elif col in table.keys:
                exprs[col] = _text(col, "nsysprobe_key")
            else:
                exprs[col] = f"CASE WHEN {named} THEN {_text(col)} END"
        where = _condition(table.rows, present) if table.rows else "1"
        self._create(name, wanted)
        self._insert(name, exprs, present, where)
        dropped_rows = 0
        if table.rows:
            dropped_rows = self._count(f"src.{_ident(name)}") - self._count(f"main.{_ident(name)}")
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
                c = _ident(col)
                self._run(
                    f"INSERT OR IGNORE INTO temp.named SELECT {c} FROM main.{_ident(t)} "
                    f"WHERE {c} = CAST({c} AS INTEGER)"
                )
        wanted = [c for c in table.columns if c in present]
        exprs = {c: _number(c) if c in table.numbers else _text(c) for c in wanted}
        self._create(name, wanted)
        self._insert(name, exprs, present, '"id" IN (SELECT id FROM temp.named)')
        dropped = self._count(f"src.{_ident(name)}") - self._count(f"main.{_ident(name)}")
        return len(present) - len(wanted), dropped

    def _main_columns(self, name: str) -> list[str]:
        return [r[1] for r in self.db.execute(f"PRAGMA main.table_info({_ident(name)})")]

    def _create(self, name: str, columns: list[str]) -> None:
        # No declared types: a column's affinity would convert what is stored (text '12' in an
        # INTEGER column becomes 12), and the reader tells values apart by their type.
        cols = ", ".join(_ident(c) for c in columns)
        self._run(f"CREATE TABLE main.{_ident(name)} ({cols})")

    def _insert(self, name: str, exprs: dict[str, str], present: list[str], where: str) -> None:
        """INSERT ... SELECT, in blocks of rowids so that a signal is answered between them."""
        rowid = self._rowid(name, present)
        targets = ([rowid] if rowid else []) + [_ident(c) for c in exprs]
        values = ([rowid] if rowid else []) + list(exprs.values())
        sql = (
            f"INSERT INTO main.{_ident(name)} ({', '.join(targets)}) "
            f"SELECT {', '.join(values)} FROM src.{_ident(name)} WHERE ({where})"
        )
        if rowid is None:
            self._run(sql, table=name)
            return
        span = self._sql(
            lambda: self.db.execute(
                f"SELECT min({rowid}), max({rowid}) FROM src.{_ident(name)}"
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

    # -- values ---------------------------------------------------------------------------

    def _text(self, value, is_text: int):
        """SQL ``nsysprobe_text``: a kept text (or BLOB) value, scrubbed."""
        if not isinstance(value, bytes):
            return value
        text = self._decoded(value, is_text)
        clean = _scrub_cached(text) if len(value) <= _CACHED_TEXT_BYTES else scrub_text(text)
        if clean != text:
            self.scrubbed += 1
        return clean

    def _key(self, value, is_text: int):
        """SQL ``nsysprobe_key``: the part after the last ``:`` of a capture option's name."""
        if not isinstance(value, bytes):
            return value
        return self._decoded(value, is_text).rsplit(":", 1)[-1]

    def _decoded(self, raw: bytes, is_text: int) -> str:
        """Text in the export's encoding, a BLOB as UTF-8 (as the reader reads them), bytes
        that are not valid replaced."""
        codec = self.codec if is_text else "utf-8"
        try:
            return raw.decode(codec)
        except UnicodeDecodeError:
            return raw.decode(codec, errors="replace")

    # -- errors ---------------------------------------------------------------------------

    def _sql(self, action, table: str | None = None):
        """Run ``action``; an SQLite error becomes the one-line error of what went wrong."""
        try:
            return action()
        except sqlite3.Error as exc:
            raise self._failed(exc, table) from None

    def _failed(self, exc: sqlite3.Error, table: str | None) -> Exception:
        name = getattr(exc, "sqlite_errorname", "")  # Python 3.11+
        text = str(exc)
        if name == "SQLITE_TOOBIG" or "too big" in text:
            return InputError(
                f"{self.source}: {table or 'a table'} holds a text longer than "
                f"{MAX_TEXT_BYTES >> 20} MiB, which nsys never writes; the export is damaged "
                f"or crafted: re-export the report with `nsys export --type sqlite`"
            )
        if name == "SQLITE_FULL" or "full" in text:
            return self._full()
        if name.startswith("SQLITE_IOERR") or "disk I/O error" in text:
            return InputError(
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
        pages = self.db.execute("PRAGMA main.page_count").fetchone()[0]
        limit = self.db.execute("PRAGMA main.max_page_count").fetchone()[0]
        if pages + 1 >= limit:
            return InputError(
                f"{self.source}: its scrubbed copy would be larger than "
                f"{self.limit_bytes >> 20} MiB, {MAX_GROWTH}x the export; the export is "
                f"damaged or crafted: re-export the report with `nsys export --type sqlite`"
            )
        return InputError(
            f"-o {self.output}: cannot write it (no space left on the device); free some space "
            f"or write to another disk"
        )


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
        raise InputError(
            f"-o {output}: cannot write it ({exc.strerror or exc}); free some space or write "
            f"to another disk"
        ) from None


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


def _read_only_uri(path: Path) -> str:
    """The export's URI, read-only; ``immutable`` for a WAL export with no ``-wal`` file (as
    the reader opens it: a read-only reader would otherwise create ``-shm`` beside it)."""
    uri = path.resolve().as_uri() + "?mode=ro"
    try:
        with path.open("rb") as fh:
            head = fh.read(_HEADER_BYTES)
    except OSError:
        return uri
    if head[18:20] == b"\x02\x02" and not Path(f"{path}-wal").exists():
        uri += "&immutable=1"
    return uri


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _number(col: str) -> str:
    c = _ident(col)
    return f"CASE typeof({c}) WHEN 'integer' THEN {c} WHEN 'real' THEN {c} END"


def _text(col: str, function: str = "nsysprobe_text") -> str:
    """The column's text and BLOBs through ``function`` (as bytes: Python decodes them
    leniently, exports hold non-UTF-8 text); numbers and NULL as they are, without a call."""
    c = _ident(col)
    return (
        f"CASE typeof({c}) WHEN 'text' THEN {function}(CAST({c} AS BLOB), 1) "
        f"WHEN 'blob' THEN {function}({c}, 0) ELSE {c} END"
    )


def _condition(rows: schema.Rows | None, present: list[str]) -> str:
    """The SQL condition of ``rows`` ("1" for none; "0" when a column it reads is absent)."""
    if rows is None:
        return "1"
    return f"({rows.sql})" if all(c in present for c in rows.columns) else "0"


# -- text ---------------------------------------------------------------------------------

# Every pattern below starts only where a run of its characters starts (a lookbehind) or at
# a fixed text, so scrubbing is linear in the text's length: a crafted 16 MiB name costs a
# second, not hours of backtracking. Each pass runs only when the text holds what it needs.

# Names of settings whose value is a secret: HF_TOKEN, --hf-token, WANDB_API_KEY, api_key,
# aws_secret_access_key, password, Authorization, session_id, ...
_SECRET_NAME = re.compile(
    r"token(?:s)?(?:$|[_.-])|secret|passw(?:or)?d|passphrase|(?:^|[_.-])pass(?:$|[_.-])|pwd"
    r"|auth|credential|cookie|signature|session[_.-]?(?:id|key)|(?:^|[_.-]|api|private)keys?"
    r"(?:$|[_.-])",
    re.IGNORECASE,
)
_SECRET_WORDS = (
    "token", "secret", "pass", "pwd", "auth", "credential", "cookie", "signature", "session",
    "key",
)  # fmt: skip
# Values of such settings that are not secrets: counts, flags, nothing.
_HARMLESS = re.compile(r"\d{1,6}(?:\.\d+)?|true|false|yes|no|none|null|on|off|<\w+>|", re.I)
_VALUE = r"(?:\"[^\"\n]*\"|'[^'\n]*'|[^\s,;&\"'<>()\[\]{}]+)"
# name=value, name: value, "name": "value", --name=value (not C++ ``::``)
_ASSIGNMENT = re.compile(
    r"(?<![\w.-])(?P<name>-*[A-Za-z_][\w.-]*)"
    r"(?P<sep>[\"']?[ \t]*(?:=|(?<!:):(?!:))[ \t]*)(?P<value>" + _VALUE + ")"
)
# --name value
_FLAG = re.compile(
    r"(?<![\w-])(?P<name>--?[A-Za-z][\w.-]*)(?P<sep>[ \t]+)(?P<value>(?!-)" + _VALUE + ")"
)
_AUTH = re.compile(
    r"\b(?P<scheme>bearer|basic|token)(?P<sep>[ \t]+)(?P<value>[\w.~+/-]{8,}=*)", re.I
)
_PRIVATE_KEY = re.compile(
    r"-----BEGIN[A-Z ]{0,40}PRIVATE KEY-----.*?(?:-----END[A-Z ]{0,40}PRIVATE KEY-----|\Z)",
    re.S,
)
_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]{0,30}://[^\s\"'<>]*")
_ADDRESS = re.compile(r"(?<![\w.+-])[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*(?![\w-])")
# Token formats of common services.
_KNOWN_PREFIX = re.compile(
    r"hf_|gh[pousr]_|github_pat_|glpat-|sk-|xox|AKIA|ASIA|AIza|npm_|pypi-|eyJ"
)
_KNOWN_TOKEN = re.compile(
    r"(?<![\w-])(?:hf_[A-Za-z0-9]{16,}|gh[pousr]_[A-Za-z0-9]{16,}|github_pat_\w{16,}"
    r"|glpat-[\w-]{16,}|sk-(?:ant-|proj-)?[\w-]{16,}|xox[abposr]-[\w-]{8,}"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}|AIza[\w-]{30,}|npm_[A-Za-z0-9]{30,}|pypi-[\w-]{40,}"
    r"|eyJ[\w-]{8,}\.[\w-]{8,}\.[\w-]{8,})(?![\w-])"
)
_LONG_RUN = re.compile(r"[A-Za-z0-9+/]{32}")
_HEX = re.compile(r"(?<![\w-])[0-9a-fA-F]{32,}(?![\w-])")
# Long random-looking strings (checked by ``_looks_random``): AWS secret keys and the like.
_RANDOM = re.compile(r"(?<![\w+/=-])[A-Za-z0-9+/]{32,}={0,2}(?![\w+/=-])")
_WORD = re.compile(r"[A-Z]?[a-z]{3,}")
_WINDOWS_PATH = re.compile(r"(?<!\w)[A-Za-z]:[\\/][^\s\"'<>|*?,;]*|\\\\[^\s\\\"'<>]+\\[^\s\"'<>]*")
_PATH_PART = r"[^\s/\"'<>|:;,()\[\]{}=*?\\]"
_POSIX_PATH = re.compile(
    rf"(?<![\w.~/\\-])/{_PATH_PART}+(?:/{_PATH_PART}*)*"
    rf"|(?<![\w.])~[\w.-]*/{_PATH_PART}*(?:/{_PATH_PART}*)*"
)
_TLDS = (
    "com|net|org|io|ai|edu|gov|local|localdomain|lan|internal|intranet|corp|cluster|cloud"
    "|uk|de|fr|cn|jp|eu|ch"
)
_HAS_TLD = re.compile(rf"\.(?:{_TLDS})(?![\w.-])", re.I)
_HOST = re.compile(
    rf"(?<![\w.-])(?:[A-Za-z0-9](?:[A-Za-z0-9-]{{0,61}}[A-Za-z0-9])?\.)+(?:{_TLDS})(?![\w.-])",
    re.I,
)
_HAS_IPV4 = re.compile(r"\d\.\d{1,3}\.\d")
_IPV4 = re.compile(
    r"(?<![\w.])(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)(?![\w.])"
)


def _secret_value(match: re.Match) -> str:
    name = match["name"].lstrip("-")
    value = match["value"].strip("\"'")
    if not _SECRET_NAME.search(name) or _HARMLESS.fullmatch(value):
        return match[0]
    return f"{match['name']}{match['sep']}{SECRET}"


def _auth_value(match: re.Match) -> str:
    if match["scheme"].lower() != "bearer" and not _looks_random(match["value"]):
        return match[0]
    return f"{match['scheme']}{match['sep']}{SECRET}"


def _random_value(match: re.Match) -> str:
    return SECRET if _looks_random(match[0]) else match[0]


def _looks_random(value: str) -> bool:
    """Letters and digits mixed, and mostly not in words: a key, not an identifier such as
    ``Conv2dWgradOutputGradientTileAccessIteratorOptimized``."""
    if not any(c.isdigit() for c in value) or not any(c.isalpha() for c in value):
        return False
    in_words = sum(len(m) for m in _WORD.findall(value))
    return in_words < len(value) / 2


def scrub_text(text: str) -> str:
    """``text`` with secrets, local paths, e-mail addresses, URLs and host names replaced
    (``<secret>``, ``<path>``, ``<address>``, ``<url>``, ``<host>``).

    Names stay as they are: ``aten::add``, ``Batch 12``, ``loss=0.5``,
    ``void at::native::vectorized_elementwise_kernel<4, ...>``. What is replaced: the value
    after ``=``/``:`` or a ``--flag`` whose name says secret (``HF_TOKEN=``, ``--hf-token``,
    ``api_key:``, ``aws_secret_access_key=``, ``password``), the token after ``Bearer``, the
    formats of common services' keys (``hf_``, ``ghp_``, ``sk-``, ``AKIA``, JWTs), hex
    strings of 32 digits or more and random-looking strings of 32 characters or more,
    absolute paths (``/home/...``, ``~/...``, ``C:\\Users\\...``), ``user@host``, URLs, host
    names with a known top-level domain and IPv4 addresses.
    """
    if "PRIVATE KEY" in text:
        text = _PRIVATE_KEY.sub(SECRET, text)
    if "://" in text:
        text = _URL.sub(URL, text)
    if "@" in text:
        text = _ADDRESS.sub(ADDRESS, text)
    lower = text.lower()
    if "bearer" in lower or "basic" in lower or "token" in lower:
        text = _AUTH.sub(_auth_value, text)
    if any(word in lower for word in _SECRET_WORDS):
        text = _FLAG.sub(_secret_value, text)
        text = _ASSIGNMENT.sub(_secret_value, text)
    if _KNOWN_PREFIX.search(text):
        text = _KNOWN_TOKEN.sub(SECRET, text)
    if _LONG_RUN.search(text):
        text = _HEX.sub(SECRET, text)
        text = _RANDOM.sub(_random_value, text)
    if ":\\" in text or ":/" in text or "\\\\" in text:
        text = _WINDOWS_PATH.sub(LOCAL_PATH, text)
    if "/" in text:
        text = _POSIX_PATH.sub(LOCAL_PATH, text)
    if "." in text:
        if _HAS_TLD.search(text):
            text = _HOST.sub(HOST, text)
        if _HAS_IPV4.search(text):
            text = _IPV4.sub(HOST, text)
    return text


_scrub_cached = functools.lru_cache(maxsize=1 << 16)(scrub_text)
