# Over 500 lines: the bounds the docstring lists, the walk that spends them
# (``_Walk``: one budget shared by every read of one report) and the verdict it gives each
# entry are one piece of reasoning; split, the bounds and the reads that spend them would be
# read in different files.
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

``/proc`` is read as input that may be hostile (a saved tree under ``--root``), within bounds no
real job comes near, and what a bound cuts is said in the report's notes, one line each:

- Each process is visited once: a saved ``/proc`` whose process is its own parent, or two that
  are each other's, is a loop no real one holds, reported once and not followed.
- At most ``PROC_SCAN_MAX`` entries of ``/proc`` are looked at for parent links, and at most
  ``MAX_ENTRIES`` processes and threads are reported.
- Each file is read only when it is a regular file inside the root (not a FIFO, a device or a
  link out of the root, which would block, never end or describe another machine), opened
  without blocking, up to its bound: ``STAT_MAX_BYTES``, ``SYSFS_MAX_BYTES`` for ``status``,
  ``ENVIRON_MAX_BYTES``, and ``numa_maps`` up to ``NUMA_MAPS_MAX_LINES`` lines and
  ``NUMA_MAPS_MAX_BYTES`` (its pages are then counted from those). A file past its bound, or
  that cannot be read (the process exited midway, access is refused), leaves that entry
  unknown, never a hang; bytes that are not UTF-8 (a thread may name itself anything) read as
  U+FFFD.
- In all, one report lists at most ``LIST_BUDGET`` folder entries, reads at most
  ``READ_BUDGET_CHARS`` of ``status`` and ``environ``, ``MAPS_BUDGET_LINES`` lines and
  ``MAPS_BUDGET_BYTES`` of ``numa_maps``, and parses, holds and prints at most
  ``REPORT_MAX_IDS`` CPU and node ids and list characters, so its time and memory stay bounded
  however many processes, threads and ids a tree names (links inside the root can show one
  huge folder or file in every process).
