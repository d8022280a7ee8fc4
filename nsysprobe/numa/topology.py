"""Where the CPUs, memory and GPUs of a machine are: NUMA nodes, sockets, cores, caches, GPUs.

Everything is read from ``/sys`` and ``/proc`` below an injectable ``root`` (``/`` on the live
machine), so a saved tree or a fake one in a test reads exactly like the real thing.

Sources, in the order the kernel exposes them:

- ``sys/devices/system/node/node<N>/{cpulist,meminfo}``: CPUs and memory of each node. A node
  with memory and no CPUs is *memory-only* (GH200's GPU memory, CXL memory).
- ``sys/devices/system/cpu/{online,possible}`` and ``cpu<N>/topology``, ``cpu<N>/cache``:
  sockets, SMT siblings and the CPUs sharing the last-level cache (a core complex on AMD).
- ``sys/bus/pci/devices/<bus id>/{vendor,class,numa_node,local_cpulist}``: NVIDIA GPUs and the
  node they hang off. Virtual machines often report ``numa_node`` as -1; then the GPU's node is
  unknown unless the machine has a single node with CPUs.
- ``proc/self/status`` ``Cpus_allowed_list``: the CPUs this process may use (cgroup cpuset and
  inherited affinity), which every plan is restricted to, as torchrun does. A Slurm job (or a
  container) can be given CPUs of one node only: a GPU on another node then has no CPU this
  job may use, and binding to its node is impossible in this job (``Topology.bindable``).

Every file is read with a size bound, only when it is a regular file inside the root
(``nsysprobe.numa.tree``), every folder is listed up to a bound on its entries, and every list
goes through the bounded parser (``nsysprobe.numa.cpulist``), so a tree that is not a real
``/sys`` ends in a one-line error.

GPU indices follow PCI bus order, which is nvidia-smi's order and CUDA's for identical GPUs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from nsysprobe.errors import TopologyError
from nsysprobe.numa.cpulist import MAX_CPUS, MAX_NODES, format_cpulist, parse_cpulist, parse_id
from nsysprobe.numa.tree import listed, read_in

# The largest sysfs or /proc file read whole (a CPU list of 8192 CPUs, /proc/PID/status) is
# tens of kB.
SYSFS_MAX_BYTES = 1 << 20

SCHEMA_VERSION = 1
NVIDIA_VENDOR = "0x10de"
# PCI classes of a GPU: VGA controller (0x0300xx) and 3D controller (0x0302xx). NVSwitches are
# bridges (0x0680xx) and must not be counted as GPUs.
GPU_CLASSES = ("0x0300", "0x0302")
# More GPUs than any one host holds (the largest have 16); a longer list is not a real machine.
MAX_GPUS = 64
# Entries a sysfs folder may hold: cpu<N> and node<N> beside a dozen files, a CPU's few cache
# levels, the PCI functions of a large server (thousands, with SR-IOV virtual functions).
MAX_CPU_ENTRIES = 2 * MAX_CPUS
MAX_NODE_ENTRIES = 2 * MAX_NODES
MAX_CACHE_ENTRIES = 64
MAX_PCI_ENTRIES = 1 << 16
ROOT_FIX = "point --root at a folder holding sys/ and proc/ of a Linux machine"
# What a Slurm user asks for to get CPUs on the GPUs' nodes.
SLURM_FIX = "ask Slurm for CPUs on that node (--gres-flags=enforce-binding)"


@dataclass(frozen=True)
class Cpu:
    """One online logical CPU. ``core`` and ``llc`` name a group by its lowest CPU id."""

    id: int
    node: int
    socket: int
    core: int
    llc: int | None = None


@dataclass(frozen=True)
class NumaNode:
    """A NUMA node. ``cpus_unlisted``: it has CPUs, but a recording made inside a cpuset that
    holds none of them (a Slurm job, a container) does not list them."""

    id: int
    cpus: frozenset[int]
    memory_kb: int | None = None
    cpus_unlisted: bool = False

    @property
    def memory_only(self) -> bool:
        return not self.cpus and not self.cpus_unlisted


@dataclass(frozen=True)
class Gpu:
    """An NVIDIA GPU; ``numa_node`` is None when unknown, ``reported_node`` is what sysfs said."""

    index: int
    bus_id: str | None
    numa_node: int | None
    reported_node: int | None = None
    local_cpus: frozenset[int] = frozenset()


@dataclass(frozen=True)
class Topology:
    nodes: tuple[NumaNode, ...]
    cpus: tuple[Cpu, ...]
    gpus: tuple[Gpu, ...]
    allowed_cpus: frozenset[int]
    offline_cpus: frozenset[int] = frozenset()
    source: str = "/"
    notes: tuple[str, ...] = field(default=())

    def node(self, node_id: int) -> NumaNode:
        for node in self.nodes:
            if node.id == node_id:
                return node
        known = ", ".join(str(n.id) for n in self.nodes) or "none"
        raise TopologyError(f"NUMA node {node_id} is not in {self.source} (nodes: {known})")

    def gpu(self, index: int) -> Gpu:
        for gpu in self.gpus:
            if gpu.index == index:
                return gpu
        raise TopologyError(
            f"GPU {index} is not in {self.source} ({len(self.gpus)} GPUs found); "
            "use fewer processes or check CUDA_VISIBLE_DEVICES"
        )

    @property
    def cpu_nodes(self) -> tuple[NumaNode, ...]:
        """Nodes that have CPUs, listed or not (memory-only nodes left out)."""
        return tuple(node for node in self.nodes if not node.memory_only)

    def node_cpus(self, node_id: int) -> frozenset[int]:
        """The CPUs of node ``node_id`` that this process may use."""
        return self.node(node_id).cpus & self.allowed_cpus

    def bindable(self, node_id: int) -> bool:
        """Whether this process may use some CPU of node ``node_id``. A Slurm job (or a
        container) whose cpuset holds none of the node's CPUs cannot bind anything to it."""
        return bool(self.node_cpus(node_id))

    def outside_cpuset(self, node: NumaNode) -> bool:
        """True when ``node`` has CPUs, listed or not, and this process may use none of them."""
        return not node.memory_only and not self.bindable(node.id)

    def gpu_cpus(self, gpu: Gpu) -> frozenset[int]:
        """The CPUs local to ``gpu`` that this process may use: its node's, else its PCI list."""
        if gpu.numa_node is not None:
            return self.node_cpus(gpu.numa_node)
        return gpu.local_cpus & self.allowed_cpus

    def unbindable_note(self, node_id: int) -> str:
        """Why nothing can be bound to node ``node_id`` here, and what to ask for instead."""
        allowed = format_cpulist(self.allowed_cpus) or "none"
        return (
            f"this job may use no CPU of node {node_id} (it may use CPUs {allowed}), so "
            f"binding to node {node_id} is impossible in this job; {SLURM_FIX}"
        )


