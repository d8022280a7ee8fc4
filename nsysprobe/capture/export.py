"""Export a report to SQLite once, next to it, and reuse that export while it is current.

``X.sqlite`` beside ``X.nsys-rep`` is read when it is newer than the report. Otherwise the
report is exported into a private scratch folder beside it and linked into place, so
concurrent callers both succeed and a reader never sees half a file. Only what nsysprobe
wrote is ever replaced: each export it makes is marked in its SQLite header (the
application id says nsysprobe, the user version is a checksum of the report's name). A name
held by anything else (a FIFO, a device, a symbolic link, a folder, the user's own database,
an export made by hand or of another report) is left as it is; the export then goes to the
user cache, and one line on stderr says so.

The cache (``$XDG_CACHE_HOME/nsysprobe``, also used when the report's folder cannot be
written) names each export by the SHA-256 of the report's bytes, so two reports of one name,
size and time never share one. The report itself is only read.

Where the nsys at hand has ``--include-json`` (2025.3 has it, 2023.4 not), the export asks for
it (``PAYLOAD_FLAG``): it keeps the frames of Python sampling, which a plain export leaves out.
An export made before, without them, is read as it is; the report then says how to make one
with them.
"""

from __future__ import annotations

import errno
import functools
import os
import re
import subprocess
import sys
import tempfile
import zlib
from collections.abc import Callable
from pathlib import Path

from nsysprobe.capture.locate import NsysInstall, find_nsys, parse_version
from nsysprobe.capture.reportfile import (
    REPORT_SUFFIXES,
    content_digest,
    is_report,
    read_header,
    report_version,
)
from nsysprobe.common.files import not_regular, read_head
from nsysprobe.common.safetext import one_line
from nsysprobe.common.writer import FILE_MODE, scratch_dir
from nsysprobe.errors import CaptureError, InputError, NsysNotFound, NsysTooOld
from nsysprobe.trace.schema import SQLITE_MAGIC

# How nsys and SQLite say the disk filled up.
_DISK_FULL = re.compile(r"disk is full|No space left on device", re.IGNORECASE)
# What `nsysprobe doctor --install` (and scripts/setup.sh) installs; reports up to this version
# can be read after running it.
SETUP_NSYS_VERSION = "2023.4.4"
# The SQLite header fields that mark an export nsysprobe made: the application id ("nsyp")
# at offset 68 and, at offset 60 (the user version), a CRC-32 of the report's file name.
_APP_ID = b"nsyp"
_APP_ID_AT = 68
_NAME_MARK_AT = 60
_HEADER_BYTES = 100
# A report's stem in a cache name is cut here, so the name stays within 255 bytes.
_STEM_CHARS = 100

Progress = Callable[[str], None]


def export_command(report: Path, sqlite: Path) -> str:
    """The command a user can run on another machine to export ``report``."""
    return f"nsys export --type sqlite --output {sqlite.name} {report.name}"


# Python sampling (``nsysprobe run --python``) stores each sample's frames as an NVTX payload,
# which a plain ``nsys export`` leaves out (2025.3: the marks are there, their payload
# columns empty); this flag puts them in ``NVTX_EVENTS.jsonText``. nsys 2023.4 has no such
# flag, and its SQLite export has no payload column at all.
PAYLOAD_FLAG = "--include-json=true"


@functools.lru_cache(maxsize=8)
def payload_flags(nsys: str) -> tuple[str, ...]:
    """``(PAYLOAD_FLAG,)`` when the ``nsys`` at that path lists ``--include-json`` in its
    ``export --help``, else ``()``: asked once per nsys."""
    try:
        done = subprocess.run(
            [nsys, "export", "--help"],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=_HELP_TIMEOUT_S,
        )
    except (OSError, subprocess.SubprocessError):
        return ()
    return (PAYLOAD_FLAG,) if "--include-json" in done.stdout + done.stderr else ()


# ``nsys export --help`` answers in a fraction of a second; one that hangs costs this much once.
_HELP_TIMEOUT_S = 20


