"""Where a process tree actually runs and keeps its memory, against its GPU's NUMA node.

For the process, each descendant (DataLoader workers, ranks under a launcher) and each thread:
the CPUs it may run on (``Cpus_allowed_list``) and the nodes they span, the memory policy
(from ``numa_maps``, which shows the task policy where no mapping sets its own) and the nodes
memory may come from (``Mems_allowed_list``), where its resident pages are (``N<node>=`` counts
in ``numa_maps``), and its GPU (``LOCAL_RANK`` through ``CUDA_VISIBLE_DEVICES``, or given).

Verdicts, for a GPU on node G:

- ``local``: runs only on G's CPUs and at least 90 % of its pages are on G.
- ``remote``: none of its CPUs are on G, and most of its pages are elsewhere.
- ``split``: its CPUs span G and other nodes, or it runs on G while most pages are elsewhere.
- ``unknown``: no GPU known for it, or its GPU's node is unknown, or /proc could not be read.

On a machine with one node holding CPUs every placement is local and binding cannot help.

``/proc`` is read with the bounds of ``nsysprobe.common.files``: a process that exits midway,
a file that is not a regular one (under a ``--root`` that is not a real ``/proc``) or bytes that
are not UTF-8 (a thread may name itself anything) make that entry unknown, never a hang.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from nsysprobe.common.files import read_lines, read_text
from nsysprobe.errors import TopologyError
from nsysprobe.numa.cpulist import format_cpulist, parse_cpulist, parse_nodelist
from nsysprobe.numa.plan import visible_gpus
from nsysprobe.numa.topology import SYSFS_MAX_BYTES, Topology, nodes_of, single_cpu_node

LOCAL_PAGES_RATIO = 0.9
# /proc/PID/environ is bounded by the kernel's argument limit (ARG_MAX, a quarter of the stack).
ENVIRON_MAX_BYTES = 16 << 20
_UNREADABLE = "skipped"


@dataclass(frozen=True)
class Placement:
    pid: int
    tid: int | None
    role: str
    name: str
    cpus: frozenset[int]
    cpu_nodes: frozenset[int]
    mems_allowed: frozenset[int]
    policy: str | None
    pages_kb_by_node: tuple[tuple[int, int], ...]
    gpu: int | None
    gpu_node: int | None
    verdict: str
    reason: str


@dataclass(frozen=True)
class PlacementReport:
    root_pid: int
    entries: tuple[Placement, ...]
    single_node: bool


def placement(
    pid: int, topology: Topology, *, root: str | Path = "/", gpu: int | None = None
) -> PlacementReport:
    """Report the placement of ``pid``, its descendants and all their threads."""
    proc = Path(root) / "proc"
    if not (proc / str(pid)).is_dir():
        raise TopologyError(f"no process {pid} in {proc}: give the pid of a running process")
    children = _children(proc)
    entries: list[Placement] = []
    todo = [(pid, "main")]
    while todo:
        current, role = todo.pop(0)
        env = _environ(proc / str(current))
        gpu_index = gpu if gpu is not None else _gpu_from_env(env)
        entries.extend(_describe(proc, current, role, gpu_index, topology))
        for child in sorted(children.get(current, ())):
            child_env = _environ(proc / str(child))
            is_rank = "LOCAL_RANK" in child_env and child_env.get("LOCAL_RANK") != env.get(
                "LOCAL_RANK"
            )
            todo.append((child, "rank" if is_rank else "worker"))
    return PlacementReport(pid, tuple(entries), single_cpu_node(topology))


def _describe(
    proc: Path, pid: int, role: str, gpu: int | None, topology: Topology
) -> list[Placement]:
    base = proc / str(pid)
    status = _status(base / "status")
    if not status:
        return []
    policy, pages = _numa_maps(base / "numa_maps")
    gpu_node = _gpu_node(topology, gpu)
    entries = [_entry(topology, pid, None, role, status, policy, pages, gpu, gpu_node)]
    tasks = [task for task in (base / "task").glob("[0-9]*") if _is_number(task.name)]
    for task in sorted(tasks, key=lambda p: int(p.name)):
        tid = int(task.name)
        if tid == pid:
            continue
        task_status = _status(task / "status")
        if task_status:
            entries.append(
                _entry(topology, pid, tid, "thread", task_status, None, None, gpu, gpu_node)
            )
    return entries


def _entry(
    topology: Topology,
    pid: int,
    tid: int | None,
    role: str,
    status: dict[str, str],
    policy: str | None,
    pages: dict[int, int] | None,
    gpu: int | None,
    gpu_node: int | None,
) -> Placement:
    who = f"thread {tid}" if tid is not None else f"process {pid}"
    cpus = parse_cpulist(status.get("Cpus_allowed_list", ""), where=f"Cpus_allowed_list of {who}")
    mems = status.get("Mems_allowed_list", "")
    cpu_nodes = nodes_of(topology, cpus)
    verdict, reason = _verdict(topology, cpu_nodes, pages or {}, gpu, gpu_node)
    return Placement(
        pid=pid,
        tid=tid,
        role=role,
        name=status.get("Name", "?"),
        cpus=cpus,
        cpu_nodes=cpu_nodes,
        mems_allowed=parse_nodelist(mems, where=f"Mems_allowed_list of {who}"),
        policy=policy,
        pages_kb_by_node=tuple(sorted((pages or {}).items())),
        gpu=gpu,
        gpu_node=gpu_node,
        verdict=verdict,
        reason=reason,
    )


def _verdict(
    topology: Topology,
    cpu_nodes: frozenset[int],
    pages: dict[int, int],
    gpu: int | None,
    gpu_node: int | None,
) -> tuple[str, str]:
    if single_cpu_node(topology):
        return "local", "the machine has one NUMA node with CPUs: binding cannot help here"
    if gpu is None:
        return "unknown", "no GPU known for it: no LOCAL_RANK in its environment; pass --gpu"
    if gpu_node is None:
        return "unknown", f"GPU {gpu}'s NUMA node is unknown (PCI numa_node -1)"
    total = sum(pages.values())
    on_gpu = pages.get(gpu_node, 0) / total if total else None
    where = _nodes_text(cpu_nodes)
    pages_text = "" if on_gpu is None else f", {on_gpu:.0%} of its pages on node {gpu_node}"
    if cpu_nodes == {gpu_node}:
        if on_gpu is None or on_gpu >= LOCAL_PAGES_RATIO:
            return "local", f"runs on GPU {gpu}'s node {gpu_node}{pages_text}"
        return (
            "split",
            f"runs on GPU {gpu}'s node {gpu_node} but only {on_gpu:.0%} of its pages are there",
        )
    if gpu_node not in cpu_nodes:
        if on_gpu is None or on_gpu < 0.5:
            return "remote", f"runs on {where}, GPU {gpu} is on node {gpu_node}{pages_text}"
        return "split", f"runs on {where}, GPU {gpu} is on node {gpu_node}{pages_text}"
    return "split", f"CPUs span {where}, GPU {gpu} is on node {gpu_node}{pages_text}"


def _nodes_text(nodes: frozenset[int]) -> str:
    return ("node " if len(nodes) == 1 else "nodes ") + (format_cpulist(nodes) or "none")


def _gpu_node(topology: Topology, gpu: int | None) -> int | None:
    if gpu is None:
        return None
    for candidate in topology.gpus:
        if candidate.index == gpu:
            return candidate.numa_node
    return None


def _gpu_from_env(env: dict[str, str]) -> int | None:
    rank = env.get("LOCAL_RANK", "")
    if not _is_number(rank):
        return None
    visible = visible_gpus(env.get("CUDA_VISIBLE_DEVICES"))
    if visible is None:
        return int(rank)
    return visible[int(rank)] if int(rank) < len(visible) else None


def _children(proc: Path) -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for stat in proc.glob("[0-9]*/stat"):
        text = _read(stat, SYSFS_MAX_BYTES)
        # The command name may hold spaces and parentheses: fields start after the last ')'.
        fields = text[text.rfind(")") + 2 :].split() if text else []
        if len(fields) > 1 and _is_number(fields[1]) and _is_number(stat.parent.name):
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    return children


def _read(path: Path, limit: int) -> str | None:
    """The text of a /proc file, None when it cannot be read (the process exited, access is
    refused, it is not a regular file or larger than ``limit``)."""
    try:
        return read_text(path, limit=limit, fix=_UNREADABLE, error=TopologyError)
    except TopologyError:
        return None


def _is_number(text: str) -> bool:
    return text.isascii() and text.isdigit() and len(text) <= 9


def _status(path: Path) -> dict[str, str]:
    text = _read(path, SYSFS_MAX_BYTES)
    if text is None:
        return {}
    return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in text.splitlines())}


def _environ(base: Path) -> dict[str, str]:
    text = _read(base / "environ", ENVIRON_MAX_BYTES)
    if text is None:
        return {}
    pairs = (item.partition("=") for item in text.split("\0") if item)
    return {key: value for key, _, value in pairs if key in ("LOCAL_RANK", "CUDA_VISIBLE_DEVICES")}


def _numa_maps(path: Path) -> tuple[str | None, dict[int, int] | None]:
    """(most common policy, resident kB per node), or (None, None) when unreadable."""
    policies: Counter[str] = Counter()
    pages: dict[int, int] = {}
    try:
        lines = read_lines(path, fix=_UNREADABLE, error=TopologyError)
        if lines is None:
            return None, None
        for line in lines:
            fields = line.split(maxsplit=2)
            if len(fields) < 2:
                continue
            policies[fields[1][:64]] += 1
            size = re.search(r"kernelpagesize_kB=([0-9]{1,9})\b", line)
            page_kb = int(size.group(1)) if size else 4
            for node, count in re.findall(r"\bN([0-9]{1,4})=([0-9]{1,18})\b", line):
                pages[int(node)] = pages.get(int(node), 0) + int(count) * page_kb
    except TopologyError:
        return None, None
    policy = policies.most_common(1)[0][0] if policies else None
    return policy, pages
