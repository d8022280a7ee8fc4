"""The one way nsysprobe writes a file a user named (``--html``, ``scrub -o``, the ladder's
``ladder.json`` and ``ladder.md``), and the one way its bytes reach a descriptor (``write_all``,
standard output included).

- Checked before the work starts (``check_output``): the name must be free, or a regular file
  with ``force``; never a folder, a FIFO, a device, a symbolic link or one of the inputs; its
  folder must exist and be writable.
- Written whole or not at all: the bytes go to a private scratch folder (mode 0700) in the
  destination's folder, removed on every exit Python sees (the CLI turns SIGTERM and SIGHUP
  into exits, Ctrl-C is one), and the finished file is linked under its name.
- Without ``force`` an existing file is never replaced, even one created meanwhile by another
  process: the final step is ``link``, which fails when the name exists.
- Work that builds its file itself (SQLite) does it in ``scratch_dir`` and hands the result
  to ``publish``; no other user can read it there.
- Every byte is written by ``write_all``, which goes on after a short write until the system
  says why it cannot: Python's buffered files can drop the rest of a write that a file size
  limit (ulimit -f) cut short and report success.

Every failure is an ``InputError`` naming the option, the path, what happened and the fix.
"""

from __future__ import annotations

import errno
import os
import select
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from nsysprobe.common.files import not_regular
from nsysprobe.errors import InputError

# Mode of the files written (before the umask), as an editor would make them.
FILE_MODE = 0o644
# What SQLite keeps beside a database: part of an input, as the database itself is.
_SIDECARS = ("", "-wal", "-shm", "-journal")

# The fix for each kind of file that is not a regular one (``files.not_regular``).
_FIX = {
    "a folder": "give a file name inside it",
    "a symbolic link": "give the file it points to, or another name",
}


def check_output(
    path: str | os.PathLike, *, force: bool, inputs: Iterable[str | os.PathLike] = (), option: str
) -> Path:
    """Raise InputError now (before a long analysis) if writing ``path`` would fail or would
    replace something it must not; return the path."""
    path = Path(path)
    where = f"{option} {path}"
    try:
        st = path.lstat()
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise InputError(f"{where}: cannot use it ({_why(exc)}); choose another name") from None
    if st is not None:
        what = not_regular(st.st_mode)
        if what is not None:
            raise InputError(
                f"{where}: is {what}, not a regular file; {_FIX.get(what, 'give a file name')}"
            )
    if is_input(path, inputs):
        raise InputError(f"{where}: is an input of this command; write to another file")
    if st is not None and not force:
        raise InputError(
            f"{where}: file exists; pass --force to overwrite it or choose another name"
        )
    folder = path.parent
    if not folder.is_dir():
        raise InputError(f"{where}: folder {folder} does not exist; create it first")
    try:  # a real try, not os.access: root passes that on a read-only mount
        os.rmdir(tempfile.mkdtemp(prefix=".nsysprobe-", dir=folder))
    except OSError as exc:
        raise InputError(f"{where}: cannot write in {folder} ({_why(exc)}); {_fix(exc)}") from None
    return path


