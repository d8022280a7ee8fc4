"""Thread placement from --cpuctxsw data against the GPU's NUMA node, on a fake two-socket
machine built as a /sys tree (tests/numa/fakesys.py) and a built export."""

from __future__ import annotations

import pytest
from numa.fakesys import FakeGpu, MachineSpec
from numa.fakesys import build as build_sys

import nsysprobe
from nsysprobe.diagnose.verdicts import NUMA_TIME_SAVED_WHEN_REMOTE
from nsysprobe.numa import discover

from exports import Export

MS = 1_000_000
LOADER_PID = 5000


@pytest.fixture
def two_socket(tmp_path):
    spec = MachineSpec(
        nodes={0: "0-7", 1: "8-15"},
        sockets={0: "0-7", 1: "8-15"},
        gpus=(FakeGpu("0000:81:00.0", 1),),
    )
    return discover(build_sys(tmp_path / "machine", spec))


def placed_export(main_cpus, loader_cpu) -> Export:
    ex = Export()
    ex.gpu("0000:81:00.0")
    ex.kernel(0, 100 * MS, launch_at=0)
    ex.nvtx(0, 50 * MS, "Batch 0")
    ex.nvtx(50 * MS, 100 * MS, "Batch 1")
    t = 0
    for cpu, ms in main_cpus:
        ex.sched(t, t + ms * MS, cpu)
        t += ms * MS
    ex.sched(0, 50 * MS, loader_cpu, tid=LOADER_PID, pid=LOADER_PID)
    return ex


def test_remote_training_thread_and_loader_recommend_binding(build, two_socket):
    # main thread: 90 ms on CPU 2 (node 0), 10 ms on CPU 9 (node 1); loader on CPU 3 (node 0)
    path = build(placed_export([(2, 90), (9, 10)], loader_cpu=3))
    report = nsysprobe.analyze(path, topology=two_socket)
    p = report.placement
    assert (p.gpu_node, p.numa_nodes) == (1, 2)
    roles = {r.role: r for r in p.roles}
    main = roles["training thread"]
    assert (main.run_ns, main.cpus, main.gpu_node_ratio, main.verdict) == (
        100 * MS,
        (2, 9),
        pytest.approx(0.1),
        "remote",
    )
    assert roles["loader processes"].verdict == "remote"
    rec = next(r for r in report.recommendations if r.id == "numa_binding")
    # off-node share over both roles: (90 + 50) / (100 + 50); measured time: two 50 ms steps
    off = 140 / 150
    assert rec.expected_gain_ratio == pytest.approx(NUMA_TIME_SAVED_WHEN_REMOTE * off)
    assert "GPU 0000:81:00.0 is on NUMA node 1" in rec.reason


def test_local_threads_need_no_binding(build, two_socket):
    path = build(placed_export([(8, 60), (9, 40)], loader_cpu=12))
    report = nsysprobe.analyze(path, topology=two_socket)
    assert {r.role: r.verdict for r in report.placement.roles} == {
        "training thread": "local",
        "loader processes": "local",
    }
    assert "numa_binding" not in [r.id for r in report.recommendations]


def test_split_placement(build, two_socket):
    path = build(placed_export([(2, 50), (9, 50)], loader_cpu=9))
    roles = {r.role: r for r in nsysprobe.analyze(path, topology=two_socket).placement.roles}
    assert (roles["training thread"].verdict, roles["loader processes"].verdict) == (
        "split",
        "local",
    )


def test_single_node_machine_says_binding_cannot_help(build, tmp_path):
    spec = MachineSpec(nodes={0: "0-3"}, sockets={0: "0-3"})
    one = discover(build_sys(tmp_path / "one", spec))
    report = nsysprobe.analyze(build(placed_export([(1, 50), (2, 50)], loader_cpu=3)), topology=one)
    assert report.placement.note.startswith("one NUMA node")
    assert {r.verdict for r in report.placement.roles} == {"local"}
    assert "numa_binding" not in [r.id for r in report.recommendations]


def test_without_sched_data_placement_is_skipped(build, two_socket):
    ex = Export()
    ex.kernel(0, 10, launch_at=0)
    report = nsysprobe.analyze(build(ex), topology=two_socket)
    assert report.placement is None
    assert [s.reason for s in report.skipped if s.analysis == "placement"] == [
        "no CPU scheduling data in the trace"
    ]
