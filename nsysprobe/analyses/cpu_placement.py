"""CPU placement in a trace: which CPUs and NUMA nodes the training and loader threads ran on,
against the NUMA node of their GPU.

Needs CPU scheduling data (``nsys profile --cpuctxsw=process-tree``, ``nsysprobe run
--cpuctxsw``) and the machine's topology (the live machine, or a folder of recorded
``lscpu``/``numactl --hardware``/``nvidia-smi topo -m`` outputs): the export itself does not
record which CPU belongs to which node.

Run time is the **sum** over a thread's scheduled-in intervals (SCHED_EVENTS: sched-in to the
next sched-out on that thread). Roles:

    training thread    the thread that made the most CUDA API calls in a GPU process
    training process   the GPU processes' other threads
    loader processes   traced processes without GPU work (DataLoader workers)

A role is ``local`` when at least 90 % of its run time was on the GPU's node, ``remote`` when at
most 10 % was, ``split`` in between, and ``unknown`` when the GPU's node is not known.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nsysprobe.analyses.events import Events
from nsysprobe.analyses.rows import per_distinct
from nsysprobe.common.table import Groups, Table, by_count, descending, distinct
from nsysprobe.numa.topology import Topology, cpu_to_node
from nsysprobe.trace.values import pid_of

LOCAL_RATIO = 0.9
REMOTE_RATIO = 0.1


@dataclass(frozen=True)
class NodeShare:
    node: int
    run_ns: int
    share_ratio: float


@dataclass(frozen=True)
class RolePlacement:
    role: str
    threads: int
    run_ns: int  # sum of scheduled-in time
    cpus: tuple[int, ...]  # CPUs it ran on
    nodes: tuple[NodeShare, ...]
    gpu_node_ratio: float | None  # share of run time on the GPU's node
    verdict: str  # local, remote, split, unknown


@dataclass(frozen=True)
class CpuPlacementResult:
    gpu_bus_id: str | None
    gpu_node: int | None
    numa_nodes: int  # nodes with CPUs on the machine
    roles: tuple[RolePlacement, ...]
    note: str


def normalize_bus_id(bus_id: str | None) -> str | None:
    """``00000000:8B:00.0`` and ``0000:8b:00.0`` -> ``8b:00.0``."""
    if not bus_id:
        return None
    return bus_id.strip().lower().split(":", 1)[-1] if bus_id.count(":") == 2 else bus_id.lower()


def analyze_cpu_placement(events: Events, topology: Topology) -> CpuPlacementResult | None:
    """Placement of the training and loader threads, or None without scheduling data (the
    events loaded with ``Events.load(trace, sched=True)``)."""
    sched = events.lookups.sched
    if sched is None or not len(sched):
        return None
    node_of = cpu_to_node(topology)
    numa_nodes = sum(1 for n in topology.nodes if n.cpus)
    bus_id, gpu_node = _gpu_node(events, topology)
    runs = _run_intervals(sched)
    runs["node"] = per_distinct(runs["cpu"], lambda c: node_of.get(c, -1), np.int64)
    training = [events.launch_threads[p] for p in events.gpu_pids if p in events.launch_threads]
    pid = pid_of(runs["globalTid"])
    in_gpu_process = np.isin(pid, events.gpu_pids)
    is_training = np.isin(runs["globalTid"], np.array(training, dtype=np.int64))
    roles = []
    for role, mask in (
        ("training thread", is_training),
        ("training process", in_gpu_process & ~is_training),
        ("loader processes", ~in_gpu_process),
    ):
        part = runs.take(mask)
        if len(part):
            roles.append(_role(role, part, gpu_node))
    note = (
        "one NUMA node: every thread is local to the GPU and binding cannot help"
        if numa_nodes <= 1
        else (
            "the GPU's NUMA node is unknown (no bus id match in the topology)"
            if gpu_node is None
            else f"GPU {bus_id} is on NUMA node {gpu_node}"
        )
    )
    return CpuPlacementResult(
        gpu_bus_id=bus_id, gpu_node=gpu_node, numa_nodes=numa_nodes, roles=tuple(roles), note=note
    )


def _gpu_node(events: Events, topology: Topology) -> tuple[str | None, int | None]:
    gpus = {g.device_id: g for g in events.lookups.gpus}
    device = int(by_count(events.kernels["deviceId"])[0]) if len(events.kernels) else None
    traced = gpus.get(device) if device is not None else None
    if traced is None and len(gpus) == 1:
        traced = next(iter(gpus.values()))
    wanted = normalize_bus_id(traced.bus_id) if traced else None
    for gpu in topology.gpus:
        if wanted and normalize_bus_id(gpu.bus_id) == wanted:
            return traced.bus_id, gpu.numa_node
    if sum(1 for n in topology.nodes if n.cpus) == 1 and topology.nodes:
        return (traced.bus_id if traced else None), topology.nodes[0].id
    return (traced.bus_id if traced else None), None


def _run_intervals(sched: Table) -> Table:
    """Scheduled-in intervals (globalTid, cpu, run_ns), by thread then start: each sched-in
    to the next event of the same thread."""
    order = np.lexsort((sched["start"], sched["globalTid"]))  # stable: ties in table order
    tid, start, sched_in = (sched[c][order] for c in ("globalTid", "start", "isSchedIn"))
    # A sched-in followed, on its thread, by a sched-out.
    keep = np.zeros(order.size, dtype=bool)
    keep[:-1] = (sched_in[:-1] == 1) & (tid[1:] == tid[:-1]) & (sched_in[1:] == 0)
    at = np.flatnonzero(keep)
    return Table(
        {
            "globalTid": tid[at],
            "cpu": sched["cpu"][order[at]],
            "run_ns": (start[at + 1] - start[at]).astype(np.int64),
        }
    )


def _role(role: str, runs: Table, gpu_node: int | None) -> RolePlacement:
    total = int(runs["run_ns"].sum())
    per_node = Groups([runs["node"]], sort=True)
    run_ns = per_node.sum(runs["run_ns"])
    nodes, sums = per_node.keys[0].tolist(), run_ns.tolist()
    shares = tuple(
        NodeShare(node=nodes[k], run_ns=sums[k], share_ratio=sums[k] / total if total else 0.0)
        for k in descending(run_ns).tolist()
    )
    if gpu_node is None or not total:
        ratio, verdict = None, "unknown"
    else:
        on_gpu_node = run_ns[per_node.keys[0] == gpu_node]
        ratio = float(on_gpu_node[0] if on_gpu_node.size else 0) / total
        verdict = (
            "local" if ratio >= LOCAL_RATIO else "remote" if ratio <= REMOTE_RATIO else "split"
        )
    return RolePlacement(
        role=role,
        threads=int(distinct(runs["globalTid"]).size),
        run_ns=total,
        cpus=tuple(sorted(int(c) for c in distinct(runs["cpu"]).tolist())),
        nodes=shares,
        gpu_node_ratio=ratio,
        verdict=verdict,
    )
