"""Finish the job in a run folder that ``nsysprobe run`` left unfinished.

A capture can stop at any stage: nsys wrote only ``report.qdstrm`` (its importer could not
load), only ``report.nsys-rep`` (the export failed, or the disk filled), or nothing at all
(nsys or the workload failed first). ``nsysprobe analyze RUN_FOLDER`` picks up where it
stopped: ``report.sqlite`` if it is there, else ``report.nsys-rep`` exported, else
``report.qdstrm`` imported and exported. What was captured is never lost: ``report.qdstrm`` is
deleted, as nsys deletes its own, only once the report made from it exists, and here only once
that report was exported, now or before (it may have been imported by hand, following the
error that ``nsysprobe run`` printed, and an interrupted import leaves half a report).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from nsysprobe.capture.export import ensure_sqlite
from nsysprobe.capture.importer import finish_qdstrm, remove_imported_stream
from nsysprobe.capture.locate import find_nsys
from nsysprobe.capture.profile import COMMAND_FILE, LOG_FILE, REPORT_STEM
from nsysprobe.capture.reportfile import REPORT_SUFFIXES
from nsysprobe.errors import InputError
from nsysprobe.trace.schema import SQLITE_MAGIC


def export_of(
    path: str | Path,
    nsys: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """The SQLite export to read for ``path``: a report's (exported and cached next to it), a
    run folder's (its capture finished where it stopped), else ``path`` itself."""
    path = Path(path)
    if path.suffix in REPORT_SUFFIXES:
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
    """The SQLite export of the capture in ``folder``, finishing the capture where needed."""
    folder = Path(folder)
    sqlite = folder / f"{REPORT_STEM}.sqlite"
    report = folder / f"{REPORT_STEM}.nsys-rep"
    qdstrm = folder / f"{REPORT_STEM}.qdstrm"
    if sqlite.is_file() and _starts_like_sqlite(sqlite):
        remove_imported_stream(report)
        return sqlite
    if report.is_file():
        exported = ensure_sqlite(report, nsys=nsys, progress=progress)
        remove_imported_stream(report)
        return exported
    if qdstrm.is_file():
        if progress:
            progress(f"finishing {qdstrm.name} with QdstrmImporter")
        return ensure_sqlite(finish_qdstrm(qdstrm, find_nsys(nsys), folder / LOG_FILE), nsys)
    present = sorted(p.name for p in folder.iterdir()) or ["nothing"]
    log = folder / LOG_FILE
    why = f"see {log} for why, then " if log.is_file() else ""
    raise InputError(
        f"{folder}: a run folder with no capture in it (it holds {', '.join(present)}); nsys "
        f"wrote no report, so there is nothing to analyze: {why}capture again with nsysprobe run"
    )


def _starts_like_sqlite(path: Path) -> bool:
    with path.open("rb") as handle:
        return handle.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
