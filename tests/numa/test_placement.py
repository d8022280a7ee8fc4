"""Placement verdicts on a fake /proc of a two-node machine (GPU 0 on node 0, GPU 1 on node 1)."""

from __future__ import annotations

from nsysprobe.numa import discover, placement
from tests.numa.fakesys import FakeGpu, MachineSpec, build

TWO_NODES = MachineSpec(
    nodes={0: "0-3", 1: "4-7"},
    sockets={0: "0-3", 1: "4-7"},
    gpus=(FakeGpu("0000:01:00.0", 0), FakeGpu("0000:81:00.0", 1)),
)


def fake_process(root, pid, ppid, cpus, pages, local_rank=None, threads=()):
    base = root / "proc" / str(pid)
    (base / "task" / str(pid)).mkdir(parents=True)
    status = f"Name:\tpython\nCpus_allowed_list:\t{cpus}\nMems_allowed_list:\t0-1\n"
    (base / "status").write_text(status)
    (base / "task" / str(pid) / "status").write_text(status)
    for tid, thread_cpus in threads:
        (base / "task" / str(tid)).mkdir()
        (base / "task" / str(tid) / "status").write_text(
            f"Name:\tpt_worker\nCpus_allowed_list:\t{thread_cpus}\n"
        )
    (base / "stat").write_text(f"{pid} (py thon) S {ppid} 1 1 0")
    maps = " ".join(f"N{node}={count}" for node, count in pages.items())
    (base / "numa_maps").write_text(f"7f0000 prefer:0 anon=10 {maps} kernelpagesize_kB=4\n")
    env = f"LOCAL_RANK={local_rank}\0PATH=/bin\0" if local_rank is not None else "PATH=/bin\0"
    (base / "environ").write_text(env)


def test_verdicts_for_ranks_workers_and_threads(tmp_path):
    root = build(tmp_path, TWO_NODES)
    fake_process(root, 100, 1, "0-7", {0: 1}, None)
    fake_process(root, 101, 100, "0-3", {0: 95, 1: 5}, 0, threads=[(111, "4-7")])
    fake_process(root, 102, 100, "0-3", {0: 90, 1: 10}, 1)
    fake_process(root, 103, 101, "0-7", {0: 50, 1: 50}, 0)
    report = placement(100, discover(root), root=root)
    got = {(e.pid, e.tid): (e.role, e.verdict) for e in report.entries}
    assert got == {
        (100, None): ("main", "unknown"),  # the launcher drives no GPU
        (101, None): ("rank", "local"),  # node 0 CPUs, 95 % of pages on node 0
        (101, 111): ("thread", "remote"),  # a thread pinned to node 1
        (102, None): ("rank", "remote"),  # GPU 1 is on node 1, it runs on node 0
        (103, None): ("worker", "split"),  # inherits GPU 0, spans both nodes
    }
    by_pid = {e.pid: e for e in report.entries if e.tid is None}
    assert by_pid[101].pages_kb_by_node == ((0, 380), (1, 20))
    assert by_pid[101].policy == "prefer:0"
    assert by_pid[102].reason == ("runs on node 0, GPU 1 is on node 1, 10% of its pages on node 1")


def test_local_cpus_with_remote_pages_is_split(tmp_path):
    root = build(tmp_path, TWO_NODES)
    fake_process(root, 200, 1, "4-7", {0: 70, 1: 30}, 1)
    (entry,) = placement(200, discover(root), root=root).entries
    assert entry.verdict == "split"
    assert entry.reason == "runs on GPU 1's node 1 but only 30% of its pages are there"