def cpu_to_node(topology: Topology) -> dict[int, int]:
    """Online CPU id -> NUMA node id, for mapping scheduler samples onto nodes."""
    return {cpu.id: cpu.node for cpu in topology.cpus}


def nodes_of(topology: Topology, cpus: frozenset[int]) -> frozenset[int]:
    """The NUMA nodes a CPU set spans (CPUs the topology does not know are ignored)."""
    mapping = cpu_to_node(topology)
    return frozenset(mapping[cpu] for cpu in cpus if cpu in mapping)


def single_cpu_node(topology: Topology) -> bool:
    """True when all CPUs sit on one node: then no binding can change locality."""
    return len(topology.cpu_nodes) <= 1


def discover(root: str | Path = "/") -> Topology:
    """Read the topology of the machine whose ``/sys`` and ``/proc`` live below ``root``."""
    root = Path(root)
    cpu_dir = root / "sys/devices/system/cpu"
    if not cpu_dir.is_dir():
        raise TopologyError(f"no {cpu_dir}: {ROOT_FIX}")
    notes: list[str] = []
    online = _online_cpus(root, cpu_dir)
    possible = _read_list(root, cpu_dir / "possible") or online
    offline = possible - online
    nodes = _read_nodes(root, root / "sys/devices/system/node", online)
    if not nodes:
        notes.append("the kernel exposes no NUMA nodes; all CPUs are counted as node 0")
        nodes = (NumaNode(0, online),)
    node_of = {cpu: node.id for node in nodes for cpu in node.cpus}
    cpus = tuple(
        _read_cpu(root, cpu_dir / f"cpu{cpu}", cpu, node_of.get(cpu, 0)) for cpu in sorted(online)
    )
    allowed = _allowed_cpus(root, root / "proc/self/status") or online
    gpus = _read_gpus(root, root / "sys/bus/pci/devices", nodes, notes)
    topology = Topology(
        nodes=nodes,
        cpus=cpus,
        gpus=gpus,
        allowed_cpus=allowed & online,
        offline_cpus=offline,
        source=str(root),
    )
    return replace(topology, notes=(*notes, *unbindable_notes(topology)))


def unbindable_notes(topology: Topology) -> list[str]:
    """One note per node whose GPUs cannot be bound to it in this job (see ``bindable``)."""
    by_node: dict[int, list[int]] = {}
    for gpu in topology.gpus:
        if gpu.numa_node is not None and not topology.bindable(gpu.numa_node):
            by_node.setdefault(gpu.numa_node, []).append(gpu.index)
    return [
        f"{'GPU' if len(gpus) == 1 else 'GPUs'} {format_cpulist(gpus)} on node {node}: "
        f"{topology.unbindable_note(node)}"
        for node, gpus in sorted(by_node.items())
    ]


