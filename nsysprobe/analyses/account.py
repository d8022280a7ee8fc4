"""The step account: where every nanosecond of every step went, per process and GPU.

One account per process and GPU it drives (a second process or GPU is never unioned into
it). Its windows are the steps of that process (the repeating NVTX range of the steps
analysis) or, without one, ``FIXED_WINDOWS`` equal windows over the process's GPU work on that
device. Each window's wall time is split, with nothing left over and nothing counted twice,
into GPU-busy time by kind and GPU-idle time by cause.

Busy time goes to the first kind running, in this order (so copies and communication under a
compute kernel are compute, and what they add is their *exposed* time):

    compute          kernels, and CUDA graph replays recorded whole
    communication    NCCL's work (``communication.py``: its kernels, and whatever is issued
                     inside its NVTX ranges) with no compute kernel running: the exposed part
    memcpy K M       copies by copy kind K (HtoD, DtoH, DtoD, ...) and host memory kind M
                     (Pageable, Pinned, ...), with no kernel running
    memset           memsets alone

Idle time is charged to what the thread that issued the work ending the idle was doing
until it issued it (the API call joined on process and correlation id). Split by time, not
by majority:

    profiler_overhead  nsys's own overhead (``PROFILER_OVERHEAD``) in the process
    queued             the work was issued before the idle began: the GPU started it late
                       (dependencies between streams, scheduling latency), no CPU cause
    sync               inside a stream/device/event synchronize, and the idle after one that
                       drained the GPU (see below); small read-backs (.item()) too
    readback           a device-to-host copy of ``READBACK_MIN_BYTES`` or more that the
                       thread waited for (.cpu(), .numpy()), and the idle after it
    blocking_copy      inside a copy call that blocks (pageable or synchronous copies)
    allocator          inside cudaMalloc/cudaFree/host allocations, and the idle after an
                       allocator call that drained the GPU (cudaFree synchronizes)
    launch             inside kernel-launch calls, and idle stretches shorter than
                       ``LAUNCH_GAP_NS`` between launches (each launch costs more than the
                       kernel it queues: launch-bound)
    loading            the thread's own code before a host-to-device copy it then issued: it
                       produced the batch itself (with DataLoader worker processes in the
                       report, only before the step's first copy)
    loader_wait        blocking OS calls (poll, futex, ...) before such a copy: waiting for
                       DataLoader workers or I/O
    os_call, os_wait   other OS-runtime calls (munmap, mmap, ...; and waits) of the thread
    module_loading     loading CUDA modules: ``cu*Load*`` calls and launches over
                       ``SLOW_LAUNCH_NS`` (lazy loading, JIT): start-up work in the capture
    cuda_api           other CUDA API calls (event records, stream waits, ...)
    cpu                the thread's own code, named by its innermost NVTX range

A call (a synchronize, a copy, an allocator call) "drained" the GPU when the thread was inside
it, begun earlier, as the GPU went idle; the time from the call's start to that moment is how
long the thread *waited* for the GPU. A drain right after a device-to-host copy is a read-back:
``readback`` when the copy is at least ``READBACK_MIN_BYTES``, else (``.item()``) ``sync``.
Inside the draining call, the idle is the drain's. After it the queue is empty, and the GPU
idles while the thread works until it gets ahead again (issues work while the GPU is still
busy), across step boundaries too: the drain's *episode*; drains that come before the thread
gets ahead form one chain. In time order, the chain's host-side idle (every cause but those in
``KEPT_AFTER_DRAINS``: the input's, the GPU's and nsys's) is the drain's up to the time the
thread waited in the chain's calls (without the drains, that much host work would have
overlapped the GPU's queued work, and no more); the rest keeps its own cause. Each
bucket keeps the names behind it (API calls, OS calls, NVTX ranges) as details.
Medians are over steps; shares are of the summed wall time of the steps.

**Periodic steps.** Steady steps made long by an event every N steps (a checkpoint, an
evaluation, logging: ``windows.periodic_steps``) are counted twice over, once each way, so
that every cause is weighed once: ``Account.buckets`` hold every steady step's time as it
was; ``Account.periodic`` splits the same time into the other steps' buckets as if every step
were one of them (``normal_buckets``: their totals scaled to all the steady steps) and what
the periodic steps took beyond that (``excess``), with the NVTX ranges run only in them. The
rules read the first split, and the periodic event's own rule the second. A rhythm of the
input pipeline (a new epoch's workers, a loader's burst: the excess mostly ``loading`` and
``loader_wait`` and starting worker processes, in no NVTX range of the periodic steps' own)
is the input's, not a periodic event.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from functools import cached_property
from types import SimpleNamespace

import numpy as np

from nsysprobe.analyses import intervals as iv
from nsysprobe.analyses.calls import (
    BIRTH_CALLS,
    LAUNCH_APIS,
    SLOW_LAUNCH_NS,
    SYNC_APIS,
    osrt_category,
)
from nsysprobe.analyses.communication import (
    CollectiveSummary,
    collective_of,
    is_communication_kernel,
    nccl_issued,
    summarize,
)
from nsysprobe.analyses.events import Events
from nsysprobe.analyses.rows import (
    ThreadCalls,
    api_name,
    columns_where,
    first_row_of,
    label_at,
    per_distinct,
    sweep,
)
from nsysprobe.analyses.steps import find_steps
from nsysprobe.analyses.windows import STARTUP_WORDS, StepWindows, periodic_steps, steady_steps
from nsysprobe.common.frames import Tables
from nsysprobe.common.table import Groups, Labels, Table, by_count, descending, ranked
from nsysprobe.errors import InputError
from nsysprobe.trace.values import pid_of

FIXED_WINDOWS = 10
EQUAL_WINDOWS = "equal windows"  # how ``windows`` begins without steps
# Without steps, a top-level NVTX range of the thread driving the GPU that occurs once, leaves
# at least ``STARTUP_LEAVES`` of the GPU work's span after it and is named like start-up is
# start-up: the windows begin after it.
STARTUP_LEAVES = 0.1
# A range is the periodic event's when it covers at least this share of the periodic steps'
# time and over this many times its share of the other steady steps' time, with at least
# ``PERIODIC_RANGE_HELD`` of its time in the periodic steps.
PERIODIC_RANGE_SHARE = 0.1
PERIODIC_RANGE_RATIO = 2
PERIODIC_RANGE_HELD = 0.75
# Idle shorter than this between back-to-back launches is the per-operation cost of issuing
# work (framework dispatch plus the launch call): fixed by fewer launches, not by moving code.
LAUNCH_GAP_NS = 100_000
# Idle that keeps its own cause inside a drain's episode: GPU-side time, nsys's, and the
# input: a thread that makes the batch itself or waits for a loader would spend that time
# whether or not it had waited for the GPU first (a loader's batches come at the loader's
# pace), and the loading fix removes it with or without the drain.
KEPT_AFTER_DRAINS = ("queued", "profiler_overhead", "loading", "loader_wait", "os_wait")
# A read-back of fewer bytes is a synchronization whose copy costs nothing (NVIDIA's
# cuda_memcpy_sync rule leaves out copies of 64,000 bytes or less).
READBACK_MIN_BYTES = 64_000
STEP_ROWS_LISTED = 2_000
# Accounts made at most: the (process, GPU) pairs with the most GPU operations. A report holds
# a few processes per GPU (ranks, a second context); thousands make a damaged or crafted one.
MAX_ACCOUNTS = 64
# Idle intervals whose figures are made at once (``_interval_facts``), a few MB each.
INTERVALS_PER_RUN = 1 << 18
DETAILS_LISTED = 6
NO_RANGE = "(no NVTX range)"

COMPUTE, COMMUNICATION, MEMSET = "compute", "communication", "memset"
IDLE_CAUSES = (
    "profiler_overhead",
    "queued",
    "sync",
    "readback",
    "blocking_copy",
    "allocator",
    "launch",
    "loading",
    "loader_wait",
    "os_call",
    "os_wait",
    "module_loading",
    "cuda_api",
    "cpu",
)
ALLOCATOR_PREFIXES = (
    "cudaMalloc",
    "cudaFree",
    "cudaHostAlloc",
    "cudaHostRegister",
    "cudaHostUnregister",
    "cuMemAlloc",
    "cuMemFree",
    "cuMemHostAlloc",
    "cuMemCreate",
    "cuMemRelease",
    "cuMemMap",
    "cuMemUnmap",
    "cuMemAddressReserve",
    "cuMemAddressFree",
    "cudaMemPool",
    "cuMemPool",
)
# API categories, in the order a thread's nested calls resolve (the outermost call wins).
_SYNC, _COPY, _ALLOC, _LAUNCH, _OTHER, _MODULE = range(6)
_DRAINING = (_SYNC, _COPY, _ALLOC)
# What a thread was doing at a moment of idle (``_thread_states``).
_OWN, _OS_WAIT, _OS_CALL, _API = 0, 1, 2, 10
# OS calls that give memory back (a pageable copy's source buffer, freed after it).
_RELEASE = re.compile(r"(?:munmap|madvise|mremap)")
PAGEABLE_HTOD = "memcpy HtoD Pageable"
AFTER_PAGEABLE = "(before a pageable copy)"
_CATEGORY_CAUSE = {
    _SYNC: "sync",
    _COPY: "blocking_copy",
    _ALLOC: "allocator",
    _LAUNCH: "launch",
    _OTHER: "cuda_api",
    _MODULE: "module_loading",
}
_CAUSE = {name: i for i, name in enumerate(IDLE_CAUSES)}  # cause -> its index
# API category -> the index of its idle cause.
_CAT_CAUSE = np.array([_CAUSE[_CATEGORY_CAUSE[k]] for k in range(len(_CATEGORY_CAUSE))])


@dataclass(frozen=True)
class Detail:
    name: str  # an API call, OS call or NVTX range (numbers masked), or a copy's size
    ns: int


@dataclass(frozen=True)
class Bucket:
    name: str  # a busy kind or an idle cause (see the module docstring)
    kind: str  # "busy" or "idle"
    total_ns: int  # over all steps
    median_ns: int  # median over steps
    share_ratio: float  # total_ns / summed step wall time
    details: tuple[Detail, ...]


@dataclass(frozen=True)
class AccountStep:
    index: int
    name: str
    start_ns: int
    wall_ns: int
    busy_ns: int
    idle_ns: int
    buckets: tuple[tuple[str, int], ...]  # (bucket name, ns), only those above zero
    communication_ns: int = 0  # NCCL work in the step (union), hidden or not
    communication_overlapped_ns: int = 0  # the part under compute kernels
    startup: bool = False  # a start-up step: in no total of the account (``STARTUP_RATIO``)
    final: bool = False  # a one-time final step (a last checkpoint): in no total either


@dataclass(frozen=True)
class HtodCopies:
    """The steady steps' host-to-device copies by host memory: the pageable ones, and the
    pinned ones of a like size (``LIKE_SIZE``, ``LINK_BOUND_BYTES``), whose rate is what
    pinning would give those (a small copy's rate is its latency's, not the link's)."""

    steps_with_copy: int = 0  # steady steps in which a host-to-device copy starts
    pageable_count: int = 0
    pageable_bytes: int = 0
    pageable_ns: int = 0
    pinned_like_count: int = 0
    pinned_like_bytes: int = 0
    pinned_like_ns: int = 0


# Pinned copies within this factor of the pageable copies' median size time what pinning
# would give them; so do any two copies of at least ``LINK_BOUND_BYTES``, whose time is the
# link's rate, not the per-copy latency (8 MiB take ~160 us at 50 GB/s, ~10 us of it latency).
LIKE_SIZE = 2
LINK_BOUND_BYTES = 8 << 20


@dataclass(frozen=True)
class Readbacks:
    """Device-to-host copies that drained the GPU, as ``readback`` counts them."""

    count: int
    median_bytes: int
    total_bytes: int


@dataclass(frozen=True)
class PeriodicSteps:
    """An event every ``period`` steady steps that made those steps long (module docstring)."""

    period: int
    steps: tuple[str, ...]  # the periodic steps' names, in order
    indices: tuple[int, ...]  # their indices among the account's steps (``AccountStep.index``)
    occurrences: tuple[str, ...]  # each occurrence's first step (one may spill into the next)
    typical_wall_ns: int  # the median of the other steady steps
    median_wall_ns: int  # the median of the periodic steps
    excess_ns: int  # the periodic steps' time beyond the other steps' mean, summed
    excess_busy_ns: int
    excess_idle_ns: int
    excess_buckets: tuple[Detail, ...]  # per bucket the time beyond the others', largest first
    ranges: tuple[Detail, ...]  # NVTX ranges of the step thread run only in these steps
    details: tuple[Detail, ...]  # the idle details of these steps, largest first
    # The other steady steps' buckets, scaled to all the steady steps, and what overlap could
    # hide in them scaled the same way (``Account.hideable_ns``).
    normal_buckets: tuple[Bucket, ...] = ()
    normal_hideable_ns: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class IdleSpans:
    """Idle pieces of the steady steps in time order: [start, end) and the index of the
    cause in ``IDLE_CAUSES``."""

    start_ns: np.ndarray
    end_ns: np.ndarray
    cause: np.ndarray

    def __len__(self) -> int:
        return int(self.start_ns.size)


# Idle stretches longer than this are the account's gaps (``IdleGaps``), by default.
DEFAULT_MIN_GAP_NS = 1_000_000


@dataclass(frozen=True)
class IdleGaps:
    """The idle stretches of the steady steps longer than ``min_gap_ns`` (from one
    piece of the account's GPU work to the next, across step edges), in time order, with
    their time by cause: what the gap tables list (``gaps.py``), in the account's words.
    ``cause`` per gap: the index in ``IDLE_CAUSES`` of the cause holding most of it;
    ``name`` the detail naming most of that cause's time in it (None when none does);
    ``by_cause``: (cause, name, ns) over all the gaps, largest first."""

    min_gap_ns: int
    start_ns: np.ndarray
    end_ns: np.ndarray
    cause: np.ndarray
    name: np.ndarray
    by_cause: tuple[tuple[str, str | None, int], ...]

    def __len__(self) -> int:
        return int(self.start_ns.size)


@dataclass(frozen=True)
class Account(Tables):
    TABLES = {"buckets": Bucket, "steps": (AccountStep, "buckets")}

    pid: int
    device_id: int
    thread: str  # the step thread, or the thread issuing most kernels without steps
    windows: str  # what a step is here: an NVTX pattern or the fixed windows
    step_count: int
    wall_ns: int  # summed over steps
    median_wall_ns: int
    busy_ns: int
    idle_ns: int
    idle_ratio: float  # idle_ns / wall_ns
    buckets: tuple[Bucket, ...]  # busy kinds, then idle causes, each largest first
    steps: tuple[AccountStep, ...]
    communication_ns: int  # all NCCL work in the steps (union), hidden or not
    communication_overlapped_ns: int  # the part under compute kernels
    readbacks: Readbacks
    loader_processes: int  # DataLoader worker processes in the report (pt_data_worker)
    collectives: tuple[CollectiveSummary, ...] = ()  # per collective, most exposed first
    # Every NCCL operation of the process on the device, in or out of the steps, for the
    # cross-rank arrivals (``arrivals.py``); not part of the JSON.
    communication_ops: CommunicationOps | None = None
    # The leading steps left out of every total above as start-up (``STARTUP_RATIO``), and
    # their wall time; the steps they are set against: the longest of the others.
    startup_steps: int = 0
    startup_ns: int = 0
    # Trailing steps as many times longer than every steady step (a final checkpoint or
    # evaluation): one-time too, left out of every total the same way.
    final_steps: int = 0
    final_ns: int = 0
    steady_longest_ns: int = 0
    # GPU work before the first window that is start-up: without steps, a one-time range
    # named like it (``STARTUP_WORDS``) ended there; with steps, the work before the first
    # step when it spans more than the longest steady step. Its span (first operation to the
    # first window) is in ``startup_ns``; the one-time range it ran in, if any.
    startup_before_ns: int = 0
    startup_range: str = ""
    # Per busy kind that compute could hide (copies, communication): the most of it that
    # overlap could hide, step by step the lesser of its exposed time and the step's compute
    # time not already running under that kind's work.
    hideable_ns: dict[str, int] = field(default_factory=dict)
    # The steady steps' host-to-device copy time by the NVTX range its call was issued in.
    copy_ranges: tuple[Detail, ...] = ()
    htod: HtodCopies = field(default_factory=HtodCopies)
    # Only when asked for (``analyze_account(idle_spans=True)``): the steady steps' idle
    # pieces with their causes, for what held the thread then (``python_frames``); not part
    # of the JSON.
    idle_spans: IdleSpans | None = None
    periodic: PeriodicSteps | None = None
    thread_id: int = -1  # the globalTid of ``thread``; -1 when no thread is known
    # The steady steps' idle stretches longer than ``min_gap_ns`` (``analyze_account``), with
    # their causes, for the gap tables; not part of the JSON (``gaps.py`` lists them).
    idle_gaps: IdleGaps | None = None

    def bucket(self, name: str) -> Bucket | None:
        return next((b for b in self.buckets if b.name == name), None)

    def normal_view(self) -> Account:
        """This account as the rules weigh it: with periodic steps, their excess apart
        (``PeriodicSteps.normal_buckets``); else itself."""
        p = self.periodic
        if p is None:
            return self
        return replace(self, buckets=p.normal_buckets, hideable_ns=p.normal_hideable_ns)

    @property
    def stepped(self) -> bool:
        """Windows are the loop's steps, not equal windows over the GPU work."""
        return not self.windows.startswith(EQUAL_WINDOWS)

    def ns(self, name: str) -> int:
        b = self.bucket(name)
        return b.total_ns if b else 0


@dataclass(frozen=True)
class CommunicationOps:
    """NCCL operations by start: start and end (the report's clock), collective name; and
    every window of the account (its NVTX steps when ``stepped``), not only those listed."""

    start_ns: np.ndarray
    end_ns: np.ndarray
    collective: np.ndarray  # object array of names
    window_start_ns: np.ndarray
    window_end_ns: np.ndarray
    window_names: np.ndarray
    stepped: bool

    def __len__(self) -> int:
        return int(self.start_ns.size)


@dataclass(frozen=True)
class AccountResult(Tables):
    TABLES = {"accounts": Account}

    accounts: tuple[Account, ...]
    primary: int  # the account the verdict reads: the one with the most GPU busy time
    left_out: int = 0  # (process, GPU) pairs past MAX_ACCOUNTS, with the least GPU work

    @property
    def main(self) -> Account | None:
        return self.accounts[self.primary] if self.accounts else None


_FIND = object()


def analyze_account(
    events: Events,
    step_range: str | None = None,
    *,
    steps: StepWindows | None | object = _FIND,
    idle_spans: bool = False,
    min_gap_ns: int = DEFAULT_MIN_GAP_NS,
) -> AccountResult:
    """One account per (process, GPU) with GPU work; see the module docstring.

    ``steps``: the windows of the steps ``find_steps(events, step_range)`` found
    (``windows.project``; None when it found none), so a report holding one process does not
    look for its steps twice; without it they are found here. A report holding several
    processes has each one's steps found in its own events. ``min_gap_ns``: the shortest
    idle stretch listed as a gap (``Account.idle_gaps``); it changes no bucket.
    """
    work = events.work_per_pair
    pairs = sorted((p, d) for d, pids in events.device_pids.items() for p in pids)
    # The busiest pairs only: thousands of processes on a GPU is a damaged or crafted export.
    kept = set(sorted(pairs, key=lambda pair: (-work[pair[1], pair[0]], pair))[:MAX_ACCOUNTS])
    left_out = len(pairs) - len(kept)
    pairs = [pair for pair in pairs if pair in kept]
    pids = sorted({p for p, _ in pairs})
    loaders = _loader_processes(events)
    issued = nccl_issued(events.runtime, events.nvtx, events.lookups.nvtx_domains)
    accounts: list[Account] = []
    for pid in pids:
        try:
            if len(pids) == 1 and steps is not _FIND:
                found = steps
            else:
                ranges = find_steps(events, step_range, pid=None if len(pids) == 1 else pid)
                found = None if ranges is None else ranges.windows(events)
                del ranges
        except InputError:
            if len(pids) == 1:
                raise
            found = None  # --step-range names another process's steps
        # Each account takes the process's own rows from the whole report's events: no copy
        # of them per process.
        for p, dev in pairs:
            if p == pid:
                work = _ProcessDevice(events, pid, dev, found, loaders, issued.get(pid))
                work.keep_spans = idle_spans
                work.min_gap_ns = min_gap_ns
                accounts.append(work.account())
                del work
        del found  # a process's copy of its ranges: not held while the next one is found
    if not accounts:
        return AccountResult(accounts=(), primary=0, left_out=left_out)
    # The process and GPU doing the most GPU work (a process that only annotates steps, or
    # launches a kernel or two, is not the training job).
    primary = max(range(len(accounts)), key=lambda i: (accounts[i].busy_ns, -i))
    return AccountResult(accounts=tuple(accounts), primary=primary, left_out=left_out)


def _loader_processes(events: Events) -> int:
    """DataLoader worker processes: PyTorch names them ``pt_data_worker`` (the process in
    ``PROCESSES``, its thread in ``ThreadNames``)."""
    pids = {p for p, n in events.lookups.process_names.items() if n == "pt_data_worker"}
    pids |= {(t >> 24) & 0xFFFFFF for t, n in events.thread_names.items() if n == "pt_data_worker"}
    return len(pids)


class _ProcessDevice:
    """The account of one process on one device."""

    def __init__(self, events: Events, pid: int, dev: int, steps, loaders: int, nccl=None):
        self.ev = events
        self.pid = pid
        self.dev = dev
        self.loaders = loaders
        self.nccl = nccl  # the calls made inside NCCL's NVTX ranges (``nccl_issued``)
        self.ops = self._ops()
        if steps is not None and not self._any_work_in(steps):
            steps = None  # none of this GPU work falls in a step: the steps are another's
        self.steps = steps
        self.step_thread = steps.thread if steps is not None else None
        self.runtime = self._runtime()
        first = int(self.ops["start"][0]) if len(self.ops) else 0
        if steps is not None and steps.count:
            self.win_s, self.win_e = steps.start, steps.end
            self.win_names = steps.names  # texts (``find_steps``)
            self.windows = f"NVTX range '{steps.pattern}', each to its completion"
            # GPU work before the first step: a one-time range there is start-up, any name.
            self.startup_range, _ = self._once_range(int(self.win_s[0]), named=False)
            self.before_ns = max(0, int(self.win_s[0]) - first) if len(self.ops) else 0
        else:
            self.startup_range, begin = self._once_range(None, named=True)
            later = self.ops["start"] >= begin
            op_s, op_e = self.ops["start"][later], self.ops["end"][later]
            self.win_s, self.win_e = _fixed_windows(op_s, op_e)
            self.win_names = np.array([f"window {i}" for i in range(self.win_s.size)])
            self.windows = f"{EQUAL_WINDOWS} over the GPU work, no step range"
            self.before_ns = max(0, begin - first) if len(self.ops) else 0
        stepped = steps is not None and steps.count
        wall = self.win_e - self.win_s
        # The steady steps; the start-up ones before them and one-time final ones after.
        self.steady = steady_steps(wall) if stepped else slice(0, wall.size)
        self.startup = self.steady.start
        self.keep_spans = False
        self.min_gap_ns = DEFAULT_MIN_GAP_NS
        self.idle_gaps: IdleGaps | None = None
        self._pageable: dict[int, np.ndarray] = {}
        # The steps of a periodic event among the steady ones (``periodic_steps``).
        self.period = 0
        self.periodic = np.zeros(wall.size, dtype=bool)
        found = periodic_steps(wall[self.steady]) if stepped else None
        if found is not None:
            self.period = found[0]
            self.periodic[self.steady.start + found[1]] = True
        self.periodic_details: dict[tuple[int, str], int] = {}

    def _once_range(self, before: int | None, named: bool) -> tuple[str, int]:
        """A top-level range of the thread driving the GPU (``_home_thread``) that ends after
        the first GPU operation, by ``before`` (default: with ``STARTUP_LEAVES`` of the GPU
        work's span after it): when ``named``, named like start-up (``STARTUP_WORDS``), all
        its occurrences over by then; else one that occurs once. Its name and end, the latest
        such, or ("", the first operation's start)."""
        ops = self.ops
        first = int(ops["start"][0]) if len(ops) else 0
        nv, top = self.ev.nvtx, self.ev.nvtx_top_level
        if not len(ops) or not len(nv):
            return "", first
        mine = np.flatnonzero(top & (nv["globalTid"] == self._home_thread()))
        if not mine.size:
            return "", first
        span = int(self.ops["end"].max()) - first
        half = first + int(span * (1 - STARTUP_LEAVES))
        codes = nv["pattern"].codes[mine]
        cats = nv["pattern"].categories
        ends = nv["end"][mine]
        by = half if before is None else before
        if named:
            # Named like start-up, any number of times ('init_model' for a teacher and a
            # student), every one of them over by then.
            late = np.bincount(codes, weights=ends > by, minlength=len(cats))[codes] > 0
            words = np.array([bool(re.search(STARTUP_WORDS, str(c))) for c in cats.tolist()])
            words = words[codes] if words.size else np.zeros(codes.size, dtype=bool)
            chosen = words & ~late
        else:
            chosen = np.bincount(codes, minlength=len(cats))[codes] == 1
        pick = np.flatnonzero(chosen & (ends > first) & (ends <= by))
        if not pick.size:
            return "", first
        last = pick[np.argmax(ends[pick])]
        return str(cats[codes[last]]), int(ends[last])

    def _copy_ranges(self) -> tuple[Detail, ...]:
        """The steady steps' host-to-device copy time by the innermost NVTX range (numbers
        masked) on the thread of the call that issued each copy, largest first."""
        ops, rt, nv = self.ops, self.runtime, self.ev.nvtx
        sel = self._steady_htod()
        if not sel.size:
            return ()
        dur = ops["end"][sel] - ops["start"][sel]
        call = self._op_calls[sel]
        where = np.full(sel.size, NO_RANGE, dtype=object)
        known = np.flatnonzero(call >= 0)
        tids, at = rt["globalTid"][call[known]], rt["start"][call[known]]
        for tid in np.unique(tids).tolist():
            rows = np.flatnonzero(nv["globalTid"] == tid) if len(nv) else np.empty(0, np.int64)
            these = np.flatnonzero(tids == tid)
            j = iv.innermost_cover(nv["start"][rows], nv["end"][rows], at[these])
            hit = j >= 0
            where[known[these[hit]]] = label_at(nv["pattern"], rows[j[hit]])
        totals: dict[str, int] = {}
        for name, ns in zip(where.tolist(), dur.tolist()):
            totals[name] = totals.get(name, 0) + int(ns)
        ranked = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:DETAILS_LISTED]
        return tuple(Detail(name, ns) for name, ns in ranked)

    def _steady_htod(self) -> np.ndarray:
        """Rows of ``ops``: the host-to-device copies that start in the steady steps."""
        ops = self.ops
        names = ops["copy"].categories.tolist()
        if "HtoD" not in names or not self.win_s.size:
            return np.empty(0, np.int64)
        lo, hi = self.win_s[self.steady][0], self.win_e[self.steady][-1]
        start = ops["start"]
        htod = ops["copy"].codes == names.index("HtoD")
        return np.flatnonzero(htod & (start >= lo) & (start < hi))

    def _htod_copies(self) -> HtodCopies:
        sel = self._steady_htod()
        kinds = self.ops["kind"]
        kind = label_at(kinds, sel) if sel.size else np.empty(0, object)
        nbytes = self.ops["bytes"][sel]
        dur = self.ops["end"][sel] - self.ops["start"][sel]
        pageable = kind == "memcpy HtoD Pageable"
        step = np.searchsorted(self.win_s, self.ops["start"][sel], side="right") - 1
        with_copy = int(np.unique(step).size)
        if not pageable.any():
            return HtodCopies(steps_with_copy=with_copy)
        median = float(np.median(nbytes[pageable]))
        within = (nbytes * LIKE_SIZE >= median) & (nbytes <= median * LIKE_SIZE)
        link_bound = (nbytes >= LINK_BOUND_BYTES) & (median >= LINK_BOUND_BYTES)
        like = (kind == "memcpy HtoD Pinned") & (within | link_bound)
        return HtodCopies(
            steps_with_copy=with_copy,
            pageable_count=int(pageable.sum()),
            pageable_bytes=int(nbytes[pageable].sum()),
            pageable_ns=int(dur[pageable].sum()),
            pinned_like_count=int(like.sum()),
            pinned_like_bytes=int(nbytes[like].sum()),
            pinned_like_ns=int(dur[like].sum()),
        )

    def _any_work_in(self, steps: StepWindows) -> bool:
        """Does any of the process's GPU work on the device overlap the steps' windows (from
        the first step's start to the last one's completion)?"""
        if not steps.count:
            return False
        by = (steps.start[:1], steps.end[-1:])
        return bool(iv.overlaps_any(self.ops["start"], self.ops["end"], by).any())

    # -- inputs -------------------------------------------------------------------------

    def _ops(self) -> Table:
        """Every GPU operation of the process on the device, by start: ``start``, ``end``,
        ``correlationId``, ``kind`` (its busy kind), ``copy`` (HtoD, DtoH, ... for copies,
        else empty) and ``coll`` (its NCCL collective, else empty) as ``Labels``, ``bytes``."""
        ev, pid, dev = self.ev, self.pid, self.dev
        kinds: list[str] = []  # busy-kind labels; rows carry codes into it
        copies: list[str] = [""]
        collectives: list[str] = [""]  # NCCL collective names; "" for other work

        def code(labels: list[str], label: str) -> int:
            if label not in labels:
                labels.append(label)
            return labels.index(label)

        def mine(df: Table, *more: str) -> dict[str, np.ndarray]:
            """The columns ``start``, ``end``, ``correlationId`` and ``more`` of the process's
            rows on the device."""
            on = (df["deviceId"] == dev) & (pid_of(df["globalPid"]) == pid)
            return columns_where(df, on, ("start", "end", "correlationId", *more))

        if self.nccl is not None and len(self.nccl):
            nccl_corr = np.asarray(self.nccl["correlationId"])
            nccl_coll = np.array(
                [code(collectives, n) for n in self.nccl["collective"].tolist()], dtype=np.int64
            )
        else:
            nccl_corr = nccl_coll = np.empty(0, dtype=np.int64)

        def issued_by_nccl(f: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            """Work issued inside an NCCL range is communication, named by that range
            (unless a kernel's own name says which collective it is)."""
            hit = first_row_of(nccl_corr, f["correlationId"])
            inside = hit >= 0
            if inside.any():
                unnamed = inside & (f["coll"] == 0)
                f["coll"][unnamed] = nccl_coll[hit[unnamed]]
                f["kind"][inside] = code(kinds, COMMUNICATION)
            return f

        parts = []
        k = mine(ev.kernels, "nameId")
        if k["start"].size:
            ids = k["nameId"]
            distinct = iv.sorted_unique(ids)
            names = [ev.name_of(i) for i in distinct.tolist()]
            named = [is_communication_kernel(n) for n in names]
            # A kernel whose name says no collective is named by the NCCL range issuing it.
            coll_of = np.array(
                [code(collectives, collective_of(n)) if c else 0 for n, c in zip(names, named)],
                dtype=np.int64,
            )
            at = np.searchsorted(distinct, ids)
            comm = np.asarray(named, dtype=bool)[at]
            codes = np.where(comm, code(kinds, COMMUNICATION), code(kinds, COMPUTE))
            f = issued_by_nccl(_op_columns(k, codes, 0, coll_of[at]))
            # Still unnamed (no NCCL range either): the kernel's own name.
            unnamed = comm & (f["coll"] == collectives.index(""))
            if unnamed.any():
                own = np.array([code(collectives, n) for n in names], dtype=np.int64)
                f["coll"][unnamed] = own[at[unnamed]]
            del at, comm, codes, unnamed
            parts.append(f)
        g = mine(ev.graphs)
        if g["start"].size:
            parts.append(_op_columns(g, code(kinds, COMPUTE), 0))
        c = mine(ev.memcpy, "bytes", "copyKind", "srcKind", "dstKind")
        if c["start"].size:
            labels_copy = ev.lookups.copy_kind_labels
            labels_mem = ev.lookups.mem_kind_labels
            # One label per distinct (copy kind, source, destination): few, however many rows.
            distinct, inverse = _distinct_rows(c["copyKind"], c["srcKind"], c["dstKind"])
            kind_codes, copy_codes = [], []
            for ck, sk, dk in distinct:
                label = labels_copy.get(int(ck), f"kind {int(ck)}")
                # The host side names the memory kind of a copy to or from the host.
                host = labels_mem.get(int(sk if label == "HtoD" else dk), "Unknown")
                name = f"memcpy {label} {host}" if label in ("HtoD", "DtoH") else f"memcpy {label}"
                kind_codes.append(code(kinds, name))
                copy_codes.append(code(copies, label))
            f = _op_columns(c, np.array(kind_codes)[inverse], np.array(copy_codes)[inverse])
            f["bytes"] = np.clip(c["bytes"], 0, None)
            parts.append(issued_by_nccl(f))
        m = mine(ev.memset)
        if m["start"].size:
            parts.append(issued_by_nccl(_op_columns(m, code(kinds, MEMSET), 0)))
        if not parts:
            parts.append(_op_columns(k, np.empty(0, np.int64), 0))
        cols = (
            {n: np.concatenate([p[n] for p in parts]) for n in parts[0]}
            if len(parts) > 1
            else parts[0]
        )
        del parts, k, g, c, m
        starts = cols["start"]
        if starts.size > 1 and not (starts[1:] >= starts[:-1]).all():
            order = np.argsort(starts, kind="stable")
            cols = {n: v[order] for n, v in cols.items()}
            del order
        for n, labels in (("kind", kinds), ("copy", copies), ("coll", collectives)):
            cols[n] = Labels(cols[n], labels)
        return Table(cols)

    def _runtime(self) -> Table:
        """The process's CUDA API calls by start: ``start``, ``end``, ``globalTid``,
        ``correlationId``, ``api`` (name, ``Labels`` sorted) and ``cat``. The columns of the
        report's own table are shared, not copied, when every call is the process's (one
        process per report, as most are)."""
        rt = self.ev.runtime
        mine = pid_of(rt["globalTid"]) == self.pid
        cols = columns_where(rt, mine, ("start", "end", "globalTid", "correlationId", "nameId"))
        del mine
        ids = cols.pop("nameId")
        distinct = iv.sorted_unique(ids)
        names = [api_name(self.ev.name_of(i)) for i in distinct.tolist()]
        labels = sorted(set(names))
        code_of = np.array([labels.index(n) for n in names], dtype=np.int32)
        cat_of = np.array([_api_category(n) for n in names], dtype=np.int8)
        which = np.searchsorted(distinct, ids)
        del ids
        cols["api"] = Labels(code_of[which], labels)
        cat = cat_of[which]
        del which
        starts = cols["start"]
        slow = (cols["end"] - starts) > SLOW_LAUNCH_NS
        # A launch that takes this long is lazy module loading or JIT, not launch overhead.
        cat[slow & (cat == _LAUNCH)] = _MODULE
        del slow
        cols["cat"] = cat
        out = Table(cols)
        if starts.size > 1 and not (starts[1:] >= starts[:-1]).all():
            out = out.take(np.argsort(starts, kind="stable"))
        return out

    # -- the account ----------------------------------------------------------------------

    def account(self) -> Account:
        ops = self.ops
        lo, hi = int(self.win_s.min()), int(self.win_e.max())
        kinds = ops["kind"].categories.tolist()
        busy_names = _busy_order(kinds)
        codes = ops["kind"].codes
        op_s, op_e = ops["start"], ops["end"]
        layers = []
        for n in busy_names:
            mine = codes == kinds.index(n)
            layers.append(iv.union(op_s[mine], op_e[mine]))
        # Busy time outside the windows is cut away with the rest below.
        seg_s, seg_e, seg_k = iv.partition(layers)
        # The communication figures need the communication layer and, when it holds any work,
        # the compute layer; the others are dropped now (the millions of intervals of a
        # kernel-heavy capture).
        layers = dict(zip(busy_names, layers))
        free = self._compute_free(layers)
        empty = iv.union([], [])
        comm = layers.get(COMMUNICATION, empty)
        layers = {
            COMMUNICATION: comm,
            COMPUTE: layers.get(COMPUTE, empty) if comm[0].size else empty,
        }
        busy_u = iv.union(seg_s, seg_e)
        idle_s, idle_e = iv.complement(busy_u, lo, hi)
        labels = list(busy_names) + list(IDLE_CAUSES)
        n_b = len(labels)
        # Per window and bucket; details per (bucket, text). Busy segments and idle pieces are
        # disjoint: each is cut at the window edges and summed on its own.
        table = np.zeros((self.win_s.size, n_b), dtype=np.int64)
        details: dict[tuple[int, str], int] = {}
        self._sum_into(table, details, seg_s, seg_e, seg_k, None, None)
        del seg_s, seg_e, seg_k, busy_u
        readback_bytes, texts, pieces = self._idle_pieces(idle_s, idle_e, hi)
        # The steady steps' pieces, kept when asked for (``Account.idle_spans``).
        kept: list[tuple[np.ndarray, ...]] = [(np.empty(0, np.int64),) * 3]
        steady_s, steady_e = self.win_s[self.steady], self.win_e[self.steady]
        lo_s = int(steady_s[0]) if steady_s.size else hi
        hi_s = int(steady_e[-1]) if steady_s.size else hi
        gaps = _GapSums(idle_s, idle_e, lo_s, hi_s, self.min_gap_ns)
        for p_s, p_e, cause, detail in pieces:
            self._sum_into(table, details, p_s, p_e, cause + len(busy_names), detail, texts)
            gaps.add(p_s, p_e, cause, detail)
            if self.keep_spans:
                inside = (p_e > lo_s) & (p_s < hi_s)
                kept.append((p_s[inside], p_e[inside], cause[inside]))
        spans = None
        if self.keep_spans:
            s_, e_, c_ = (np.concatenate(x) for x in zip(*kept))
            spans = IdleSpans(np.clip(s_, lo_s, None), np.clip(e_, None, hi_s), c_)
        self.idle_gaps = gaps.result(texts)
        wall = self.win_e - self.win_s
        return self._result(
            labels,
            len(busy_names),
            table,
            wall,
            details,
            layers,
            busy_names,
            readback_bytes,
            free,
            spans,
        )

    def _per_window(self, u: iv.Intervals) -> np.ndarray:
        """The time of disjoint sorted intervals ``u`` in each window."""
        s, e, _, holder = iv.split_by(u[0], u[1], (self.win_s, self.win_e))
        inside = holder >= 0
        return np.bincount(
            holder[inside], weights=(e - s)[inside], minlength=self.win_s.size
        ).astype(np.int64)

    def _compute_free(self, layers: dict[str, iv.Intervals]) -> dict[str, np.ndarray]:
        """Per kind of work that compute could hide (copies, communication): in each window,
        the compute time not already running under that kind's work, all that overlapping
        could still put under it (the step cannot drop below the longer of the two)."""
        compute = layers.get(COMPUTE)
        if compute is None or not compute[0].size:
            return {}
        comp_w = self._per_window(compute)
        out = {}
        for name, u in layers.items():
            if name in (COMPUTE, MEMSET) or not u[0].size:
                continue
            both = comp_w + self._per_window(u) - self._per_window(iv.union_of([compute, u]))
            out[name] = comp_w - both
        return out

    def _sum_into(self, table, details, s, e, bucket, detail, texts) -> None:
        """Add the pieces [s, e) (disjoint, sorted) of ``bucket`` to ``table`` (window x
        bucket) and, where ``detail`` (codes of ``texts``) names one, to ``details``; cut at
        every window edge, the time outside the windows left out. A run of
        ``INTERVALS_PER_RUN`` pieces at a time: the cut pieces are not held all at once."""
        for lo in range(0, s.size, INTERVALS_PER_RUN):
            run = slice(lo, lo + INTERVALS_PER_RUN)
            part = None if detail is None else detail[run]
            self._sum_run_into(table, details, s[run], e[run], bucket[run], part, texts)

    def _sum_run_into(self, table, details, s, e, bucket, detail, texts) -> None:
        p_s, p_e, origin, w = iv.split_by(s, e, (self.win_s, self.win_e))
        inside = w >= 0
        dur = (p_e - p_s)[inside]
        origin, w = origin[inside], w[inside]
        del p_s, p_e, inside
        sums = np.bincount(w * table.shape[1] + bucket[origin], weights=dur, minlength=table.size)
        table += sums.astype(np.int64).reshape(table.shape)
        if detail is None:
            return
        codes = detail[origin]
        steady = (w >= self.steady.start) & (w < self.steady.stop)
        named = (codes >= 0) & steady  # the steady steps' details only
        periodic = self.periodic[w]
        n_t = len(texts.texts)
        for into, these in (
            (details, named & ~periodic),
            (self.periodic_details, named & periodic),
        ):
            if not these.any():
                continue
            key = bucket[origin][these] * n_t + codes[these]
            sums = np.bincount(key, weights=dur[these])
            for k in np.flatnonzero(np.bincount(key)).tolist():
                b, text = divmod(k, n_t)
                name = texts.texts[text]
                into[(b, name)] = into.get((b, name), 0) + int(sums[k])

    def _result(
        self, labels, n_busy, table, wall, details, layers, busy_names, rb, free, spans=None
    ) -> Account:
        # Every total is the steady steps': the start-up steps are listed, and counted apart.
        k, sl = self.startup, self.steady
        steady, steady_wall = table[sl], wall[sl]
        total_wall = int(steady_wall.sum())
        longest = int(steady_wall.max()) if steady_wall.size else 0
        # Unstepped, the named range's span is start-up; stepped, work before the first step
        # that spans more than a whole step.
        stepped = self.steps is not None and self.steps.count
        before = self.before_ns if not stepped or self.before_ns > longest else 0
        periodic = self._periodic(labels, n_busy, steady, details, free)
        every = dict(details)  # the steady steps' details, the periodic ones' too
        for key, ns in self.periodic_details.items():
            every[key] = every.get(key, 0) + ns
        buckets = _buckets(labels, n_busy, steady, total_wall, _details_by_bucket(every))
        busy_total = int(steady[:, :n_busy].sum())
        hideable = _hideable(labels[:n_busy], steady, free, sl)
        comm_ns = overlapped = 0
        comm_w = np.zeros(wall.size, dtype=np.int64)
        exposed_w = comm_w
        collectives: tuple[CollectiveSummary, ...] = ()
        comm_ops = None
        if COMMUNICATION in busy_names:
            comm = layers[COMMUNICATION]
            s, e, _, holder = iv.split_by(comm[0], comm[1], (self.win_s, self.win_e))
            inside = holder >= 0
            comm_w = np.bincount(
                holder[inside], weights=(e - s)[inside], minlength=wall.size
            ).astype(np.int64)
            exposed_w = table[:, labels.index(COMMUNICATION)]
            comm_ns, overlapped = int(comm_w[sl].sum()), int((comm_w - exposed_w)[sl].sum())
            ops = self.ops
            mine = ops["kind"] == COMMUNICATION
            c_s, c_e = ops["start"][mine], ops["end"][mine]
            c_n = label_at(ops["coll"], np.flatnonzero(mine))
            steady_windows = (self.win_s[sl], self.win_e[sl])
            collectives = summarize(c_s, c_e, c_n, layers[COMPUTE], steady_windows)
            comm_ops = CommunicationOps(
                c_s,
                c_e,
                c_n,
                self.win_s,
                self.win_e,
                self.win_names,
                stepped=not self.windows.startswith(EQUAL_WINDOWS),
            )
        steps = tuple(
            AccountStep(
                index=i,
                name=str(self.win_names[i]),
                start_ns=int(self.win_s[i]),
                wall_ns=int(wall[i]),
                busy_ns=int(table[i, :n_busy].sum()),
                idle_ns=int(table[i, n_busy:].sum()),
                buckets=tuple(
                    (labels[b], int(table[i, b])) for b in range(len(labels)) if table[i, b]
                ),
                communication_ns=int(comm_w[i]),
                communication_overlapped_ns=int(comm_w[i] - exposed_w[i]),
                startup=i < k,
                final=i >= sl.stop,
            )
            for i in range(min(wall.size, STEP_ROWS_LISTED))
        )
        return Account(
            pid=self.pid,
            device_id=self.dev,
            thread=self.ev.thread_label(self._home_thread()),
            thread_id=self._home_thread(),
            windows=self.windows,
            step_count=int(steady_wall.size),
            wall_ns=total_wall,
            median_wall_ns=int(np.median(steady_wall)) if steady_wall.size else 0,
            busy_ns=busy_total,
            idle_ns=total_wall - busy_total,
            idle_ratio=(total_wall - busy_total) / total_wall if total_wall else 0.0,
            buckets=tuple(buckets),
            steps=steps,
            communication_ns=comm_ns,
            communication_overlapped_ns=overlapped,
            readbacks=Readbacks(
                count=int(rb.size),
                median_bytes=int(np.median(rb)) if rb.size else 0,
                total_bytes=int(rb.sum(dtype=np.float64)),
            ),
            loader_processes=self.loaders,
            collectives=collectives,
            communication_ops=comm_ops,
            startup_steps=k,
            startup_ns=int(wall[:k].sum()) + before,
            final_steps=int(wall.size - sl.stop),
            final_ns=int(wall[sl.stop :].sum()),
            startup_before_ns=before,
            steady_longest_ns=longest,
            hideable_ns=hideable,
            copy_ranges=self._copy_ranges(),
            htod=self._htod_copies(),
            startup_range=self.startup_range if before else "",
            idle_spans=spans,
            periodic=periodic,
            idle_gaps=self.idle_gaps,
        )

    def _periodic(self, labels, n_busy, steady, details, free) -> PeriodicSteps | None:
        """The periodic event's split of the steady steps (module docstring), or None."""
        if not self.period:
            return None
        sl = self.steady
        per = self.periodic[sl]
        n, n_p = per.size, int(per.sum())
        others = steady[~per]
        excess = steady[per].sum(axis=0) - n_p * others.mean(axis=0)
        total = float(excess.sum())
        inputs = sum(float(excess[labels.index(x)]) for x in ("loading", "loader_wait"))
        # Starting DataLoader workers is the input's too (a new epoch's loader).
        if self.loaders:
            inputs += sum(
                ns for (_, name), ns in self.periodic_details.items() if name in BIRTH_CALLS
            )
        ranges, own = self._periodic_ranges()
        # Waiting for the input, in no range of its own (a range the other steps run too, such
        # as 'data', only takes longer): the input pipeline's rhythm (a new epoch's workers, a
        # loader's burst), not a periodic event of the loop.
        if total <= 0 or (inputs > total / 2 and not own):
            return None
        scale = n / (n - n_p)
        wall = steady.sum(axis=1)
        scaled = {key: int(ns * scale) for key, ns in details.items()}
        spent = _details_by_bucket(self.periodic_details)
        idle_details = sorted(
            (
                Detail(f"{d.name} ({labels[b]})", d.ns)
                for b, ds in spent.items()
                if b >= n_busy
                for d in ds
            ),
            key=lambda d: -d.ns,
        )
        grew = [Detail(labels[b], int(x)) for b, x in enumerate(excess.tolist()) if x >= 1]
        return PeriodicSteps(
            period=self.period,
            steps=tuple(str(x) for x in self.win_names[sl][per]),
            indices=tuple(int(i) for i in np.flatnonzero(self.periodic)),
            occurrences=tuple(
                str(x) for x in self.win_names[sl][per & ~np.concatenate([[False], per[:-1]])]
            ),
            typical_wall_ns=int(np.median(wall[~per])),
            median_wall_ns=int(np.median(wall[per])),
            excess_ns=int(total),
            excess_busy_ns=int(excess[:n_busy].sum()),
            excess_idle_ns=int(total) - int(excess[:n_busy].sum()),
            excess_buckets=tuple(sorted(grew, key=lambda d: -d.ns)[:DETAILS_LISTED]),
            ranges=ranges,
            details=tuple(idle_details[:DETAILS_LISTED]),
            normal_buckets=_buckets(
                labels, n_busy, others, int(wall.sum()), _details_by_bucket(scaled), scale
            ),
            normal_hideable_ns={
                k: int(v * scale)
                for k, v in _hideable(labels[:n_busy], others, free, sl, ~per).items()
            },
        )

    def _periodic_ranges(self) -> tuple[tuple[Detail, ...], bool]:
        """The step thread's NVTX ranges (numbers masked) that cover, of the periodic steps'
        time, at least ``PERIODIC_RANGE_SHARE`` and over ``PERIODIC_RANGE_RATIO`` times their
        share of the other steady steps' time, most of their time in the periodic steps
        (``PERIODIC_RANGE_HELD``): so neither a range enclosing the steps nor one run briefly
        in every step is the event's. Their time in the periodic steps, largest first; and
        whether one of them runs in at most a tenth of the other steps (its own range, not
        one of every step that took longer)."""
        nv = self.ev.nvtx
        if not len(nv) or self.steps is None:
            return (), False
        rows = np.flatnonzero(nv["globalTid"] == self._home_thread())
        sl = self.steady
        w_s, w_e = self.win_s[sl], self.win_e[sl]
        # A range started in a step's CPU range is that step's, whole (the CPU may run steps
        # ahead of their windows); any other is cut at the windows' edges.
        steps, at = self.steps, nv["start"][rows]
        step = np.searchsorted(steps.cpu_start, at, side="right") - 1
        held = step >= 0
        held[held] = at[held] < steps.cpu_end[step[held]]
        outside = rows[~held]
        p_s, p_e, origin, w = iv.split_by(nv["start"][outside], nv["end"][outside], (w_s, w_e))
        codes = np.concatenate(
            [nv["pattern"].codes[rows[held]], nv["pattern"].codes[outside][origin]]
        )
        dur = np.concatenate([nv["end"][rows[held]] - at[held], p_e - p_s])
        w = np.concatenate([step[held] - sl.start, w])
        inside = (w >= 0) & (w < w_s.size)
        if not inside.any():
            return (), False
        codes, dur, w = codes[inside], dur[inside], w[inside]
        per = self.periodic[sl]
        n_c = len(nv["pattern"].categories)
        wall = w_e - w_s
        in_p = np.bincount(codes[per[w]], weights=dur[per[w]], minlength=n_c)
        in_o = np.bincount(codes[~per[w]], weights=dur[~per[w]], minlength=n_c)
        share_p = in_p / max(int(wall[per].sum()), 1)
        share_o = in_o / max(int(wall[~per].sum()), 1)
        chosen = (
            (share_p >= PERIODIC_RANGE_SHARE)
            & (share_p > PERIODIC_RANGE_RATIO * share_o)
            & (in_p >= PERIODIC_RANGE_HELD * (in_p + in_o))
        )
        cats = nv["pattern"].categories
        chosen[cats == self.steps.pattern] = False  # the steps' own range holds the event
        if not chosen.any():
            return (), False
        # The other steps each name runs in.
        pairs = np.unique(codes[~per[w]].astype(np.int64) * w_s.size + w[~per[w]])
        runs_in = np.bincount(pairs // w_s.size, minlength=n_c)
        own = bool((chosen & (runs_in <= 0.1 * int((~per).sum()))).any())
        ns = np.where(chosen, in_p, 0)
        top = descending(ns)[:DETAILS_LISTED].tolist()
        return tuple(Detail(str(cats[c]), int(ns[c])) for c in top if ns[c] > 0), own

    def _home_thread(self) -> int:
        """The step thread; without steps, the process's main thread when it launches
        kernels (PyTorch's autograd threads launch many too), else the thread launching most."""
        if self.step_thread is not None:
            return self.step_thread
        rt = self.runtime
        tids = rt["globalTid"]
        launches = rt["cat"] == _LAUNCH
        if launches.any():
            tids = tids[launches]
        if not tids.size:
            return -1
        main = tids[(tids & 0xFFFFFF) == self.pid]
        if main.size:
            return int(main[0])
        return int(by_count(tids)[0])  # the most calls; of several, the first to call

    def _idle_pieces(self, idle_s: np.ndarray, idle_e: np.ndarray, hi: int):
        """Idle intervals -> the bytes of each read-back that drained the GPU, the details'
        texts, and the labeled pieces of the intervals: runs of (start, end, cause, detail)
        arrays in time order, cause an index into IDLE_CAUSES, detail a code of the texts.

        Two passes over runs of intervals, so that what is held grows with a run, not with
        the millions of idle intervals of a kernel-heavy capture: the first finds the drains
        (their chains of episodes span runs), the second makes the pieces (``sweep``: a
        thread with millions of calls cuts the idle time into tens of millions of them),
        the figures of each run's intervals made again as it goes."""
        n = idle_s.size
        texts = _Texts()
        facts = self._interval_facts(idle_s, idle_e, hi, texts)
        drained = np.zeros(n, dtype=bool)
        waited, drain_cause, drain_detail, readback_bytes = [], [], [], []
        threads: set[int] = set()
        for lo in range(0, n, INTERVALS_PER_RUN):
            f = facts(lo, min(lo + INTERVALS_PER_RUN, n))
            drained[lo : lo + f.n] = f.drained
            waited.append(f.waited[f.drained])
            drain_cause.append(f.drain_cause[f.drained])
            drain_detail.append(f.drain_detail[f.drained])
            readback_bytes.append(f.readback_bytes)
            threads.update(np.unique(f.tid[~f.queued]).tolist())
        # Per drain (in time order): its cause, its detail, and the time its thread waited.
        waited, drain_cause, drain_detail, readback_bytes = (
            np.concatenate([np.empty(0, dtype=np.int64), *x])
            for x in (waited, drain_cause, drain_detail, readback_bytes)
        )
        episode, chain = self._drain_episodes(idle_s, idle_e, drained)
        of_drain = chain[drained]
        ok = of_drain >= 0
        budget = np.bincount(of_drain[ok], weights=waited[ok]).astype(np.int64)
        del drained, waited
        kind, api = self.ops["kind"], self.runtime["api"]
        ovh = self.ev.overhead
        ovh = ovh.take(pid_of(ovh["globalTid"]) == self.pid)
        overhead = iv.union(ovh["start"], ovh["end"])
        del ovh
        calls = {t: self._calls(int(t)) for t in sorted(threads)}

        def run(lo: int, hi: int):
            """The pieces of the intervals [lo, hi), in time order."""
            f = facts(lo, hi)
            out: list[tuple] = []

            def emit(s, e, c, d, k):
                keep = e > s
                c = np.asarray(c, dtype=np.int64)
                c = c if c.shape == s.shape else np.full(s.shape, c, dtype=np.int64)
                if np.ndim(d) == 0:
                    d = np.full(s.shape, d, dtype=np.int64)
                if keep.all():  # no copy when none is empty
                    out.append((s, e, c, d, k))
                else:
                    out.append((s[keep], e[keep], c[keep], d[keep], k[keep]))

            i_s, i_e = idle_s[lo:hi], idle_e[lo:hi]
            # Work issued before the idle began: the GPU started it late, no CPU cause.
            at = np.flatnonzero(f.queued)
            emit(i_s[at], i_e[at], _CAUSE["queued"], -1, at)
            # After the issuing call began, the idle is the cost of that call, named by the
            # call and the copy it issued: "cudaMemcpyAsync (memcpy HtoD Pageable)".
            at = np.flatnonzero(f.issued)
            kind_of = np.where(f.end_copy[at] > 0, kind.codes[f.first[at]], -1)
            named = _joined(
                (api.codes[f.call[at]], api.categories), (kind_of, kind.categories), " ({})"
            )
            late = np.maximum(i_s[at], f.call_start[at])
            emit(late, i_e[at], _CAT_CAUSE[f.cat[at]], texts.codes(named), at)
            del at, kind_of, named, late
            # Before it, what the issuing thread was doing.
            early_e = np.minimum(i_e, f.call_start)
            for thread in np.unique(f.tid[~f.queued]).tolist():
                sel = np.flatnonzero(~f.queued & (f.tid == thread))
                p_s, p_e, p_idx, state, detail = self._thread_states(
                    calls[thread], i_s[sel], early_e[sel], texts, thread
                )
                g = sel[p_idx]  # the idle interval of each piece (in this run)
                c = np.full(p_s.size, _CAUSE["cpu"], dtype=np.int64)
                own = state == _OWN
                loading = f.input_copy[g]
                c[own & loading] = _CAUSE["loading"]
                c[own & f.short[g] & f.launched[g] & ~loading] = _CAUSE["launch"]
                wait = state == _OS_WAIT
                c[wait] = np.where(loading[wait], _CAUSE["loader_wait"], _CAUSE["os_wait"])
                c[state == _OS_CALL] = _CAUSE["os_call"]
                in_api = state >= _API
                c[in_api] = _CAT_CAUSE[state[in_api] - _API]
                # Inside the call that read back, the wait is the read-back's.
                rb = f.read[g] & ((state == _API + _SYNC) | (state == _API + _COPY))
                c[rb] = f.drain_cause[g][rb]
                detail[rb] = f.drain_detail[g][rb]
                emit(p_s, p_e, c, detail, g)
                del p_s, p_e, p_idx, state, detail, g, c, own, loading, wait, in_api, rb
            parts = list(zip(*out))
            out.clear()
            start, end, cause_idx, detail, interval = (
                p[0] if len(p) == 1 else np.concatenate(p) for p in parts
            )
            del parts
            start, end, cause_idx, detail, interval = _overhead_first(
                overhead, start, end, cause_idx, detail, interval + lo, texts.code("nsys")
            )
            return _charge_drains(
                start,
                end,
                cause_idx,
                detail,
                episode[interval],
                chain[interval],
                budget,
                drain_cause,
                drain_detail,
                spent,
                in_range,
            )

        own = np.array([_CAUSE[x] for x in ("cpu", "loading", "launch")])

        def in_range(drain: np.ndarray, detail: np.ndarray, cause: np.ndarray) -> np.ndarray:
            """The drain's detail, with the NVTX range its host work ran in when it was the
            thread's own code: "after cudaFree in 'forward'"."""
            ranged = np.isin(cause, own) & np.isin(detail, list(texts.ranges))
            out = drain.copy()
            if not ranged.any():
                return out
            n = len(texts.texts)  # grows as the new texts are coded
            out[ranged] = per_distinct(
                drain[ranged] * n + detail[ranged],
                lambda k: texts.code(f"{texts.texts[k // n]} in '{texts.texts[k % n]}'"),
                np.int64,
            )
            return out

        spent = [-1, 0]  # the chain of drains under way between runs, and its time so far

        def pieces():
            for lo, hi in sweep([c for t in sorted(threads) for c in calls[t]], idle_s, idle_e):
                yield run(lo, hi)

        return readback_bytes, texts, pieces()

    def _interval_facts(self, idle_s: np.ndarray, idle_e: np.ndarray, hi: int, texts: _Texts):
        """facts(lo, hi) -> what is known of each idle interval of [lo, hi) before it is cut
        into pieces: the operation ending it (``first``), the call that issued that
        (``call``, ``call_start``, ``tid``, ``cat``; ``queued`` when issued before the idle
        began, else ``issued``), its copy (``end_copy``, ``input_copy``), ``short`` and
        ``launched`` stretches, and the drain (``drained``, ``waited``, ``read``,
        ``drain_cause``, ``drain_detail`` as a code of ``texts``, ``readback_bytes`` of the
        read-backs in a window)."""
        ops, rt = self.ops, self.runtime
        op_start, op_end = ops["start"], ops["end"]
        op_bytes = ops["bytes"]
        op_call, rt_start = self._op_calls, rt["start"]
        rt_tid, rt_cat = rt["globalTid"], rt["cat"]
        api_names = rt["api"].categories
        last = max(len(ops) - 1, 0)
        home = self._home_thread()
        copy_code = ops["copy"].codes
        copy_names = ops["copy"].categories.tolist()
        htod = copy_names.index("HtoD") if "HtoD" in copy_names else -2
        dtoh = copy_names.index("DtoH") if "DtoH" in copy_names else -2
        # The step's input: a host-to-device copy ends loading. With DataLoader workers in
        # the report, only the step's first copy and those of its size carry batches (the
        # workers make the batches; other copies carry what the step's own code made).
        is_input = copy_code == htod
        if self.loaders and self.step_thread is not None:
            is_input = self._first_htod(is_input)
        draining: dict[int, tuple] = {}  # thread -> its draining calls (``_draining_calls``)

        def facts(lo: int, hi_: int) -> SimpleNamespace:
            s, e = idle_s[lo:hi_], idle_e[lo:hi_]
            m = s.size
            # The operation that ends each idle interval starts at its end ...
            first = np.searchsorted(op_start, e, side="left")
            has_op = (first < len(ops)) & (e < hi)
            has_op[has_op] = op_start[first[has_op]] == e[has_op]
            first = np.clip(first, 0, last)
            # ... and the API call that issued it has its correlation id (per process).
            call = op_call[first]
            known = has_op & (call >= 0)
            call = np.clip(call, 0, max(len(rt) - 1, 0))
            call_start = np.where(known, rt_start[call] if len(rt) else 0, e)
            tid = np.where(known, rt_tid[call] if len(rt) else home, home)
            cat = np.where(known, rt_cat[call] if len(rt) else _OTHER, _OTHER)
            if not len(rt):
                known[:] = False
            end_copy = np.where(has_op, copy_code[first], 0) if len(ops) else first
            input_copy = has_op & is_input[first] if len(ops) else has_op
            # The operation that ran just before each idle interval ends at its start.
            # No operation spans an idle start: the first to end at it is the first whose
            # running maximum of the ends reaches it.
            prev = np.clip(np.searchsorted(self._reach, s, side="left"), 0, last)
            before = (op_end[prev] == s) if len(ops) else np.zeros(m, dtype=bool)
            prev_dtoh = before & (copy_code[prev] == dtoh) if len(ops) else before
            prev_bytes = np.where(before, op_bytes[prev], 0) if len(ops) else prev
            del prev, before
            queued = known & (call_start < s)
            drain_cat = np.full(m, -1, dtype=np.int64)
            drain_api = np.full(m, -1, dtype=np.int64)  # codes of the API names
            waited = np.zeros(m, dtype=np.int64)
            for thread in np.unique(tid[~queued]).tolist():
                sel = np.flatnonzero(~queued & (tid == thread))
                if thread not in draining:
                    draining[thread] = self._draining_calls(thread)
                drain_cat[sel], drain_api[sel], began = _drains(draining[thread], s[sel])
                waited[sel] = np.where(drain_cat[sel] >= 0, s[sel] - began, 0)
            drained = (drain_cat >= 0) & ~queued
            # A drain after a device-to-host copy is a read-back; one of a few bytes (.item())
            # is a synchronization whose copy costs nothing.
            read = drained & prev_dtoh & np.isin(drain_cat, (_SYNC, _COPY))
            readback = read & (prev_bytes >= READBACK_MIN_BYTES)
            drain_cause = np.where(
                readback, _CAUSE["readback"], _CAT_CAUSE[np.clip(drain_cat, 0, None)]
            )
            drain_cause = np.where(read & ~readback, _CAUSE["sync"], drain_cause)
            # Named only where there is a drain: "read back 4 B", "after cudaFree".
            drain_detail = np.full(m, -1, dtype=np.int64)
            at = np.flatnonzero(drained & read)
            drain_detail[at] = texts.codes(
                _joined(_one("read back", at.size), _size_labels(prev_bytes[at]), " {}")
            )
            at = np.flatnonzero(drained & ~read)
            drain_detail[at] = texts.codes(
                _joined(_one("after", at.size), (drain_api[at], api_names), " {}")
            )
            sl = self.steady  # the steady steps' read-backs only
            in_window = iv.overlaps_any(s, e, (self.win_s[sl], self.win_e[sl]))
            return SimpleNamespace(
                n=m,
                first=first,
                call=call,
                call_start=call_start,
                tid=tid,
                cat=cat,
                queued=queued,
                issued=known & ~queued,
                end_copy=end_copy,
                input_copy=input_copy,
                short=(e - s) < LAUNCH_GAP_NS,
                launched=known & (cat == _LAUNCH),
                drained=drained,
                waited=waited,
                read=read,
                drain_cause=drain_cause,
                drain_detail=drain_detail,
                readback_bytes=prev_bytes[readback & in_window],
            )

        return facts

    @cached_property
    def _reach(self) -> np.ndarray:
        """Per GPU operation (by start), the latest end of it and every one before it."""
        return np.maximum.accumulate(self.ops["end"])

    @cached_property
    def _op_calls(self) -> np.ndarray:
        """Per GPU operation, the row of the API call that issued it (same correlation id),
        or -1."""
        call = first_row_of(self.runtime["correlationId"], self.ops["correlationId"])
        return call.astype(iv.index_type(len(self.runtime)), copy=False)

    def _pageable_calls(self, thread: int) -> np.ndarray:
        """Starts of the calls of ``thread`` that issued pageable host-to-device copies."""
        if thread in self._pageable:
            return self._pageable[thread]
        kinds = self.ops["kind"]
        names = kinds.categories.tolist()
        if PAGEABLE_HTOD not in names:
            return np.empty(0, np.int64)
        call = self._op_calls[kinds.codes == names.index(PAGEABLE_HTOD)]
        call = call[call >= 0]
        rt = self.runtime
        out = np.sort(rt["start"][call[rt["globalTid"][call] == thread]])
        self._pageable[thread] = out
        return out

    def _calls(self, thread: int) -> list[ThreadCalls]:
        """The thread's CUDA API calls, OS-runtime calls and NVTX ranges, to sweep."""
        return [ThreadCalls(df, thread) for df in (self.runtime, self.ev.osrt, self.ev.nvtx)]

    def _first_htod(self, is_htod: np.ndarray) -> np.ndarray:
        """Per operation: does it carry a batch: is it the first host-to-device copy its step
        launched (from inside the step's CPU range; a copy launched outside every step range:
        the first in its window), or a copy of the same size as one of those (the next
        micro-batch of a step that accumulates gradients)?"""
        htod = np.flatnonzero(is_htod)
        out = np.zeros(is_htod.size, dtype=bool)
        if not htod.size:
            return out
        call = self._op_calls[htod]
        known = call >= 0
        launched = self.ops["start"][htod].copy()
        launched[known] = self.runtime["start"][call[known]]
        cpu_s, cpu_e = self.steps.cpu_start, self.steps.cpu_end
        step = np.searchsorted(cpu_s, launched, side="right") - 1
        inside = step >= 0
        inside[inside] = launched[inside] < cpu_e[step[inside]]
        window = np.searchsorted(self.win_s, self.ops["start"][htod], side="right") - 1
        # Steps are 0 .. n-1; the windows' groups follow them (before the first window: n).
        group = np.where(inside, step, cpu_s.size + 1 + window)
        _, first = np.unique(group, return_index=True)
        nbytes = self.ops["bytes"][htod]
        out[htod[np.isin(nbytes, nbytes[first])]] = True
        return out

    def _drain_episodes(
        self, idle_s: np.ndarray, idle_e: np.ndarray, drained: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per idle interval, the latest drain whose episode it belongs to (its number among
        the drained intervals, in time order; -1 for none), and the chain of that episode.

        After a call drains the GPU, the queue is empty and the GPU idles between the
        thread's next launches until the thread gets ahead again: until it issues an
        operation while the GPU is still busy with earlier work. That is the drain's
        episode, across step boundaries too. Drains that follow one another before the
        thread gets ahead (``loss.item()`` then ``acc.cpu()``) form one chain, whose idle
        ``_charge_drains`` shares out.
        """
        n = idle_s.size
        # Numbers of drains and chains: 32 bits while they fit (millions of idle intervals).
        kind = iv.index_type(n)
        d_idx = np.flatnonzero(drained)
        if not d_idx.size:
            return np.full(n, -1, dtype=kind), np.full(n, -1, dtype=kind)
        op_s = self.ops["start"]
        call = self._op_calls
        known = call >= 0
        issued_at = self.runtime["start"][np.clip(call, 0, None)]
        issued_at[~known] = op_s[~known]
        ahead = np.zeros(op_s.size, dtype=bool)
        ahead[1:] = known[1:] & (issued_at[1:] < self._reach[:-1])
        del known, issued_at
        t_ahead = op_s[ahead]
        del ahead
        k = np.searchsorted(t_ahead, idle_e[d_idx], side="left")
        caught = np.full(k.size, np.iinfo(np.int64).max, dtype=np.int64)
        some = k < t_ahead.size
        caught[some] = t_ahead[k[some]]
        del k, some, t_ahead
        # A drain that comes after the previous one's episode ended starts a new chain.
        new = np.ones(d_idx.size, dtype=bool)
        new[1:] = idle_s[d_idx][1:] >= caught[:-1]
        chains = (np.cumsum(new) - 1).astype(kind)
        # Each interval belongs to the latest drain at or before it, while its episode lasts.
        episode = np.full(n, -1, dtype=kind)
        episode[d_idx] = np.arange(d_idx.size, dtype=kind)
        np.maximum.accumulate(episode, out=episode)
        inside = np.flatnonzero(episode >= 0)
        over = idle_s[inside] >= caught[episode[inside]]
        episode[inside[over]] = -1
        inside = inside[~over]
        del over
        chain = np.full(n, -1, dtype=kind)
        chain[inside] = chains[episode[inside]]
        return episode, chain

    def _draining_calls(self, thread: int) -> tuple[np.ndarray, ...]:
        """The thread's calls that can drain the GPU (sync, copy, allocator): start, end,
        category and API name (a code of the runtime's ``api`` labels), by start."""
        rt = self.runtime
        mine = np.flatnonzero((rt["globalTid"] == thread) & np.isin(rt["cat"], _DRAINING))
        return rt["start"][mine], rt["end"][mine], rt["cat"][mine], rt["api"].codes[mine]

    def _thread_states(self, calls: list[ThreadCalls], s, e, texts: _Texts, thread: int):
        """Split the intervals [s, e) (disjoint, sorted, after those of the last call) by what
        the thread of ``calls`` (``_calls``) was doing.

        Returns (starts, ends, interval index, state, detail): ``_API + category`` inside a
        CUDA call (detail: its name),
        ``_OS_WAIT``/``_OS_CALL`` inside an OS call (its name), else ``_OWN``, the thread's
        own code (detail: its innermost NVTX range, numbers masked); details as codes of
        ``texts``."""
        keep = e > s
        idx = np.flatnonzero(keep)
        s, e = s[keep], e[keep]
        ev = self.ev
        # Only the calls and ranges that overlap an interval can hold one of its pieces (a
        # range holding a point there overlaps it, and so does every range enclosing it).
        rt, os_, nv = (c.take((s, e)) for c in calls)
        points = np.concatenate([df[c] for df in (rt, os_, nv) for c in ("start", "end")])
        p_s, p_e, origin = iv.split_at(s, e, points)
        del points
        mid = p_s + (p_e - p_s) // 2
        state = np.full(p_s.size, _OWN, dtype=np.int64)
        no_range = texts.code(NO_RANGE)
        detail = np.full(p_s.size, no_range, dtype=np.int64)
        free = np.ones(p_s.size, dtype=bool)
        j = iv.outermost_cover(rt["start"], rt["end"], mid)
        hit = free & (j >= 0)
        state[hit] = _API + rt["cat"][j[hit]]
        detail[hit] = texts.of_category(rt["api"], j[hit])
        free &= ~hit
        j = iv.outermost_cover(os_["start"], os_["end"], mid)
        hit = free & (j >= 0)
        if hit.any():
            # Millions of OS calls, a few names: each name is looked up once.
            ids = os_["nameId"][j[hit]]

            def os_state(i: int) -> int:
                return _OS_WAIT if osrt_category(ev.name_of(i)) == "os_wait" else _OS_CALL

            state[hit] = per_distinct(ids, os_state, np.int64)
            detail[hit] = per_distinct(ids, lambda i: texts.code(ev.name_of(i)), np.int64)
            # Memory given back before a pageable copy of the thread, in no range that ends
            # before that copy: the last batch's source buffer (a pageable batch is freed to
            # the OS, a pinned one kept by the caching host allocator), the copies' own cost,
            # gone with pinned memory.
            released = per_distinct(ids, lambda i: bool(_RELEASE.match(ev.name_of(i))), bool)
            if released.any():
                at = np.flatnonzero(hit)[released]
                copies = self._pageable_calls(thread)
                k = np.searchsorted(copies, mid[at])
                between = k < copies.size
                # Not inside a range that ends before that copy (a checkpoint's own munmap).
                if between.any() and len(nv):
                    j = iv.innermost_cover(nv["start"], nv["end"], mid[at])
                    ends = np.where(j >= 0, nv["end"][np.clip(j, 0, None)], np.iinfo(np.int64).max)
                    nxt = copies[np.clip(k, 0, max(copies.size - 1, 0))] if copies.size else ends
                    between &= ends >= nxt
                at = at[between]
                state[at] = _API + _COPY
                name = ids[released][between]
                detail[at] = per_distinct(
                    name, lambda i: texts.code(f"{ev.name_of(i)} {AFTER_PAGEABLE}"), np.int64
                )
            del ids
        free &= ~hit
        del hit
        if free.any() and len(nv):
            j = iv.innermost_cover(nv["start"], nv["end"], mid[free])
            named = texts.of_category(nv["pattern"], np.clip(j, 0, None))
            detail[free] = np.where(j >= 0, named, no_range)
            texts.ranges.update(np.unique(named[j >= 0]).tolist())
        return p_s, p_e, idx[origin], state, detail


class _GapSums:
    """The idle intervals [``idle_s``, ``idle_e``) cut to the steady steps [``lo``, ``hi``)
    that last longer than ``min_gap_ns``, and the time of each (gap, cause, detail) as the idle
    pieces come, a run at a time (``add``); ``result``: ``IdleGaps``. A piece lies inside one
    idle interval, so it meets at most one gap."""

    def __init__(self, idle_s, idle_e, lo: int, hi: int, min_gap_ns: int):
        s, e = np.maximum(idle_s, lo), np.minimum(idle_e, hi)
        long = (e - s) > min_gap_ns
        self.min_gap_ns = min_gap_ns
        self.start, self.end = s[long], e[long]
        self.sums: list[tuple[np.ndarray, ...]] = []

    def add(self, p_s, p_e, cause, detail) -> None:
        gap = np.searchsorted(self.end, p_s, side="right")
        hit = gap < self.start.size
        hit[hit] = p_e[hit] > self.start[gap[hit]]
        if not hit.any():
            return
        g = gap[hit]
        ns = np.minimum(p_e[hit], self.end[g]) - np.maximum(p_s[hit], self.start[g])
        by = Groups([g, cause[hit], detail[hit]], sort=True)
        self.sums.append((*by.keys, by.sum(ns)))

    def result(self, texts: _Texts) -> IdleGaps:
        n = self.start.size
        cause = np.zeros(n, dtype=np.int64)
        name = np.full(n, None, dtype=object)
        if not self.sums:
            return IdleGaps(self.min_gap_ns, self.start, self.end, cause, name, ())
        g, c, d, ns = (np.concatenate(x) for x in zip(*self.sums))
        by = Groups([g, c, d], sort=True)
        g, c, d = by.keys
        ns = by.sum(ns)
        per_cause = Groups([g, c], sort=True)
        cause_ns = per_cause.sum(ns)
        # Per gap, its largest cause (ties: the first in IDLE_CAUSES' order), then that
        # cause's largest detail (ties: the first coded).
        best = np.lexsort((per_cause.keys[1], -cause_ns, per_cause.keys[0]))
        first = np.ones(best.size, dtype=bool)
        first[1:] = per_cause.keys[0][best][1:] != per_cause.keys[0][best][:-1]
        cause[per_cause.keys[0][best[first]]] = per_cause.keys[1][best[first]]
        named = (d >= 0) & (c == cause[g])
        order = np.lexsort((d[named], -ns[named], g[named]))
        gn, dn = g[named][order], d[named][order]
        first = np.ones(gn.size, dtype=bool)
        first[1:] = gn[1:] != gn[:-1]
        name[gn[first]] = [texts.texts[k] for k in dn[first].tolist()]
        total = Groups([c, d], sort=True)
        rows = [
            (IDLE_CAUSES[ci], texts.texts[di] if di >= 0 else None, t)
            for ci, di, t in zip(*(k.tolist() for k in total.keys), total.sum(ns).tolist())
        ]
        rows.sort(key=lambda r: -r[2])
        return IdleGaps(self.min_gap_ns, self.start, self.end, cause, name, tuple(rows))


class _Texts:
    """The details' texts as codes (-1: none): pieces come by the million, names by the few."""

    def __init__(self):
        self.texts: list[str] = []
        self._codes: dict[str, int] = {}
        self.ranges: set[int] = set()  # the codes of NVTX range names

    def code(self, text: str | None) -> int:
        if text is None or text == "":
            return -1
        code = self._codes.get(text)
        if code is None:
            code = self._codes[text] = len(self.texts)
            self.texts.append(text)
        return code

    def codes(self, coded: Coded) -> np.ndarray:
        """The codes of texts given as ``(which, texts)``: each row's index into ``texts``
        (-1, None or "" for none), as ``_joined`` gives them."""
        which, distinct = coded
        # -1 picks the last entry: none.
        return np.array([self.code(t) for t in distinct] + [-1], dtype=np.int64)[which]

    def of_category(self, column: Labels, idx: np.ndarray) -> np.ndarray:
        """The codes of a ``Labels`` column's texts at the rows ``idx``."""
        cats = column.categories
        return per_distinct(
            column.codes[idx],
            lambda k: self.code(str(cats[k])) if k >= 0 else -1,
            np.int64,
        )


def _drains(draining: tuple[np.ndarray, ...], at: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per time: the category, API (its code) and start of the draining call
    (``_draining_calls``) the thread was inside at that time, begun before it; -1, -1 and the
    time when none."""
    s, e, cat, api = draining
    if not s.size:
        return np.full(at.size, -1, dtype=np.int64), np.full(at.size, -1, dtype=np.int64), at
    j = iv.outermost_cover(s, e, at)
    inside = j >= 0
    j = np.clip(j, 0, None)
    inside &= s[j] < at
    cats = np.where(inside, cat[j], -1).astype(np.int64)
    apis = np.where(inside, api[j], -1).astype(np.int64)
    return cats, apis, np.where(inside, s[j], at)


def _buckets(labels, n_busy, rows, total_wall, by_bucket, scale=1.0) -> tuple[Bucket, ...]:
    """The buckets of the steps ``rows`` (step x bucket), their totals times ``scale``:
    busy kinds, then idle causes, each largest first."""
    out = []
    for b, name in enumerate(labels):
        total = int(rows[:, b].sum() * scale)
        if not total:
            continue
        out.append(
            Bucket(
                name=name,
                kind="busy" if b < n_busy else "idle",
                total_ns=total,
                median_ns=int(np.median(rows[:, b])),
                share_ratio=total / total_wall if total_wall else 0.0,
                details=by_bucket.get(b, ()),
            )
        )
    out.sort(key=lambda x: (x.kind != "busy", -x.total_ns))
    return tuple(out)


def _hideable(busy_names, rows, free, sl, of=None) -> dict[str, int]:
    """Per busy kind, the most of it overlap could hide in the steps ``rows`` (the steady
    steps ``sl``, or those of them where ``of``): under compute not already running under it."""
    out = {}
    for b, name in enumerate(busy_names):
        if name in (COMPUTE, MEMSET) or not rows[:, b].any():
            continue
        room = free[name][sl] if name in free else None
        if room is not None and of is not None:
            room = room[of]
        out[name] = int(np.minimum(rows[:, b], room).sum()) if room is not None else 0
    return out


def _details_by_bucket(details: dict[tuple[int, str], int]) -> dict[int, tuple[Detail, ...]]:
    """Per bucket, its ``DETAILS_LISTED`` largest details (ns per (bucket, detail text)):
    largest first, ties in the order ``descending`` leaves the texts sorted."""
    texts: dict[int, list[str]] = {}
    for b, text in sorted(details, key=lambda k: (k[0], str(k[1]))):
        texts.setdefault(b, []).append(text)
    out = {}
    for b, names in texts.items():
        ns = np.array([details[b, t] for t in names], dtype=np.int64)
        top = descending(ns)[:DETAILS_LISTED].tolist()
        out[b] = tuple(Detail(str(names[i]), int(ns[i])) for i in top)
    return out


def _overhead_first(overhead: iv.Intervals, s, e, c, d, k, nsys: int):
    """Relabel the idle pieces under nsys's own overhead in the process (``overhead``, a
    union over its threads): it wins over every other cause, detail ``nsys``. Pieces come back
    in time order, with the idle interval ``k`` of each."""
    if s.size > 1 and not (s[1:] >= s[:-1]).all():
        order = np.argsort(s, kind="stable")
        s, e, c, d, k = s[order], e[order], c[order], d[order], k[order]
        del order
    if not s.size:
        return s, e, c, d, k
    # Only the overhead within these pieces' stretch of time.
    lo = np.searchsorted(overhead[1], s[0], side="right")
    hi = np.searchsorted(overhead[0], e.max(), side="left")
    u = (overhead[0][lo:hi], overhead[1][lo:hi])
    if not u[0].size:
        return s, e, c, d, k
    p_s, p_e, origin, holder = iv.split_by(s, e, u)
    hit = holder >= 0
    c, d = c[origin], d[origin].copy()
    c[hit] = IDLE_CAUSES.index("profiler_overhead")
    d[hit] = nsys
    return p_s, p_e, c, d, k[origin]


def _charge_drains(
    s, e, c, d, episode, chain, budget, drain_cause, drain_detail, spent, named=None
):
    """Charge each chain of drains with the host-side idle of its episodes, in time order, up
    to the time the thread waited inside its draining calls: without the drains, that much of
    the host work would have overlapped the GPU's queued work, and no more. Each piece goes
    to the latest drain before it; pieces in no episode, nsys's overhead and ``queued`` time
    keep their cause; a piece that straddles the limit is split there. ``s`` must be in time
    order; ``episode`` numbers the drains, ``drain_cause`` and ``drain_detail`` hold one value
    per drain. The pieces may come a run at a time: ``spent`` is [the chain under way when the
    last run ended, the time it was charged so far], and is brought up to date. ``named``
    (drain details, the pieces' details, their causes) -> the details the pieces take."""
    fixed = tuple(IDLE_CAUSES.index(x) for x in KEPT_AFTER_DRAINS)
    idx = np.flatnonzero((episode >= 0) & ~np.isin(c, fixed))
    if not idx.size:
        return s, e, c, d
    ep, ch = episode[idx], chain[idx]
    dur = e[idx] - s[idx]
    cum = np.cumsum(dur)
    starts = np.ones(idx.size, dtype=bool)
    starts[1:] = ch[1:] != ch[:-1]
    group_base = np.maximum.accumulate(np.where(starts, cum - dur, 0))
    before = cum - dur - group_base
    # Chains follow one another in time: only the first can go on from the last run.
    before[ch == spent[0]] += spent[1]
    spent[:] = [int(ch[-1]), int(before[-1] + dur[-1])]
    budget = budget[ch]
    whole = before + dur <= budget
    part = ~whole & (before < budget)
    del cum, starts, group_base

    # c and d are the caller's to give: relabeled in place.
    def detail_of(rows, drains):
        given = drain_detail[drains]
        return given if named is None else named(given, d[rows], c[rows])

    d[idx[whole]] = detail_of(idx[whole], ep[whole])
    c[idx[whole]] = drain_cause[ep[whole]]
    if part.any():
        cut = s[idx[part]] + (budget[part] - before[part])
        head = (cut, drain_cause[ep[part]], detail_of(idx[part], ep[part]))
        s = np.concatenate([s, s[idx[part]]])
        e = np.concatenate([e, head[0]])
        c = np.concatenate([c, head[1]])
        d = np.concatenate([d, head[2]])
        s[idx[part]] = head[0]  # the rest of the piece keeps its own cause
        order = np.argsort(s, kind="stable")
        s, e, c, d = s[order], e[order], c[order], d[order]
    return s, e, c, d


def _busy_order(kinds) -> list[str]:
    copies = sorted(
        (k for k in kinds if str(k).startswith("memcpy")),
        key=lambda k: (0 if " HtoD" in k else 1 if " DtoH" in k else 2, k),
    )
    head = [k for k in (COMPUTE, COMMUNICATION) if k in set(kinds)]
    tail = [MEMSET] if MEMSET in set(kinds) else []
    return head + copies + tail


def _op_columns(rows: dict[str, np.ndarray], kind, copy, coll=0) -> dict[str, np.ndarray]:
    """start, end, correlationId of ``rows``, the codes of ``kind``, ``copy`` and ``coll``
    (writable, one per row), ``bytes`` 0."""
    n = rows["start"].size

    def per_row(code) -> np.ndarray:
        return np.array(np.broadcast_to(np.asarray(code, dtype=np.int32), (n,)))

    return {
        "start": rows["start"],
        "end": rows["end"],
        "correlationId": rows["correlationId"],
        "kind": per_row(kind),
        "copy": per_row(copy),
        "bytes": np.zeros(n, dtype=np.int64),
        "coll": per_row(coll),
    }


# Bits per column when the columns of ``_distinct_rows`` are packed into one integer.
_ROW_BITS = 21
# A column of ``_distinct_rows`` with values below this (an enum: copy kinds, memory kinds) is
# packed as it is; one with larger values by the rank of each among its distinct ones.
_SMALL_RANGE = 1 << 8


def _distinct_rows(
    first: np.ndarray, second: np.ndarray, third: np.ndarray
) -> tuple[list[tuple[int, int, int]], np.ndarray]:
    """The distinct rows of three integer columns, sorted, and each row's index into them.
    Few are distinct among millions of rows: when every value fits ``_ROW_BITS`` bits, a row
    is one integer and the distinct ones are marked in a table (``ranked``), nothing sorted
    (``np.unique`` over the rows sorts them all: 0.35 s for the 0.9 M copies of one rank of
    the user-reported shape)."""
    cols = [np.asarray(c, dtype=np.int64) for c in (first, second, third)]
    if not cols[0].size:
        return [], np.empty(0, dtype=np.intp)
    if all(c.min() >= 0 and c.max() < 1 << _ROW_BITS for c in cols):
        # Each column's values, or their ranks, make one digit of the row's integer: rows in
        # order are integers in order. (At most 2^21 digits each: no overflow.)
        key = np.zeros(cols[0].size, dtype=np.int64)
        digits = []  # per column, the value of each digit
        for c in cols:
            high = int(c.max()) + 1
            values, digit = (np.arange(high), c) if high <= _SMALL_RANGE else ranked(c, high)
            key *= values.size
            key += digit
            digits.append(values)
        del digit
        n2, n3 = digits[1].size, digits[2].size
        keys, codes = ranked(key, digits[0].size * n2 * n3)
        del key
        parts = (keys // (n2 * n3), keys // n3 % n2, keys % n3)
        rows = list(zip(*(v[p].tolist() for v, p in zip(digits, parts))))
        return rows, codes
    distinct, inverse = np.unique(np.stack(cols, axis=1), axis=0, return_inverse=True)
    return [tuple(r) for r in distinct.tolist()], inverse.ravel()


def _api_category(name: str) -> int:
    if name in SYNC_APIS:
        return _SYNC
    if name in LAUNCH_APIS:
        return _LAUNCH
    if name.startswith(("cuModuleLoad", "cuLibraryLoad", "cudaLibraryLoad")):
        return _MODULE
    if name.startswith(ALLOCATOR_PREFIXES):
        return _ALLOC
    if name.startswith(("cudaMemcpy", "cuMemcpy")) and "Async" not in name:
        return _COPY
    if name.startswith(("cudaMemcpy", "cuMemcpy", "cudaMemset", "cuMemset")):
        # Async copies block too when the host side is pageable; they drain a GPU only then.
        return _COPY
    return _OTHER


def _fixed_windows(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if not len(starts):
        return np.zeros(1, np.int64), np.zeros(1, np.int64)
    lo, hi = int(starts.min()), int(ends.max())
    n = max(1, min(FIXED_WINDOWS, hi - lo))
    edges = lo + (np.arange(n + 1, dtype=np.int64) * (hi - lo)) // n
    return edges[:-1], edges[1:]


# Texts per row as ``(which, texts)``: each row's index into a few distinct texts (-1: none),
# so that no string is made per row.
Coded = tuple[np.ndarray, list[str] | np.ndarray]


def _one(text: str, n: int) -> Coded:
    """``text`` on each of ``n`` rows."""
    return np.zeros(n, dtype=np.int64), [text]


def _joined(first: Coded, second: Coded, form: str) -> tuple[np.ndarray, list[str]]:
    """Per row, the text of ``first`` followed by ``form`` filled with that of ``second``
    (nothing where it is none or empty), one string per distinct pair."""
    (a_codes, a_texts), (b_codes, b_texts) = first, second
    width = len(b_texts) + 1
    key = np.asarray(a_codes, dtype=np.int64) * width + (np.asarray(b_codes, dtype=np.int64) + 1)
    keys, which = ranked(key, len(a_texts) * width)
    labels = []
    for k in keys.tolist():
        a, b = a_texts[k // width], b_texts[k % width - 1] if k % width else ""
        labels.append(f"{a}{form.format(b)}" if b else str(a))
    return which, labels


def _size_labels(nbytes: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Sizes as "4 B", "64 kB", "128 MB" (``Coded``): few distinct values, each formatted
    once."""
    sizes, which = np.unique(nbytes, return_inverse=True)
    labels = [
        f"{b / 1e6:.0f} MB" if b >= 1e6 else f"{b / 1e3:.0f} kB" if b >= 1e3 else f"{b} B"
        for b in sizes.tolist()
    ]
    return which.reshape(-1), labels
