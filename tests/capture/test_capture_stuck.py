"""Runs that nsys does not end by itself: a workload left holding the output open, and a
Ctrl-C that nsys drops. Each must still end, instead of waiting forever."""

from __future__ import annotations

import io
import signal
import subprocess
import sys
import time

import pytest

from nsysprobe.capture import profile
from nsysprobe.errors import NothingCaptured

from .capture_helpers import write_fake


def test_an_orphan_holding_the_output_open_is_stopped(tmp_path, monkeypatch):
    monkeypatch.setattr(profile, "DRAIN_S", 0.5)
    marker = tmp_path / "orphan-alive"
    nsys = write_fake(
        tmp_path / "kit" / "target-linux-x64" / "nsys",
        'case "$1" in\n'
        "  --version) echo 'NVIDIA Nsight Systems version 2023.4.4.54-234433681190v0' ;;\n"
        # the "workload" keeps stdout open and would outlive nsys by five minutes
        f"  profile) (sleep 300; touch {marker}) & echo started; exit 0 ;;\n"
        "esac\n",
    )
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    started = time.monotonic()
    with pytest.raises(NothingCaptured):
        profile.capture(
            [str(script)],
            tmp_path / "run",
            nsys=str(nsys),
            stdout=io.BytesIO(),
            stderr=io.BytesIO(),
        )
    assert time.monotonic() - started < 30
    assert (tmp_path / "run" / "nsys.log").read_text().startswith("started")


def test_ctrl_c_that_nsys_drops_reaches_the_workload(tmp_path):
    # A stand-in nsys that ignores SIGINT, as nsys 2023.4.4 does while it is still starting
    # the workload, and runs the workload as a process group of its own, as nsys does.
    nsys = write_fake(
        tmp_path / "kit" / "target-linux-x64" / "nsys",
        'case "$1" in\n'
        "  --version) echo 'NVIDIA Nsight Systems version 2023.4.4.54-234433681190v0' ;;\n"
        "  profile) trap '' INT\n"
        # (the ignored SIGINT is inherited: the workload restores Python's own handler)
        f'    setsid {sys.executable} -c "import signal, time; '
        "signal.signal(signal.SIGINT, signal.default_int_handler); "
        "print('started', flush=True); time.sleep(120)\"\n"
        "    exit $? ;;\n"
        "esac\n",
    )
    script = tmp_path / "train.py"
    script.write_text("print('never run by the stand-in')\n")
    cli = [sys.executable, "-c", "from nsysprobe.cli import main; main()"]
    proc = subprocess.Popen(
        [*cli, "run", "--nsys", str(nsys), "-o", str(tmp_path / "run"), str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    while proc.stdout.readline().strip() != "started":
        assert proc.poll() is None, "the run ended before the workload started"
    started = time.monotonic()
    proc.send_signal(signal.SIGINT)
    output = proc.communicate(timeout=60)[0]
    # nsys ignored the Ctrl-C; the workload got it after ESCALATE_S and ended the run
    assert time.monotonic() - started < profile.ESCALATE_S + 20, output
    assert "KeyboardInterrupt" in output
    assert (tmp_path / "run" / "nsys-command.txt").exists()
