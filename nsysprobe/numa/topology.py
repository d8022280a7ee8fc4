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

Every file is read with a size bound and every list through the bounded parser
(``nsysprobe.numa.cpulist``), so a tree that is not a real ``/sys`` ends in a one-line error.

GPU indices follow PCI bus order, which is nvidia-smi's order and CUDA's for identical GPUs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from nsysprobe.common.files import read_text
from nsysprobe.errors import TopologyError
from nsysprobe.numa.cpulist import format_cpulist, parse_cpulist, parse_id

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
    online = _online_cpus(cpu_dir)
    possible = _read_list(cpu_dir / "possible") or online
    offline = possible - online
    nodes = _read_nodes(root / "sys/devices/system/node", online)
    if not nodes:
        notes.append("the kernel exposes no NUMA nodes; all CPUs are counted as node 0")
        nodes = (NumaNode(0, online),)
    node_of = {cpu: node.id for node in nodes for cpu in node.cpus}
    cpus = tuple(
        _read_cpu(cpu_dir / f"cpu{cpu}", cpu, node_of.get(cpu, 0)) for cpu in sorted(online)
    )
    allowed = _allowed_cpus(root / "proc/self/status") or online
    gpus = _read_gpus(root / "sys/bus/pci/devices", nodes, notes)
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


def _read_text(path: Path) -> str | None:
    text = read_text(path, limit=SYSFS_MAX_BYTES, fix=ROOT_FIX, error=TopologyError)
    return None if text is None else text.strip()


def _read_list(path: Path) -> frozenset[int]:
    text = _read_text(path)
    return frozenset() if text is None else parse_cpulist(text, where=str(path), fix=ROOT_FIX)


def _read_number(path: Path, kind: str) -> int | None:
    """A CPU/node id or a small count in ``path``; None when absent or -1 (unknown)."""
    text = _read_text(path)
    if text is None or text == "-1":
        return None
    return parse_id(text, where=str(path), kind=kind, fix=ROOT_FIX)


def _entry_id(entry: Path, prefix: str, kind: str) -> int | None:
    """``cpu12`` -> 12; None for a name that is not the prefix and a number (``cpufreq``)."""
    suffix = entry.name[len(prefix) :]
    if not (suffix.isascii() and suffix.isdigit()):
        return None
    return parse_id(suffix, where=str(entry), kind=kind, fix=ROOT_FIX)


def _online_cpus(cpu_dir: Path) -> frozenset[int]:
    online = _read_list(cpu_dir / "online")
    if online:
        return online
    # Without an ``online`` file every CPU directory counts, minus those marked offline.
    ids = set()
    for entry in cpu_dir.glob("cpu[0-9]*"):
        cpu = _entry_id(entry, "cpu", "CPU")
        if cpu is not None and _read_text(entry / "online") != "0":
            ids.add(cpu)
    return frozenset(ids)


def _read_nodes(node_dir: Path, online: frozenset[int]) -> tuple[NumaNode, ...]:
    nodes = []
    for entry in node_dir.glob("node[0-9]*"):
        node_id = _entry_id(entry, "node", "node")
        if node_id is None:
            continue
        # Offline CPUs can linger in a node's list; they cannot run anything.
        cpus = _read_list(entry / "cpulist") & online
        nodes.append(NumaNode(node_id, cpus, _memory_kb(entry / "meminfo")))
    return tuple(sorted(nodes, key=lambda node: node.id))


def _memory_kb(meminfo: Path) -> int | None:
    text = _read_text(meminfo)
    if text is None:
        return None
    match = re.search(r"MemTotal:\s+([0-9]{1,15})\s*kB", text)
    return int(match.group(1)) if match else None


def _read_cpu(path: Path, cpu: int, node: int) -> Cpu:
    topo = path / "topology"
    socket = _read_number(topo / "physical_package_id", "socket")
    siblings = _read_list(topo / "thread_siblings_list") or frozenset({cpu})
    return Cpu(
        id=cpu,
        node=node,
        socket=socket or 0,
        core=min(siblings),
        llc=_last_level_cache(path / "cache"),
    )


def _last_level_cache(cache_dir: Path) -> int | None:
    """Lowest CPU id sharing the highest-level data or unified cache (not instruction caches)."""
    best_level, best = -1, None
    for index in cache_dir.glob("index[0-9]*"):
        if _read_text(index / "type") not in ("Unified", "Data"):
            continue
        level = _read_number(index / "level", "cache level")
        shared = _read_list(index / "shared_cpu_list")
        if level is not None and level > best_level and shared:
            best_level, best = level, min(shared)
    return best


def _allowed_cpus(status: Path) -> frozenset[int]:
    text = _read_text(status) or ""
    match = re.search(r"^Cpus_allowed_list:[ \t]*(\S*)", text, re.MULTILINE)
    return parse_cpulist(match.group(1), where=str(status), fix=ROOT_FIX) if match else frozenset()


def _read_gpus(pci_dir: Path, nodes: tuple[NumaNode, ...], notes: list[str]) -> tuple[Gpu, ...]:
    found = []
    for device in sorted(pci_dir.glob("*")):
        if _read_text(device / "vendor") != NVIDIA_VENDOR:
            continue
        if not (_read_text(device / "class") or "").startswith(GPU_CLASSES):
            continue
        found.append(device)
        if len(found) > MAX_GPUS:
            raise TopologyError(
                f"{pci_dir}: more than {MAX_GPUS} NVIDIA GPUs, more than any machine has; "
                f"{ROOT_FIX}"
            )
    gpus = []
    for index, device in enumerate(found):
        reported_text = _read_text(device / "numa_node")
        reported = _reported_node(reported_text, device / "numa_node")
        local = _read_list(device / "local_cpulist")
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
