"""Topology from recorded command outputs, for planning a machine you are not on.

A folder may hold any of:

- ``lscpu.txt``: plain ``lscpu`` in any locale, ``lscpu -p`` or ``lscpu -e``. Plain output is
  read by the shape of its values, not its labels: node lines are labels naming ``NUMA`` and a
  number with a CPU-list value; threads per core, cores per socket and sockets are the three
  consecutive integer fields whose product is the CPU count (that order holds in every
  util-linux release and translation). SMT siblings follow Linux's enumeration (CPU ``i`` and
  ``i + physical cores``) when every such pair lies on one node, and core complexes are cut
  from the L3 instance count; ``lscpu -p`` gives both exactly and is preferred.
- ``numactl-hardware.txt``: ``numactl --hardware``; nodes, their CPUs and memory (memory-only
  nodes included).
- ``nvidia-smi-topo-m.txt``: ``nvidia-smi topo -m``; each GPU's CPU and NUMA affinity.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from nsysprobe.errors import TopologyError
from nsysprobe.numa.cpulist import is_cpulist, parse_cpulist
from nsysprobe.numa.topology import Cpu, Gpu, NumaNode, Topology, resolve_gpu_node

LSCPU_FILE = "lscpu.txt"
NUMACTL_FILE = "numactl-hardware.txt"
TOPO_FILE = "nvidia-smi-topo-m.txt"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass(frozen=True)
class LscpuInfo:
    """What a recorded lscpu says. ``cpus`` is empty when only node lists could be read."""

    nodes: dict[int, frozenset[int]]
    online: frozenset[int]
    offline: frozenset[int]
    cpus: tuple[Cpu, ...]
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class NumactlInfo:
    nodes: tuple[NumaNode, ...]


@dataclass(frozen=True)
class TopoGpu:
    """One GPU row of ``nvidia-smi topo -m``; None where the cell said N/A."""

    index: int
    cpu_affinity: frozenset[int] | None
    numa_affinity: frozenset[int] | None
    gpu_numa_id: int | None


def parse_lscpu(text: str, *, where: str = LSCPU_FILE) -> LscpuInfo:
    lines = [_ANSI.sub("", line) for line in text.splitlines() if line.strip()]
    if not lines:
        raise TopologyError(f"{where} is empty: record it with `lscpu -p > {LSCPU_FILE}`")
    if any(line.startswith("#") for line in lines):
        return _parse_lscpu_parseable(lines, where)
    header = lines[0].split()
    if header and header[0].upper() == "CPU" and {"NODE", "SOCKET"} & {h.upper() for h in header}:
        return _parse_lscpu_extended(lines, where)
    return _parse_lscpu_plain(lines, where)


def _fields(lines: list[str]) -> list[tuple[str, str]]:
    fields = []
    for line in lines:
        match = re.match(r"^\s*([^:：]+?)\s*[:：]\s*(.*)$", line)
        if match:
            fields.append((match.group(1), match.group(2).strip()))
    return fields


def _parse_lscpu_plain(lines: list[str], where: str) -> LscpuInfo:
    fields = _fields(lines)
    nodes: dict[int, frozenset[int]] = {}
    for label, value in fields:
        numa_at = label.upper().find("NUMA")
        number = re.search(r"\d+", label[numa_at:]) if numa_at >= 0 else None
        if number and (value == "" or is_cpulist(value)):
            nodes[int(number.group())] = parse_cpulist(value, where=where)
    total, online = _cpu_count_and_online(fields)
    if not online:
        online = frozenset().union(*nodes.values()) if nodes else frozenset()
    if not online:
        raise TopologyError(
            f"{where} names no online CPUs: record it with `lscpu -p > {LSCPU_FILE}`"
        )
    total = max(total, max(online) + 1)
    if not nodes:
        nodes = {0: online}
    cpus, notes = _reconstruct_cpus(fields, nodes, online, total)
    return LscpuInfo(nodes, online, frozenset(range(total)) - online, cpus, tuple(notes))


def _cpu_count_and_online(fields: list[tuple[str, str]]) -> tuple[int, frozenset[int]]:
    """The CPU count is the first integer field; the online list is the CPU list right after it."""
    for i, (_, value) in enumerate(fields[:-1]):
        if value.isdigit():
            following = fields[i + 1][1]
            if is_cpulist(following) and not following.isdigit() or following == "0":
                return int(value), parse_cpulist(following)
            return int(value), frozenset()
    return 0, frozenset()


def _smt_triple(fields: list[tuple[str, str]], total: int) -> tuple[int, int, int] | None:
    """(threads per core, cores per socket, sockets): consecutive integers multiplying to total."""
    values = [value for _, value in fields]
    for i in range(len(values) - 2):
        if all(v.isdigit() for v in values[i : i + 3]):
            threads, cores, sockets = (int(v) for v in values[i : i + 3])
            if threads * cores * sockets == total and 0 < threads <= 8:
                return threads, cores, sockets
    return None


def _l3_instances(fields: list[tuple[str, str]]) -> int | None:
    for label, value in fields:
        if "L3" in label:
            match = re.search(r"\((\d+)\s", value)
            return int(match.group(1)) if match else None
    return None


def _reconstruct_cpus(
    fields: list[tuple[str, str]],
    nodes: dict[int, frozenset[int]],
    online: frozenset[int],
    total: int,
) -> tuple[tuple[Cpu, ...], list[str]]:
    notes = []
    node_of = {cpu: node for node, cpus in nodes.items() for cpu in cpus}
    triple = _smt_triple(fields, total)
    if triple is None:
        notes.append("lscpu.txt gives no threads/cores/sockets; each CPU counted as its own core")
        threads, sockets = 1, 1
    else:
        threads, _, sockets = triple
    physical = total // threads

    def core_of(cpu: int) -> int:
        return cpu % physical

    if threads > 1 and any(node_of.get(cpu) != node_of.get(core_of(cpu)) for cpu in online):
        notes.append("lscpu.txt: SMT siblings do not follow i + cores; each CPU counted as a core")
        threads, physical = 1, total

        def core_of(cpu: int) -> int:
            return cpu

    cpu_nodes = sorted(node for node, cpus in nodes.items() if cpus)
    per_socket = len(cpu_nodes) // sockets if sockets and len(cpu_nodes) % sockets == 0 else 0
    socket_of_node = {
        node: (rank // per_socket if per_socket else 0) for rank, node in enumerate(cpu_nodes)
    }
    instances = _l3_instances(fields) or sockets
    cores_per_llc = max(physical // instances, 1)
    cpus = tuple(
        Cpu(
            id=cpu,
            node=node_of.get(cpu, 0),
            socket=socket_of_node.get(node_of.get(cpu, 0), 0),
            core=core_of(cpu),
            llc=(core_of(cpu) // cores_per_llc) * cores_per_llc,
        )
        for cpu in sorted(online)
    )
    if instances > sockets:
        notes.append(
            f"lscpu.txt: {instances} L3 caches assumed to hold consecutive cores; "
            "record `lscpu -p` for exact core complexes"
        )
    return cpus, notes


def _parse_lscpu_parseable(lines: list[str], where: str) -> LscpuInfo:
    header = [line for line in lines if line.startswith("#") and "," in line]
    names = (
        [n.strip().upper() for n in header[-1].lstrip("# ").split(",")]
        if header
        else ["CPU", "CORE", "SOCKET", "NODE", "", "L1D", "L1I", "L2", "L3"]
    )
    rows = [line.split(",") for line in lines if not line.startswith("#")]
    return _rows_to_info(names, rows, where)


def _parse_lscpu_extended(lines: list[str], where: str) -> LscpuInfo:
    names = [n.upper() for n in lines[0].split()]
    rows = [line.split() for line in lines[1:]]
    return _rows_to_info(names, rows, where)


def _rows_to_info(names: list[str], rows: list[list[str]], where: str) -> LscpuInfo:
    def column(*wanted: str) -> int | None:
        for name in wanted:
            if name in names:
                return names.index(name)
        return None

    cpu_col, node_col = column("CPU"), column("NODE")
    core_col, socket_col = column("CORE"), column("SOCKET")
    online_col = column("ONLINE")
    cache_cols = [i for i, n in enumerate(names) if n.startswith("L") and n[1:2].isdigit()]
    if cpu_col is None:
        raise TopologyError(f"{where} has no CPU column: record it with `lscpu -p > {LSCPU_FILE}`")
    parsed = []
    offline = set()
    for row in rows:
        if len(row) <= cpu_col or not row[cpu_col].isdigit():
            continue
        cpu = int(row[cpu_col])

        def cell(col: int | None, row: list[str] = row) -> str:
            return row[col].strip() if col is not None and col < len(row) else ""

        node_text = cell(node_col)
        state = cell(online_col).lower()
        if (online_col is not None and state not in ("y", "yes")) or (
            node_col is not None and not node_text.isdigit()
        ):
            offline.add(cpu)
            continue
        llc_text = cell(cache_cols[-1]).split(":")[-1] if cache_cols else ""
        parsed.append(
            (
                cpu,
                int(node_text) if node_text else 0,
                int(cell(socket_col) or 0),
                int(cell(core_col) or cpu),
                int(llc_text) if llc_text.isdigit() else None,
            )
        )
    if not parsed:
        raise TopologyError(f"{where} lists no online CPUs: record it with `lscpu -p`")
    core_min: dict[tuple[int, int], int] = {}
    llc_min: dict[int, int] = {}
    for cpu, _, socket, core, llc in parsed:
        core_min[(socket, core)] = min(core_min.get((socket, core), cpu), cpu)
        if llc is not None:
            llc_min[llc] = min(llc_min.get(llc, cpu), cpu)
    cpus = tuple(
        Cpu(cpu, node, socket, core_min[(socket, core)], None if llc is None else llc_min[llc])
        for cpu, node, socket, core, llc in sorted(parsed)
    )
    nodes: dict[int, set[int]] = {}
    for cpu in cpus:
        nodes.setdefault(cpu.node, set()).add(cpu.id)
    online = frozenset(cpu.id for cpu in cpus)
    return LscpuInfo(
        {node: frozenset(ids) for node, ids in nodes.items()}, online, frozenset(offline), cpus
    )


def parse_numactl_hardware(text: str, *, where: str = NUMACTL_FILE) -> NumactlInfo:
    cpus: dict[int, frozenset[int]] = {}
    memory: dict[int, int] = {}
    for line in text.splitlines():
        match = re.match(r"^\s*node\s+(\d+)\s+cpus:\s*(.*)$", line)
        if match:
            ids = match.group(2).split()
            if not all(i.isdigit() for i in ids):
                raise TopologyError(f"cannot read {line.strip()!r} in {where}")
            cpus[int(match.group(1))] = frozenset(int(i) for i in ids)
            continue
        match = re.match(r"^\s*node\s+(\d+)\s+size:\s*(\d+)\s*MB", line)
        if match:
            memory[int(match.group(1))] = int(match.group(2)) * 1024
    if not cpus:
        raise TopologyError(
            f"{where} has no 'node N cpus:' lines: record it with `numactl --hardware`"
        )
    return NumactlInfo(
        tuple(NumaNode(node, ids, memory.get(node)) for node, ids in sorted(cpus.items()))
    )


def parse_nvidia_smi_topo(text: str, *, where: str = TOPO_FILE) -> tuple[TopoGpu, ...]:
    lines = [_ANSI.sub("", line).rstrip() for line in text.splitlines()]
    header_at = next(
        (i for i, line in enumerate(lines) if re.match(r"^\s+GPU\d+", line) and "Affinity" in line),
        None,
    )
    if header_at is None:
        raise TopologyError(
            f"{where} has no header row with 'GPU0 ... CPU Affinity': record it with "
            "`nvidia-smi topo -m`"
        )
    header = [cell.strip() for cell in re.split(r"\t|\s{2,}", lines[header_at]) if cell.strip()]
    gpus = []
    for line in lines[header_at + 1 :]:
        if not line.strip() or line.strip().startswith("Legend"):
            break
        tokens = line.split()
        match = re.fullmatch(r"GPU(\d+)", tokens[0])
        if not match:
            continue
        cells = dict(zip(header, tokens[1:], strict=False))
        if len(tokens) - 1 != len(header):
            cells = _cells_by_shape(header, tokens[1:])
        gpus.append(
            TopoGpu(
                index=int(match.group(1)),
                cpu_affinity=_optional_list(cells.get("CPU Affinity")),
                numa_affinity=_optional_list(cells.get("NUMA Affinity", cells.get("NUMA"))),
                gpu_numa_id=_optional_int(cells.get("GPU NUMA ID")),
            )
        )
    if not gpus:
        raise TopologyError(f"{where} has no GPU rows under its header")
    return tuple(gpus)


def _cells_by_shape(header: list[str], cells: list[str]) -> dict[str, str]:
    """Align a row whose cell count differs from the header's: the affinity columns are last."""
    affinity_at = header.index("CPU Affinity") if "CPU Affinity" in header else len(header)
    tail = header[affinity_at:]
    return dict(zip(tail, cells[len(cells) - len(tail) :], strict=False)) if tail else {}


