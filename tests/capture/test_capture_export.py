from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
from concurrent.futures import ThreadPoolExecutor

import pytest

from nsysprobe.capture.export import ensure_sqlite
from nsysprobe.capture.reportfile import is_report, report_version
from nsysprobe.errors import InputError, NsysNotFound, NsysTooOld

from .capture_helpers import install_hint


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def report_copy(captured, tmp_path):
    copy = tmp_path / "copy.nsys-rep"
    shutil.copy2(captured.report, copy)
    return copy


def _claim_version(report, version: bytes):
    """Rewrite the header's build string in place, as a report from another nsys would read."""
    data = bytearray(report.read_bytes())
    old = data[: data.index(b"-")]
    new = b"NVIDIA Tegra Profiler Report " + version
    assert len(new) == len(old)
    data[: len(old)] = new
    report.write_bytes(bytes(data))


def test_report_version_is_the_nsys_that_wrote_it(captured, nsys):
    version = report_version(captured.report)
    assert version is not None
    assert tuple(int(p) for p in version.split(".")) == nsys.version_tuple
    assert is_report(captured.report)


def test_report_version_of_other_files_is_unknown(captured, workload):
    assert report_version(workload) is None
    assert report_version(captured.sqlite) is None


def test_export_is_made_beside_the_report_and_reused(report_copy):
    before = _digest(report_copy)
    sqlite = ensure_sqlite(report_copy)
    assert sqlite == report_copy.with_suffix(".sqlite")
    with sqlite3.connect(sqlite) as db:
        ranges = db.execute("SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 59").fetchone()
    assert ranges == (3,)
    made = sqlite.stat().st_mtime_ns
    assert ensure_sqlite(report_copy) == sqlite
    assert sqlite.stat().st_mtime_ns == made
    assert _digest(report_copy) == before
    assert [p.name for p in report_copy.parent.iterdir() if p.name.startswith(".")] == []


def test_export_is_redone_when_the_report_is_newer(report_copy):
    sqlite = ensure_sqlite(report_copy)
    os.utime(sqlite, ns=(1, 1))
    messages = []
    ensure_sqlite(report_copy, progress=messages.append)
    assert sqlite.stat().st_mtime_ns > report_copy.stat().st_mtime_ns
    assert messages and messages[0].startswith("exporting copy.nsys-rep to SQLite with nsys ")


def test_concurrent_exports_both_succeed(report_copy):
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda _: ensure_sqlite(report_copy), range(2)))
    assert results == [report_copy.with_suffix(".sqlite")] * 2
    with sqlite3.connect(results[0]) as db:
        assert db.execute("SELECT count(*) FROM NVTX_EVENTS").fetchone()[0] > 0


def test_sqlite_input_is_returned_as_is(captured):
    assert ensure_sqlite(captured.sqlite) == captured.sqlite


def test_report_from_a_newer_nsys_names_the_version_and_the_export_command(report_copy, nsys):
    _claim_version(report_copy, b"2099@1@1@11")
    with pytest.raises(NsysTooOld) as caught:
        ensure_sqlite(report_copy, str(nsys.path))
    assert str(caught.value) == (
        f"{report_copy} was written by nsys 2099.1.1.11, newer than nsys {nsys.version} at "
        f"{nsys.path}; pass --nsys PATH to nsys 2099.1.1.11 or newer, or export it where nsys "
        "2099.1.1.11 is: nsys export --type sqlite --output copy.sqlite copy.nsys-rep"
    )
    assert not report_copy.with_suffix(".sqlite").exists()


def test_missing_nsys_names_the_version_needed(report_copy, tmp_path, nsys):
    missing = tmp_path / "no" / "nsys"
    with pytest.raises(NsysNotFound) as caught:
        ensure_sqlite(report_copy, str(missing))
    version = report_version(report_copy)
    assert str(caught.value) == (
        f"no nsys to export {report_copy} (written by nsys {version}; no nsys at {missing}; "
        f"{install_hint()}); "
        f"run `nsysprobe doctor --install`, install nsys {version} or newer and pass --nsys "
        "PATH, or "
        f"export it where nsys {version} is: "
        "nsys export --type sqlite --output copy.sqlite copy.nsys-rep"
    )


@pytest.mark.parametrize(
    ("name", "make", "expected"),
    [
        ("gone.nsys-rep", None, "{p} does not exist; pass the path of a .nsys-rep or .sqlite file"),
        ("folder", "dir", "{p} is a directory; pass the .nsys-rep or .sqlite file inside it"),
        (
            "text.nsys-rep",
            "text",
            "{p} is not an Nsight Systems report (no report header); "
            "pass a .nsys-rep or .qdrep file or its .sqlite export",
        ),
        (
            "run.qdstrm",
            "text",
            "{p} is an unfinished capture; turn it into a report with "
            "QdstrmImporter -i run.qdstrm (nsysprobe run does this itself)",
        ),
    ],
)
def test_input_errors_say_what_and_the_fix(tmp_path, name, make, expected):
    path = tmp_path / name
    if make == "dir":
        path.mkdir()
    elif make == "text":
        path.write_text("not a report\n")
    with pytest.raises(InputError) as caught:
        ensure_sqlite(path)
    assert str(caught.value) == expected.format(p=path)