def resolve_gpu_node(
    reported: int | None, local_cpus: frozenset[int], nodes: tuple[NumaNode, ...]
) -> tuple[int | None, str | None]:
    """The node a GPU belongs to, and a note when it had to be inferred or stays unknown.

    A reported node >= 0 that the machine has is trusted. Otherwise the node is the one whose
    CPUs equal the GPU's local CPU list, or the only node with CPUs; failing both it is unknown.
    """
    if reported is not None and reported >= 0:
        if any(node.id == reported for node in nodes):
            return reported, None
    with_cpus = [node for node in nodes if node.cpus]
    matching = [node for node in with_cpus if local_cpus and node.cpus == local_cpus]
    if len(matching) == 1:
        return matching[0].id, "node inferred from the GPU's CPU affinity"
    if len(with_cpus) == 1:
        return with_cpus[0].id, "node is the machine's only node with CPUs"
    return None, "node unknown: pass --from with nvidia-smi-topo-m.txt recorded on the host"


def to_dict(topology: Topology) -> dict:
    """The JSON form: ``numa_nodes`` (id -> cpus, memory_only, ...) and ``gpus`` (index, ...)."""
    sockets: dict[int, set[int]] = {}
    for cpu in topology.cpus:
        sockets.setdefault(cpu.socket, set()).add(cpu.node)
    return {
        "schema_version": SCHEMA_VERSION,
        "source": topology.source,
        "numa_nodes": {
            str(node.id): {
                "cpus": sorted(node.cpus),
                "cpulist": format_cpulist(node.cpus),
                "memory_only": node.memory_only,
                "memory_mb": None if node.memory_kb is None else node.memory_kb // 1024,
                "cpus_unlisted": node.cpus_unlisted,
                "outside_cpuset": topology.outside_cpuset(node),
            }
            for node in topology.nodes
        },
        "sockets": {str(s): sorted(nodes) for s, nodes in sorted(sockets.items())},
        "gpus": [
            {
                "index": gpu.index,
                "bus_id": gpu.bus_id,
                "numa_node": gpu.numa_node,
                "reported_numa_node": gpu.reported_node,
                "cpus": sorted(topology.gpu_cpus(gpu)),
                "node_bindable": gpu.numa_node is None or topology.bindable(gpu.numa_node),
            }
            for gpu in topology.gpus
        ],
        "allowed_cpus": sorted(topology.allowed_cpus),
        "offline_cpus": sorted(topology.offline_cpus),
        "smt_threads_per_core": _threads_per_core(topology),
        "notes": list(topology.notes),
    }


def _threads_per_core(topology: Topology) -> int:
    per_core: dict[int, int] = {}
    for cpu in topology.cpus:
        per_core[cpu.core] = per_core.get(cpu.core, 0) + 1
    return max(per_core.values(), default=1)


def _read_text(root: Path, path: Path) -> str | None:
    text = read_in(path, root, limit=SYSFS_MAX_BYTES, fix=ROOT_FIX, error=TopologyError)
    return None if text is None else text.strip()


def _read_list(root: Path, path: Path) -> frozenset[int]:
    text = _read_text(root, path)
    return frozenset() if text is None else parse_cpulist(text, where=str(path), fix=ROOT_FIX)


def _read_number(root: Path, path: Path, kind: str) -> int | None:
    """A CPU/node id or a small count in ``path``; None when absent or -1 (unknown)."""
    text = _read_text(root, path)
    if text is None or text == "-1":
        return None
    return parse_id(text, where=str(path), kind=kind, fix=ROOT_FIX)


def _entries(folder: Path, limit: int) -> list[Path]:
    """The entries of ``folder`` (none when it is absent); TopologyError past ``limit``."""
    names, more = listed(folder, limit)
    if more:
        raise TopologyError(
            f"{folder}: more than {limit} entries, more than any real one holds; {ROOT_FIX}"
        )
    return [folder / name for name in names]


def _numbered_entries(folder: Path, prefix: str, kind: str, limit: int) -> list[tuple[int, Path]]:
    """``cpu12`` -> (12, path), for each name that is ``prefix`` and a number (not
    ``cpufreq``), in id order."""
    found = []
    for entry in _entries(folder, limit):
        suffix = entry.name[len(prefix) :]
        if entry.name.startswith(prefix) and suffix.isascii() and suffix.isdigit():
            found.append((parse_id(suffix, where=str(entry), kind=kind, fix=ROOT_FIX), entry))
    return sorted(found)