def _optional_list(value: str | None) -> frozenset[int] | None:
    return parse_cpulist(value) if value and is_cpulist(value) else None


def _optional_int(value: str | None) -> int | None:
    return int(value) if value and value.isdigit() else None


def load_recorded(folder: str | Path) -> Topology:
    """Build a topology from whichever of the three recordings ``folder`` holds."""
    folder = Path(folder)
    texts = {
        name: (folder / name).read_text(errors="replace")
        for name in (LSCPU_FILE, NUMACTL_FILE, TOPO_FILE)
        if (folder / name).is_file()
    }
    if not texts:
        raise TopologyError(
            f"{folder} holds none of {LSCPU_FILE}, {NUMACTL_FILE}, {TOPO_FILE}: record them "
            f"with `lscpu -p`, `numactl --hardware` and `nvidia-smi topo -m`"
        )
    notes: list[str] = []
    lscpu = parse_lscpu(texts[LSCPU_FILE]) if LSCPU_FILE in texts else None
    numactl = parse_numactl_hardware(texts[NUMACTL_FILE]) if NUMACTL_FILE in texts else None
    topo = parse_nvidia_smi_topo(texts[TOPO_FILE]) if TOPO_FILE in texts else ()
    if lscpu is not None:
        notes.extend(lscpu.notes)
    nodes = _merge_nodes(lscpu, numactl, topo)
    online = frozenset().union(*(node.cpus for node in nodes))
    if lscpu is not None and lscpu.cpus:
        cpus = lscpu.cpus
    else:
        notes.append("no lscpu.txt: each node counted as its own socket, each CPU as its own core")
        cpus = tuple(
            Cpu(cpu, node.id, node.id, cpu, None) for node in nodes for cpu in sorted(node.cpus)
        )
        cpus = tuple(sorted(cpus, key=lambda cpu: cpu.id))
    gpus = []
    for row in topo:
        numa = row.numa_affinity
        reported = min(numa) if numa and len(numa) == 1 else None
        node, why = resolve_gpu_node(reported, row.cpu_affinity or frozenset(), nodes)
        if why is not None:
            notes.append(f"GPU {row.index}: NUMA affinity N/A in {TOPO_FILE}; {why}")
        gpus.append(Gpu(row.index, None, node, reported, row.cpu_affinity or frozenset()))
    return Topology(
        nodes=nodes,
        cpus=cpus,
        gpus=tuple(gpus),
        allowed_cpus=online,
        offline_cpus=lscpu.offline if lscpu is not None else frozenset(),
        source=str(folder),
        notes=tuple(notes),
    )


def _merge_nodes(
    lscpu: LscpuInfo | None, numactl: NumactlInfo | None, topo: tuple[TopoGpu, ...]
) -> tuple[NumaNode, ...]:
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
        if not nodes:
            union = frozenset().union(*(row.cpu_affinity or frozenset() for row in topo))
            nodes = {0: NumaNode(0, union)}
    for row in topo:
        # GH200-style GPU memory shows up as its own node with no CPUs.
        if row.gpu_numa_id is not None and row.gpu_numa_id not in nodes:
            nodes[row.gpu_numa_id] = NumaNode(row.gpu_numa_id, frozenset())
    return tuple(nodes[node] for node in sorted(nodes))
