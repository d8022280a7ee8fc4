"""A Slurm job whose cpuset holds CPUs of one NUMA node while some of its GPUs hang off another.

``data/slurm_cpuset`` is shaped after the ``nvidia-smi topo -m`` printed inside
``srun --gpus=A100_80GB:8 -c32`` on a two-socket, 112-CPU machine (rapidsai/dask-cuda#1381):
the job got CPUs 0-15,56-71, all on node 0, so GPUs 4-7 (node 1) have an empty CPU Affinity
cell while their NUMA Affinity still says 1. It is stored tab-separated with the header's
underline escape, as nvidia-smi writes it to a file (compare sample_traces/h200x2_topology), and
``numactl --hardware`` in that job lists node 0 alone, with the allowed CPUs (Slurm's cpuset
holds node 0's memory only). The live case is the same job on a fake /sys tree.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from nsysprobe.cli import main
from nsysprobe.numa import binding_for_rank, discover, load_recorded, plan
from nsysprobe.numa.command_outputs import NUMACTL_FILE, TOPO_FILE, parse_nvidia_smi_topo
from tests.numa.fakesys import FakeGpu, MachineSpec, build
from tests.numa.test_sysfs_topology import cpus

DATA = Path(__file__).parent / "data" / "slurm_cpuset"
NSYSPROBE = [sys.executable, "-c", "from nsysprobe.cli import main; main()"]
JOB_CPUS = cpus("0-15,56-71")
IMPOSSIBLE = (
    "this job may use no CPU of node 1 (it may use CPUs 0-15,56-71), so binding to node 1 is "
    "impossible in this job; ask Slurm for CPUs on that node (--gres-flags=enforce-binding)"
)

# The same job on the live reader: 2 sockets x 4 cores x 2 threads, a cpuset of node 0's CPUs.
SLURM_JOB = MachineSpec(
    nodes={0: "0-3,8-11", 1: "4-7,12-15"},
    sockets={0: "0-3,8-11", 1: "4-7,12-15"},
    smt_offset=8,
    gpus=(FakeGpu("0000:1b:00.0", 0, "0-3,8-11"), FakeGpu("0000:9a:00.0", 1, "4-7,12-15")),
    allowed="0-3,8-11",
)
LIVE_IMPOSSIBLE = (
    "this job may use no CPU of node 1 (it may use CPUs 0-3,8-11), so binding to node 1 is "
    "impossible in this job; ask Slurm for CPUs on that node (--gres-flags=enforce-binding)"
)


def test_recorded_job_reports_the_gpus_node_and_the_cpus_the_job_may_use():
    topology = load_recorded(DATA)
    assert [gpu.numa_node for gpu in topology.gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert topology.allowed_cpus == JOB_CPUS
    assert topology.node(1).cpus_unlisted and not topology.node(1).memory_only
    assert not topology.bindable(1) and topology.bindable(0)
    assert f"GPUs 4-7 on node 1: {IMPOSSIBLE}" in topology.notes


def test_topo_from_the_job_recording():
    result = CliRunner().invoke(main, ["topo", "--from", str(DATA)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "  node 0 (socket 0): CPUs 0-15,56-71, 515703 MiB" in lines
    assert "  node 1: CPUs not in the recording (outside its cpuset)" in lines
    assert "  GPU 3: node 0, CPUs 0-15,56-71" in lines
    assert (
        "  GPU 4: node 1, no CPU of it in this job's cpuset: binding to node 1 is impossible in "
        "this job"
    ) in lines
    assert "  this process may use CPUs 0-15,56-71" in lines
    data = json.loads(
        CliRunner().invoke(main, ["topo", "--from", str(DATA), "--format", "json"]).output
    )
    assert data["numa_nodes"]["1"]["outside_cpuset"] is True
    assert [g["node_bindable"] for g in data["gpus"]] == [True] * 4 + [False] * 4


def test_numactl_listing_the_node_with_no_cpus(tmp_path):
    """numactl may keep node 1 (its memory in the job) and list no CPUs for it: still not a
    memory-only node, since a GPU's NUMA Affinity names it."""
    (tmp_path / TOPO_FILE).write_bytes((DATA / TOPO_FILE).read_bytes())
    (tmp_path / NUMACTL_FILE).write_text(
        "available: 2 nodes (0-1)\n"
        f"node 0 cpus: {' '.join(map(str, sorted(JOB_CPUS)))}\n"
        "node 0 size: 515703 MB\nnode 0 free: 498121 MB\n"
        "node 1 cpus:\nnode 1 size: 516052 MB\nnode 1 free: 509112 MB\n"
        "node distances:\nnode   0   1 \n  0:  10  20 \n  1:  20  10 \n"
    )
    output = CliRunner().invoke(main, ["topo", "--from", str(tmp_path)]).output
    assert "memory only" not in output
    assert "  node 1: CPUs not in the recording (outside its cpuset), 516052 MiB" in output
    topology = load_recorded(tmp_path)
    assert topology.node(1).cpus_unlisted and not topology.node(1).memory_only
    assert topology.node(1).memory_kb == 516052 * 1024


