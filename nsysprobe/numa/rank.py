"""Bind the calling process for its local rank, as ``nsysprobe numa exec`` and workloads do."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from nsysprobe.errors import TopologyError
from nsysprobe.numa.bind import MEMORY_POLICIES, Binding, BindOutcome, apply_binding
from nsysprobe.numa.plan import plan, visible_gpus
from nsysprobe.numa.topology import Topology, discover, single_cpu_node

# On the project's one-node H200 VMs, binding every rank to that node (all CPUs, memory
# preferred there) ran the DDP workload at 5.8 steps/s against 13.2 unbound, in either order
# (2026-11-30). On one node a memory policy cannot help, so none is set there, and a binding
# to every CPU the process may use is left out altogether.
ONE_NODE = "one NUMA node with CPUs: binding cannot help here"


def local_rank_from(env: Mapping[str, str]) -> int:
    text = env.get("LOCAL_RANK", "0")
    if not (text.isascii() and text.isdigit() and len(text) <= 9):
        raise TopologyError(
            f"LOCAL_RANK={text[:40]!r} is not a number: launch with torchrun or nsysprobe launch"
        )
    return int(text)


def binding_for_rank(
    topology: Topology,
    mode: str,
    local_rank: int,
    memory: str = "preferred",
    env: Mapping[str, str] | None = None,
) -> Binding:
    """The binding of ``local_rank`` under ``mode``, honouring ``CUDA_VISIBLE_DEVICES``. On a
    machine with one NUMA node: no memory policy, and an empty binding when the mode would
    give the rank every CPU anyway. A rank whose GPU's node has no CPU in this job's cpuset
    gets an empty binding whose note says so (see ``nsysprobe.numa.plan``)."""
    if memory not in MEMORY_POLICIES:
        raise TopologyError(
            f"unknown memory policy {memory!r}: use one of {', '.join(MEMORY_POLICIES)}"
        )
    if local_rank < 0:
        raise TopologyError(f"local rank {local_rank} is negative: ranks count from 0")
    env = os.environ if env is None else env
    indices = visible_gpus(env.get("CUDA_VISIBLE_DEVICES"))
    ranks = plan(topology, mode, nproc=local_rank + 1, gpu_indices=indices).ranks
    chosen = ranks[local_rank]
    if not chosen.cpus:
        return Binding(frozenset(), frozenset(), "none", note=chosen.note)
    if single_cpu_node(topology):
        if chosen.cpus >= topology.allowed_cpus:
            return Binding(frozenset(), frozenset(), "none", note=ONE_NODE)
        return Binding(chosen.cpus, chosen.memory_nodes, "none")
    return Binding(chosen.cpus, chosen.memory_nodes, memory)


def bind_local_rank(
    mode: str = "node",
    memory: str = "preferred",
    local_rank: int | None = None,
    root: str | Path = "/",
) -> BindOutcome:
    """Discover the machine, plan ``mode`` and bind this process for its ``LOCAL_RANK``."""
    rank = local_rank_from(os.environ) if local_rank is None else local_rank
    binding = binding_for_rank(discover(root), mode, rank, memory)
    return apply_binding(binding)
