"""workloads/numa_ddp.py for real on the CPU under gloo, two ranks through ``nsysprobe launch``:
the per-rank options that make one rank a straggler the way real ranks are (fewer loader
workers, pageable copies) reach that rank only, and bad values are refused in one line."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "workloads" / "numa_ddp.py"
TINY = ["--device", "cpu", "--image-size", "32", "--batch-size", "2", "--steps", "2"]
LAUNCH = [sys.executable, "-m", "nsysprobe", "launch", "--nproc-per-node", "2", "--numa", "none"]


def test_one_rank_gets_fewer_workers_and_pageable_copies():
    done = subprocess.run(
        [*LAUNCH, "--", sys.executable, str(SCRIPT), *TINY, "--warmup", "1", "--workers", "2"]
        + ["--rank-workers", "1=0", "--pageable-rank", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = dict(re.findall(r"rank (\d): [\d.]+ steps/s over 2 steps \(([^)\n]*)\)", done.stdout))
    # (pinned memory only on CUDA)
    assert lines == {
        "0": "numa-aware=False, workers=2, pageable=False, pinned=False, world=2",
        "1": "numa-aware=False, workers=0, pageable=True, pinned=False, world=2",
    }


def test_bad_rank_workers_are_refused_in_one_line():
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *TINY, "--rank-workers", "one=2"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith("give RANK=N, e.g. 1=2")
