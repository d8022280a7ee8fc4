"""Fake /sys and /proc trees built from a declarative machine description."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class FakeGpu:
    bus_id: str
    numa_node: int
    local_cpulist: str = ""


@dataclass(frozen=True)
class MachineSpec:
    """``nodes``: node -> CPU list text ("" for memory-only); ``sockets`` likewise.

    ``smt_offset``: CPU i and i + offset are siblings (0: no SMT). ``llc_size``: consecutive
    physical cores per last-level cache. ``offline``: CPUs that are present but offline.
    """

    nodes: dict[int, str]
    sockets: dict[int, str]
    smt_offset: int = 0
    llc_size: int = 0
    offline: tuple[int, ...] = ()
    gpus: tuple[FakeGpu, ...] = ()
    allowed: str | None = None
    memory_mb: dict[int, int] = field(default_factory=dict)
    other_pci: tuple[tuple[str, str, str], ...] = ()


def _ids(text: str) -> list[int]:
    ids: list[int] = []
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        ids.extend(range(int(low), int(high or low) + 1))
    return ids


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def build(root: Path, spec: MachineSpec) -> Path:
    every = sorted({cpu for text in spec.nodes.values() for cpu in _ids(text)} | set(spec.offline))
    online = [cpu for cpu in every if cpu not in spec.offline]
    cpu_dir = root / "sys/devices/system/cpu"
    _write(cpu_dir / "possible", f"0-{max(every)}")
    _write(cpu_dir / "online", ",".join(map(str, online)))
    socket_of = {cpu: s for s, text in spec.sockets.items() for cpu in _ids(text)}
    for cpu in every:
        base = cpu_dir / f"cpu{cpu}"
        if cpu in spec.offline:
            _write(base / "online", "0")
            continue  # the kernel removes topology/ and cache/ of an offline CPU
        physical = cpu % spec.smt_offset if spec.smt_offset else cpu
        siblings = [c for c in (physical, physical + spec.smt_offset) if c in online]
        if not spec.smt_offset:
            siblings = [cpu]
        _write(base / "topology/physical_package_id", str(socket_of[cpu]))
        _write(base / "topology/thread_siblings_list", ",".join(map(str, siblings)))
        _write(base / "cache/index0/type", "Instruction")
        _write(base / "cache/index0/level", "1")
        _write(base / "cache/index0/shared_cpu_list", str(cpu))
        _write(base / "cache/index1/type", "Data")
        _write(base / "cache/index1/level", "1")
        _write(base / "cache/index1/shared_cpu_list", ",".join(map(str, siblings)))
        if spec.llc_size:
            first = physical // spec.llc_size * spec.llc_size
            group = [
                c
                for p in range(first, first + spec.llc_size)
                for c in ((p, p + spec.smt_offset) if spec.smt_offset else (p,))
                if c in online
            ]
            _write(base / "cache/index3/type", "Unified")
            _write(base / "cache/index3/level", "3")
            _write(base / "cache/index3/shared_cpu_list", ",".join(map(str, sorted(group))))
    node_dir = root / "sys/devices/system/node"
    for node, text in spec.nodes.items():
        _write(node_dir / f"node{node}/cpulist", text)
        memory_kb = spec.memory_mb.get(node, 1024) * 1024
        _write(node_dir / f"node{node}/meminfo", f"Node {node} MemTotal:       {memory_kb} kB")
    for gpu in spec.gpus:
        dev = root / "sys/bus/pci/devices" / gpu.bus_id
        _write(dev / "vendor", "0x10de")
        _write(dev / "class", "0x030200")
        _write(dev / "numa_node", str(gpu.numa_node))
        _write(dev / "local_cpulist", gpu.local_cpulist)
    for bus_id, vendor, pci_class in spec.other_pci:
        dev = root / "sys/bus/pci/devices" / bus_id
        _write(dev / "vendor", vendor)
        _write(dev / "class", pci_class)
        _write(dev / "numa_node", "0")
    allowed = spec.allowed or ",".join(map(str, online))
    _write(root / "proc/self/status", f"Name:\tpython\nCpus_allowed_list:\t{allowed}")
    return root
