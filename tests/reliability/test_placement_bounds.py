"""Bounded work in ``nsysprobe numa placement --root DIR`` and the topology it reads (issue 33,
root cause 3).

A saved ``/proc`` whose process is its own ancestor, a ``numa_maps`` that never ends (64 GB
sparse, a FIFO, ``/dev/zero``, a link out of the root), an environment or CPU lists no kernel
writes, and ``/sys`` or recorded topologies whose node lists overlap. Each CLI case runs the
real command in a child process with its address space capped at ``MEMORY_CAP_BYTES`` and a
``TIME_LIMIT_S`` deadline: it ends in a report (exit 0) whose notes say what was cut or left
out, or in one line ``nsysprobe: error: ...``, with its peak resident memory (``VmHWM``) under
``PEAK_RSS_LIMIT_KB``. The bounds themselves are checked in-process, set small.
"""

from __future__ import annotations

import importlib
import os
import resource
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nsysprobe.numa import cpulist, discover, render
from nsysprobe.numa.placement import placement
from tests.numa.fakesys import FakeGpu, MachineSpec, build

from .hostile import Done, run_cli

# The module, not the function ``nsysprobe.numa`` exports under the same name.
placement_module = importlib.import_module("nsysprobe.numa.placement")
MEMORY_CAP_BYTES = 1 << 30
PEAK_RSS_LIMIT_KB = 200 * 1024
TIME_LIMIT_S = 20
BIG = 64 << 30
ROOT_FIX = "point --root at a folder holding sys/ and proc/ of a Linux machine"
TWO_NODES = MachineSpec(
    nodes={0: "0-1", 1: "2-3"},
    sockets={0: "0-1", 1: "2-3"},
    gpus=(FakeGpu("0000:1b:00.0", 0, "0-1"), FakeGpu("0000:9a:00.0", 1, "2-3")),
)
# What the fake rank 100 prints: GPU 0 is on node 0, where it runs and keeps its pages.
MAIN = "main 100 python: CPUs 0-1 (nodes 0); policy default, pages N0=0MiB -> local: "
MAIN_LOCAL = f"{MAIN}runs on GPU 0's node 0, 100% of its pages on node 0"
# "0-8191,0-8191,...": every id 9362 times over, within the 64 kB a CPU list may have.
OVERLAPPING = ",".join(["0-8191"] * (cpulist.MAX_LIST_CHARS // 7))


def status_text(cpus: str = "0-1", name: str = "python") -> str:
    return f"Name:\t{name}\nCpus_allowed_list:\t{cpus}\nMems_allowed_list:\t0-1\n"


def fake_process(
    root: Path,
    pid: int,
    ppid: int,
    *,
    numa_maps: str = "7f0000 default anon=10 N0=10 kernelpagesize_kB=4\n",
    environ: str = "LOCAL_RANK=0\0PATH=/bin\0",
    threads: int = 0,
) -> Path:
    """``/proc/PID`` of a process on node 0's CPUs, its parent ``ppid``, with ``threads``
    threads beside its main one (tids 10000 + i)."""
    base = root / "proc" / str(pid)
    for tid in (pid, *range(10000, 10000 + threads)):
        (base / "task" / str(tid)).mkdir(parents=True)
        (base / "task" / str(tid) / "status").write_text(status_text())
    (base / "status").write_text(status_text())
    (base / "stat").write_text(f"{pid} (python) S {ppid} 1 1 0")
    (base / "numa_maps").write_text(numa_maps)
    (base / "environ").write_text(environ)
    return base


def tree(tmp_path: Path) -> Path:
    return build(tmp_path / "tree", TWO_NODES)


def nsysprobe(*args: str) -> Done:
    """Run ``nsysprobe ARGS`` with its memory capped; fail if it outlives TIME_LIMIT_S."""
    return run_cli(
        *args,
        timeout=TIME_LIMIT_S,
        limits={resource.RLIMIT_AS: (MEMORY_CAP_BYTES, MEMORY_CAP_BYTES)},
    )


def report(root: Path, pid: int = 100) -> list[str]:
    """The lines ``numa placement PID --root ROOT`` prints, after checking it ended well."""
    done = nsysprobe("numa", "placement", str(pid), "--root", str(root))
    assert done.peak_rss_mib * 1024 < PEAK_RSS_LIMIT_KB, f"{done.peak_rss_mib:.0f} MiB resident"
    assert done.code == 0, f"exit {done.code}\n{done.stdout[:500]}\n{done.stderr[-2000:]}"
    assert "Traceback" not in done.stderr, done.stderr
    return done.stdout.splitlines()


def one_line_error(*args: str) -> str:
    done = nsysprobe(*args)
    assert done.peak_rss_mib * 1024 < PEAK_RSS_LIMIT_KB, f"{done.peak_rss_mib:.0f} MiB resident"
    assert done.code == 2, f"exit {done.code}\n{done.stdout[:500]}\n{done.stderr[-2000:]}"
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("nsysprobe: error: "), done.stderr
    return lines[0]


def notes(lines: list[str]) -> list[str]:
    return [line.removeprefix("  note: ") for line in lines if line.startswith("  note: ")]


# --- loops in the parent links: before, the walk never ended and its memory grew -----------

# name -> the parent of each process; 100 is the one asked about.
LOOPS = {
    "own_parent": {100: 100},
    "each_others_parent": {100: 101, 101: 100},
    "three_in_a_ring": {100: 102, 101: 100, 102: 101},
}


@pytest.mark.parametrize("name", LOOPS)
def test_a_process_that_is_its_own_ancestor_is_reported_once(name, tmp_path):
    root = tree(tmp_path)
    parents = LOOPS[name]
    for pid, ppid in parents.items():
        fake_process(root, pid, ppid)
    lines = report(root)
    assert lines[0] == MAIN_LOCAL
    workers = [line.split(":")[0] for line in lines[1:] if not line.startswith("  note: ")]
    assert workers == [f"worker {pid} python" for pid in sorted(parents) if pid != 100]
    assert notes(lines) == [
        f"{root}/proc/100/stat: names {parents[100]} as its parent, but 100 is already in the "
        "tree above it, a loop no real /proc holds; read once"
    ]


# --- numa_maps that never ends: before, a 64 GB file was read to its end --------------------


def _sparse(path: Path, root: Path) -> str:
    os.truncate(path, BIG)  # its first line stays, then 64 GB of NUL bytes
    return (
        f"{path}: read up to its first 1025 lines (64 MiB), the bound of 262144 lines "
        "and 64 MiB for one numa_maps; its pages are counted from those"
    )


def _fifo(path: Path, root: Path) -> str:
    path.unlink()
    os.mkfifo(path)
    return f"{path}: is a FIFO, not a regular file; skipped"


def _fifo_linked_inside(path: Path, root: Path) -> str:
    os.mkfifo(root / "fifo")
    path.unlink()
    path.symlink_to("../../fifo")
    return f"{path}: is a FIFO, not a regular file; skipped"


def _dev_zero(path: Path, root: Path) -> str:
    path.unlink()
    path.symlink_to("/dev/zero")
    return f"{path}: links lead out of {root} (to /dev/zero), not read; skipped"


def _linked_out_to_64_gb(path: Path, root: Path) -> str:
    outside = root.parent / "elsewhere.numa_maps"
    outside.write_text("7f0000 default anon=10 N1=10 kernelpagesize_kB=4\n")
    os.truncate(outside, BIG)
    path.unlink()
    path.symlink_to(outside)
    return f"{path}: links lead out of {root} (to {outside}), not read; skipped"


ENDLESS = {
    "sparse_64_GB": _sparse,
    "fifo": _fifo,
    "fifo_linked_inside_the_root": _fifo_linked_inside,
    "dev_zero": _dev_zero,
    "linked_out_of_the_root_to_64_GB": _linked_out_to_64_gb,
}


@pytest.mark.parametrize("name", ENDLESS)
def test_a_numa_maps_that_never_ends(name, tmp_path):
    root = tree(tmp_path)
    path = fake_process(root, 100, 1) / "numa_maps"
    note = ENDLESS[name](path, root)
    lines = report(root)
    if name == "sparse_64_GB":
        assert lines[0] == MAIN_LOCAL
    else:  # no pages known: judged on its CPUs alone
        assert lines[0] == (
            "main 100 python: CPUs 0-1 (nodes 0); policy None, pages - -> local: runs on GPU 0's "
            "node 0"
        )
    assert notes(lines) == [note]


# --- the other files placement reads: never read when they could block or never end ---------


def _spoil(kind: str, path: Path, root: Path) -> str:
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
        return f"{path}: is a FIFO, not a regular file; skipped"
    path.symlink_to("/dev/zero")
    return f"{path}: links lead out of {root} (to /dev/zero), not read; skipped"


@pytest.mark.parametrize("kind", ["fifo", "dev_zero"])
@pytest.mark.parametrize("file", ["stat", "status", "environ", "task/10000/status"])
def test_a_proc_file_that_is_not_a_regular_one(file, kind, tmp_path):
    """A worker 101 of rank 100: its stat (how it is found), status (its CPUs), environ (its
    GPU) or its thread's status, spoiled: that much is left out and said so."""
    root = tree(tmp_path)
    fake_process(root, 100, 1)
    fake_process(root, 101, 100, threads=1)
    note = _spoil(kind, root / "proc/101" / file, root)
    lines = report(root)
    assert lines[0] == MAIN_LOCAL
    worker = MAIN_LOCAL.replace("main 100", "worker 101")
    thread = "  thread 10000 python: CPUs 0-1 (nodes 0) -> local: runs on GPU 0's node 0"
    worker = {
        "stat": [],
        "status": [],
        "environ": [
            "worker 101 python: CPUs 0-1 (nodes 0); policy default, pages N0=0MiB -> unknown: "
            "no GPU known for it: no LOCAL_RANK in its environment; pass --gpu",
            thread.replace("-> local: runs on GPU 0's node 0", "-> unknown: ")
            + "no GPU known for it: no LOCAL_RANK in its environment; pass --gpu",
        ],
        "task/10000/status": [worker],
    }[file]
    assert lines[1:-1] == worker
    assert notes(lines) == [note]


# --- environments and CPU lists no kernel writes ---------------------------------------------


def test_an_environment_with_a_cuda_visible_devices_longer_than_linux_allows(tmp_path):
    """14 MB of ``10,10,...``: before, split into 4.7 million strings (hundreds of MB)."""
    root = tree(tmp_path)
    visible = "10," * ((14 << 20) // 3)
    base = fake_process(root, 100, 1, environ=f"LOCAL_RANK=0\0CUDA_VISIBLE_DEVICES={visible}\0")
    lines = report(root)
    assert lines[0] == (
        f"{MAIN}".replace("-> local: ", "-> unknown: ")
        + "no GPU known for it: no LOCAL_RANK in its environment; pass --gpu"
    )
    assert notes(lines) == [
        f"{base}/environ: CUDA_VISIBLE_DEVICES longer than 131072 characters, longer than "
        "Linux allows; its GPU is left unknown"
    ]


def test_threads_sharing_a_cpu_list_of_overlapping_ranges(tmp_path):
    """300 threads whose 64 kB CPU list names every CPU 5000 times: before, 1.6 s each."""
    root = tree(tmp_path)
    base = fake_process(root, 100, 1, threads=300)
    shared = root / "status_of_every_thread"
    shared.write_text(status_text(OVERLAPPING, "pt_worker"))
    for tid in range(10000, 10300):
        status = base / "task" / str(tid) / "status"
        status.unlink()
        os.link(shared, status)
    lines = report(root)
    assert len(lines) == 301 and not notes(lines)
    assert lines[1] == (
        "  thread 10000 pt_worker: CPUs 0-8191 (nodes 0-1) -> split: CPUs span nodes 0-1, "
        "GPU 0 is on node 0"
    )


def test_threads_with_distinct_cpu_lists_of_8192_cpus_stop_at_the_ids_bound(tmp_path):
    """2000 threads, each allowed a different set of about 8192 CPUs: before, 2000 sets of
    half a MB each (1 GB); the report stops at REPORT_MAX_IDS ids held."""
    root = tree(tmp_path)
    base = fake_process(root, 100, 1, threads=2000)
    for i, tid in enumerate(range(10000, 12000)):
        (base / "task" / str(tid) / "status").write_text(status_text(f"0-{8191 - i}"))
    lines = report(root)
    assert notes(lines) == [
        "stopped when the entries' CPU and node lists passed 2097152 ids and characters, the "
        "bound; give the pid of one rank to see the rest"
    ]
    assert 200 < len(lines) - 1 < 300


# --- topologies whose node lists overlap, or folders no real /sys holds ---------------------


def test_a_sysfs_file_linked_out_of_the_root(tmp_path):
    """A saved tree whose node1/cpulist is an absolute link: it would read another machine's."""
    root = tree(tmp_path)
    cpulist_file = root / "sys/devices/system/node/node1/cpulist"
    outside = tmp_path / "cpulist"
    outside.write_text("2-3\n")
    cpulist_file.unlink()
    cpulist_file.symlink_to(outside)
    assert one_line_error("topo", "--root", str(root)) == (
        f"nsysprobe: error: {cpulist_file}: links lead out of {root} (to {outside}), not read; "
        f"{ROOT_FIX}"
    )


def test_sysfs_nodes_that_each_list_every_cpu(tmp_path):
    """1024 nodes, each listing CPUs 0-8191: before, 1024 sets of 8192 ids (about 750 MB)."""
    root = tree(tmp_path)
    (root / "sys/devices/system/cpu/online").write_text("0-8191\n")
    for node in range(1024):
        folder = root / f"sys/devices/system/node/node{node}"
        folder.mkdir(exist_ok=True)
        (folder / "cpulist").write_text("0-8191\n")
    assert one_line_error("topo", "--root", str(root)) == (
        f"nsysprobe: error: {root}/sys/devices/system/node/node1/cpulist: CPU 0 is listed on "
        f"node 0 and again on node 1, but a CPU is on one node only; {ROOT_FIX}"
    )


def test_a_cpu_with_more_cache_folders_than_any_real_one(tmp_path):
    root = tree(tmp_path)
    cache = root / "sys/devices/system/cpu/cpu0/cache"
    for index in range(2, 65):
        (cache / f"index{index}").mkdir()
    assert one_line_error("topo", "--root", str(root)) == (
        f"nsysprobe: error: {cache}: more than 64 entries, more than any real one holds; {ROOT_FIX}"
    )


LSCPU_FIX = "record it with `lscpu -p > lscpu.txt`"
NUMACTL_FIX = "record it with `numactl --hardware > numactl-hardware.txt`"
# name -> (file, text, the error after its path)
RECORDINGS = {
    "lscpu_1024_nodes_of_every_cpu": (
        "lscpu.txt",
        "CPU(s): 8192\nOn-line CPU(s) list: 0-8191\n"
        + "".join(f"NUMA node{n} CPU(s): 0-8191\n" for n in range(1024)),
        f"CPU 0 is listed on node 0 and again on node 1, but a CPU is on one node only; "
        f"{LSCPU_FIX}",
    ),
    "lscpu_one_node_65000_times": (
        "lscpu.txt",
        "CPU(s): 8192\nOn-line CPU(s) list: 0-8191\n" + "NUMA node0 CPU(s): 0-8191\n" * 65000,
        f"NUMA node 0 is listed twice; {LSCPU_FIX}",
    ),
    "numactl_nodes_sharing_cpus": (
        "numactl-hardware.txt",
        "available: 2 nodes (0-1)\nnode 0 cpus: 0 1 2 3\nnode 1 cpus: 3 4\n",
        f"CPU 3 is listed on node 0 and again on node 1, but a CPU is on one node only; "
        f"{NUMACTL_FIX}",
    ),
}


@pytest.mark.parametrize("name", RECORDINGS)
def test_a_recording_whose_nodes_overlap(name, tmp_path):
    file, text, message = RECORDINGS[name]
    (tmp_path / file).write_text(text)
    assert one_line_error("topo", "--from", str(tmp_path)) == (
        f"nsysprobe: error: {tmp_path / file}: {message}"
    )


# --- the bounds, set small, in-process --------------------------------------------------------


def run_placement(root: Path, pid: int = 100):
    return placement(pid, discover(root), root=root)


def test_threads_past_the_entries_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(placement_module, "MAX_ENTRIES", 3)
    root = tree(tmp_path)
    base = fake_process(root, 100, 1, threads=5)
    got = run_placement(root)
    assert [(e.pid, e.tid) for e in got.entries] == [(100, None), (100, 10000), (100, 10001)]
    assert got.notes == (
        f"{base}/task: more threads than the bound of 3 processes and threads leaves room for; "
        "2 are shown; give the pid of one rank to see the rest",
    )


def test_processes_past_the_entries_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(placement_module, "MAX_ENTRIES", 2)
    root = tree(tmp_path)
    for pid in (100, 101, 102, 103):
        fake_process(root, pid, 1 if pid == 100 else 100)
    got = run_placement(root)
    assert [e.pid for e in got.entries] == [100, 101]
    assert got.notes == (
        "more than 2 processes in the tree of 100; give the pid of one rank to see the rest",
    )


def test_a_numa_maps_past_its_own_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(placement_module, "NUMA_MAPS_MAX_LINES", 2)
    root = tree(tmp_path)
    maps = "1 default N0=1\n2 bind:1 N0=2\n3 bind:1 N1=100\n"
    base = fake_process(root, 100, 1, numa_maps=maps)
    (entry,) = run_placement(root).entries
    assert entry.pages_kb_by_node == ((0, 12),)
    assert run_placement(root).notes == (
        f"{base}/numa_maps: read up to its first 2 lines (29 bytes), the bound of 2 lines and "
        "64 MiB for one numa_maps; its pages are counted from those",
    )


def test_numa_maps_past_the_bound_for_all(tmp_path, monkeypatch):
    monkeypatch.setattr(placement_module, "MAPS_BUDGET_LINES", 3)
    root = tree(tmp_path)
    maps = "1 default N0=1\n2 default N0=2\n"
    for pid in (100, 101, 102):
        fake_process(root, pid, 1 if pid == 100 else 100, numa_maps=maps)
    got = run_placement(root)
    assert [e.pages_kb_by_node for e in got.entries] == [((0, 12),), ((0, 4),), ()]
    assert got.notes == (
        f"{root}/proc/101/numa_maps: read up to its first 1 lines (15 bytes), what was left of "
        "the bound of 3 lines and 512 MiB of numa_maps in all; its pages are counted from those",
        f"{root}/proc/102/numa_maps and later numa_maps not read: the bound of 3 lines and "
        "512 MiB of numa_maps in all is spent; their pages are unknown",
    )


def test_status_and_environ_past_the_bound_for_all(tmp_path, monkeypatch):
    monkeypatch.setattr(placement_module, "READ_BUDGET_CHARS", 150)
    root = tree(tmp_path)
    fake_process(root, 100, 1, threads=10)
    got = run_placement(root)
    assert 1 < len(got.entries) < 11
    assert got.notes == (
        "stopped after reading 150 bytes of status and environ files, the bound; give the pid "
        "of one rank to see the rest",
    )


def test_proc_past_the_scan_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(placement_module, "PROC_SCAN_MAX", 1)
    root = tree(tmp_path)
    fake_process(root, 100, 1)
    fake_process(root, 101, 100)
    got = run_placement(root)
    assert got.notes == (
        f"{root}/proc: only its first 1 entries looked at for children, the bound; children "
        "past them are missing",
    )


def test_notes_past_their_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(placement_module, "MAX_NOTES", 2)
    root = tree(tmp_path)
    base = fake_process(root, 100, 1, threads=4)
    for tid in range(10000, 10004):
        _spoil("fifo", base / "task" / str(tid) / "status", root)
    got = run_placement(root)
    assert got.notes == (
        f"{base}/task/10000/status: is a FIFO, not a regular file; skipped",
        f"{base}/task/10001/status: is a FIFO, not a regular file; skipped",
        "2 more notes like these",
    )
    assert render.placement_json(got)["notes"] == list(got.notes)


def test_a_task_folder_linked_out_of_the_root(tmp_path):
    """``task`` linked to the live ``/proc/self/task``: the threads of another machine."""
    root = tree(tmp_path)
    base = fake_process(root, 100, 1)
    (base / "task/100/status").unlink()
    (base / "task/100").rmdir()
    (base / "task").rmdir()
    (base / "task").symlink_to("/proc/self/task")
    got = run_placement(root)
    assert [(e.pid, e.tid) for e in got.entries] == [(100, None)]
    assert len(got.notes) == 1
    assert got.notes[0].startswith(f"{base}/task: links lead out of {root} (to /proc/")


# --- CPU lists: the same ids however the ranges overlap ---------------------------------------


@given(st.lists(st.tuples(st.integers(0, 8191), st.integers(0, 300)), max_size=40))
def test_a_cpu_list_reads_as_the_union_of_its_ranges(ranges):
    text = ",".join(f"{low}-{min(low + span, 8191)}" for low, span in ranges)
    expected = {cpu for low, span in ranges for cpu in range(low, min(low + span, 8191) + 1)}
    assert cpulist.parse_cpulist(text) == expected


def test_a_cpu_list_naming_every_cpu_thousands_of_times():
    assert cpulist.parse_cpulist(OVERLAPPING) == frozenset(range(8192))
