"""Hostile and unlucky topology input: recorded command outputs (``--from``), fake ``/sys`` and
``/proc`` trees (``--root``), options and environment, a real process with a non-UTF-8 name.

Each case runs the real command in a child process with its address space capped at
``MEMORY_CAP_BYTES`` and a ``TIME_LIMIT_S`` deadline, and must end in a result (exit 0) or one
line ``nsysprobe: error: ...`` (exit 2) naming the file and how to record it again; the child's
peak resident memory (its ``VmHWM``) must stay under ``PEAK_RSS_LIMIT_KB``.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.numa.fakesys import FakeGpu, MachineSpec, build

from .hostile import run_cli

MEMORY_CAP_BYTES = 1 << 30
PEAK_RSS_LIMIT_KB = 200 * 1024
TIME_LIMIT_S = 30
TOPO = "nvidia-smi-topo-m.txt"
TOPO_HEADER = "\tGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
RECORD = {
    "lscpu.txt": "record it with `lscpu -p > lscpu.txt`",
    "numactl-hardware.txt": "record it with `numactl --hardware > numactl-hardware.txt`",
    TOPO: f"record it with `nvidia-smi topo -m > {TOPO}`",
}
ROOT_FIX = "point --root at a folder holding sys/ and proc/ of a Linux machine"
NUMACTL = "available: 1 nodes (0)\nnode 0 cpus: 0 1 2 3\nnode 0 size: 1024 MB\n"
TWO_NODES = MachineSpec(
    nodes={0: "0-1", 1: "2-3"},
    sockets={0: "0-1", 1: "2-3"},
    gpus=(FakeGpu("0000:1b:00.0", 0, "0-1"), FakeGpu("0000:9a:00.0", 1, "2-3")),
)


@dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    stderr: str
    seconds: float
    peak_rss_kb: int


def nsysprobe(*args: str, env: dict[str, str] | None = None) -> Outcome:
    """Run ``nsysprobe ARGS`` with its memory capped; fail the test if it outlives
    TIME_LIMIT_S."""
    done = run_cli(
        *args,
        env=env,
        timeout=TIME_LIMIT_S,
        limits={resource.RLIMIT_AS: (MEMORY_CAP_BYTES, MEMORY_CAP_BYTES)},
    )
    return Outcome(done.code, done.stdout, done.stderr, done.wall_s, int(done.peak_rss_mib * 1024))


def one_line_error(outcome: Outcome) -> str:
    """The single error line, after checking the exit code, the memory and the absence of a
    traceback."""
    assert outcome.peak_rss_kb < PEAK_RSS_LIMIT_KB, f"{outcome.peak_rss_kb} kB resident"
    assert outcome.code == 2, f"exit {outcome.code}\n{outcome.stdout[:500]}\n{outcome.stderr}"
    lines = outcome.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("nsysprobe: error: "), outcome.stderr
    return lines[0]


def result(outcome: Outcome) -> str:
    assert outcome.peak_rss_kb < PEAK_RSS_LIMIT_KB, f"{outcome.peak_rss_kb} kB resident"
    assert outcome.code == 0, f"exit {outcome.code}\n{outcome.stderr}"
    assert "Traceback" not in outcome.stderr, outcome.stderr
    return outcome.stdout


def topo_rows(rows: str) -> str:
    return TOPO_HEADER + rows


# name -> (files of the recorded folder, the file the error must name, what it must say)
RECORDINGS = {
    # The case from the issue: 2.3 GB for one cell.
    "cpu_affinity_0-2000000000": (
        {TOPO: topo_rows("GPU0\t X \t0-2000000000\t0\t\tN/A\n")},
        TOPO,
        "CPU 2000000000 is past the 8192 CPUs Linux supports (ids 0-8191)",
    ),
    "numa_affinity_0-2000000000": (
        {TOPO: topo_rows("GPU0\t X \t0-3\t0-2000000000\t\tN/A\n")},
        TOPO,
        "node 2000000000 is past the 1024 nodes Linux supports (ids 0-1023)",
    ),
    "lscpu_node_cpus_0-2000000000": (
        {"lscpu.txt": "CPU(s): 4\nOn-line CPU(s) list: 0-3\nNUMA node0 CPU(s): 0-2000000000\n"},
        "lscpu.txt",
        "CPU 2000000000 is past the 8192 CPUs Linux supports (ids 0-8191)",
    ),
    "lscpu_cpu_count_2e10": (
        {"lscpu.txt": "CPU(s): 20000000000\nOn-line CPU(s) list: 0-3\n"},
        "lscpu.txt",
        "a count of 20000000000 CPUs, more than the 8192 Linux supports",
    ),
    "numactl_cpu_id_1e20": (
        {"numactl-hardware.txt": "node 0 cpus: 0 99999999999999999999\nnode 0 size: 1 MB\n"},
        "numactl-hardware.txt",
        "CPU 99999999999999999999 is past the 8192 CPUs Linux supports (ids 0-8191)",
    ),
    "lscpu_p_letters_for_a_core": (
        {"lscpu.txt": "# CPU,Core,Socket,Node,,L1d,L1i,L2,L3\n0,x,0,0,,0,0,0,0\n"},
        "lscpu.txt",
        "core id 'x' is not a number",
    ),
    "superscript_two_as_gpu_numa_id": (
        {TOPO: topo_rows("GPU0\t X \t0-3\t0\t\t\u00b2\n"), "numactl-hardware.txt": NUMACTL},
        None,
        None,
    ),
    "5000_digit_threads_per_core": (
        {
            "lscpu.txt": "CPU(s): 4\nOn-line CPU(s) list: 0-3\nThread(s) per core: "
            + "9" * 5000
            + "\nCore(s) per socket: 2\nSocket(s): 1\nNUMA node0 CPU(s): 0-3\n"
        },
        None,
        None,
    ),
    "24_MB_lscpu": (
        {"lscpu.txt": "CPU(s):                4\n" * (1 << 20)},
        "lscpu.txt",
        "larger than 8 MiB, more than any real one holds",
    ),
    "million_gpu_rows": (
        {TOPO: topo_rows("".join(f"GPU{i}\t X \t0-3\t0\t\tN/A\n" for i in range(10**6)))},
        TOPO,
        "larger than 8 MiB, more than any real one holds",
    ),
    "5000_gpu_rows": (
        {TOPO: topo_rows("".join(f"GPU{i}\t X \t0-3\t0\t\tN/A\n" for i in range(5000)))},
        TOPO,
        "GPU64 is past the 64 GPUs nsysprobe reads",
    ),
}


@pytest.mark.parametrize("name", RECORDINGS)
def test_hostile_recording(name, tmp_path):
    files, named, message = RECORDINGS[name]
    for file, text in files.items():
        (tmp_path / file).write_text(text, encoding="utf-8")
    outcome = nsysprobe("numa", "plan", "--from", str(tmp_path))
    if named is None:  # a recording that can still be read: the one-line "no GPU" or a plan
        if outcome.code:
            one_line_error(outcome)
        else:
            result(outcome)
        return
    error = one_line_error(outcome)
    assert error == f"nsysprobe: error: {tmp_path / named}: {message}; {RECORD[named]}"


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "folder"])
def test_a_recording_that_is_not_a_regular_file(kind, tmp_path):
    """lscpu.txt as a FIFO (it would block open()), a link to /dev/zero (endless) or a folder:
    a one-line error naming it, not a hang, and not a topology silently built without it."""
    (tmp_path / "numactl-hardware.txt").write_text(NUMACTL)
    lscpu = tmp_path / "lscpu.txt"
    what = {"fifo": "a FIFO", "dev_zero": "a character device", "folder": "a folder"}[kind]
    if kind == "fifo":
        os.mkfifo(lscpu)
    elif kind == "dev_zero":
        lscpu.symlink_to("/dev/zero")
    else:
        lscpu.mkdir()
    error = one_line_error(nsysprobe("topo", "--from", str(tmp_path)))
    assert error == (
        f"nsysprobe: error: {lscpu}: is {what}, not a regular file; {RECORD['lscpu.txt']}"
    )


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _huge_list(path: Path) -> None:
    path.write_text("0-2000000000\n")


def _bytes(data: bytes):
    return lambda path: path.write_bytes(data)


def _folder(path: Path) -> None:
    path.unlink()
    path.mkdir()


# name -> (file below the root, how it is spoiled, what the error says after the path)
SYSFS = {
    "fifo_for_cpu_online": (
        "sys/devices/system/cpu/online",
        _fifo,
        "is a FIFO, not a regular file",
    ),
    "node_cpulist_0-2000000000": (
        "sys/devices/system/node/node1/cpulist",
        _huge_list,
        "CPU 2000000000 is past the 8192 CPUs Linux supports (ids 0-8191)",
    ),
    "non_utf8_gpu_numa_node": (
        "sys/bus/pci/devices/0000:9a:00.0/numa_node",
        _bytes(b"\xff\xfe\n"),
        "node id '\ufffd\ufffd' is not a number",
    ),
    "letters_for_gpu_numa_node": (
        "sys/bus/pci/devices/0000:9a:00.0/numa_node",
        _bytes(b"abc\n"),
        "node id 'abc' is not a number",
    ),
    "folder_for_node_cpulist": (
        "sys/devices/system/node/node0/cpulist",
        _folder,
        "is a folder, not a regular file",
    ),
}


@pytest.mark.parametrize("name", SYSFS)
def test_hostile_sysfs_tree(name, tmp_path):
    root = build(tmp_path, TWO_NODES)
    file, spoil, message = SYSFS[name]
    spoil(root / file)
    error = one_line_error(nsysprobe("topo", "--root", str(root)))
    assert error == f"nsysprobe: error: {root / file}: {message}; {ROOT_FIX}"


def test_a_cpu_folder_whose_name_is_not_a_number(tmp_path):
    """Without an ``online`` file every ``cpu[0-9]*`` folder counts: ``cpu1x`` is not a CPU."""
    root = build(tmp_path, TWO_NODES)
    (root / "sys/devices/system/cpu/online").unlink()
    (root / "sys/devices/system/cpu/cpu1x").mkdir()
    assert "  node 1 (socket 1): CPUs 2-3, 1024 MiB" in result(
        nsysprobe("topo", "--root", str(root))
    )


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        (
            ["launch", "--numa", "none", "--nproc-per-node", "1000000000", "--", "true"],
            {},
            "--nproc-per-node 1000000000 is more ranks than Linux has CPUs (8192 at most): "
            "start one rank per GPU",
        ),
        (
            ["numa", "exec", "--local-rank", "-1", "--", "true"],
            {},
            "local rank -1 is negative: ranks count from 0",
        ),
        (
            ["numa", "exec", "--", "true"],
            {"LOCAL_RANK": "\u00b2"},
            "LOCAL_RANK='\u00b2' is not a number: launch with torchrun or nsysprobe launch",
        ),
        (["numa", "exec", "--", "true"], {"CUDA_VISIBLE_DEVICES": "\u00b2"}, None),
    ],
    ids=[
        "nproc_1e9",
        "local_rank_-1",
        "LOCAL_RANK_superscript",
        "CUDA_VISIBLE_DEVICES_superscript",
    ],
)
def test_hostile_options_and_environment(args, env, expected, tmp_path):
    root = build(tmp_path, TWO_NODES)
    outcome = nsysprobe(*args[:-2], "--root", str(root), *args[-2:], env=env)
    if expected is None:
        result(outcome)
    else:
        assert one_line_error(outcome) == f"nsysprobe: error: {expected}"


def test_placement_beside_a_process_named_in_bytes_that_are_not_utf8():
    """A thread may name itself anything (prctl PR_SET_NAME); /proc shows the bytes as they
    are, and placement reads every process's stat to find children."""
    ready_r, ready_w = os.pipe()
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import ctypes, os, sys, time\n"
            "ctypes.CDLL(None).prctl(15, b'\\xff\\xfe-rank', 0, 0, 0)\n"
            "os.write(int(sys.argv[1]), b'x')\n"
            "time.sleep(60)\n",
            str(ready_w),
        ],
        pass_fds=(ready_w,),
        env={"LOCAL_RANK": "0"},
    )
    os.close(ready_w)
    try:
        assert os.read(ready_r, 1) == b"x"
        name = Path(f"/proc/{child.pid}/comm").read_bytes()
        assert name == b"\xff\xfe-rank\n"
        output = result(nsysprobe("numa", "placement", str(child.pid)))
    finally:
        os.close(ready_r)
        child.kill()
        child.wait()
    first = output.splitlines()[0]
    assert first.startswith(f"main {child.pid} ") and "-rank: CPUs " in first, first


def test_a_slurm_job_whose_cpuset_leaves_a_gpus_node_without_cpus():
    # nvidia-smi topo -m inside such a job prints an empty CPU Affinity cell for GPUs 4-7
    # (tests/numa/data/slurm_cpuset; the cases are in tests/numa/test_slurm_cpuset.py). Before:
    # "NUMA node 1 is not in ... (nodes: 0)", exit 2.
    data = Path(__file__).resolve().parents[1] / "numa" / "data" / "slurm_cpuset"
    shown = result(nsysprobe("topo", "--from", str(data)))
    assert "GPU 4: node 1" in shown
    assert "binding to node 1 is impossible in this job" in shown
    assert "0-15,56-71" in shown
    planned = result(nsysprobe("numa", "plan", "--from", str(data), "--mode", "node"))
    assert "rank 4 -> GPU 4 (node 1): unbound: this job may use no CPU of node 1" in planned