"""

from __future__ import annotations

import os
import re
from collections import Counter, deque
from dataclasses import dataclass
from functools import lru_cache
from itertools import islice
from pathlib import Path

from nsysprobe.common.files import MAX_LINE_BYTES
from nsysprobe.errors import TopologyError
from nsysprobe.numa.cpulist import MAX_NODES, format_cpulist, parse_cpulist
from nsysprobe.numa.plan import visible_gpus
from nsysprobe.numa.topology import SYSFS_MAX_BYTES, Topology, cpu_to_node, single_cpu_node
from nsysprobe.numa.tree import check_inside, is_number, numbered, open_in, read_in

LOCAL_PAGES_RATIO = 0.9
# /proc/PID/environ is bounded by the kernel's argument limit (ARG_MAX, a quarter of the stack);
# one string in it by MAX_ARG_STRLEN (32 pages).
ENVIRON_MAX_BYTES = 16 << 20
ENV_VALUE_MAX_CHARS = 128 << 10
# /proc/PID/stat: a command name of at most 64 bytes and 50 numbers, about 1 kB.
STAT_MAX_BYTES = 4 << 10
# numa_maps has a line of a few hundred bytes per mapping; vm.max_map_count is 65530 unless
# raised.
NUMA_MAPS_MAX_LINES = 1 << 18
NUMA_MAPS_MAX_BYTES = 64 << 20
# One report. A job of 8 ranks with 8 DataLoader workers each (72 processes, a few thousand
# threads, numa_maps of 10 to 20 thousand lines each) stays well within each bound; past one,
# the report is cut there and says so.
PROC_SCAN_MAX = 1 << 18
MAX_ENTRIES = 16384
LIST_BUDGET = 1 << 20
READ_BUDGET_CHARS = 64 << 20
MAPS_BUDGET_LINES = 1 << 22
MAPS_BUDGET_BYTES = 512 << 20
# Ids and characters read, held and printed, in all: each distinct CPU or node list's
# characters and ids, and each entry's CPU list as printed, its nodes and page nodes.
REPORT_MAX_IDS = 1 << 21
MAX_NOTES = 20
# A process's name (comm) is at most 15 bytes, printed with escapes.
MAX_NAME_CHARS = 64
_UNREADABLE = "skipped"
_FIX = "give the pid of one rank to see the rest"
_STATUS_FIELD = re.compile(
    r"^[ \t]*(Name|Cpus_allowed_list|Mems_allowed_list)[ \t]*:[ \t]*(.*?)[ \t]*$", re.MULTILINE
)
_PAGE_SIZE = re.compile(rb"kernelpagesize_kB=([0-9]{1,9})\b")
_NODE_PAGES = re.compile(rb"\bN([0-9]{1,4})=([0-9]{1,18})\b")


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
    """``notes``: what a bound cut or a file that could not be read left out, one line each."""

    root_pid: int
    entries: tuple[Placement, ...]
    single_node: bool
    notes: tuple[str, ...] = ()


def placement(
    pid: int, topology: Topology, *, root: str | Path = "/", gpu: int | None = None
) -> PlacementReport:
    """Report the placement of ``pid``, its descendants and all their threads."""
    proc = Path(root) / "proc"
    if not (proc / str(pid)).is_dir():
        raise TopologyError(f"no process {pid} in {proc}: give the pid of a running process")
    walk = _Walk(Path(root), topology)
    entries = walk.tree(pid, gpu)
    return PlacementReport(pid, tuple(entries), single_cpu_node(topology), walk.all_notes())


class _Walk:
    """One report's reads of ``/proc``, within the bounds above; what they cut is noted."""

    def __init__(self, root: Path, topology: Topology) -> None:
        self.root = root
        self.proc = root / "proc"
        self.topology = topology
        self.single_node = single_cpu_node(topology)
        self.node_of = cpu_to_node(topology)
        self.stopped: str | None = None
        self.notes: list[str] = []
        self.notes_left_out = 0
        self.list_left = LIST_BUDGET
        self.read_left = READ_BUDGET_CHARS
        self.map_lines_left = MAPS_BUDGET_LINES
        self.map_bytes_left = MAPS_BUDGET_BYTES
        self.maps_spent_noted = False
        self.ids_left = REPORT_MAX_IDS
        self.lists: dict[tuple[str, str], frozenset[int]] = {}
        self.nodes: dict[frozenset[int], frozenset[int]] = {}
        self.environs: dict[int, tuple[str | None, int | None]] = {}
        self.cpulist = lru_cache(maxsize=1024)(format_cpulist)

    def tree(self, pid: int, gpu: int | None) -> list[Placement]:
        children = self.children()
        entries: list[Placement] = []
        seen = {pid}
        todo = deque([(pid, "main")])
        while todo and self.stopped is None:
            current, role = todo.popleft()
            rank, env_gpu = self.environ(current)
            gpu_index = gpu if gpu is not None else env_gpu
            entries.extend(self.describe(current, role, gpu_index, MAX_ENTRIES - len(entries)))
            if self.stopped is not None:
                break
            for child in children.get(current, ()):
                if child in seen:
                    self.note(
                        f"{self.proc / str(child)}/stat: names {current} as its parent, but "
                        f"{child} is already in the tree above it, a loop no real /proc holds; "
                        "read once"
                    )
                elif len(seen) >= MAX_ENTRIES:
                    self.note(f"more than {MAX_ENTRIES} processes in the tree of {pid}; {_FIX}")
                    break
                else:
                    seen.add(child)
                    child_rank, _ = self.environ(child)
                    is_rank = child_rank is not None and child_rank != rank
                    todo.append((child, "rank" if is_rank else "worker"))
        return entries

    def describe(self, pid: int, role: str, gpu: int | None, room: int) -> list[Placement]:
        if room <= 0:
            self.stop(f"stopped at {MAX_ENTRIES} processes and threads, the bound; {_FIX}")
            return []
        base = self.proc / str(pid)
        status = self.status(base / "status")
        if not status:
            return []
        policy, pages = self.numa_maps(base / "numa_maps")
        gpu_node = _gpu_node(self.topology, gpu)
        first = self.entry(pid, None, role, status, policy, pages, gpu, gpu_node)
        if first is None:
            return []
        entries = [first]
        tids, more = self.numbered(base / "task", self.list_left)
        others = [tid for tid in tids if tid != pid]
        more = more or len(others) > room - 1
        for tid in others[: room - 1]:
            task_status = self.status(base / "task" / str(tid) / "status")
            if self.stopped is not None:
                break
            if task_status:
                entry = self.entry(pid, tid, "thread", task_status, None, None, gpu, gpu_node)
                if entry is None:
                    break
                entries.append(entry)
        if more:
            self.stop(
                f"{base / 'task'}: more threads than the bound of {MAX_ENTRIES} processes "
                f"and threads leaves room for; {len(entries) - 1} are shown; {_FIX}"
            )
        return entries

    def entry(
        self,
        pid: int,
        tid: int | None,
        role: str,
        status: dict[str, str],
        policy: str | None,
        pages: dict[int, int] | None,
        gpu: int | None,
        gpu_node: int | None,
    ) -> Placement | None:
        """One entry, or None when it would pass ``REPORT_MAX_IDS`` (the walk then stops)."""
        who = f"thread {tid}" if tid is not None else f"process {pid}"
        cpus = self.parse(status.get("Cpus_allowed_list", ""), "CPU", f"Cpus_allowed_list of {who}")
        mems = self.parse(
            status.get("Mems_allowed_list", ""), "node", f"Mems_allowed_list of {who}"
        )
        if cpus is None or mems is None:
            return None
        cpu_nodes = self.nodes.get(cpus)
        if cpu_nodes is None:
            cpu_nodes = frozenset(self.node_of[cpu] for cpu in cpus if cpu in self.node_of)
            self.nodes[cpus] = cpu_nodes
        if not self.spend(len(self.cpulist(cpus)) + len(mems) + len(cpu_nodes) + len(pages or ())):
            return None
        verdict, reason = _verdict(self.single_node, cpu_nodes, pages or {}, gpu, gpu_node)
        return Placement(
            pid=pid,
            tid=tid,
            role=role,
            name=status.get("Name", "?")[:MAX_NAME_CHARS],
            cpus=cpus,
            cpu_nodes=cpu_nodes,
            mems_allowed=mems,
            policy=policy,
            pages_kb_by_node=tuple(sorted((pages or {}).items())),
            gpu=gpu,
            gpu_node=gpu_node,
            verdict=verdict,
            reason=reason,
        )

    def parse(self, text: str, kind: str, where: str) -> frozenset[int] | None:
        """A CPU or node list, one set for each distinct text; None past ``REPORT_MAX_IDS``."""
        ids = self.lists.get((kind, text))
        if ids is None:
            ids = parse_cpulist(text, where=where, kind=kind)
            if not self.spend(len(text) + len(ids)):
                return None
            self.lists[(kind, text)] = ids
        return ids

    def spend(self, ids: int) -> bool:
        self.ids_left -= ids
        if self.ids_left < 0:
            self.stop(
                f"stopped when the entries' CPU and node lists passed {REPORT_MAX_IDS} ids and "
                f"characters, the bound; {_FIX}"
            )
        return self.ids_left >= 0

    def children(self) -> dict[int, list[int]]:
        pids, more = self.numbered(self.proc, PROC_SCAN_MAX)
        if more:
            self.note(
                f"{self.proc}: only its first {PROC_SCAN_MAX} entries looked at for children, "
                "the bound; children past them are missing"
            )
        children: dict[int, list[int]] = {}
        for pid in pids:
            text = self.read(self.proc / str(pid) / "stat", STAT_MAX_BYTES, budget=False)
            # The command name may hold spaces and parentheses: fields start after the last ')'.
            fields = text[text.rfind(")") + 2 :].split(maxsplit=2) if text else []
            if len(fields) > 1 and is_number(fields[1]):
                children.setdefault(int(fields[1]), []).append(pid)
        return children

    def environ(self, pid: int) -> tuple[str | None, int | None]:
        """(its LOCAL_RANK, its GPU), each None when unknown."""
        if pid not in self.environs:
            path = self.proc / str(pid) / "environ"
            text = self.read(path, ENVIRON_MAX_BYTES) or ""
            rank = _env_value(text, "LOCAL_RANK")
            visible = _env_value(text, "CUDA_VISIBLE_DEVICES")
            if visible is not None and len(visible) > ENV_VALUE_MAX_CHARS:
                self.note(
                    f"{path}: CUDA_VISIBLE_DEVICES longer than {ENV_VALUE_MAX_CHARS} "
                    "characters, longer than Linux allows; its GPU is left unknown"
                )
                gpu = None
            else:
                gpu = _gpu_from_env(rank, visible)
            self.environs[pid] = (None if rank is None else rank[:MAX_NAME_CHARS], gpu)
        return self.environs[pid]

    def status(self, path: Path) -> dict[str, str]:
        text = self.read(path, SYSFS_MAX_BYTES)
        if text is None:
            return {}
        return {match.group(1): match.group(2) for match in _STATUS_FIELD.finditer(text)}

    def numa_maps(self, path: Path) -> tuple[str | None, dict[int, int] | None]:
        """(most common policy, resident kB per node), or (None, None) when unreadable."""
        if self.map_lines_left <= 0 or self.map_bytes_left <= 0:
            if not self.maps_spent_noted:
                self.maps_spent_noted = True
                self.note(
                    f"{path} and later numa_maps not read: the bound of {MAPS_BUDGET_LINES} "
                    f"lines and {_size(MAPS_BUDGET_BYTES)} of numa_maps in all is spent; "
                    "their pages are unknown"
                )
            return None, None
        fd = self.open(path)
        if fd is None:
            return None, None
        max_lines = min(NUMA_MAPS_MAX_LINES, self.map_lines_left)
        max_bytes = min(NUMA_MAPS_MAX_BYTES, self.map_bytes_left)
        policies: Counter[bytes] = Counter()
        pages: dict[int, int] = {}
        lines = size = 0
        more = False
        with os.fdopen(fd, "rb") as handle:
            try:
                while True:
                    if lines >= max_lines or size >= max_bytes:
                        more = bool(handle.read(1))
                        break
                    line = handle.readline(min(MAX_LINE_BYTES, max_bytes - size))
                    if not line:
                        break
                    lines += 1
                    size += len(line)
                    _count_pages(line, policies, pages)
            except OSError as exc:
                self.note(f"{path}: cannot read it ({exc.strerror}); {_UNREADABLE}")
                return None, None
        self.map_lines_left -= lines
        self.map_bytes_left -= size
        if more:
            own = lines >= NUMA_MAPS_MAX_LINES or size >= NUMA_MAPS_MAX_BYTES
            bound = (
                f"the bound of {NUMA_MAPS_MAX_LINES} lines and {_size(NUMA_MAPS_MAX_BYTES)} "
                "for one numa_maps"
                if own
                else f"what was left of the bound of {MAPS_BUDGET_LINES} lines and "
                f"{_size(MAPS_BUDGET_BYTES)} of numa_maps in all"
            )
            self.note(
                f"{path}: read up to its first {lines} lines ({_size(size)}), {bound}; its "
                "pages are counted from those"
            )
        policy = policies.most_common(1)[0][0] if policies else None
        return None if policy is None else policy.decode("utf-8", "replace"), pages

    def read(self, path: Path, limit: int, *, budget: bool = True) -> str | None:
        """The text of ``path`` (None when absent, or unreadable: noted); ``budget``: counted
        against ``READ_BUDGET_CHARS``, past which the walk stops."""
        if budget and self.read_left <= 0:
            self.stop(
                f"stopped after reading {_size(READ_BUDGET_CHARS)} of status and environ files, "
                f"the bound; {_FIX}"
            )
            return None
        try:
            text = read_in(path, self.root, limit=limit, fix=_UNREADABLE, error=TopologyError)
        except TopologyError as exc:
            self.note(str(exc))
            return None
        if budget and text is not None:
            self.read_left -= len(text)
        return text

    def numbered(self, folder: Path, limit: int) -> tuple[list[int], bool]:
        """The numbered entries of a folder inside the root (none for one outside: noted)
        among the first ``limit`` listed, and whether more were left; counted against
        ``LIST_BUDGET``, past which the walk stops."""
        try:
            check_inside(folder, self.root, _UNREADABLE, TopologyError)
        except TopologyError as exc:
            self.note(str(exc))
            return [], False
        found = numbered(folder, min(limit, self.list_left))
        self.list_left -= found.looked
        if found.more and self.list_left <= 0:
            self.stop(f"stopped after listing {LIST_BUDGET} folder entries, the bound; {_FIX}")
        return found.ids, found.more

    def open(self, path: Path) -> int | None:
        try:
            return open_in(path, self.root, fix=_UNREADABLE, error=TopologyError)
        except TopologyError as exc:
            self.note(str(exc))
            return None

    def note(self, text: str) -> None:
        if text in self.notes:
            return
        if len(self.notes) < MAX_NOTES:
            self.notes.append(text[:1000])
        else:
            self.notes_left_out += 1

    def stop(self, why: str) -> None:
        if self.stopped is None:
            self.stopped = why

    def all_notes(self) -> tuple[str, ...]:
        more = [f"{self.notes_left_out} more notes like these"] if self.notes_left_out else []
        return (*([self.stopped] if self.stopped else []), *self.notes, *more)


