"""Topology discovery and torchrun-mode plans on fake /sys trees; expectations derived by hand."""

from __future__ import annotations

import pytest

from nsysprobe.errors import TopologyError
from nsysprobe.numa import cpu_to_node, discover, plan
from nsysprobe.numa.cpulist import format_cpulist, parse_cpulist
from tests.numa.fakesys import FakeGpu, MachineSpec, build


def cpus(text: str) -> frozenset[int]:
    ids = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        ids.update(range(int(low), int(high or low) + 1))
    return frozenset(ids)


def plan_cpus(topology, mode):
    return [rank.cpus for rank in plan(topology, mode).ranks]


# 2 sockets x 4 cores x 2 threads; sibling of CPU i is i + 8.
TWO_SOCKET_SMT = MachineSpec(
    nodes={0: "0-3,8-11", 1: "4-7,12-15"},
    sockets={0: "0-3,8-11", 1: "4-7,12-15"},
    smt_offset=8,
    llc_size=4,
    gpus=(
        FakeGpu("0000:1b:00.0", 0),
        FakeGpu("0000:3d:00.0", 0),
        FakeGpu("0000:9a:00.0", 1),
        FakeGpu("0000:bc:00.0", 1),
    ),
    # An NVSwitch is an NVIDIA bridge, not a GPU.
    other_pci=(("0000:05:00.0", "0x10de", "0x068000"), ("0000:06:00.0", "0x8086", "0x030000")),
)


def test_two_socket_smt_topology(tmp_path):
    topology = discover(build(tmp_path, TWO_SOCKET_SMT))
    assert [node.cpus for node in topology.nodes] == [cpus("0-3,8-11"), cpus("4-7,12-15")]
    assert [(g.index, g.bus_id, g.numa_node) for g in topology.gpus] == [
        (0, "0000:1b:00.0", 0),
        (1, "0000:3d:00.0", 0),
        (2, "0000:9a:00.0", 1),
        (3, "0000:bc:00.0", 1),
    ]
    mapping = cpu_to_node(topology)
    assert mapping[9] == 0 and mapping[12] == 1 and len(mapping) == 16


def test_two_socket_smt_plans(tmp_path):
    topology = discover(build(tmp_path, TWO_SOCKET_SMT))
    node0, node1 = cpus("0-3,8-11"), cpus("4-7,12-15")
    assert plan_cpus(topology, "node") == [node0, node0, node1, node1]
    assert plan_cpus(topology, "socket") == [node0, node0, node1, node1]
    # Two GPUs per node share its 4 cores: first two cores (and siblings) to the lower GPU.
    assert plan_cpus(topology, "exclusive") == [
        cpus("0-1,8-9"),
        cpus("2-3,10-11"),
        cpus("4-5,12-13"),
        cpus("6-7,14-15"),
    ]
    # One L3 per node: both GPUs of a node get the whole complex.
    assert plan_cpus(topology, "core-complex") == [node0, node0, node1, node1]
    assert [r.memory_nodes for r in plan(topology, "node").ranks][2] == {1}


# AMD-style: 2 sockets x NPS2 = 4 nodes of 8 cores, L3 per 4 cores; nodes 0 and 2 have no GPU.
AMD_NPS2 = MachineSpec(
    nodes={0: "0-7", 1: "8-15", 2: "16-23", 3: "24-31"},
    sockets={0: "0-15", 1: "16-31"},
    llc_size=4,
    gpus=(
        FakeGpu("0000:21:00.0", 1),
        FakeGpu("0000:22:00.0", 1),
        FakeGpu("0000:23:00.0", 1),
        FakeGpu("0000:e1:00.0", 3),
    ),
)


def test_amd_several_nodes_per_socket(tmp_path):
    topology = discover(build(tmp_path, AMD_NPS2))
    assert plan_cpus(topology, "node") == [cpus("8-15")] * 3 + [cpus("24-31")]
    assert plan_cpus(topology, "socket") == [cpus("0-15")] * 3 + [cpus("16-31")]
    # 8 cores for 3 GPUs: 3, 3, 2.
    assert plan_cpus(topology, "exclusive") == [
        cpus("8-10"),
        cpus("11-13"),
        cpus("14-15"),
        cpus("24-31"),
    ]
    # Two complexes on node 1 (8-11, 12-15): the third GPU wraps around to the first.
    assert plan_cpus(topology, "core-complex") == [
        cpus("8-11"),
        cpus("12-15"),
        cpus("8-11"),
        cpus("24-27"),
    ]
    socket_plan = plan(topology, "socket").ranks[0]
    assert socket_plan.memory_nodes == {0, 1}


GH200 = MachineSpec(
    nodes={0: "0-71", **{n: "" for n in range(1, 9)}},
    sockets={0: "0-71"},
    gpus=(FakeGpu("0009:01:00.0", 0),),
    memory_mb={0: 491520, 1: 97280, **{n: 0 for n in range(2, 9)}},
)


def test_memory_only_nodes(tmp_path):
    topology = discover(build(tmp_path, GH200))
    assert [node.id for node in topology.nodes if node.memory_only] == list(range(1, 9))
    assert not topology.node(0).memory_only
    assert topology.node(1).memory_kb == 97280 * 1024
    assert plan_cpus(topology, "node") == [cpus("0-71")]
    assert plan_cpus(topology, "socket") == [cpus("0-71")]
    assert plan(topology, "node").ranks[0].memory_nodes == {0}