def _online_cpus(root: Path, cpu_dir: Path) -> frozenset[int]:
    online = _read_list(root, cpu_dir / "online")
    if online:
        return online
    # Without an ``online`` file every CPU directory counts, minus those marked offline.
    return frozenset(
        cpu
        for cpu, entry in _numbered_entries(cpu_dir, "cpu", "CPU", MAX_CPU_ENTRIES)
        if _read_text(root, entry / "online") != "0"
    )


def _read_nodes(root: Path, node_dir: Path, online: frozenset[int]) -> tuple[NumaNode, ...]:
    nodes = []
    node_of: dict[int, int] = {}
    for node_id, entry in _numbered_entries(node_dir, "node", "node", MAX_NODE_ENTRIES):
        # Offline CPUs can linger in a node's list; they cannot run anything.
        cpus = _read_list(root, entry / "cpulist") & online
        claim_cpus(node_of, node_id, cpus, where=str(entry / "cpulist"), fix=ROOT_FIX)
        nodes.append(NumaNode(node_id, cpus, _memory_kb(root, entry / "meminfo")))
    return tuple(sorted(nodes, key=lambda node: node.id))


def claim_cpus(
    node_of: dict[int, int], node: int, cpus: frozenset[int], *, where: str, fix: str
) -> None:
    """Record ``cpus`` as node ``node``'s in ``node_of``; TopologyError for a CPU another node
    already has. A CPU is on one node only, so the nodes' sets hold ``MAX_CPUS`` ids in all."""
    for cpu in cpus:
        other = node_of.setdefault(cpu, node)
        if other != node:
            raise TopologyError(
                f"{where}: CPU {cpu} is listed on node {other} and again on node {node}, "
                f"but a CPU is on one node only; {fix}"
            )


def _memory_kb(root: Path, meminfo: Path) -> int | None:
    text = _read_text(root, meminfo)
    if text is None:
        return None
    match = re.search(r"MemTotal:\s+([0-9]{1,15})\s*kB", text)
    return int(match.group(1)) if match else None


def _read_cpu(root: Path, path: Path, cpu: int, node: int) -> Cpu:
    topo = path / "topology"
    socket = _read_number(root, topo / "physical_package_id", "socket")
    siblings = _read_list(root, topo / "thread_siblings_list") or frozenset({cpu})
    return Cpu(
        id=cpu,
        node=node,
        socket=socket or 0,
        core=min(siblings),
        llc=_last_level_cache(root, path / "cache"),
    )


def _last_level_cache(root: Path, cache_dir: Path) -> int | None:
    """Lowest CPU id sharing the highest-level data or unified cache (not instruction caches)."""
    best_level, best = -1, None
    for _, index in _numbered_entries(cache_dir, "index", "cache", MAX_CACHE_ENTRIES):
        if _read_text(root, index / "type") not in ("Unified", "Data"):
            continue
        level = _read_number(root, index / "level", "cache level")
        shared = _read_list(root, index / "shared_cpu_list")
        if level is not None and level > best_level and shared:
            best_level, best = level, min(shared)
    return best


def _allowed_cpus(root: Path, status: Path) -> frozenset[int]:
    text = _read_text(root, status) or ""
    match = re.search(r"^Cpus_allowed_list:[ \t]*(\S*)", text, re.MULTILINE)
    return parse_cpulist(match.group(1), where=str(status), fix=ROOT_FIX) if match else frozenset()


def _read_gpus(
    root: Path, pci_dir: Path, nodes: tuple[NumaNode, ...], notes: list[str]
) -> tuple[Gpu, ...]:
    found = []
    for device in sorted(_entries(pci_dir, MAX_PCI_ENTRIES)):
        if _read_text(root, device / "vendor") != NVIDIA_VENDOR:
            continue
        if not (_read_text(root, device / "class") or "").startswith(GPU_CLASSES):
            continue
        found.append(device)
        if len(found) > MAX_GPUS:
            raise TopologyError(
                f"{pci_dir}: more than {MAX_GPUS} NVIDIA GPUs, more than any machine has; "
                f"{ROOT_FIX}"
            )
    gpus = []
    for index, device in enumerate(found):
        reported_text = _read_text(root, device / "numa_node")
        reported = _reported_node(reported_text, device / "numa_node")
        local = _read_list(root, device / "local_cpulist")
        node, why = resolve_gpu_node(reported, local, nodes)
        if why is not None:
            notes.append(f"GPU {index} ({device.name}) reports NUMA node {reported}; {why}")
        gpus.append(Gpu(index, device.name, node, reported, local))
    return tuple(gpus)


def _reported_node(text: str | None, path: Path) -> int | None:
    """sysfs ``numa_node``: a node id, or -1 (which virtual machines often report) for none."""
    if text is None:
        return None
    if text.startswith("-") and text[1:].isascii() and text[1:].isdigit():
        return -1
    return parse_id(text, where=str(path), kind="node", fix=ROOT_FIX)
