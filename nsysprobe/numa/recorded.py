"""Topology from recorded command outputs, for planning a machine you are not on.

A folder may hold any of ``lscpu.txt``, ``numactl-hardware.txt`` and
``nvidia-smi-topo-m.txt``; ``nsysprobe.numa.command_outputs`` says how each is read.

Recorded inside a Slurm job (or a container) whose cpuset holds CPUs of some nodes only, the
three show that cpuset: ``lscpu``/``numactl --hardware`` list the allowed CPUs alone (numactl
may list a node with no CPUs, or leave it out), and ``nvidia-smi topo -m`` prints an empty CPU
Affinity cell for a GPU on a node without allowed CPUs while its NUMA Affinity still names the
node. Such a node is kept with ``cpus_unlisted``: the GPU's node is known, binding to it is
impossible in that job.

Each file is read with bounds (``RECORDED_MAX_BYTES``, ``RECORDED_MAX_LINES``,
``MAX_LINE_CHARS``) and every id and list through ``nsysprobe.numa.cpulist``: a file that no
real machine prints ends in a one-line TopologyError naming it and how to record it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from nsysprobe.common.files import read_text
from nsysprobe.errors import TopologyError
from nsysprobe.numa.command_outputs import (
    LSCPU_FILE,
    NUMACTL_FILE,
    RECORD,
    TOPO_FILE,
    LscpuInfo,
    NumactlInfo,
    TopoGpu,
    parse_lscpu,
    parse_numactl_hardware,
    parse_nvidia_smi_topo,
)
from nsysprobe.numa.cpulist import MAX_CPUS, MAX_LIST_CHARS, format_cpulist
from nsysprobe.numa.topology import (
    Cpu,
    Gpu,
    NumaNode,
    Topology,
    resolve_gpu_node,
    unbindable_notes,
)

# Far past what the largest machine prints: `lscpu -p` for 8192 CPUs is about 8200 lines of
# 40 bytes, `numactl --hardware` for 1024 nodes about 5000 lines (its distance rows 4 kB each).
RECORDED_MAX_BYTES = 8 << 20
RECORDED_MAX_LINES = 65536
MAX_LINE_CHARS = MAX_LIST_CHARS
# Everything Python's str.splitlines() splits at.
_LINE_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"


def load_recorded(folder: str | Path) -> Topology:
    """Build a topology from whichever of the three recordings ``folder`` holds."""
    folder = Path(folder)
    texts = {
        name: text
        for name in (LSCPU_FILE, NUMACTL_FILE, TOPO_FILE)
        if (text := read_recorded(folder / name)) is not None
    }
    if not texts:
        raise TopologyError(
            f"{folder} holds none of {LSCPU_FILE}, {NUMACTL_FILE}, {TOPO_FILE}: record them "
            f"with `lscpu -p`, `numactl --hardware` and `nvidia-smi topo -m`"
        )
    where = {name: str(folder / name) for name in texts}
    notes: list[str] = []
    lscpu = parse_lscpu(texts[LSCPU_FILE], where=where[LSCPU_FILE]) if LSCPU_FILE in texts else None
    numactl = (
        parse_numactl_hardware(texts[NUMACTL_FILE], where=where[NUMACTL_FILE])
        if NUMACTL_FILE in texts
        else None
    )
    topo = (
        parse_nvidia_smi_topo(texts[TOPO_FILE], where=where[TOPO_FILE])
        if TOPO_FILE in texts
        else ()
    )
    if lscpu is not None:
        notes.extend(lscpu.notes)
    nodes = _merge_nodes(lscpu, numactl, topo)
    notes.extend(_add_unlisted_nodes(nodes, topo))
    node_list = tuple(nodes[node] for node in sorted(nodes))
    online = frozenset().union(*(node.cpus for node in node_list))
    if lscpu is not None and lscpu.cpus:
        cpus = lscpu.cpus
    else:
        notes.append("no lscpu.txt: each node counted as its own socket, each CPU as its own core")
        cpus = tuple(
            Cpu(cpu, node.id, node.id, cpu, None) for node in node_list for cpu in sorted(node.cpus)
        )
        cpus = tuple(sorted(cpus, key=lambda cpu: cpu.id))
    gpus = []
    for row in topo:
        numa = row.numa_affinity
        reported = min(numa) if numa and len(numa) == 1 else None
        node, why = resolve_gpu_node(reported, row.cpu_affinity or frozenset(), node_list)
        if why is not None:
            notes.append(f"GPU {row.index}: NUMA affinity N/A in {TOPO_FILE}; {why}")
        gpus.append(Gpu(row.index, None, node, reported, row.cpu_affinity or frozenset()))
    topology = Topology(
        nodes=node_list,
        cpus=cpus,
        gpus=tuple(gpus),
        allowed_cpus=online,
        offline_cpus=lscpu.offline if lscpu is not None else frozenset(),
        source=str(folder),
    )
    return replace(topology, notes=(*notes, *unbindable_notes(topology)))


def read_recorded(path: Path) -> str | None:
    """The text of one recording, None when it is absent; TopologyError when it is not a
    regular file or larger than any real machine's (``RECORDED_MAX_*``, ``MAX_LINE_CHARS``)."""
    fix = RECORD.get(path.name, "record it again")
    text = read_text(path, limit=RECORDED_MAX_BYTES, fix=fix, error=TopologyError)
    if text is None:
        return None
    # Counted before splitting, so that millions of short lines are never made into a list.
    breaks = sum(text.count(mark) for mark in _LINE_BREAKS)
    if breaks > RECORDED_MAX_LINES:
        raise TopologyError(
            f"{path}: more than {RECORDED_MAX_LINES} lines, more than a recording of the "
            f"largest machine ({MAX_CPUS} CPUs) holds; {fix}"
        )
    longest = max(map(len, text.splitlines()), default=0)
    if longest > MAX_LINE_CHARS:
        raise TopologyError(
            f"{path}: a line of {longest} characters, longer than any the command prints; {fix}"
        )
    return text


