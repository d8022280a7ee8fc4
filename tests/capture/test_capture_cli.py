"""``nsysprobe run`` and ``doctor`` through click, under the real nsys."""

from __future__ import annotations

import json
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from nsysprobe.capture.profile import COMMAND_FILE, LOG_FILE
from nsysprobe.cli import main

from .capture_helpers import STEP_SLEEP_NS, default_sigint, install_hint

SETUP = install_hint()


def _invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def _rows(sqlite, sql):
    with sqlite3.connect(sqlite) as db:
        return db.execute(sql).fetchall()


def test_run_captures_nvtx_steps_and_os_runtime_calls(workload, nsys, tmp_path):
    folder = tmp_path / "run"
    result = _invoke("run", "--nsys", str(nsys.path), "--output", str(folder), str(workload))
    assert result.exit_code == 0, result.output
    assert "workload done" in result.output
    assert {p.name for p in folder.iterdir()} == {
        "report.nsys-rep",
        "report.sqlite",
        "analysis.json",
        COMMAND_FILE,
        LOG_FILE,
    }
    command = (folder / COMMAND_FILE).read_text()
    assert command.startswith(f"{nsys.path} profile --trace=")
    assert "workload done" in (folder / LOG_FILE).read_text()

    sqlite = folder / "report.sqlite"
    steps = _rows(
        sqlite,
        "SELECT coalesce(e.text, s.value), e.start, e.end FROM NVTX_EVENTS e "
        "LEFT JOIN StringIds s ON s.id = e.textId WHERE e.eventType = 59 ORDER BY e.start",
    )
    assert [name for name, _, _ in steps] == ["step 0", "step 1", "step 2"]
    assert all(end - start >= STEP_SLEEP_NS for _, start, end in steps)
    calls = _rows(
        sqlite,
        "SELECT s.value, o.start, o.end FROM OSRT_API o JOIN StringIds s ON s.id = o.nameId",
    )
    sleeps = [(start, end) for name, start, end in calls if name == "clock_nanosleep"]
    unmaps = [(start, end) for name, start, end in calls if name == "munmap"]
    for _, step_start, step_end in steps:
        inside = [s for s in sleeps if step_start <= s[0] and s[1] <= step_end]
        assert len(inside) == 1 and inside[0][1] - inside[0][0] >= STEP_SLEEP_NS
        assert any(step_start <= s and e <= step_end for s, e in unmaps)

    analysis = json.loads((folder / "analysis.json").read_text())
    rows = analysis["steps"]["rows"]
    # No GPU work: each step runs from the last one's end (the first from its start) to its
    # own, its CPU range as recorded.
    ends = [steps[0][1]] + [end for _, _, end in steps]
    assert [(r["name"], r["start_ns"], r["wall_ns"]) for r in rows] == [
        (name, ends[i], end - ends[i]) for i, (name, _, end) in enumerate(steps)
    ]
    assert [(r["cpu_start_ns"], r["cpu_ns"]) for r in rows] == [(s, e - s) for _, s, e in steps]
    osrt = {r["function"]: r for r in analysis["osrt"]["rows"]}
    assert osrt["clock_nanosleep"]["count"] == len(sleeps)
    assert osrt["clock_nanosleep"]["total_ns"] == sum(end - start for start, end in sleeps)
    assert osrt["munmap"]["count"] == len(unmaps)


def test_workload_exit_code_passes_through_and_files_stay(workload, nsys, tmp_path):
    folder = tmp_path / "failing"
    result = _invoke("run", "--nsys", str(nsys.path), "-o", str(folder), str(workload), "3")
    assert result.exit_code == 3
    assert "nsysprobe: the workload exited with code 3" in result.output
    assert (folder / "report.nsys-rep").is_file() and (folder / "report.sqlite").is_file()


def test_run_with_missing_nsys_is_one_line_and_exit_2(workload, tmp_path):
    missing = tmp_path / "nowhere" / "nsys"
    result = _invoke("run", "--nsys", str(missing), str(workload))
    assert result.exit_code == 2
    assert result.output == f"nsysprobe: error: no nsys at {missing}; {SETUP}\n"


