"""Helpers shared by the capture tests."""

from __future__ import annotations

import os
import signal
import textwrap
from pathlib import Path

# Three 50 ms NVTX steps, each with a sleep (clock_nanosleep) and an anonymous mmap that is
# unmapped through the exported munmap symbol, so the OS-runtime trace sees both.
WORKLOAD = textwrap.dedent(
    """
    import mmap
    import sys
    import time

    import nvtx

    for step in range(3):
        with nvtx.annotate(f"step {step}", color="blue"):
            time.sleep(0.05)
            buffer = mmap.mmap(-1, 1 << 20)
            buffer.close()
    print("workload done")
    sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    """
)
STEP_SLEEP_NS = 50_000_000
REPO = Path(__file__).resolve().parents[2]


def install_hint(home: Path | None = None) -> str:
    """The end of every message that found no nsys; ``home``: nsysprobe's own install folder
    (default: this checkout's, or ``$NSYSPROBE_NSYS_HOME``)."""
    home = home or Path(os.environ.get("NSYSPROBE_NSYS_HOME") or REPO / ".nsys")
    return (
        f"install one with `nsysprobe doctor --install` (Nsight Systems from Debian's packages "
        f"into {home}, no root needed) or from NVIDIA "
        "(https://developer.nvidia.com/nsight-systems), or pass --nsys PATH"
    )


def write_fake(path: Path, body: str) -> Path:
    """A stand-in executable, for failure modes a real nsys cannot be made to show."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    path.chmod(0o755)
    return path


def default_sigint() -> None:
    """``preexec_fn`` for a child the test will Ctrl-C: a shell that started the test run in
    the background leaves SIGINT ignored, and Python then never raises KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
