"""The ``.qdstrm`` goes once the report made from it exists, as nsys's own goes, and stays only
when the import failed. Every stream here is a real one: nsys 2023.4.4 profiling the tiny
workload with an importer that cannot load (``nsys_without_libssh``), which makes nsys move its
stream beside the report as ``report.qdstrm`` (on the H200 the same happens with the nsys inside
Nsight Compute 2025.3.1, whose importer lacks libdw.so.1).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from nsysprobe.capture.importer import finish_qdstrm
from nsysprobe.capture.locate import find_importer
from nsysprobe.capture.profile import ProfileOptions, capture
from nsysprobe.capture.runfolder import run_folder_sqlite
from nsysprobe.errors import CaptureError, ImporterLoadError

from .capture_helpers import write_fake


@pytest.fixture(scope="module")
def unfinished(tmp_path_factory, workload, nsys_without_libssh) -> Path:
    """A run folder that ``nsysprobe run`` left with a real report.qdstrm and no report."""
    folder = tmp_path_factory.mktemp("unfinished") / "run"
    with pytest.raises(ImporterLoadError):
        capture([str(workload)], folder, ProfileOptions(), str(nsys_without_libssh))
    assert (folder / "report.qdstrm").stat().st_size > 0
    assert not (folder / "report.nsys-rep").exists()
    return folder


def _copy(folder: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(folder, copy)
    return copy


def test_a_successful_import_removes_the_qdstrm(unfinished, nsys, tmp_path):
    folder = _copy(unfinished, tmp_path)
    report = finish_qdstrm(folder / "report.qdstrm", nsys, folder / "nsys.log")
    assert report == folder / "report.nsys-rep" and report.stat().st_size > 0
    assert not (folder / "report.qdstrm").exists()


def test_run_removes_the_qdstrm_before_an_export_that_fails(
    workload, nsys, nsys_without_libssh, tmp_path
):
    """nsys's own import fails, nsysprobe's QdstrmImporter succeeds, then the export fails as on
    a full disk: the report exists, so the stream must not stay beside it."""
    kit = tmp_path / "kit"
    fake = write_fake(
        kit / "nsys",
        f'if [ "$1" = profile ]; then exec "{nsys_without_libssh}" "$@"; fi\n'
        'if [ "$1" = export ]; then\n'
        "  echo '[QuadDCommon::tag_message*] = database or disk is full' >&2\n  exit 1\n"
        f'fi\nexec "{nsys.path}" "$@"\n',
    )
    (kit / "QdstrmImporter").symlink_to(find_importer(nsys))
    folder = tmp_path / "run"
    with pytest.raises(CaptureError, match="^no space left to export"):
        capture([str(workload)], folder, ProfileOptions(), str(fake))
    assert (folder / "report.nsys-rep").stat().st_size > 0
    assert not (folder / "report.qdstrm").exists()


def test_analyze_of_a_run_folder_imported_by_hand_removes_the_qdstrm(unfinished, nsys, tmp_path):
    """The error of ``nsysprobe run`` says: run QdstrmImporter -i report.qdstrm, then
    ``nsysprobe analyze FOLDER``. The importer leaves its input; analyze, finding the report
    beside it, exports the report and then removes the stream."""
    folder = _copy(unfinished, tmp_path)
    importer = find_importer(nsys)
    subprocess.run(
        [str(importer), "-i", str(folder / "report.qdstrm")], check=True, capture_output=True
    )
    assert (folder / "report.qdstrm").is_file() and (folder / "report.nsys-rep").is_file()
    sqlite = run_folder_sqlite(folder, nsys=str(nsys.path))
    assert sqlite == folder / "report.sqlite" and sqlite.stat().st_size > 0
    assert not (folder / "report.qdstrm").exists()
