"""Scrub an export before sharing it: remove the environment and local paths nsys stored.

nsys stores the profiled process's whole environment in a report: ``META_DATA_CAPTURE``
(``PROCESS_n:ENVIRONMENT_VARIABLE`` rows), ``StringIds`` (NUL-separated environment blocks)
and ``TARGET_INFO_SYSTEM_ENV``; public traces were found holding live API tokens. The copy
keeps every event, id and timestamp and drops or blanks only:

- every ``ENVIRONMENT`` row of ``META_DATA_CAPTURE`` and every row of ``TARGET_INFO_SYSTEM_ENV``;
- strings that are environment entries (``NAME=value``, alone or NUL-separated);
- absolute paths under home, temporary and work folders, in strings and metadata
  (replaced by ``<local path>``), and the host names in the metadata (``<host>``).

The original is never written; the copy is written to a temporary file, vacuumed (so deleted
data does not linger in free pages) and renamed into place.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import tempfile
from dataclasses import dataclass
from pathlib import Path

from nsysprobe.errors import InputError
from nsysprobe.trace.reader import Trace

LOCAL_PATH = "<local path>"
REMOVED = "<environment removed>"
# One entry alone must look like an environment variable (NAME=...); in a NUL-separated block
# any entry does. NVTX names such as ``loss=0.5`` stay.
_ENV_ENTRY = re.compile(r"^[A-Z_][A-Z0-9_]*=")
_ENV_BLOCK_ENTRY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_LOCAL = re.compile(
    r"(?<![\w./-])(?:/home|/root|/tmp|/work|/Users|/scratch|/data|/mnt)(?:/[^\s:\x00\"']*)?"
)
_HOST_KEYS = ("EXPORT_HOST", "DEVICE_DISPLAY_NAME", "HOSTNAME")


@dataclass(frozen=True)
class ScrubResult:
    output: Path
    environment_rows: int  # metadata rows removed
    strings_blanked: int  # StringIds values replaced
    paths_blanked: int  # metadata values with local paths replaced


def scrub(source: str | Path, output: str | Path, *, force: bool = False) -> ScrubResult:
    source, output = Path(source), Path(output)
    Trace(source).close()  # the same checks and one-line errors as analyze
    if output.exists() and not force:
        raise InputError(f"{output}: already exists; choose another name or pass --force")
    if output.resolve() == source.resolve():
        raise InputError(f"{output}: is the input; write the scrubbed copy to another file")
    fd, tmp = tempfile.mkstemp(prefix=f".{output.name}.", dir=output.parent or ".")
    os.close(fd)
    try:
        shutil.copyfile(source, tmp)
        db = sqlite3.connect(tmp)
        db.text_factory = lambda raw: raw.decode("utf-8", errors="replace")
        try:
            counts = _scrub_db(db)
            db.commit()
            db.execute("VACUUM")
        finally:
            db.close()
        os.replace(tmp, output)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return ScrubResult(output, *counts)


def _tables(db: sqlite3.Connection) -> set[str]:
    return {n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _scrub_db(db: sqlite3.Connection) -> tuple[int, int, int]:
    tables = _tables(db)
    env_rows = paths = strings = 0
    if "TARGET_INFO_SYSTEM_ENV" in tables:
        env_rows += db.execute("DELETE FROM TARGET_INFO_SYSTEM_ENV").rowcount
    for table in ("META_DATA_CAPTURE", "META_DATA_EXPORT", "EXPORT_META_DATA"):
        if table not in tables:
            continue
        env_rows += db.execute(f"DELETE FROM {table} WHERE name LIKE '%ENVIRONMENT%'").rowcount
        for name, value in db.execute(f"SELECT name, value FROM {table}").fetchall():
            new = _clean_meta(str(name), value)
            if new != value:
                db.execute(
                    f"UPDATE {table} SET value = ? WHERE name = ? AND value = ?", (new, name, value)
                )
                paths += 1
    if "StringIds" in tables:
        for sid, value in db.execute("SELECT id, value FROM StringIds").fetchall():
            new = _clean_string(value)
            if new != value:
                db.execute("UPDATE StringIds SET value = ? WHERE id = ?", (new, sid))
                strings += 1
    return env_rows, strings, paths


def _clean_meta(name: str, value: object) -> object:
    if not isinstance(value, str):
        return value
    if name.rsplit(":", 1)[-1] in _HOST_KEYS and value:
        return "<host>"
    return _LOCAL.sub(LOCAL_PATH, value)


def _clean_string(value: object) -> object:
    if not isinstance(value, str):
        return value
    parts = value.split("\x00")
    if len(parts) > 1 and any(_ENV_BLOCK_ENTRY.match(p) for p in parts):
        return REMOVED
    if _ENV_ENTRY.match(value):
        return REMOVED
    return _LOCAL.sub(LOCAL_PATH, value)
