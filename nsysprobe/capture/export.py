"""Export a report to SQLite once, next to it, and reuse that export while it is current."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from nsysprobe.capture.locate import NsysInstall, find_nsys, parse_version
from nsysprobe.capture.reportfile import REPORT_SUFFIXES, is_report, read_header, report_version
from nsysprobe.errors import CaptureError, InputError, NsysNotFound, NsysTooOld
from nsysprobe.trace.schema import SQLITE_MAGIC

# How nsys and SQLite say the disk filled up.
_DISK_FULL = re.compile(r"disk is full|No space left on device", re.IGNORECASE)
# What scripts/setup.sh installs; reports up to this version can be read after running it.
SETUP_NSYS_VERSION = "2023.4.4"

Progress = Callable[[str], None]


def export_command(report: Path, sqlite: Path) -> str:
    """The command a user can run on another machine to export ``report``."""
    return f"nsys export --type sqlite --output {sqlite.name} {report.name}"


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
        setup = "run scripts/setup.sh, " if wanted[:3] <= parse_version(SETUP_NSYS_VERSION) else ""
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


def _cache_path(report: Path) -> Path:
    """``X.sqlite`` beside the report, or in the user cache if the report's folder is read-only."""
    beside = report.with_suffix(".sqlite")
    if os.access(report.parent, os.W_OK):
        return beside
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nsysprobe"
    stat = report.stat()
    return cache / f"{report.stem}-{stat.st_size}-{stat.st_mtime_ns}.sqlite"


def ensure_sqlite(report: Path, nsys: str | None = None, progress: Progress | None = None) -> Path:
    """The SQLite export of ``report``, made with ``nsys export`` unless a current one exists.

    A ``.sqlite`` given as ``report`` is returned as is. The export is written to a temporary
    file in the target folder and renamed into place, so concurrent callers both succeed and
    a reader never sees half a file. The report itself is only read.
    """
    report = Path(report)
    if report.is_file() and read_header(report, len(SQLITE_MAGIC)) == SQLITE_MAGIC:
        return report
    check_report(report)
    sqlite = _cache_path(report)
    if sqlite.is_file() and sqlite.stat().st_mtime_ns > report.stat().st_mtime_ns:
        return sqlite
    version = report_version(report)
    install = _nsys_for(report, version, nsys)
    if progress:
        progress(f"exporting {report.name} to SQLite with nsys {install.version}")
    sqlite.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{sqlite.name}.", suffix=".tmp", dir=sqlite.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        command = [str(install.path), "export", "--type", "sqlite", "--force-overwrite", "true"]
        done = subprocess.run(
            [*command, "--output", str(tmp), str(report)],
            capture_output=True,
            text=True,
            errors="replace",
        )
        output = (done.stdout + done.stderr).strip()
        if "newer than your current version" in output:
            raise NsysTooOld(
                f"{report} is newer than nsys {install.version} at {install.path} (nsys says so); "
                f"pass --nsys PATH to a newer nsys, or export it elsewhere: "
                f"{export_command(report, sqlite)}"
            )
        if done.returncode != 0 or not tmp.is_file() or tmp.stat().st_size == 0:
            last = output.splitlines()[-1] if output else f"exit code {done.returncode}"
            if _DISK_FULL.search(output):
                raise CaptureError(
                    f"no space left to export {report} into {sqlite.parent} ({last}); free "
                    f"space there, or move the report to a disk with room, and run it again"
                )
            raise CaptureError(
                f"nsys export failed on {report}: {last}; "
                f"check the report opens in nsys {install.version} or re-capture it"
            )
        os.replace(tmp, sqlite)
    finally:
        tmp.unlink(missing_ok=True)
    return sqlite
