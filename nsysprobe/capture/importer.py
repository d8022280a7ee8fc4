"""Finish a capture that nsys left as a ``.qdstrm`` because its importer failed to run.

A ``.qdstrm`` is nsys's raw stream: gigabytes for a few GPU steps (2.0 GB for 100 2048x2048
matmuls traced with cuda,nvtx,osrt on the H200), holding nothing the report made from it
lacks. nsys writes it to ``$TMPDIR`` as ``nsys-report-XXXX.qdstrm`` and deletes it once its
importer has written the report; only when that import fails does it move the stream beside
the report, as ``X.qdstrm`` for ``--output X``. QdstrmImporter itself never deletes its input.
So nsysprobe deletes a stream as nsys does, once the report made from it exists
(``remove_imported_stream``): right after QdstrmImporter succeeded, not after a later export,
which can fail (a full disk) or be interrupted without the stream being any less redundant.
It is kept whenever the import failed, and whenever it is not known to be the stream a
report was imported from (``imported_from``).

QdstrmImporter writes the report into a private folder beside the stream; the report is
then linked into place, so an interrupted import leaves no half report under its name. A
report already there (an older capture, when the stream is newer) is kept under another name."""

from __future__ import annotations

import errno
import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from nsysprobe.capture.export import note
from nsysprobe.capture.locate import NsysInstall, find_importer
from nsysprobe.capture.reportfile import contains
from nsysprobe.common.files import not_regular
from nsysprobe.common.writer import scratch_dir
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


def finish_qdstrm(
    qdstrm: Path, nsys: NsysInstall, log: Path | None = None, retry: str | None = None
) -> Path:
    """Run ``QdstrmImporter -i X.qdstrm`` to write ``X.nsys-rep``, then delete the ``.qdstrm``
    as nsys does; when the import fails the ``.qdstrm`` is kept and the error names ``retry``
    (by default the importer's own command) as the way to finish it."""
    importer = find_importer(nsys)
    if importer is None:
        raise CaptureError(
            f"nsys left {qdstrm} unfinished and no QdstrmImporter was found beside {nsys.path}; "
            f"finish it with an Nsight Systems {nsys.version} install: QdstrmImporter -i {qdstrm}"
        )
    retry = retry or f"{importer} -i {qdstrm}"
    report = qdstrm.with_suffix(".nsys-rep")
    with scratch_dir(report) as scratch:
        made = scratch / report.name
        command = [str(importer), "-i", str(qdstrm), "-o", str(made)]
        done = subprocess.run(command, capture_output=True, text=True, errors="replace")
        output = (done.stdout + done.stderr).strip()
        if log is not None:
            with log.open("a", encoding="utf-8") as handle:
                handle.write(f"$ {' '.join(command)}\n{output}\n")
        library = missing_library(output)
        if library is not None:
            raise ImporterLoadError(
                f"QdstrmImporter ({importer}) cannot load {library}, so {qdstrm} (kept) was not "
                f"turned into a report; {library_fix(library)}, then run: {retry}"
            )
        if done.returncode != 0 or not made.is_file():
            last = output.splitlines()[-1] if output else f"exit code {done.returncode}"
            raise CaptureError(
                f"QdstrmImporter failed on {qdstrm} (kept): {last}; see {log or 'its output'} "
                f"and retry with: {retry}"
            )
        _place_report(made, report)
    remove_imported_stream(report)
    return report


def _place_report(made: Path, report: Path) -> None:
    """Link the imported ``made`` as ``report``; a report already there (older than the stream
    just imported) is first kept under a name of its own, ``X-<its time>.nsys-rep``."""
    try:
        _link(made, report)
        return
    except FileExistsError:
        pass
    mode = report.lstat().st_mode
    what = not_regular(mode)
    if what is not None:
        raise CaptureError(
            f"{report} is {what}, not a report, so it is left as it is and the report imported "
            f"from {report.with_suffix('.qdstrm')} has no place; move it away and run again"
        )
    aside = keep_aside(report)
    os.replace(made, report)
    note(
        f"{report.with_suffix('.qdstrm').name} was newer than {report.name}: imported it; the "
        f"older report is kept as {aside}"
    )


def keep_aside(path: Path) -> Path:
    """Give the regular file ``path`` a second name of its own, ``X-<its time>.ext``, so that
    ``path`` can be replaced without losing it; return that name."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(path.stat().st_mtime))
    for number in range(1, 100):
        again = "" if number == 1 else f"-{number}"
        aside = path.with_name(f"{path.stem}-{stamp}{again}{path.suffix}")
        try:
            _link(path, aside)
            return aside
        except FileExistsError:
            continue
    raise CaptureError(f"no free name in {path.parent} to keep the older {path.name}")


def _link(source: Path, name: Path) -> None:
    """Give ``source`` the new name ``name`` (FileExistsError when it is taken): a hard link,
    or on a file system without them a rename."""
    try:
        os.link(source, name, follow_symlinks=False)
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EXDEV, errno.ENOTSUP, errno.EMLINK):
            raise
        if os.path.lexists(name):
            raise FileExistsError(errno.EEXIST, "File exists", str(name)) from None
        os.rename(source, name)


def imported_from(report: Path, stream: Path) -> bool:
    """Whether ``report`` says it was imported from ``stream``.

    QdstrmImporter records the absolute path of the stream it read in the report it writes,
    as a length-prefixed string (nsys 2023.4 puts it some 500 bytes before the end). A report
    nsys wrote itself names nsys's temporary stream, one made from another stream names that
    one, and one cut short by an interrupted import has no such record.
    """
    for path in {os.path.abspath(stream), os.path.realpath(stream)}:
        name = os.fsencode(path)
        if contains(report, _varint(len(name)) + name):
            return True
    return False


def _varint(number: int) -> bytes:
    """``number`` as a protocol-buffer varint, the length prefix of a string there."""
    out = bytearray()
    while True:
        out.append((number & 0x7F) | (0x80 if number > 0x7F else 0))
        number >>= 7
        if not number:
            return bytes(out)


def remove_imported_stream(report: Path) -> bool:
    """Delete ``X.qdstrm`` beside the report ``X.nsys-rep`` imported from it; True if one went.

    Call it only once the report is known whole: QdstrmImporter succeeded on it, or nsys wrote
    it (nsys writes a report only after its import succeeded), or it was exported."""
    stream = report.with_suffix(".qdstrm")
    if report.suffix != ".nsys-rep" or not report.is_file() or not stream.is_file():
        return False
    stream.unlink(missing_ok=True)
    return True
