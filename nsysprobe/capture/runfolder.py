"""Finish the job in a run folder that ``nsysprobe run`` left unfinished.

A capture can stop at any stage: nsys wrote only ``report.qdstrm`` (its importer could not
load), only ``report.nsys-rep`` (the export failed, or the disk filled), or nothing at all
(nsys or the workload failed first). ``nsysprobe analyze RUN_FOLDER`` picks up where it
stopped, and the newest capture there wins, by modification time (QdstrmImporter touches
the stream as it finishes, just before the report it writes; a tie goes to the report):

- ``report.qdstrm`` newer than any report is imported (an older report is kept under
  another name) and exported; when that cannot be done the error says so and how to finish
  it, and the older capture is not analyzed instead;
- else ``report.nsys-rep`` is exported, unless ``report.sqlite`` is newer than it (an export
  older than its report is stale and is made again);
- else ``report.sqlite`` is read as it is.

What was captured is never lost: ``report.qdstrm`` is deleted, as nsys deletes its own, only
once the report made from it exists, and here only once that report was exported, now or
before (it may have been imported by hand, following the error that ``nsysprobe run``
printed, and an interrupted import leaves half a report), and only when the report says it
was imported from that stream. A stream older than the report and not imported into it (an
earlier capture) is kept, and a note says so.
"""

from __future__ import annotations

import stat
from collections.abc import Callable
from pathlib import Path

from nsysprobe.capture.reportfile import REPORT_SUFFIXES
from nsysprobe.common.files import read_head
from nsysprobe.errors import InputError, NsysprobeError
from nsysprobe.trace.schema import SQLITE_MAGIC

# What a run folder holds (``capture.profile`` writes them): the capture ``REPORT_STEM`` with
# its suffix, the nsys command line and nsys's log.
REPORT_STEM = "report"
COMMAND_FILE = "nsys-command.txt"
LOG_FILE = "nsys.log"


def export_of(
    path: str | Path,
    nsys: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """The SQLite export to read for ``path``: a report's (exported and cached next to it), a
    run folder's (its capture finished where it stopped), else ``path`` itself."""
    path = Path(path)
    if path.suffix in REPORT_SUFFIXES:
        from nsysprobe.capture.export import ensure_sqlite  # (nsys's modules: only for a report)

        return ensure_sqlite(path, nsys=nsys, progress=progress)
    if is_run_folder(path):
        return run_folder_sqlite(path, nsys=nsys, progress=progress)
    return path


def is_run_folder(path: str | Path) -> bool:
    """Whether ``path`` is a folder ``nsysprobe run`` wrote (its command file or a capture)."""
    path = Path(path)
    names = (COMMAND_FILE, *(f"{REPORT_STEM}{s}" for s in (".sqlite", ".nsys-rep", ".qdstrm")))
    return path.is_dir() and any((path / name).is_file() for name in names)


def run_folder_sqlite(
    folder: str | Path,
    nsys: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """The SQLite export of the newest capture in ``folder``, finishing it where needed."""
    from nsysprobe.capture.export import ensure_sqlite, note
    from nsysprobe.capture.importer import imported_from

    folder = Path(folder)
    sqlite = folder / f"{REPORT_STEM}.sqlite"
    report = folder / f"{REPORT_STEM}.nsys-rep"
    qdstrm = folder / f"{REPORT_STEM}.qdstrm"
    times = {report: _mtime_ns(report), qdstrm: _mtime_ns(qdstrm)}
    if times[report] is None:  # an export stands for a capture only without its report
        times[sqlite] = _mtime_ns(sqlite, SQLITE_MAGIC)
    present = [path for path, t in times.items() if t is not None]
    if not present:
        raise _no_capture(folder)
    # On equal times the report, then the export, win over the stream.
    rank = {qdstrm: 0, sqlite: 1, report: 2}
    newest = max(present, key=lambda path: (times[path], rank[path]))
    if newest == qdstrm:
        older = max(present, key=rank.get) if len(present) > 1 else None
        return _finish_stream(folder, qdstrm, older, nsys, progress)
    exported = ensure_sqlite(newest, nsys=nsys, progress=progress)
    if qdstrm in present:
        if newest == report and imported_from(report, qdstrm):
            qdstrm.unlink(missing_ok=True)
        else:
            note(
                f"{qdstrm} is older than {newest.name}, which is not known to be made from it, "
                f"so it is kept and not analyzed; to analyze it, move it into an empty folder "
                f"and run nsysprobe analyze on that folder, else delete it"
            )
    return exported


def _finish_stream(
    folder: Path,
    qdstrm: Path,
    older: Path | None,
    nsys: str | None,
    progress: Callable[[str], None] | None,
) -> Path:
    """Import and export ``qdstrm``, the newest capture in ``folder``."""
    from nsysprobe.capture.export import ensure_sqlite, note
    from nsysprobe.capture.importer import finish_qdstrm, keep_aside
    from nsysprobe.capture.locate import find_nsys

    if progress:
        progress(f"finishing {qdstrm.name} with QdstrmImporter")
    retry = f"nsysprobe analyze {folder}"
    try:
        report = finish_qdstrm(qdstrm, find_nsys(nsys), folder / LOG_FILE, retry=retry)
    except NsysprobeError as exc:
        if older is not None:
            exc.args = (
                f"{exc}; {qdstrm.name} is the newest capture in {folder}, so the older "
                f"{older.name} was not analyzed instead",
            )
        raise
    if older is not None and older.suffix == ".sqlite":
        # An export without its report is the only copy of that capture: keep it.
        note(f"{older.name} is older than {qdstrm.name}; it is kept as {keep_aside(older)}")
    return ensure_sqlite(report, nsys, progress=progress)


def _mtime_ns(path: Path, magic: bytes | None = None) -> int | None:
    """When the regular file ``path`` (through links) was last written; None if it is none,
    or does not start with ``magic``."""
    try:
        st = path.stat()
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    if magic is not None:
        try:
            if read_head(path, len(magic)) != magic:
                return None
        except InputError:
            return None
    return st.st_mtime_ns


def _no_capture(folder: Path) -> InputError:
    present = sorted(p.name for p in folder.iterdir()) or ["nothing"]
    log = folder / LOG_FILE
    why = f"see {log} for why, then " if log.is_file() else ""
    return InputError(
        f"{folder}: a run folder with no capture in it (it holds {', '.join(present)}); nsys "
        f"wrote no report, so there is nothing to analyze: {why}capture again with nsysprobe run"
    )