def _count_pages(line: bytes, policies: Counter[bytes], pages: dict[int, int]) -> None:
    """Add one numa_maps line: its policy, and its resident pages per node (a node once)."""
    fields = line.split(maxsplit=2)
    if len(fields) < 2:
        return
    policies[fields[1][:64]] += 1
    size = _PAGE_SIZE.search(line)
    page_kb = int(size.group(1)) if size else 4
    for match in islice(_NODE_PAGES.finditer(line), MAX_NODES):
        node = int(match.group(1))
        if node < MAX_NODES:
            pages[node] = pages.get(node, 0) + int(match.group(2)) * page_kb


def _size(count: int) -> str:
    """``67108864`` -> ``64 MiB``; a count that is no whole number of MiB in bytes."""
    return f"{count >> 20} MiB" if count and not count % (1 << 20) else f"{count} bytes"


def _env_value(environ: str, key: str) -> str | None:
    """The value of ``key`` in an environ block (NUL-separated ``KEY=value``), the first one
    as getenv(3) finds, without splitting the whole block."""
    if environ.startswith(f"{key}="):
        start = len(key) + 1
    else:
        at = environ.find(f"\0{key}=")
        if at < 0:
            return None
        start = at + len(key) + 2
    end = environ.find("\0", start)
    return environ[start : end if end >= 0 else len(environ)]


def _verdict(
    single_node: bool,
    cpu_nodes: frozenset[int],
    pages: dict[int, int],
    gpu: int | None,
    gpu_node: int | None,
) -> tuple[str, str]:
    if single_node:
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


def _gpu_from_env(rank: str | None, cuda_visible_devices: str | None) -> int | None:
    if rank is None or not is_number(rank):
        return None
    visible = visible_gpus(cuda_visible_devices)
    if visible is None:
        return int(rank)
    return visible[int(rank)] if int(rank) < len(visible) else None
