"""The user's trace is never written: its bytes are the same after every kind of analysis, no
SQLite journal appears beside it, and two analyze runs exporting one report at once both
succeed (the export is written to a temporary file and renamed into place)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .checks import check_analyze, check_outcome, folder_state
from conftest import SAMPLE_TRACES, SHARED_TRACES

FORMATS = ("text", "json", "markdown")


def _traces() -> list[Path]:
    shared = sorted(SHARED_TRACES.glob("*.sqlite")) if SHARED_TRACES.is_dir() else []
    return [SAMPLE_TRACES / "h200_baseline.sqlite", *shared]


@pytest.mark.parametrize("trace", _traces(), ids=lambda p: p.stem)
def test_analysis_leaves_the_trace_and_its_folder_as_they_were(trace, tmp_path):
    copy = tmp_path / "trace" / trace.name
    copy.parent.mkdir()
    shutil.copy2(trace, copy)
    before = folder_state(copy)
    for fmt in FORMATS:
        assert check_analyze(copy, fmt=fmt) == "report"
    assert check_analyze(copy, "--html", str(tmp_path / "report.html")) == "report"
    assert folder_state(copy) == before
    assert copy.stat().st_mtime_ns == trace.stat().st_mtime_ns


def test_a_read_only_trace_in_a_read_only_folder_is_analyzed(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    copy = folder / "trace.sqlite"
    shutil.copy2(SAMPLE_TRACES / "h200_baseline.sqlite", copy)
    copy.chmod(0o444)
    folder.chmod(0o555)
    try:
        assert check_analyze(copy, fmt="json") == "report"
    finally:
        folder.chmod(0o755)


@pytest.fixture(scope="module")
def tiny_report(nsys, tmp_path_factory) -> Path:
    """A real .nsys-rep of a few NVTX ranges, made by the nsys the project installs."""
    folder = tmp_path_factory.mktemp("tiny")
    script = "import nvtx, time\nfor i in range(3):\n    with nvtx.annotate(f'step {i}'):\n"
    script += "        time.sleep(0.02)\n"
    done = subprocess.run(
        [str(nsys.path), "profile", "--trace=nvtx,osrt", "--sample=none", "--cpuctxsw=none"]
        + ["-o", str(folder / "R"), sys.executable, "-c", script],
        capture_output=True,
        text=True,
    )
    report = folder / "R.nsys-rep"
    assert done.returncode == 0 and report.is_file(), done.stdout + done.stderr
    return report


def test_two_analyze_runs_exporting_one_report_at_once_both_succeed(tiny_report, tmp_path):
    report = tmp_path / "reports" / tiny_report.name
    report.parent.mkdir()
    shutil.copy2(tiny_report, report)
    before = folder_state(report)[report.name]
    command = [sys.executable, "-m", "nsysprobe", "analyze", str(report), "--format", "json"]
    runs = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    for run in runs:
        stdout, stderr = run.communicate(timeout=300)
        assert run.returncode == 0, stderr
        check_outcome(run.returncode, stdout, stderr, "json", str(report))
    assert folder_state(report)[report.name] == before
    assert sorted(p.name for p in report.parent.iterdir()) == ["R.nsys-rep", "R.sqlite"]
