"""Which CPUs each local rank should run on: the semantics of ``torchrun --numa-binding``.

Rank ``r`` drives GPU ``r`` (or the ``r``-th entry of ``CUDA_VISIBLE_DEVICES``). Every mode
works on the CPUs of a node that this process may use (``allowed_cpus``):

- ``node``: all CPUs of the GPU's node.
- ``socket``: all CPUs of every node on the GPU's socket (a node's socket is the socket of its
  lowest allowed CPU; nodes without CPUs belong to no socket).
- ``exclusive``: the GPU's node's physical cores, in order of their lowest CPU id, cut into one
  contiguous share per GPU on that node (GPUs in index order); when the cores do not divide
  evenly the lowest GPUs get one extra core. A core brings all its SMT siblings.
- ``core-complex``: the node's CPUs grouped by last-level cache, groups ordered by most allowed
  CPUs then lowest CPU id; the ``k``-th GPU of the node takes group ``k`` modulo the count.

A GPU whose node is unknown (PCI ``numa_node`` -1 on a multi-node machine) is taken to be on
node 0, as torchrun does, and the plan says so.

A GPU whose node has no CPU this process may use (a Slurm job given CPUs of other nodes only)
cannot be bound to its node in this job: its rank is left unbound (no CPUs, no memory policy,
so it runs on every CPU of the job as it would without binding) and ``RankPlan.note`` says why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nsysprobe.errors import TopologyError
from nsysprobe.numa.topology import Topology, nodes_of

MODES = ("node", "socket", "exclusive", "core-complex")


@dataclass(frozen=True)
class RankPlan:
    """One rank's CPUs; empty ``cpus`` leave it unbound, for the reason in ``note``."""

    local_rank: int
    gpu: int
    gpu_node: int
    cpus: frozenset[int]
    memory_nodes: frozenset[int]
    note: str = ""


@dataclass(frozen=True)
class Plan:
    mode: str
    ranks: tuple[RankPlan, ...]
    notes: tuple[str, ...] = ()


def visible_gpus(cuda_visible_devices: str | None) -> list[int] | None:
    """GPU indices named by ``CUDA_VISIBLE_DEVICES``, or None when unset or not plain indices."""
    if not cuda_visible_devices:
        return None
    parts = [part.strip() for part in cuda_visible_devices.split(",")]
    plain = all(p.isascii() and p.isdigit() and len(p) <= 9 for p in parts)
    return [int(part) for part in parts] if plain else None


def plan(
    topology: Topology,
    mode: str,
    nproc: int | None = None,
    gpu_indices: Sequence[int] | None = None,
) -> Plan:
    """The CPU set of each of ``nproc`` local ranks (default: one per GPU) under ``mode``."""
    if mode not in MODES:
        raise TopologyError(f"unknown NUMA mode {mode!r}: use one of {', '.join(MODES)}")
    if not topology.gpus:
        raise TopologyError(
            f"no NVIDIA GPU found in {topology.source}: plan on the GPU machine or pass --from "
            "with its nvidia-smi-topo-m.txt"
        )
    indices = list(gpu_indices) if gpu_indices is not None else [g.index for g in topology.gpus]
    count = len(indices) if nproc is None else nproc
    if count < 1:
        raise TopologyError(f"--nproc-per-node {count} must be at least 1")
    if count > len(indices):
        raise TopologyError(
            f"{count} processes but only {len(indices)} GPUs in {topology.source}: "
            "start at most one process per GPU"
        )
    notes = list(topology.notes)
    ranks = []
    for rank in range(count):
        gpu = indices[rank]
        node = _gpu_node(topology, gpu, notes)
        if not topology.bindable(node):
            note = topology.unbindable_note(node)
            ranks.append(RankPlan(rank, gpu, node, frozenset(), frozenset(), note))
            continue
        cpus = _CHOOSERS[mode](topology, gpu, node)
        ranks.append(RankPlan(rank, gpu, node, cpus, nodes_of(topology, cpus)))
    return Plan(mode, tuple(ranks), tuple(dict.fromkeys(notes)))


def _gpu_node(topology: Topology, gpu: int, notes: list[str]) -> int:
    node = topology.gpu(gpu).numa_node
    if node is None:
        notes.append(f"GPU {gpu}'s NUMA node is unknown; planned on node 0 as torchrun does")
        return 0
    return node


def _node_cpus(topology: Topology, node: int) -> frozenset[int]:
    return topology.node_cpus(node)


def _gpus_on_node(topology: Topology, node: int) -> list[int]:
    return sorted(g.index for g in topology.gpus if (g.numa_node or 0) == node)


def _choose_node(topology: Topology, gpu: int, node: int) -> frozenset[int]:
    return _node_cpus(topology, node)


def _choose_socket(topology: Topology, gpu: int, node: int) -> frozenset[int]:
    socket_of = {cpu.id: cpu.socket for cpu in topology.cpus}

    def socket_of_node(node_id: int) -> int | None:
        cpus = _node_cpus(topology, node_id)
        return socket_of[min(cpus)] if cpus else None

    socket = socket_of_node(node)
    chosen: frozenset[int] = frozenset()
    for other in topology.nodes:
        if socket is not None and socket_of_node(other.id) == socket:
            chosen |= _node_cpus(topology, other.id)
    return chosen


def _choose_exclusive(topology: Topology, gpu: int, node: int) -> frozenset[int]:
    gpus = _gpus_on_node(topology, node)
    position = gpus.index(gpu)
    core_of = {cpu.id: cpu.core for cpu in topology.cpus}
    cores: dict[int, set[int]] = {}
    for cpu in _node_cpus(topology, node):
        cores.setdefault(core_of[cpu], set()).add(cpu)
    ordered = [cores[key] for key in sorted(cores)]
    share, extra = divmod(len(ordered), len(gpus))
    if share < 1:
        raise TopologyError(
            f"node {node} has {len(ordered)} usable physical cores for {len(gpus)} GPUs: "
            "mode exclusive needs one core per GPU; use mode node"
        )
    start = position * share + min(position, extra)
    end = start + share + (1 if position < extra else 0)
    return frozenset(cpu for core in ordered[start:end] for cpu in core)


def _choose_core_complex(topology: Topology, gpu: int, node: int) -> frozenset[int]:
    gpus = _gpus_on_node(topology, node)
    position = gpus.index(gpu)
    llc_of = {cpu.id: cpu.llc if cpu.llc is not None else cpu.id for cpu in topology.cpus}
    groups: dict[int, set[int]] = {}
    for cpu in _node_cpus(topology, node):
        groups.setdefault(llc_of[cpu], set()).add(cpu)
    if not groups:
        return frozenset()
    ordered = sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))
    return frozenset(ordered[position % len(ordered)][1])


_CHOOSERS = {
    "node": _choose_node,
    "socket": _choose_socket,
    "exclusive": _choose_exclusive,
    "core-complex": _choose_core_complex,
}