def test_run_whose_importer_cannot_load_names_the_library_and_keeps_the_capture(
    workload, nsys_without_libssh, tmp_path
):
    folder = tmp_path / "unfinished"
    result = _invoke("run", "--nsys", str(nsys_without_libssh), "-o", str(folder), str(workload))
    assert result.exit_code == 2
    importer = nsys_without_libssh.parents[1] / "host-linux-x64" / "QdstrmImporter"
    qdstrm = folder / "report.qdstrm"
    assert result.output.splitlines()[-1] == (
        f"nsysprobe: error: QdstrmImporter ({importer}) cannot load libssh.so, so {qdstrm} "
        "(kept) was not turned into a report; put a folder holding libssh.so on "
        "LD_LIBRARY_PATH (LD_LIBRARY_PATH=/path/to/lib nsysprobe ...) or install the package "
        f"that ships it, then run: {importer} -i {qdstrm}; once fixed, "
        f"`nsysprobe analyze {folder}` finishes the job"
    )
    assert qdstrm.stat().st_size > 0
    assert not (folder / "report.nsys-rep").exists()


def test_analyze_of_a_report_newer_than_nsys_is_one_line_and_exit_2(captured, nsys, tmp_path):
    report = tmp_path / "future.nsys-rep"
    shutil.copy2(captured.report, report)
    data = bytearray(report.read_bytes())
    header = b"NVIDIA Tegra Profiler Report 2099@1@1@11"
    data[: len(header)] = header
    report.write_bytes(bytes(data))
    result = _invoke("analyze", str(report))
    assert result.exit_code == 2
    assert result.output == (
        f"nsysprobe: error: {report} was written by nsys 2099.1.1.11, newer than nsys "
        f"{nsys.version} at {nsys.path}; pass --nsys PATH to nsys 2099.1.1.11 or newer, or "
        "export it where nsys 2099.1.1.11 is: "
        "nsys export --type sqlite --output future.sqlite future.nsys-rep\n"
    )


@pytest.mark.parametrize("explicit", [True, False])
def test_doctor_names_nsys_importer_and_nvtx(nsys, explicit):
    result = _invoke("doctor", *(["--nsys", str(nsys.path)] if explicit else []))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert f"ok   nsys: {nsys.version} at {nsys.path}" in lines
    assert any(line.startswith("ok   importer: ") for line in lines)
    assert any(line.startswith("ok   python nvtx: 0.2.1") for line in lines)
    assert any(" CUDA GPU: " in line for line in lines)


def test_doctor_without_nsys_fails_with_the_fix(monkeypatch, tmp_path):
    missing = tmp_path / "nsys"
    result = _invoke("doctor", "--nsys", str(missing))
    assert result.exit_code == 1
    assert f"FAIL nsys: no nsys at {missing} -> {SETUP}" in result.output.splitlines()


def test_ctrl_c_stops_the_workload_and_keeps_the_capture(nsys, tmp_path):
    script = tmp_path / "endless.py"
    script.write_text(
        "import time\nimport nvtx\nprint('started', flush=True)\n"
        "while True:\n    with nvtx.annotate('step'):\n        time.sleep(0.05)\n"
    )
    folder = tmp_path / "interrupted"
    cli = [sys.executable, "-c", "from nsysprobe.cli import main; main()"]
    proc = subprocess.Popen(
        [*cli, "run", "--nsys", str(nsys.path), "-o", str(folder), str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=default_sigint,
    )
    try:
        while proc.stdout.readline().strip() != "started":
            assert proc.poll() is None, "the run ended before the workload started"
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        output = proc.communicate(timeout=120)[0]
    finally:
        if proc.poll() is None:  # leave no run behind when the test fails
            proc.kill()
    assert proc.returncode == 130, output
    assert "nsysprobe: interrupted; kept what was captured" in output
    ranges = _rows(
        folder / "report.sqlite", "SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 59"
    )
    assert ranges[0][0] >= 1


@pytest.mark.parametrize("rung", ["nope", "mistakes", "ladder", "../baseline", "__init__"])
def test_run_rung_names_only_the_workloads(rung):
    result = CliRunner().invoke(main, ["run", "--rung", rung])
    assert result.exit_code == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"nsysprobe: error: --rung {rung}: no such workload; one of baseline")


def test_run_without_a_workload_says_what_to_give():
    result = CliRunner().invoke(main, ["run"])
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "nsysprobe: error: give a WORKLOAD (a script or a command) or --rung NAME"
    )
