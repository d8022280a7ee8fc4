"""The three command outputs a topology can be recorded from, parsed (``load_recorded`` in
``nsysprobe.numa.recorded`` reads them from a folder and merges them):

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

Every id and list is read through ``nsysprobe.numa.cpulist``: an output that no real machine
prints ends in a one-line TopologyError naming it and how to record it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nsysprobe.errors import TopologyError
from nsysprobe.numa.cpulist import (
    MAX_CPUS,
    is_cpulist,
    parse_cpulist,
    parse_id,
    parse_nodelist,
)
from nsysprobe.numa.topology import MAX_GPUS, Cpu, NumaNode, claim_cpus

LSCPU_FILE = "lscpu.txt"
NUMACTL_FILE = "numactl-hardware.txt"
TOPO_FILE = "nvidia-smi-topo-m.txt"
RECORD = {
    LSCPU_FILE: f"record it with `lscpu -p > {LSCPU_FILE}`",
    NUMACTL_FILE: f"record it with `numactl --hardware > {NUMACTL_FILE}`",
    TOPO_FILE: f"record it with `nvidia-smi topo -m > {TOPO_FILE}`",
}
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
    """One GPU row of ``nvidia-smi topo -m``; None where the cell said N/A. An empty CPU
    Affinity cell (the cpuset holds none of the GPU's CPUs) is the empty set."""

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
    node_of: dict[int, int] = {}
    for label, value in fields:
        numa_at = label.upper().find("NUMA")
        number = re.search(r"[0-9]+", label[numa_at:]) if numa_at >= 0 else None
        if number and (value == "" or is_cpulist(value)):
            node = parse_id(number.group(), where=where, kind="node", fix=RECORD[LSCPU_FILE])
            if node in nodes:
                # Each list would be expanded: lscpu prints a node once.
                raise TopologyError(
                    f"{where}: NUMA node {node} is listed twice; {RECORD[LSCPU_FILE]}"
                )
            nodes[node] = parse_cpulist(value, where=where, fix=RECORD[LSCPU_FILE])
            claim_cpus(node_of, node, nodes[node], where=where, fix=RECORD[LSCPU_FILE])
    total, online = _cpu_count_and_online(fields, where)
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


def _cpu_count_and_online(fields: list[tuple[str, str]], where: str) -> tuple[int, frozenset[int]]:
    """The CPU count is the first integer field; the online list is the CPU list right after it."""
    for i, (_, value) in enumerate(fields[:-1]):
        if _digits(value):
            count = _small_int(value)
            if count is None or count > MAX_CPUS:
                raise TopologyError(
                    f"{where}: a count of {value[:20]} CPUs, more than the {MAX_CPUS} Linux "
                    f"supports; {RECORD[LSCPU_FILE]}"
                )
            following = fields[i + 1][1]
            if is_cpulist(following) and not _digits(following) or following == "0":
                return count, parse_cpulist(following, where=where, fix=RECORD[LSCPU_FILE])
            return count, frozenset()
    return 0, frozenset()


def _smt_triple(fields: list[tuple[str, str]], total: int) -> tuple[int, int, int] | None:
    """(threads per core, cores per socket, sockets): consecutive integers multiplying to total."""
    values = [_small_int(value) for _, value in fields]
    for i in range(len(values) - 2):
        threads, cores, sockets = values[i : i + 3]
        if threads is None or cores is None or sockets is None:
            continue
        if threads * cores * sockets == total and 0 < threads <= 8:
            return threads, cores, sockets
    return None


def _l3_instances(fields: list[tuple[str, str]]) -> int | None:
    for label, value in fields:
        if "L3" in label:
            match = re.search(r"\(([0-9]{1,9})\s", value)
            return int(match.group(1)) if match else None
    return None


def _digits(text: str) -> bool:
    """Plain ASCII digits (``str.isdigit`` also accepts ``²``, which ``int`` refuses)."""
    return text.isascii() and text.isdigit()


def _small_int(text: str) -> int | None:
    """``text`` as an int when it is up to 9 ASCII digits, else None."""
    return int(text) if _digits(text) and len(text) <= 9 else None


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

    def number(text: str, kind: str) -> int:
        return parse_id(text, where=where, kind=kind, fix=RECORD[LSCPU_FILE])

    cpu_col, node_col = column("CPU"), column("NODE")
    core_col, socket_col = column("CORE"), column("SOCKET")
    online_col = column("ONLINE")
    cache_cols = [i for i, n in enumerate(names) if n.startswith("L") and n[1:2].isdigit()]
    if cpu_col is None:
        raise TopologyError(f"{where} has no CPU column: record it with `lscpu -p > {LSCPU_FILE}`")
    parsed = []
    offline = set()
    seen = set()
    for row in rows:
        if len(row) <= cpu_col or not _digits(row[cpu_col].strip()):
            continue
        cpu = number(row[cpu_col], "CPU")
        if cpu in seen:
            raise TopologyError(f"{where}: CPU {cpu} is listed twice; {RECORD[LSCPU_FILE]}")
        seen.add(cpu)

        def cell(col: int | None, row: list[str] = row) -> str:
            return row[col].strip() if col is not None and col < len(row) else ""

        node_text = cell(node_col)
        state = cell(online_col).lower()
        if (online_col is not None and state not in ("y", "yes")) or (
            node_col is not None and not _digits(node_text)
        ):
            offline.add(cpu)
            continue
        llc_text = cell(cache_cols[-1]).split(":")[-1] if cache_cols else ""
        parsed.append(
            (
                cpu,
                number(node_text, "node") if node_text else 0,
                number(cell(socket_col), "socket") if cell(socket_col) else 0,
                number(cell(core_col), "core") if cell(core_col) else cpu,
                number(llc_text, "cache") if _digits(llc_text) else None,
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
    fix = RECORD[NUMACTL_FILE]
    cpus: dict[int, frozenset[int]] = {}
    node_of: dict[int, int] = {}
    memory: dict[int, int] = {}
    for line in text.splitlines():
        match = re.match(r"^\s*node\s+([0-9]+)\s+cpus:\s*(.*)$", line)
        if match:
            ids = match.group(2).split()
            if not all(_digits(i) for i in ids):
                raise TopologyError(f"cannot read {line.strip()[:80]!r} in {where}; {fix}")
            node = parse_id(match.group(1), where=where, kind="node", fix=fix)
            cpus[node] = frozenset(parse_id(i, where=where, fix=fix) for i in ids)
            claim_cpus(node_of, node, cpus[node], where=where, fix=fix)
            continue
        match = re.match(r"^\s*node\s+([0-9]+)\s+size:\s*([0-9]{1,12})\s*MB", line)
        if match:
            node = parse_id(match.group(1), where=where, kind="node", fix=fix)
            memory[node] = int(match.group(2)) * 1024
    if not cpus:
        raise TopologyError(
            f"{where} has no 'node N cpus:' lines: record it with `numactl --hardware`"
        )
    return NumactlInfo(
        tuple(NumaNode(node, ids, memory.get(node)) for node, ids in sorted(cpus.items()))
    )


def parse_nvidia_smi_topo(text: str, *, where: str = TOPO_FILE) -> tuple[TopoGpu, ...]:
    fix = RECORD[TOPO_FILE]
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
    # The link columns (GPU0 ... NIC1) come first, the affinity columns last.
    links = header.index("CPU Affinity") if "CPU Affinity" in header else len(header)
    gpus: list[TopoGpu] = []
    seen: set[int] = set()
    for line in lines[header_at + 1 :]:
        if not line.strip() or line.strip().startswith("Legend"):
            break
        name, cells = _row_cells(line, links, header[links:])
        match = re.fullmatch(r"GPU([0-9]{1,9})", name)
        if not match:
            continue
        index = int(match.group(1))
        if index >= MAX_GPUS or index in seen:
            why = "listed twice" if index in seen else f"past the {MAX_GPUS} GPUs nsysprobe reads"
            raise TopologyError(f"{where}: GPU{index} is {why}; {fix}")
        seen.add(index)
        gpus.append(
            TopoGpu(
                index=index,
                cpu_affinity=_affinity(cells.get("CPU Affinity"), where, "CPU"),
                numa_affinity=_affinity(
                    cells.get("NUMA Affinity", cells.get("NUMA")), where, "node"
                ),
                gpu_numa_id=_optional_node(cells.get("GPU NUMA ID"), where),
            )
        )
    if not gpus:
        raise TopologyError(f"{where} has no GPU rows under its header")
    return tuple(gpus)


def _row_cells(line: str, links: int, tail: list[str]) -> tuple[str, dict[str, str]]:
    """A row's name and its affinity cells by column name.

    nvidia-smi ends each cell with a tab and pads a value narrower than its column's name
    with a second one (``0-31\t0\t\tN/A``): after the CPU Affinity cell, which is empty for a
    GPU whose CPUs the cpuset excludes, empty cells are padding. Copied from a terminal, the
    tabs are spaces and an empty CPU Affinity leaves no word: the only cell nvidia-smi ever
    leaves empty is that one (the others say N/A), so missing words are put there.
    """
    if "\t" in line:
        cells = [cell.strip() for cell in line.split("\t")]
        name, affinity = cells[0], cells[1 + links :]
        affinity = affinity[:1] + [cell for cell in affinity[1:] if cell]
    else:
        words = line.split()
        name, affinity = words[0], words[1 + links :]
        affinity = [""] * (len(tail) - len(affinity)) + affinity
    return name, dict(zip(tail, affinity, strict=False))


def _affinity(value: str | None, where: str, kind: str) -> frozenset[int] | None:
    """A CPU or node list; None for N/A or no cell, the empty set for an empty cell."""
    if value is None or (value and not is_cpulist(value)):
        return None
    if kind == "node":
        return parse_nodelist(value, where=where, fix=RECORD[TOPO_FILE])
    return parse_cpulist(value, where=where, fix=RECORD[TOPO_FILE])


def _optional_node(value: str | None, where: str) -> int | None:
    if not value or not _digits(value):
        return None
    return parse_id(value, where=where, kind="node", fix=RECORD[TOPO_FILE])
