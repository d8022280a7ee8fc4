"""Text and JSON forms of topologies, plans and placement reports, and each one's renderers
(format -> function, for ``nsysprobe.render.render_as``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import lru_cache

from nsysprobe.numa.cpulist import format_cpulist
from nsysprobe.numa.placement import PlacementReport
from nsysprobe.numa.plan import Plan
from nsysprobe.numa.topology import SCHEMA_VERSION, Topology, single_cpu_node, to_dict


def topology_json(topology: Topology) -> dict:
    return to_dict(topology)


def topology_text(topology: Topology) -> str:
    lines = [f"NUMA topology of {topology.source}"]
    socket_of_node = {cpu.node: cpu.socket for cpu in topology.cpus}
    for node in topology.nodes:
        memory = "" if node.memory_kb is None else f", {node.memory_kb // 1024} MiB"
        if node.memory_only:
            lines.append(f"  node {node.id}: memory only{memory}")
        elif node.cpus_unlisted:
            lines.append(
                f"  node {node.id}: CPUs not in the recording (outside its cpuset){memory}"
            )
        else:
            socket = socket_of_node.get(node.id, 0)
            outside = ", none in this job's cpuset" if topology.outside_cpuset(node) else ""
            lines.append(
                f"  node {node.id} (socket {socket}): CPUs {format_cpulist(node.cpus)}{memory}"
                f"{outside}"
            )
    for gpu in topology.gpus:
        node = "unknown" if gpu.numa_node is None else str(gpu.numa_node)
        bus = f" {gpu.bus_id}" if gpu.bus_id else ""
        if gpu.numa_node is not None and not topology.bindable(gpu.numa_node):
            lines.append(
                f"  GPU {gpu.index}{bus}: node {node}, no CPU of it in this job's cpuset: "
                f"binding to node {node} is impossible in this job"
            )
            continue
        cpus = format_cpulist(topology.gpu_cpus(gpu)) or "-"
        lines.append(f"  GPU {gpu.index}{bus}: node {node}, CPUs {cpus}")
    if not topology.gpus:
        lines.append("  no NVIDIA GPU found")
    lines.append(f"  this process may use CPUs {format_cpulist(topology.allowed_cpus) or 'none'}")
    if topology.offline_cpus:
        lines.append(f"  offline CPUs {format_cpulist(topology.offline_cpus)}")
    if single_cpu_node(topology):
        lines.append("  one NUMA node with CPUs: NUMA binding cannot help on this machine")
    lines.extend(f"  note: {note}" for note in topology.notes)
    return "\n".join(lines)


def plan_json(plan: Plan) -> dict:
    return {
        "schema_version": SCHEMA_VERSION,
        "mode": plan.mode,
        "ranks": [
            {
                "local_rank": rank.local_rank,
                "gpu": rank.gpu,
                "gpu_numa_node": rank.gpu_node,
                "cpus": sorted(rank.cpus),
                "cpulist": format_cpulist(rank.cpus),
                "memory_nodes": sorted(rank.memory_nodes),
                "unbound_reason": rank.note or None,
            }
            for rank in plan.ranks
        ],
        "notes": list(plan.notes),
    }


def plan_text(plan: Plan) -> str:
    lines = [f"mode {plan.mode}"]
    for rank in plan.ranks:
        where = f"  rank {rank.local_rank} -> GPU {rank.gpu} (node {rank.gpu_node}): "
        if not rank.cpus:
            lines.append(f"{where}unbound: {rank.note}")
            continue
        lines.append(
            f"{where}CPUs {format_cpulist(rank.cpus)}, "
            f"memory node {format_cpulist(rank.memory_nodes)}"
        )
    lines.extend(f"  note: {note}" for note in plan.notes)
    return "\n".join(lines)


def placement_json(report: PlacementReport) -> dict:
    cpulist = lru_cache(maxsize=1024)(format_cpulist)
    return {
        "schema_version": SCHEMA_VERSION,
        "pid": report.root_pid,
        "single_numa_node": report.single_node,
        "entries": [
            {
                "pid": e.pid,
                "tid": e.tid,
                "role": e.role,
                "name": e.name,
                "cpus": cpulist(e.cpus),
                "cpu_nodes": sorted(e.cpu_nodes),
                "mems_allowed": sorted(e.mems_allowed),
                "memory_policy": e.policy,
                "resident_kb_by_node": {str(n): kb for n, kb in e.pages_kb_by_node},
                "gpu": e.gpu,
                "gpu_numa_node": e.gpu_node,
                "verdict": e.verdict,
                "reason": e.reason,
            }
            for e in report.entries
        ],
        "notes": list(report.notes),
    }


def placement_text(report: PlacementReport) -> str:
    # The entries of one tree share a few CPU sets, each formatted once.
    cpulist = lru_cache(maxsize=1024)(format_cpulist)
    lines = []
    for e in report.entries:
        who = f"  thread {e.tid} {e.name}" if e.tid is not None else f"{e.role} {e.pid} {e.name}"
        pages = " ".join(f"N{n}={kb // 1024}MiB" for n, kb in e.pages_kb_by_node)
        memory = "" if e.tid is not None else f"; policy {e.policy}, pages {pages or '-'}"
        lines.append(
            f"{who}: CPUs {cpulist(e.cpus)} (nodes {format_cpulist(e.cpu_nodes)}){memory}"
            f" -> {e.verdict}: {e.reason}"
        )
    lines.extend(f"  note: {note}" for note in report.notes)
    return "\n".join(lines)


def _as_json(form: Callable[[object], dict]) -> Callable[[object], str]:
    """A renderer of ``form``'s dict as indented JSON."""
    return lambda subject: json.dumps(form(subject), indent=2)


TOPOLOGY_RENDERERS = {"text": topology_text, "json": _as_json(topology_json)}
PLAN_RENDERERS = {"text": plan_text, "json": _as_json(plan_json)}
PLACEMENT_RENDERERS = {"text": placement_text, "json": _as_json(placement_json)}
