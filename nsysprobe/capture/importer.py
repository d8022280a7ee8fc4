"""Finish a capture that nsys left as a ``.qdstrm`` because its importer failed to run.

A ``.qdstrm`` is nsys's raw stream: gigabytes for a few GPU steps (2.0 GB for 100 2048x2048
matmuls traced with cuda,nvtx,osrt on the H200), holding nothing the report made from it
lacks. nsys writes it to ``$TMPDIR`` as ``nsys-report-XXXX.qdstrm`` and deletes it once its
importer has written the report; only when that import fails does it move the stream beside
the report, as ``X.qdstrm`` for ``--output X``. QdstrmImporter itself never deletes its input.
So nsysprobe deletes a stream as nsys does, once the report made from it exists
(``remove_imported_stream``): right after QdstrmImporter succeeded, not after a later export,
which can fail (a full disk) or be interrupted without the stream being any less redundant.
It is kept whenever the import failed.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from nsysprobe.capture.locate import NsysInstall, find_importer
from nsysprobe.errors import CaptureError, ImporterLoadError

_LOADER_RE = re.compile(r"error while loading shared libraries: ([^:\s]+)")


@dataclass(frozen=True)
class ImporterStatus:
    """Whether the importer beside an nsys starts; ``missing_library`` names what it lacks."""

    path: Path | None
    loads: bool
    missing_library: str | None
    detail: str


def missing_library(output: str) -> str | None:
    """The library named in a dynamic loader error, e.g. ``libdw.so.1``."""
    match = _LOADER_RE.search(output)
    return match.group(1) if match else None


def library_fix(library: str) -> str:
    return (
        f"put a folder holding {library} on LD_LIBRARY_PATH "
        f"(LD_LIBRARY_PATH=/path/to/lib nsysprobe ...) or install the package that ships it"
    )


def importer_status(nsys: NsysInstall) -> ImporterStatus:
    """Start the importer with ``--version`` to see whether it loads."""
    importer = find_importer(nsys)
    if importer is None:
        return ImporterStatus(None, False, None, f"no QdstrmImporter found beside {nsys.path}")
    done = subprocess.run(
        [str(importer), "--version"], capture_output=True, text=True, errors="replace"
    )
    output = (done.stdout + done.stderr).strip()
    library = missing_library(output)
    if library is not None:
        return ImporterStatus(importer, False, library, f"{importer} cannot load {library}")
    if done.returncode != 0:
        return ImporterStatus(importer, False, None, f"{importer} --version failed: {output}")
    return ImporterStatus(importer, True, None, f"{importer} loads ({output})")


def finish_qdstrm(qdstrm: Path, nsys: NsysInstall, log: Path | None = None) -> Path:
    """Run ``QdstrmImporter -i X.qdstrm`` to write ``X.nsys-rep``, then delete the ``.qdstrm``
    as nsys does; when the import fails the ``.qdstrm`` is kept and the error says how to retry."""
    importer = find_importer(nsys)
    if importer is None:
        raise CaptureError(
            f"nsys left {qdstrm} unfinished and no QdstrmImporter was found beside {nsys.path}; "
            f"finish it with an Nsight Systems {nsys.version} install: QdstrmImporter -i {qdstrm}"
        )
    command = [str(importer), "-i", str(qdstrm), "-f"]
    done = subprocess.run(command, capture_output=True, text=True, errors="replace")
    output = (done.stdout + done.stderr).strip()
    if log is not None:
        with log.open("a", encoding="utf-8") as handle:
            handle.write(f"$ {' '.join(command)}\n{output}\n")
    report = qdstrm.with_suffix(".nsys-rep")
    library = missing_library(output)
    if library is not None:
        raise ImporterLoadError(
            f"QdstrmImporter ({importer}) cannot load {library}, so {qdstrm} (kept) was not "
            f"turned into a report; {library_fix(library)}, then run: {importer} -i {qdstrm}"
        )
    if done.returncode != 0 or not report.is_file():
        last = output.splitlines()[-1] if output else f"exit code {done.returncode}"
        raise CaptureError(
            f"QdstrmImporter failed on {qdstrm} (kept): {last}; see {log or 'its output'} "
            f"and retry with: {importer} -i {qdstrm}"
        )
    remove_imported_stream(report)
    return report


def remove_imported_stream(report: Path) -> bool:
    """Delete ``X.qdstrm`` beside the report ``X.nsys-rep`` imported from it; True if one went.

    Call it only once the report is known whole: QdstrmImporter succeeded on it, or nsys wrote
    it (nsys writes a report only after its import succeeded), or it was exported."""
    stream = report.with_suffix(".qdstrm")
    if report.suffix != ".nsys-rep" or not report.is_file() or not stream.is_file():
        return False
    stream.unlink(missing_ok=True)
    return True