def write_output(
    data: str | bytes,
    path: str | os.PathLike,
    *,
    force: bool,
    inputs: Iterable[str | os.PathLike] = (),
    option: str,
) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` whole or not at all."""
    path = check_output(path, force=force, inputs=inputs, option=option)
    raw = data.encode("utf-8", errors="surrogateescape") if isinstance(data, str) else data
    with scratch_dir(path) as scratch:
        tmp = scratch / "output"
        _guarded(lambda: _write_new(tmp, raw), path, option)
        return publish(tmp, path, force=force, inputs=inputs, option=option)


def publish(
    tmp: Path,
    path: str | os.PathLike,
    *,
    force: bool,
    inputs: Iterable[str | os.PathLike] = (),
    option: str,
) -> Path:
    """Move the finished file ``tmp`` (in ``path``'s folder, e.g. from ``scratch_dir``) to
    ``path`` under the rules of ``check_output``."""
    path = Path(path)
    _guarded(lambda: os.chmod(tmp, FILE_MODE & ~_umask()), path, option)
    return _place(lambda name: os.link(tmp, name), path, force, inputs, option)


@contextmanager
def scratch_dir(near: str | os.PathLike) -> Iterator[Path]:
    """A private folder (mode 0700) beside ``near``, removed with what it holds on exit."""
    near = Path(near)
    try:
        folder = Path(tempfile.mkdtemp(prefix=".nsysprobe-", dir=near.parent))
    except OSError as exc:
        raise InputError(
            f"{near}: cannot write in {near.parent} ({_why(exc)}); {_fix(exc)}"
        ) from None
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _place(link, path: Path, force: bool, inputs, option: str) -> Path:
    """Give the written file its name with ``link(name)``: directly when the name must be
    free, else under a temporary name renamed over the (re-checked) existing file."""
    check_output(path, force=force, inputs=inputs, option=option)  # anything new meanwhile
    try:
        link(path)
        return path
    except FileExistsError:
        if not force:
            raise InputError(
                f"{option} {path}: file exists (created meanwhile); pass --force to overwrite "
                f"it or choose another name"
            ) from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EXDEV, errno.ENOTSUP, errno.EMLINK):
            _fail(exc, path, option)
    # --force over an existing file, or a file system without hard links.
    for _ in range(100):
        temp = path.with_name(f".nsysprobe-{os.urandom(4).hex()}.tmp")
        try:
            link(temp)
            break
        except FileExistsError:
            continue
        except OSError as exc:
            _fail(exc, path, option)
    else:
        raise InputError(f"{option} {path}: no free temporary name in {path.parent}")
    try:
        check_output(path, force=force, inputs=inputs, option=option)
        _guarded(lambda: os.replace(temp, path), path, option)
    finally:
        temp.unlink(missing_ok=True)
    return path


def write_all(fd: int, raw: bytes) -> None:
    """Write all of ``raw`` to ``fd``, or raise the OSError that stopped it (EFBIG past
    ulimit -f, ENOSPC, EPIPE): a short write is followed by the rest, never taken as done."""
    view = memoryview(raw)
    while view:
        try:
            written = os.write(fd, view)
        except BlockingIOError:  # a non-blocking descriptor (a pipe shared with another program)
            select.select([], [fd], [])
            continue
        if written == 0:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        view = view[written:]


def _write_new(path: Path, raw: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        write_all(fd, raw)
    finally:
        os.close(fd)


def _guarded(action, path: Path, option: str):
    try:
        return action()
    except OSError as exc:
        _fail(exc, path, option)


def _fail(exc: OSError, path: Path, option: str):
    raise InputError(f"{option} {path}: cannot write it ({_why(exc)}); {_fix(exc)}") from None


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _fix(exc: OSError) -> str:
    if exc.errno == errno.ENOSPC:
        return "free some space or write to another disk"
    if exc.errno == errno.EFBIG:
        return "raise the file size limit (ulimit -f) or write a smaller report"
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return "choose a folder you can write to"
    return "choose another file name or folder"


def is_input(path: str | os.PathLike, inputs: Iterable[str | os.PathLike]) -> bool:
    """Whether ``path`` (through any links) is one of ``inputs`` or a file SQLite keeps beside
    one, or names one SQLite would make there (``IN-wal``, ``IN-journal``: written, it would
    be read as part of the input)."""
    inputs = list(inputs)
    try:
        st = os.stat(path)
    except OSError:
        st = None
    if st is not None and _is_one_of(st, inputs):
        return True
    where = os.path.realpath(path)
    return any(
        where == os.path.realpath(item) + suffix for item in inputs for suffix in _SIDECARS[1:]
    )


def _is_one_of(st: os.stat_result, inputs: Iterable[str | os.PathLike]) -> bool:
    """Whether ``st`` is an input, or a file SQLite keeps beside one (its pending -wal)."""
    for item in inputs:
        for suffix in _SIDECARS:
            try:
                other = os.stat(f"{os.fspath(item)}{suffix}")
            except OSError:
                continue
            if (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
                return True
    return False


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