def test_empty_cpu_affinity_as_copied_from_a_terminal():
    """Pasted from a terminal (as in the issue), tabs are spaces and the empty cell is gone."""
    raw = (DATA / TOPO_FILE).read_text()
    pasted = re.sub(r"\x1b\[[0-9;]*m", "", raw).expandtabs(8)
    assert "\t" not in pasted
    rows = parse_nvidia_smi_topo(pasted)
    assert rows == parse_nvidia_smi_topo(raw)
    assert [row.cpu_affinity for row in rows] == [JOB_CPUS] * 4 + [frozenset()] * 4
    assert [row.numa_affinity for row in rows] == [{0}] * 4 + [{1}] * 4


def test_plan_leaves_the_ranks_on_node_1_unbound_and_says_why():
    topology = load_recorded(DATA)
    ranks = plan(topology, "node").ranks
    assert [rank.cpus for rank in ranks] == [JOB_CPUS] * 4 + [frozenset()] * 4
    assert all(rank.note == IMPOSSIBLE for rank in ranks[4:])
    result = CliRunner().invoke(main, ["numa", "plan", "--mode", "exclusive", "--from", str(DATA)])
    assert result.exit_code == 0, result.output
    assert f"  rank 5 -> GPU 5 (node 1): unbound: {IMPOSSIBLE}" in result.output.splitlines()
    assert "  rank 1 -> GPU 1 (node 0): CPUs 8-15, memory node 0" in result.output.splitlines()
    binding = binding_for_rank(topology, "socket", 6, env={})
    assert (binding.cpus, binding.memory) == (frozenset(), "none")
    assert binding.describe() == f"unbound: {IMPOSSIBLE}"


def test_live_job_whose_cpuset_leaves_a_gpus_node_without_cpus(tmp_path):
    output = CliRunner().invoke(main, ["topo", "--root", str(build(tmp_path, SLURM_JOB))]).output
    assert (
        "  node 1 (socket 1): CPUs 4-7,12-15, 1024 MiB, none in this job's cpuset"
        in output.splitlines()
    )
    assert (
        "  GPU 1 0000:9a:00.0: node 1, no CPU of it in this job's cpuset: binding to node 1 is "
        "impossible in this job"
    ) in output.splitlines()
    topology = discover(tmp_path)
    assert topology.gpus[1].numa_node == 1 and not topology.bindable(1)
    assert topology.allowed_cpus == cpus("0-3,8-11")
    assert f"GPU 1 on node 1: {LIVE_IMPOSSIBLE}" in topology.notes
    for mode in ("node", "socket", "exclusive", "core-complex"):
        ranks = plan(topology, mode).ranks
        assert ranks[1].cpus == frozenset() and ranks[1].note == LIVE_IMPOSSIBLE, mode
        assert ranks[0].cpus and ranks[0].cpus <= cpus("0-3,8-11"), mode


def test_exec_runs_the_command_unbound(tmp_path):
    """numa exec for the rank on node 1 execs its command with the job's own CPUs."""
    root = build(tmp_path, SLURM_JOB)
    done = subprocess.run(
        [*NSYSPROBE, "numa", "exec", "--root", str(root), "--local-rank", "1", "--"]
        + ["grep", "Cpus_allowed_list", "/proc/self/status"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == f"nsysprobe: rank 1: unbound: {LIVE_IMPOSSIBLE}\n"
    own = [line for line in open("/proc/self/status") if line.startswith("Cpus_allowed_list")]
    assert done.stdout.split() == own[0].split()


def test_launch_starts_the_rank_on_node_1_unbound(tmp_path):
    root = build(tmp_path / "root", SLURM_JOB)
    script = tmp_path / "rank.py"
    script.write_text(  # one write per rank: the two ranks share the pipe
        "import os\n"
        "same = sorted(os.sched_getaffinity(0)) == " + repr(sorted(os.sched_getaffinity(0))) + "\n"
        "os.write(1, f\"{os.environ['LOCAL_RANK']} {same}\\n\".encode())\n"
    )
    done = subprocess.run(
        [*NSYSPROBE, "launch", "--nproc-per-node", "2", "--root", str(root), "--"]
        + [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "1 True" in done.stdout.splitlines()
    assert f"nsysprobe: rank 1: unbound: {LIVE_IMPOSSIBLE}" in done.stderr.splitlines()