def _merge_nodes(
    lscpu: LscpuInfo | None, numactl: NumactlInfo | None, topo: tuple[TopoGpu, ...]
) -> dict[int, NumaNode]:
    if numactl is not None:
        nodes = {node.id: node for node in numactl.nodes}
    elif lscpu is not None:
        nodes = {node: NumaNode(node, cpus) for node, cpus in lscpu.nodes.items()}
    else:
        nodes = {}
        for row in topo:
            if row.numa_affinity and len(row.numa_affinity) == 1 and row.cpu_affinity:
                node = min(row.numa_affinity)
                nodes[node] = NumaNode(
                    node, nodes.get(node, NumaNode(node, frozenset())).cpus | row.cpu_affinity
                )
        union = frozenset().union(*(row.cpu_affinity or frozenset() for row in topo))
        if not nodes and union:
            nodes = {0: NumaNode(0, union)}
    for row in topo:
        # GH200-style GPU memory shows up as its own node with no CPUs.
        if row.gpu_numa_id is not None and row.gpu_numa_id not in nodes:
            nodes[row.gpu_numa_id] = NumaNode(row.gpu_numa_id, frozenset())
    return nodes


def _add_unlisted_nodes(nodes: dict[int, NumaNode], topo: tuple[TopoGpu, ...]) -> list[str]:
    """Keep the node a GPU's NUMA Affinity names though the recording lists none of its CPUs.

    A GPU's NUMA affinity is the node of the CPUs closest to it, so that node has CPUs; when
    the recording shows none (numactl leaves the node out or gives it no CPUs, nvidia-smi an
    empty CPU Affinity), they lie outside the cpuset the recording was made in.
    """
    gpus_of: dict[int, list[int]] = {}
    for row in topo:
        if row.numa_affinity and len(row.numa_affinity) == 1:
            node = min(row.numa_affinity)
            if node not in nodes or not nodes[node].cpus:
                gpus_of.setdefault(node, []).append(row.index)
    notes = []
    for node, gpus in sorted(gpus_of.items()):
        known = nodes.get(node)
        memory = known.memory_kb if known is not None else None
        nodes[node] = NumaNode(node, frozenset(), memory, cpus_unlisted=True)
        which = ("GPU " if len(gpus) == 1 else "GPUs ") + format_cpulist(gpus)
        notes.append(
            f"node {node}: {TOPO_FILE} names it the NUMA affinity of {which}, but the recording "
            "lists none of its CPUs: they lie outside the cpuset it was recorded in"
        )
    return notes
