"""``nsysprobe run --python``: the nsys options that sample Python, and the export option that
keeps the samples' frames, asked for only where nsys has it."""

from __future__ import annotations

import shlex
import sqlite3
import sys
from pathlib import Path

from click.testing import CliRunner

from nsysprobe.capture.export import PAYLOAD_FLAG, _export, payload_flags
from nsysprobe.capture.locate import NsysInstall
from nsysprobe.capture.profile import PYTHON_ARGS, ProfileOptions, nsys_command
from nsysprobe.cli import main
from nsysprobe.trace.reader import Trace

from .capture_helpers import write_fake

SAMPLING = ["--python-sampling=true", "--python-sampling-frequency=1000"]


def test_python_adds_the_sampling_options_before_the_workload(tmp_path):
    nsys = NsysInstall(Path("/opt/nsys/bin/nsys"), "2025.3.1.90")
    plain = nsys_command(nsys, tmp_path, ["python3", "t.py"], ProfileOptions(), "cuda", True)
    sampled = nsys_command(
        nsys,
        tmp_path,
        ["python3", "t.py"],
        ProfileOptions(python=True, nsys_args=("--cudabacktrace=all",)),
        "cuda",
        True,
    )
    assert list(PYTHON_ARGS) == SAMPLING
    assert sampled == [*plain[:-2], *SAMPLING, "--cudabacktrace=all", "python3", "t.py"]


def test_run_python_samples_the_workload_under_the_real_nsys(workload, nsys, tmp_path):
    """nsys 2023.4.4 (scripts/setup.sh): the capture has its Python samples, NVTX marks in the
    sampling domain, though that nsys exports none of their frames; the report says why no
    frames are shown."""
    folder = tmp_path / "run"
    result = CliRunner().invoke(
        main,
        [
            "run",
            "--python",
            "--nsys",
            str(nsys.path),
            "-o",
            str(folder),
            "--no-history",
            str(workload),
        ],
    )
    assert result.exit_code == 0, result.output
    command = shlex.split((folder / "nsys-command.txt").read_text())
    assert command[-4:] == [*SAMPLING, sys.executable, str(workload)]
    db = sqlite3.connect(folder / "report.sqlite")
    (domain,) = db.execute(
        "SELECT domainId FROM NVTX_EVENTS WHERE eventType = 75 AND text LIKE 'Python%'"
    ).fetchone()
    (marks,) = db.execute(
        "SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 34 AND domainId = ?", (domain,)
    ).fetchone()
    db.close()
    assert marks > 100  # 1 kHz over the workload's 150 ms of steps, and its start-up
    with Trace(folder / "report.sqlite") as trace:
        samples = trace.python_samples()
    assert len(samples) == marks and samples.readable == 0
    assert "no step account to attribute the Python samples to" in result.output


def test_the_export_asks_for_the_frames_only_where_nsys_has_the_option(nsys, tmp_path):
    assert payload_flags(str(nsys.path)) == ()  # 2023.4.4: no --include-json
    log = tmp_path / "args.txt"
    fake = write_fake(
        tmp_path / "new" / "nsys",
        'if [ "$1 $2" = "export --help" ]; then\n'
        "  echo '  --include-json [true|false]'; exit 0\nfi\n"
        f'echo "$@" > "{log}"\n'
        'while [ "$1" != --output ]; do shift; done\n'
        'printf "SQLite format 3\\000" > "$2"\n',
    )
    assert payload_flags(str(fake)) == (PAYLOAD_FLAG,) == ("--include-json=true",)
    report = tmp_path / "r.nsys-rep"
    report.write_bytes(b"report")
    out = tmp_path / "r.sqlite"
    _export(report, out, NsysInstall(fake, "2025.3.1.90"), out)
    assert log.read_text().split()[:6] == [
        "export",
        "--type",
        "sqlite",
        "--force-overwrite",
        "true",
        "--include-json=true",
    ]
