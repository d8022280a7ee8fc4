"""On a machine with one NUMA node, binding cannot help: no memory policy, and no binding at
all when the rank would get every CPU anyway (measured on the H200 VMs: binding there slowed
the DDP workload from 13.2 to 5.8 steps/s)."""

from __future__ import annotations

import os

from nsysprobe.numa import apply_binding, binding_for_rank, discover

from .fakesys import FakeGpu, MachineSpec, build

ONE_NODE = MachineSpec(nodes={0: "0-1"}, sockets={0: "0-1"}, gpus=(FakeGpu("0000:01:00.0", 0),))
TWO_NODES = MachineSpec(
    nodes={0: "0", 1: "1"}, sockets={0: "0", 1: "1"}, gpus=(FakeGpu("0000:01:00.0", 1),)
)


def test_node_mode_on_one_node_binds_nothing(tmp_path):
    binding = binding_for_rank(discover(build(tmp_path, ONE_NODE)), "node", 0, env={})
    assert (binding.cpus, binding.nodes, binding.memory) == (frozenset(), frozenset(), "none")
    assert binding.describe() == "unbound: one NUMA node with CPUs: binding cannot help here"
    before = os.sched_getaffinity(0)
    outcome = apply_binding(binding)
    assert (outcome.cpus_bound, outcome.memory_bound, outcome.threads_bound) == (False, False, 0)
    assert os.sched_getaffinity(0) == before


def test_two_nodes_keep_the_memory_policy(tmp_path):
    binding = binding_for_rank(discover(build(tmp_path, TWO_NODES)), "node", 0, env={})
    assert (binding.cpus, binding.nodes, binding.memory) == (
        frozenset({1}),
        frozenset({1}),
        "preferred",
    )
