"""Faults during a capture that tests/capture/ does not already cover, each followed by
``nsysprobe analyze RUN_FOLDER`` finishing the job where the capture left something to finish.

Covered there: nsys missing, an importer that cannot load (the .qdstrm kept), a workload
exiting non-zero, SIGINT to the nsysprobe process. Here: nsys failing, the workload killed,
Ctrl-C to the whole process group, a full disk, and analyze on each run folder left behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from capture.capture_helpers import default_sigint, write_fake
from click.testing import CliRunner

import nsysprobe
from nsysprobe.cli import main

from .checks import check_outcome

NSYS_VERSION_LINE = "echo 'NVIDIA Nsight Systems version 2023.4.4.54-234433681190v0'; exit 0"


def _invoke(*args: str):
    result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=True)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    return result


def _analyze_folder(folder: Path, *options: str):
    result = _invoke("analyze", folder, "--format", "json", "--no-history", *options)
    check_outcome(result.exit_code, result.stdout, result.stderr, "json", str(folder))
    return result


def _error_line(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.startswith("nsysprobe: error:")]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_nsys_failing_keeps_the_folder_and_analyze_says_what_is_there(workload, tmp_path):
    fake = write_fake(
        tmp_path / "kit" / "nsys",
        f'if [ "$1" = --version ]; then {NSYS_VERSION_LINE}; fi\n'
        "echo 'Error: the Linux kernel refused perf events (perf_event_paranoid)' >&2\nexit 1\n",
    )
    folder = tmp_path / "run"
    result = _invoke("run", "--nsys", fake, "-o", folder, "--no-history", workload)
    assert result.exit_code == 1
    log = folder / "nsys.log"
    assert _error_line(result) == (
        f"nsysprobe: error: the workload exited with code 1 and nsys wrote no report; see {log}"
    )
    assert "perf_event_paranoid" in log.read_text()
    later = _analyze_folder(folder)
    assert later.exit_code == 2
    assert _error_line(later) == (
        f"nsysprobe: error: {folder}: a run folder with no capture in it (it holds "
        "nsys-command.txt, nsys.log); nsys wrote no report, so there is nothing to analyze: "
        f"see {log} for why, then capture again with nsysprobe run"
    )


def test_a_killed_workload_keeps_its_capture(nsys, tmp_path):
    script = tmp_path / "killed.py"
    script.write_text(
        "import os, signal, time\nimport nvtx\n"
        "for i in range(3):\n    with nvtx.annotate(f'step {i}'):\n        time.sleep(0.05)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    folder = tmp_path / "run"
    result = _invoke("run", "--nsys", nsys.path, "-o", folder, "--no-history", script)
    assert result.exit_code == 137, result.output
    assert "nsysprobe: the workload exited with code 137" in result.stderr
    assert (folder / "report.nsys-rep").is_file() and (folder / "report.sqlite").is_file()
    later = _analyze_folder(folder)
    assert later.exit_code == 0


def test_ctrl_c_to_the_process_group_keeps_the_capture(nsys, tmp_path):
    script = tmp_path / "endless.py"
    script.write_text(
        "import time\nimport nvtx\nprint('started', flush=True)\n"
        "while True:\n    with nvtx.annotate('step'):\n        time.sleep(0.05)\n"
    )
    folder = tmp_path / "interrupted"
    proc = subprocess.Popen(
        [sys.executable, "-m", "nsysprobe", "run", "--nsys", str(nsys.path), "-o", str(folder)]
        + ["--no-history", str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # a terminal's Ctrl-C goes to the whole foreground group
        preexec_fn=default_sigint,
    )
    try:
        while proc.stdout.readline().strip() != "started":
            assert proc.poll() is None, "the run ended before the workload started"
        time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGINT)
        output = proc.communicate(timeout=120)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, output
    # The workload's own KeyboardInterrupt traceback is its business; none may come from us.
    assert str(Path(nsysprobe.__file__).parent) not in output, output
    assert "nsysprobe: interrupted; kept what was captured" in output
    assert _analyze_folder(folder).exit_code == 0


def test_analyze_finishes_a_qdstrm_the_importer_could_not(
    workload, nsys, nsys_without_libssh, tmp_path
):
    folder = tmp_path / "unfinished"
    result = _invoke("run", "--nsys", nsys_without_libssh, "-o", folder, "--no-history", workload)
    assert result.exit_code == 2
    assert _error_line(result).endswith(
        f"; once fixed, `nsysprobe analyze {folder}` finishes the job"
    )
    qdstrm = folder / "report.qdstrm"
    again = _analyze_folder(folder, "--nsys", str(nsys_without_libssh))
    assert again.exit_code == 2 and "cannot load libssh.so" in _error_line(again)
    assert qdstrm.stat().st_size > 0
    done = _analyze_folder(folder, "--nsys", str(nsys.path))
    assert done.exit_code == 0, done.stderr
    assert (folder / "report.nsys-rep").is_file() and (folder / "report.sqlite").is_file()
    # Kept while the import failed, gone once the report exists: it is gigabytes (issue 12).
    assert not qdstrm.exists()


def _disk_full_nsys(tmp_path: Path, nsys) -> Path:
    """nsys whose export writes part of the file, then fails as on a full disk."""
    return write_fake(
        tmp_path / "kit" / "nsys",
        'if [ "$1" = export ]; then\n'
        '  while [ "$1" != --output ]; do shift; done\n'
        '  head -c 4096 /dev/zero > "$2"\n'
        "  echo '[QuadDCommon::tag_message*] = database or disk is full' >&2\n  exit 1\n"
        f'fi\nexec "{nsys.path}" "$@"\n',
    )


def _check_report_kept(result, folder) -> None:
    """The export ran out of space: the one-line error says what to do, and the run folder
    keeps the report and nothing half-written."""
    report = folder / "report.nsys-rep"
    assert _error_line(result) == (
        f"nsysprobe: error: no space left to export {report} into {folder} ([QuadDCommon::"
        "tag_message*] = database or disk is full); free space there, or move the report to a "
        f"disk with room, and run it again; once fixed, `nsysprobe analyze {folder}` finishes "
        "the job"
    )
    assert sorted(p.name for p in folder.iterdir()) == [
        "nsys-command.txt",
        "nsys.log",
        "report.nsys-rep",
    ]


def test_a_full_disk_during_export_keeps_the_report(workload, nsys, tmp_path):
    folder = tmp_path / "run"
    fake = _disk_full_nsys(tmp_path, nsys)
    result = _invoke("run", "--nsys", fake, "-o", folder, "--no-history", workload)
    assert result.exit_code == 2
    _check_report_kept(result, folder)
    assert _analyze_folder(folder, "--nsys", str(nsys.path)).exit_code == 0


@pytest.fixture
def tiny_disk(tmp_path):
    """A 300 KiB tmpfs: room for the tiny workload's report (about 240 KB), not its export."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=300k", "tmpfs", str(mount)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(
            f"cannot mount a tmpfs here ({done.stderr.decode().strip()}); "
            "test_a_full_disk_during_export_keeps_the_report covers it with a fake nsys"
        )
    yield mount
    subprocess.run(["umount", str(mount)], check=True)


def test_a_real_full_disk_keeps_what_was_captured(workload, nsys, tiny_disk):
    """The report fits, its export does not: the run keeps the report and says so; once
    there is room, analyze exports it."""
    folder = tiny_disk / "run"
    result = _invoke("run", "--nsys", nsys.path, "-o", folder, "--no-history", workload)
    assert result.exit_code == 2, result.output
    _check_report_kept(result, folder)
    subprocess.run(["mount", "-o", "remount,size=16m", str(tiny_disk)], check=True)
    assert _analyze_folder(folder, "--nsys", str(nsys.path)).exit_code == 0
    assert (folder / "report.sqlite").is_file()
