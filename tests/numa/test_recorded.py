"""Parsers and plans on recorded lscpu / numactl / nvidia-smi outputs (tests/numa/data)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from nsysprobe.errors import TopologyError
from nsysprobe.numa import load_recorded, plan
from nsysprobe.numa.command_outputs import parse_lscpu, parse_nvidia_smi_topo
from tests.numa.test_sysfs_topology import cpus

DATA = Path(__file__).parent / "data"


def dgx_node(n: int) -> frozenset[int]:
    """NPS4 on 2x64 cores with SMT: node n holds cores 16n..16n+15 and their siblings +128."""
    return cpus(f"{16 * n}-{16 * n + 15},{128 + 16 * n}-{128 + 16 * n + 15}")


def test_dgx_a100_topology():
    topology = load_recorded(DATA / "dgx_a100")
    assert [node.id for node in topology.nodes] == list(range(8))
    assert all(topology.node(n).cpus == dgx_node(n) for n in range(8))
    assert [gpu.numa_node for gpu in topology.gpus] == [3, 3, 1, 1, 7, 7, 5, 5]
    assert topology.gpu_cpus(topology.gpu(0)) == dgx_node(3)


def test_dgx_a100_plans():
    topology = load_recorded(DATA / "dgx_a100")
    node = plan(topology, "node").ranks
    assert [r.cpus for r in node] == [dgx_node(n) for n in (3, 3, 1, 1, 7, 7, 5, 5)]
    exclusive = plan(topology, "exclusive").ranks
    assert exclusive[0].cpus == cpus("48-55,176-183")
    assert exclusive[1].cpus == cpus("56-63,184-191")
    complexes = plan(topology, "core-complex").ranks
    assert complexes[0].cpus == cpus("48-51,176-179")
    assert complexes[1].cpus == cpus("52-55,180-183")
    socket = plan(topology, "socket").ranks
    assert socket[0].cpus == cpus("0-63,128-191")
    assert socket[4].cpus == cpus("64-127,192-255")
    assert socket[0].memory_nodes == {0, 1, 2, 3}


def test_german_lscpu_with_numactl_and_topo():
    topology = load_recorded(DATA / "xeon_de")
    assert topology.node(0).cpus == cpus("0-19,40-59")
    assert topology.node(1).memory_kb == 387068 * 1024
    assert [gpu.numa_node for gpu in topology.gpus] == [0, 0, 1, 1]
    assert {cpu.socket for cpu in topology.cpus if cpu.node == 1} == {1}
    exclusive = plan(topology, "exclusive").ranks
    assert exclusive[1].cpus == cpus("10-19,50-59")
    assert exclusive[2].cpus == cpus("20-29,60-69")


def test_gh200_memory_only_nodes():
    topology = load_recorded(DATA / "gh200")
    assert [n.id for n in topology.nodes if n.memory_only] == list(range(1, 9))
    assert topology.gpus[0].numa_node == 0
    assert plan(topology, "node").ranks[0].cpus == cpus("0-71")


def test_chinese_lscpu(tmp_path):
    shutil.copy(DATA / "lscpu_zh_CN.txt", tmp_path / "lscpu.txt")
    (tmp_path / "nvidia-smi-topo-m.txt").write_text(
        "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n"
        "GPU0\t X \tNV4\t4-7,12-15\t1\nGPU1\tNV4\t X \t4-7,12-15\t1\n"
    )
    topology = load_recorded(tmp_path)
    assert topology.node(1).cpus == cpus("4-7,12-15")
    assert [r.cpus for r in plan(topology, "exclusive").ranks] == [
        cpus("4-5,12-13"),
        cpus("6-7,14-15"),
    ]


def test_lscpu_parseable_even_odd_with_offline_cpu():
    info = parse_lscpu((DATA / "lscpu_p_even_odd.txt").read_text())
    assert info.nodes == {0: cpus("0,2,4,8,10,12,14"), 1: cpus("1,3,5,7,9,11,13,15")}
    assert info.offline == {6}
    by_id = {cpu.id: cpu for cpu in info.cpus}
    assert by_id[9].core == 1 and by_id[14].core == 14
    assert by_id[15].llc == 1 and by_id[8].llc == 0


def test_topo_without_numa_affinity_infers_node_from_cpus(tmp_path):
    (tmp_path / "numactl-hardware.txt").write_text(
        "available: 2 nodes (0-1)\nnode 0 cpus: 0 1\nnode 0 size: 100 MB\n"
        "node 1 cpus: 2 3\nnode 1 size: 100 MB\n"
    )
    (tmp_path / "nvidia-smi-topo-m.txt").write_text(
        "\tGPU0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \t2-3\tN/A\n"
    )
    topology = load_recorded(tmp_path)
    assert topology.gpus[0].numa_node == 1
    assert any("inferred from the GPU's CPU affinity" in note for note in topology.notes)


def test_recorded_errors(tmp_path):
    with pytest.raises(TopologyError, match="holds none of lscpu.txt"):
        load_recorded(tmp_path)
    with pytest.raises(TopologyError, match="no header row with 'GPU0 ... CPU Affinity'"):
        parse_nvidia_smi_topo("No devices were found\n")
