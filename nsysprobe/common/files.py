"""Files a user named, read without trusting what the name claims.

A FIFO named ``run.sqlite`` or ``lscpu.txt`` blocks ``open()`` until a writer comes, a device
never ends, a folder or a symlink loop is no file: every file is opened without blocking and
must be a regular file before anything is read, and is read up to a size no real one reaches.
Each failure is one error of the caller's class (``InputError``, ``TopologyError``), naming the
file, what it is, and ``fix``.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

from nsysprobe.errors import InputError, NsysprobeError

# numa_maps-like files are read a line at a time; their lines are a few hundred bytes.
MAX_LINE_BYTES = 64 * 1024
TRACE_FIX = "give a .sqlite export or a .nsys-rep report"

_NOT_REGULAR = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def not_regular(mode: int) -> str | None:
    """What a file of ``mode`` (``st_mode``) is when it is not a regular file ("a FIFO"),
    else None."""
    return next((what for is_kind, what in _NOT_REGULAR if is_kind(mode)), None)


def read_head(path: str | os.PathLike, size: int) -> bytes:
    """Up to ``size`` bytes from the start of the regular file ``path`` (a trace); InputError
    if it is missing, unreadable or not a regular file."""
    path = Path(path)
    fd = open_regular(path, InputError, TRACE_FIX)
    if fd is None:
        raise InputError(f"{path}: no such file; {TRACE_FIX}")
    try:
        return os.read(fd, size)
    except OSError as exc:
        raise InputError(f"{path}: cannot read it ({exc.strerror}); check the file") from None
    finally:
        os.close(fd)


def read_text(
    path: Path, *, limit: int, fix: str, error: type[NsysprobeError] = InputError
) -> str | None:
    """The text of the regular file ``path`` (at most ``limit`` bytes; bytes that are not
    UTF-8 become U+FFFD), None when it does not exist."""
    fd = open_regular(path, error, fix)
    if fd is None:
        return None
    try:
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(limit + 1 - size, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise error(f"{path}: cannot read it ({exc.strerror}); {fix}") from None
    finally:
        os.close(fd)
    if size > limit:
        raise error(f"{path}: larger than {_size(limit)}, more than any real one holds; {fix}")
    return b"".join(chunks).decode("utf-8", errors="replace")


def read_lines(
    path: Path, *, fix: str, error: type[NsysprobeError] = InputError
) -> Iterator[str] | None:
    """The lines of the regular file ``path`` one at a time (a line longer than
    ``MAX_LINE_BYTES`` comes in pieces), None when it does not exist."""
    fd = open_regular(path, error, fix)
    if fd is None:
        return None
    return _lines(fd, path, fix, error)


def open_regular(path: Path, error: type[NsysprobeError], fix: str) -> int | None:
    """A descriptor of the regular file ``path``, opened without blocking; None when it does
    not exist; ``error`` saying what it is otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except IsADirectoryError:
        raise error(f"{path}: is a folder, not a regular file; {fix}") from None
    except OSError as exc:
        raise error(f"{path}: cannot open it ({exc.strerror}); {fix}") from None
    what = not_regular(os.fstat(fd).st_mode)
    if what is not None:
        os.close(fd)
        raise error(f"{path}: is {what}, not a regular file; {fix}")
    return fd


def _lines(fd: int, path: Path, fix: str, error: type[NsysprobeError]) -> Iterator[str]:
    with os.fdopen(fd, "rb") as handle:
        try:
            while line := handle.readline(MAX_LINE_BYTES):
                yield line.decode("utf-8", errors="replace")
        except OSError as exc:
            raise error(f"{path}: cannot read it ({exc.strerror}); {fix}") from None


def _size(limit: int) -> str:
    return f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit >> 10} KiB"