def check_report(report: Path) -> None:
    """Raise InputError unless ``report`` is an existing Nsight Systems report file."""
    if not report.exists():
        raise InputError(f"{report} does not exist; pass the path of a .nsys-rep or .sqlite file")
    if report.is_dir():
        raise InputError(f"{report} is a directory; pass the .nsys-rep or .sqlite file inside it")
    if report.suffix == ".qdstrm":
        raise InputError(
            f"{report} is an unfinished capture; turn it into a report with "
            f"QdstrmImporter -i {report.name} (nsysprobe run does this itself)"
        )
    if not is_report(report):
        raise InputError(
            f"{report} is not an Nsight Systems report (no report header); "
            f"pass a {' or '.join(REPORT_SUFFIXES)} file or its .sqlite export"
        )


def _nsys_for(report: Path, version: str | None, nsys: str | None) -> NsysInstall:
    sqlite = report.with_suffix(".sqlite")
    where = f"nsys {version}" if version else "a newer nsys"
    elsewhere = f"or export it where {where} is: {export_command(report, sqlite)}"
    try:
        install = find_nsys(nsys)
    except NsysNotFound as exc:
        wanted = parse_version(version or "") or ()
        own = wanted[:3] <= parse_version(SETUP_NSYS_VERSION)
        setup = "run `nsysprobe doctor --install`, " if own else ""
        raise NsysNotFound(
            f"no nsys to export {report} (written by nsys {version or 'unknown'}; {exc}); "
            f"{setup}install nsys {version or ''} or newer and pass --nsys PATH, {elsewhere}"
        ) from exc
    if version is not None and not install.can_read(version):
        raise NsysTooOld(
            f"{report} was written by nsys {version}, newer than nsys {install.version} at "
            f"{install.path}; pass --nsys PATH to nsys {version} or newer, {elsewhere}"
        )
    return install


def note(message: str) -> None:
    """One line on stderr for what the caller should know but need not act on."""
    try:
        print(f"nsysprobe: note: {one_line(message)}", file=sys.stderr, flush=True)
    except (OSError, ValueError):  # a closed stderr must not fail the analysis
        pass


