"""The CLI: topo/plan output, exact errors, and launch/exec run for real with 2 ranks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from nsysprobe.cli import main
from tests.numa.fakesys import FakeGpu, MachineSpec, build

DATA = Path(__file__).parent / "data"
NSYSPROBE = [sys.executable, "-c", "from nsysprobe.cli import main; main()"]
# Two GPUs sharing node 0's two CPUs: mode exclusive gives rank 0 CPU 0 and rank 1 CPU 1.
TWO_GPUS_TWO_CPUS = MachineSpec(
    nodes={0: "0-1"},
    sockets={0: "0-1"},
    gpus=(FakeGpu("0000:01:00.0", 0), FakeGpu("0000:02:00.0", 0)),
)
# Rank 1 fails only once rank 0 has written its line: the launcher stops the other ranks when
# one fails, and on a loaded machine rank 0 was stopped before it wrote anything.
RANK_SCRIPT = """
import os, sys, time
allowed = [l.split()[1] for l in open("/proc/self/status") if l.startswith("Cpus_allowed_list")]
keys = ("LOCAL_RANK", "RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
sys.stdout.write(" ".join(os.environ[k] for k in keys) + " " + allowed[0] + "\\n")
sys.stdout.flush()
written = os.path.join(os.path.dirname(os.path.abspath(sys.argv[0])), "rank0-written")
if os.environ["RANK"] == "0":
    open(written, "w").close()
deadline = time.monotonic() + 30
while not os.path.exists(written) and time.monotonic() < deadline:
    time.sleep(0.01)
sys.exit(int(sys.argv[1]) if os.environ["RANK"] == "1" else 0)
"""


def test_topo_json_from_recording():
    result = CliRunner().invoke(main, ["topo", "--from", str(DATA / "xeon_de"), "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["numa_nodes"]["1"]["cpus"] == list(range(20, 40)) + list(range(60, 80))
    assert data["numa_nodes"]["0"]["memory_only"] is False
    assert [(g["index"], g["numa_node"]) for g in data["gpus"]] == [(0, 0), (1, 0), (2, 1), (3, 1)]
    assert data["gpus"][2]["cpus"] == data["numa_nodes"]["1"]["cpus"]


def test_topo_text_on_fake_root(tmp_path):
    result = CliRunner().invoke(main, ["topo", "--root", str(build(tmp_path, TWO_GPUS_TWO_CPUS))])
    assert result.exit_code == 0
    assert "  GPU 1 0000:02:00.0: node 0, CPUs 0-1" in result.output
    assert "one NUMA node with CPUs: NUMA binding cannot help on this machine" in result.output


def test_plan_text_and_error():
    runner = CliRunner()
    result = runner.invoke(
        main, ["numa", "plan", "--mode", "exclusive", "--from", str(DATA / "dgx_a100")]
    )
    assert result.exit_code == 0
    assert "  rank 1 -> GPU 1 (node 3): CPUs 56-63,184-191, memory node 3" in result.output
    result = runner.invoke(
        main, ["numa", "plan", "--nproc-per-node", "9", "--from", str(DATA / "dgx_a100")]
    )
    assert result.exit_code == 2
    assert result.output == (
        f"nsysprobe: error: 9 processes but only 8 GPUs in {DATA / 'dgx_a100'}: "
        "start at most one process per GPU\n"
    )


def test_launch_two_ranks_bound_before_start(tmp_path):
    root = build(tmp_path / "root", TWO_GPUS_TWO_CPUS)
    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT)
    done = subprocess.run(
        [
            *NSYSPROBE,
            "launch",
            "--nproc-per-node",
            "2",
            "--numa",
            "exclusive",
            "--root",
            str(root),
            "--master-port",
            "29611",
            "--",
            sys.executable,
            str(script),
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 3, done.stderr
    assert sorted(done.stdout.splitlines()) == [
        "0 0 2 2 127.0.0.1 29611 0",
        "1 1 2 2 127.0.0.1 29611 1",
    ]
    # one NUMA node: the CPUs are split between the ranks, no memory policy is set
    assert "nsysprobe: rank 1: CPUs 1 (node 0), memory none" in done.stderr


def test_a_failing_rank_sets_the_status_not_the_ranks_stopped_for_it(tmp_path):
    """Rank 0 fails with 3 at once; rank 1 is still running and is stopped (SIGTERM, 143):
    the launcher reports the failure. (A loaded CI machine made this race visible.)"""
    script = tmp_path / "fail.py"
    script.write_text(
        "import os, sys, time\nsys.exit(3) if os.environ['RANK'] == '0' else time.sleep(60)\n"
    )
    done = subprocess.run(
        [*NSYSPROBE, "launch", "--nproc-per-node", "2", "--numa", "none", "--"]
        + [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 3, done.stderr


def test_launch_forwards_signals(tmp_path):
    script = tmp_path / "wait.py"
    script.write_text(
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: (print('got TERM', flush=True), sys.exit(7)))\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    launcher = subprocess.Popen(
        [
            *NSYSPROBE,
            "launch",
            "--nproc-per-node",
            "2",
            "--numa",
            "none",
            "--",
            sys.executable,
            str(script),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    seen = ""
    while seen.count("ready") < 2:  # the two ranks' lines may interleave
        seen += launcher.stdout.readline()
    launcher.send_signal(signal.SIGTERM)
    out, _ = launcher.communicate(timeout=30)
    assert out.count("got TERM") == 2
    assert launcher.returncode == 7


def test_exec_binds_local_rank_then_execs(tmp_path):
    root = build(tmp_path, TWO_GPUS_TWO_CPUS)
    env = dict(os.environ, LOCAL_RANK="1")
    done = subprocess.run(
        [
            *NSYSPROBE,
            "numa",
            "exec",
            "--mode",
            "exclusive",
            "--root",
            str(root),
            "--",
            "grep",
            "Cpus_allowed_list",
            "/proc/self/status",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["Cpus_allowed_list:", "1"]


def test_placement_of_a_launched_tree(tmp_path):
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)"],
        env=dict(os.environ, LOCAL_RANK="0"),
    )
    try:
        time.sleep(0.3)
        result = CliRunner().invoke(main, ["numa", "placement", str(child.pid), "--format", "json"])
    finally:
        child.kill()
        child.wait()
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    main_entry = data["entries"][0]
    assert main_entry["pid"] == child.pid and main_entry["tid"] is None
    assert main_entry["cpus"] == "0-1" and main_entry["cpu_nodes"] == [0]
    assert main_entry["resident_kb_by_node"]["0"] > 0
    assert main_entry["verdict"] == "local"
    assert "binding cannot help" in main_entry["reason"]


def test_placement_of_missing_pid():
    result = CliRunner().invoke(main, ["numa", "placement", "999999999"])
    assert result.exit_code == 2
    assert result.output == (
        "nsysprobe: error: no process 999999999 in /proc: give the pid of a running process\n"
    )


@pytest.mark.parametrize("mode", ["node", "socket"])
def test_launch_rejects_more_ranks_than_gpus(tmp_path, mode):
    root = build(tmp_path, TWO_GPUS_TWO_CPUS)
    result = CliRunner().invoke(
        main, ["launch", "--nproc-per-node", "3", "--numa", mode, "--root", str(root), "--", "true"]
    )
    assert result.exit_code == 2
    assert "3 processes but only 2 GPUs" in result.output
