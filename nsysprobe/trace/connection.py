"""Opening an export read-only, within limits: which files are read, how, and for how long.

- the path must be a regular file that starts like an SQLite file (``check_sqlite_file``: a
  FIFO named ``x.sqlite`` would block ``open``);
- a WAL database with a pending ``-wal`` file is read from a private copy (``private_copy``),
  so no ``-wal`` or ``-shm`` appears beside it;
- only the file's plain tables are read (``table_kinds``): a view or a virtual table runs SQL of
  the file's author;
- SQLite's limits bound one value (``MAX_VALUE_BYTES``) and a budget bounds the work of all
  queries on one export (``WorkBudget``, ``_OPS_PER_BYTE`` VM steps per byte of the file);
- each failure is a one-line message that says what, where, and the fix (``read_failed``).

``reader.Trace`` opens its connections through these.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import tempfile
from pathlib import Path

from nsysprobe.common.files import open_regular, read_head
from nsysprobe.errors import InputError
from nsysprobe.trace.schema import SQLITE_MAGIC

# The SQLite header up to its file format bytes.
_HEADER_BYTES = 20
# The longest value any query of the sqlite3 connections may build or return (a name is cut
# far below; SQLite's own limit is 1e9 bytes).
MAX_VALUE_BYTES = 1 << 28
# A pending -wal larger than this many times its database (plus the room) is refused.
_MAX_WAL_RATIO = 4
_WAL_ROOM_BYTES = 256 << 20
# The work budget: SQLite VM steps per byte of the export, and the steps between checks.
_OPS_PER_BYTE = 100
_MIN_OPS = 1 << 30
OPS_PER_CHECK = 1 << 16


def is_locked(exc: sqlite3.DatabaseError) -> bool:
    return "locked" in str(exc)


def locked_message(path: Path, exc: sqlite3.DatabaseError) -> str:
    return (
        f"{path}: another program holds it locked ({exc}); wait until it has finished "
        f"writing the file, or analyze a copy of it"
    )


def read_failed(path: Path, table: str, exc: Exception) -> str:
    if isinstance(exc, sqlite3.DatabaseError) and is_locked(exc):
        return locked_message(path, exc)
    return (
        f"{path}: reading {table} failed ({exc}); the export is damaged or not one nsysprobe "
        f"knows: re-export the report with `nsys export --type sqlite`"
    )


def check_sqlite_file(path: Path) -> bool:
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

    def left(self) -> int:
        """VM steps left to the export's queries."""
        return max(self._checks_left, 0) * OPS_PER_CHECK

    def charge(self, ops: int) -> bool:
        """Count ``ops`` VM steps done where no progress handler runs (ADBC's driver, which
        reads a batch of rows between two calls: ``arrow``); False once the budget is spent."""
        self._checks_left -= -(-ops // OPS_PER_CHECK)  # rounded up
        if self._checks_left < 0:
            self.spent = True
        return not self.spent

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


def private_copy(path: Path) -> Path:
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


def settle_copy(copy: Path) -> bool:
    """Write the pending pages of the private copy's ``-wal`` into its database file and
    leave WAL mode (``PRAGMA journal_mode = DELETE``): the copy then reads as a plain file,
    ``immutable``. Read in WAL mode, each reader maps the copy's ``-shm``, and this process
    holds two SQLite libraries (Python's ``sqlite3`` and the one in ADBC's driver) whose locks
    do not see each other: one re-made the ``-shm`` under the other's mapping (a bus error,
    one run in ~40 of the WAL test, 2026-12-05). False where SQLite refuses (a damaged file):
    the copy is then read in WAL mode, as before."""
    try:
        db = sqlite3.connect(copy, isolation_level=None)
        try:
            mode = db.execute("PRAGMA journal_mode = DELETE").fetchone()[0]
        finally:
            db.close()
    except sqlite3.Error:
        return False
    return str(mode).lower() == "delete"