def _cache_path(report: Path) -> Path:
    """The export of ``report`` in the user cache, named by the SHA-256 of its bytes."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nsysprobe"
    return cache / f"{report.stem[:_STEM_CHARS]}-{content_digest(report)}.sqlite"


def _name_mark(report: Path) -> bytes:
    return zlib.crc32(os.fsencode(report.name)).to_bytes(4, "big")


def _header(path: Path) -> bytes:
    """The first bytes of the regular file ``path`` (through links), or b"" if it is none."""
    try:
        return read_head(path, _HEADER_BYTES)
    except InputError:
        return b""


def _is_ours(header: bytes) -> bool:
    return header.startswith(SQLITE_MAGIC) and header[_APP_ID_AT : _APP_ID_AT + 4] == _APP_ID


def _occupant(sqlite: Path, report: Path, *, by_name: bool = True) -> str | None:
    """What holds ``sqlite`` that must not be replaced ("a FIFO", "a file"); None when the
    name is free or holds an export nsysprobe made (of a report named as ``report`` is, when
    ``by_name``: a cache name already says which bytes it was made from)."""
    try:
        mode = sqlite.lstat().st_mode
    except FileNotFoundError:
        return None
    what = not_regular(mode)
    if what is not None:
        return what
    header = _header(sqlite)
    ours = _is_ours(header) and (not by_name or _marked_for(header, report))
    return None if ours else "a file"


def _marked_for(header: bytes, report: Path) -> bool:
    return header[_NAME_MARK_AT : _NAME_MARK_AT + 4] == _name_mark(report)


def _current(sqlite: Path, report: Path) -> bool:
    """Whether ``sqlite`` is the export of ``report`` to read as is: an SQLite file newer than
    the report, made by hand or by nsysprobe, and not marked as made from another report."""
    header = _header(sqlite)
    if not header.startswith(SQLITE_MAGIC) or (
        _is_ours(header) and not _marked_for(header, report)
    ):
        return False
    try:
        return sqlite.stat().st_mtime_ns > report.stat().st_mtime_ns
    except OSError:
        return False


def _can_write(folder: Path) -> bool:
    try:  # a real try, not os.access: root passes that on a read-only mount
        os.rmdir(tempfile.mkdtemp(prefix=".nsysprobe-", dir=folder))
    except OSError:
        return False
    return True


def ensure_sqlite(report: Path, nsys: str | None = None, progress: Progress | None = None) -> Path:
    """The SQLite export of ``report``, made with ``nsys export`` unless a current one exists.

    A ``.sqlite`` given as ``report`` is returned as is. See the module's docstring for where
    the export goes and what is never replaced.
    """
    report = Path(report)
    if report.is_file() and read_header(report, len(SQLITE_MAGIC)) == SQLITE_MAGIC:
        return report
    check_report(report)
    beside = report.with_suffix(".sqlite")
    if _current(beside, report):
        return beside
    occupant = _occupant(beside, report)
    if occupant is None and _can_write(report.parent):
        target = beside
    else:
        target = _cache_path(report)
        if occupant is not None:
            note(
                f"{beside} is {occupant}, not an export nsysprobe made of {report.name}, so it "
                f"is left as it is; the export is read from {target}"
            )
        held = _occupant(target, report, by_name=False)
        if held is not None:
            raise CaptureError(
                f"{target} is {held}, not an export nsysprobe made, so it is left as it is; "
                f"remove it and run again, or export the report yourself: "
                f"{export_command(report, beside)}"
            )
        if _is_ours(_header(target)):
            return target
    version = report_version(report)
    install = _nsys_for(report, version, nsys)
    if progress:
        progress(f"exporting {report.name} to SQLite with nsys {install.version}")
    if target != beside:
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with scratch_dir(target) as scratch:
        made = _export(report, scratch / target.name, install, target)
        _mark(made, report)
        return _place(made, target, report, by_name=target == beside)


def _export(report: Path, output: Path, install: NsysInstall, target: Path) -> Path:
    """Run ``nsys export`` of ``report`` into ``output``; CaptureError when it fails."""
    command = [str(install.path), "export", "--type", "sqlite", "--force-overwrite", "true"]
    command += payload_flags(str(install.path))
    done = subprocess.run(
        [*command, "--output", str(output), str(report)],
        capture_output=True,
        text=True,
        errors="replace",
    )
    text = (done.stdout + done.stderr).strip()
    if "newer than your current version" in text:
        raise NsysTooOld(
            f"{report} is newer than nsys {install.version} at {install.path} (nsys says so); "
            f"pass --nsys PATH to a newer nsys, or export it elsewhere: "
            f"{export_command(report, report.with_suffix('.sqlite'))}"
        )
    if done.returncode != 0 or not output.is_file() or output.stat().st_size == 0:
        last = text.splitlines()[-1] if text else f"exit code {done.returncode}"
        if _DISK_FULL.search(text):
            raise CaptureError(
                f"no space left to export {report} into {target.parent} ({last}); free "
                f"space there, or move the report to a disk with room, and run it again"
            )
        raise CaptureError(
            f"nsys export failed on {report}: {last}; "
            f"check the report opens in nsys {install.version} or re-capture it"
        )
    return output


def _mark(made: Path, report: Path) -> None:
    """Mark ``made`` as nsysprobe's export of ``report`` (see ``_APP_ID``), readable as the
    files ``nsysprobe.common.writer`` writes are."""
    fd = os.open(made, os.O_RDWR | os.O_CLOEXEC)
    try:
        if os.pread(fd, len(SQLITE_MAGIC), 0) != SQLITE_MAGIC:
            raise CaptureError(
                f"nsys export wrote no SQLite file for {report}; check the report opens in nsys"
            )
        os.pwrite(fd, _name_mark(report), _NAME_MARK_AT)
        os.pwrite(fd, _APP_ID, _APP_ID_AT)
    finally:
        os.close(fd)
    mask = os.umask(0o022)
    os.umask(mask)
    os.chmod(made, FILE_MODE & ~mask)


def _place(made: Path, target: Path, report: Path, *, by_name: bool) -> Path:
    """Give the finished export its name: linked when the name is free, renamed over an
    export nsysprobe made (an older one, or one a concurrent run placed meanwhile), and never
    over anything else."""
    try:
        os.link(made, target)
        return target
    except FileExistsError:
        pass
    except OSError as exc:  # a file system without hard links
        if exc.errno not in (errno.EPERM, errno.EXDEV, errno.ENOTSUP, errno.EMLINK):
            raise CaptureError(
                f"cannot write {target} ({exc.strerror}); check that {target.parent} can be "
                f"written and run it again"
            ) from None
    occupant = _occupant(target, report, by_name=by_name)
    if occupant is not None:
        raise CaptureError(
            f"{target} appeared while {report} was exported and is {occupant}, so it is left "
            f"as it is; move it away and run again"
        )
    os.replace(made, target)
    return target
