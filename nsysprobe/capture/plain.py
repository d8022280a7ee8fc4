"""Run a workload without nsys, its output into a log file: the unprofiled side of a comparison."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

from nsysprobe.capture.profile import workload_command


def run_plain(workload: Sequence[str], log: Path) -> int:
    """Run ``workload`` (a ``.py`` script runs under this interpreter) with its stdout and stderr
    in ``log``; return its exit code."""
    command = workload_command(workload)
    log.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with log.open("wb") as out:
        return subprocess.run(
            command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
        ).returncode