# Sub-NUMA clustering, 1 socket, 2 nodes with scattered lists; CPU 2 offline (its sibling 10
# stays online) and a cgroup cpuset allowing only 0-13.
SNC = MachineSpec(
    nodes={0: "0-3,8-11", 1: "4-7,12-15"},
    sockets={0: "0-15"},
    smt_offset=8,
    offline=(2,),
    allowed="0-13",
    gpus=(FakeGpu("0000:18:00.0", 0), FakeGpu("0000:19:00.0", 0), FakeGpu("0000:98:00.0", 1)),
)


def test_sub_numa_clustering_offline_and_cpuset(tmp_path):
    topology = discover(build(tmp_path, SNC))
    assert topology.offline_cpus == {2}
    assert topology.node(0).cpus == cpus("0-1,3,8-11")
    assert topology.allowed_cpus == cpus("0-1,3-13")
    assert plan_cpus(topology, "node") == [cpus("0-1,3,8-11")] * 2 + [cpus("4-7,12-13")]
    # Node 0's cores by lowest sibling: {0,8} {1,9} {3,11} {10}; two each.
    assert plan_cpus(topology, "exclusive")[:2] == [cpus("0-1,8-9"), cpus("3,10-11")]
    assert plan_cpus(topology, "socket")[2] == cpus("0-1,3-13")


EVEN_ODD = MachineSpec(
    nodes={0: "0,2,4,6,8,10,12,14", 1: "1,3,5,7,9,11,13,15"},
    sockets={0: "0,2,4,6,8,10,12,14", 1: "1,3,5,7,9,11,13,15"},
    smt_offset=8,
    gpus=(FakeGpu("0000:3b:00.0", 1), FakeGpu("0000:5e:00.0", 1)),
)


def test_even_odd_numbering(tmp_path):
    topology = discover(build(tmp_path, EVEN_ODD))
    assert plan_cpus(topology, "node") == [cpus("1,3,5,7,9,11,13,15")] * 2
    # Node 1's cores by lowest sibling: {1,9} {3,11} {5,13} {7,15}.
    assert plan_cpus(topology, "exclusive") == [cpus("1,3,9,11"), cpus("5,7,13,15")]


def test_vm_numa_node_minus_one(tmp_path):
    single = MachineSpec(
        nodes={0: "0-7"}, sockets={0: "0-7"}, gpus=(FakeGpu("0000:00:05.0", -1, "0-7"),)
    )
    topology = discover(build(tmp_path / "single", single))
    assert topology.gpus[0].numa_node == 0 and topology.gpus[0].reported_node == -1
    assert any("reports NUMA node -1" in note for note in topology.notes)
    double = MachineSpec(
        nodes={0: "0-3", 1: "4-7"},
        sockets={0: "0-7"},
        gpus=(FakeGpu("0000:00:05.0", -1, "0-7"),),
    )
    topology = discover(build(tmp_path / "double", double))
    assert topology.gpus[0].numa_node is None
    result = plan(topology, "node")
    assert result.ranks[0].cpus == cpus("0-3")
    assert any("planned on node 0 as torchrun does" in note for note in result.notes)


def test_plan_errors(tmp_path):
    topology = discover(build(tmp_path, TWO_SOCKET_SMT))
    with pytest.raises(TopologyError, match="5 processes but only 4 GPUs"):
        plan(topology, "node", nproc=5)
    with pytest.raises(TopologyError, match="unknown NUMA mode 'numa'"):
        plan(topology, "numa")
    crowded = MachineSpec(
        nodes={0: "0"},
        sockets={0: "0"},
        gpus=(FakeGpu("0000:01:00.0", 0), FakeGpu("0000:02:00.0", 0)),
    )
    with pytest.raises(TopologyError, match="1 usable physical cores for 2 GPUs"):
        plan(discover(build(tmp_path / "crowded", crowded)), "exclusive")


def test_plan_follows_cuda_visible_devices(tmp_path):
    topology = discover(build(tmp_path, TWO_SOCKET_SMT))
    result = plan(topology, "node", gpu_indices=[3, 0])
    assert [(r.gpu, r.cpus) for r in result.ranks] == [
        (3, cpus("4-7,12-15")),
        (0, cpus("0-3,8-11")),
    ]


def test_cpulist_round_trip():
    assert parse_cpulist("0-2,4,6-7\n") == {0, 1, 2, 4, 6, 7}
    assert format_cpulist({7, 6, 0, 1, 2, 4}) == "0-2,4,6-7"
    assert parse_cpulist("") == frozenset()
    with pytest.raises(TopologyError, match="cannot read 'x'"):
        parse_cpulist("0,x")


def test_cpulists_stop_at_linux_limits():
    """CPU ids run below NR_CPUS (8192 at most), node ids below MAX_NUMNODES (1024)."""
    from nsysprobe.numa.cpulist import parse_nodelist

    assert parse_cpulist("8190-8191") == {8190, 8191}
    assert parse_nodelist("1023", where="x") == {1023}
    with pytest.raises(TopologyError) as caught:
        parse_cpulist("0-2000000000", where="cpulist", fix="record it again")
    assert str(caught.value) == (
        "cpulist: CPU 2000000000 is past the 8192 CPUs Linux supports (ids 0-8191); record it again"
    )
    with pytest.raises(TopologyError, match="^x: node 1024 is past the 1024 nodes Linux supports"):
        parse_nodelist("0-1024", where="x")
    with pytest.raises(TopologyError, match=r"^cannot read '\u00b2' in a CPU list"):
        parse_cpulist("\u00b2")


def test_missing_root(tmp_path):
    with pytest.raises(TopologyError, match="point --root at a folder holding sys/ and proc/"):
        discover(tmp_path)
