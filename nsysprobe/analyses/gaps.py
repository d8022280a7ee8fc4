"""GPU activity and idle gaps, per device, and what the CPU was doing during each gap.

Busy time is the **union** of kernels, memcpy and memset on a device (overlapping streams are
counted once); the span runs from the device's first operation to its last, and idle time is
the span minus busy time. A *gap* is an idle stretch between two operations longer than the
threshold (default 1 ms: step-level starvation; NVIDIA's ``gpu_gaps`` rule uses 500 ms and
misses it). Gap time is a union too (gaps on one device are disjoint).

Each gap is attributed to the CPU thread the GPU was waiting on: the thread whose CUDA API
call issued the operation that ended the gap (joined on process and correlation id; the
process's busiest CUDA thread when the call is not in the trace). What that thread did during
the gap is measured by its time inside:

    cuda_sync    cudaStreamSynchronize, cudaDeviceSynchronize, cudaEventSynchronize, ...
    cuda_copy    cudaMemcpy* / cuMemcpy* (a pageable copy blocks the thread)
    cuda_launch  kernel and graph launches (a launch over 1 ms is module loading or JIT:
                 cuda_other)
    cuda_other   any other CUDA API call (cudaMalloc, cudaFree, ...)
    os_wait      blocking OS calls: poll, select, pthread_cond_wait, futex, read, ...
                 (waiting for DataLoader workers or I/O)
    os_call      other OS calls (munmap, mmap, open, ...)
    cpu          none of these: the thread ran its own code (Python producing a batch,
                 building the graph)

and to the innermost NVTX range open on that thread for at least half of the gap (the range
covering the most of it when none covers half), grouped by name with numbers masked
(``Batch 12`` -> ``Batch #``). The longest gaps
are also listed with every NVTX range, OS-runtime call and CUDA API call that overlapped them,
on every thread of the process. The shares are sums over gaps of one thread's time, so they
add up to the total gap time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nsysprobe.analyses import intervals as iv
from nsysprobe.analyses.events import (
    Events,
    ThreadCalls,
    api_name,
    first_row_of,
    label_at,
    per_distinct,
    rows_overlapping,
    sweep,
)
from nsysprobe.common.frames import Tables
from nsysprobe.common.table import Groups, descending, first_seen
from nsysprobe.trace.values import pid_of

DEFAULT_MIN_GAP_NS = 1_000_000
# (NVTX range, gap) pairs attributed at once: bounds memory when 1e5 ranges nest over a gap.
PAIRS_PER_CHUNK = 1 << 21
LONGEST_GAPS_LISTED = 20
NO_RANGE = "(no NVTX range)"
SLOW_LAUNCH_NS = 1_000_000
OVERLAPS_LISTED = 8

SYNC_APIS = frozenset(
    {
        "cudaDeviceSynchronize",
        "cudaStreamSynchronize",
        "cudaEventSynchronize",
        "cuCtxSynchronize",
        "cuStreamSynchronize",
        "cuEventSynchronize",
    }
)
LAUNCH_APIS = frozenset(
    {
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cudaLaunchCooperativeKernel",
        "cuLaunchKernel",
        "cuLaunchKernelEx",
        "cudaGraphLaunch",
        "cuGraphLaunch",
    }
)
OS_WAITS = frozenset(
    {
        "poll",
        "ppoll",
        "select",
        "pselect",
        "pselect6",
        "epoll_wait",
        "epoll_pwait",
        "pthread_cond_wait",
        "pthread_cond_timedwait",
        "pthread_cond_clockwait",
        "pthread_mutex_lock",
        "pthread_mutex_timedlock",
        "pthread_rwlock_rdlock",
        "pthread_rwlock_wrlock",
        "pthread_join",
        "futex",
        "sem_wait",
        "sem_timedwait",
        "sem_clockwait",
        "read",
        "readv",
        "pread",
        "pread64",
        "recv",
        "recvfrom",
        "recvmsg",
        "nanosleep",
        "clock_nanosleep",
        "usleep",
        "sleep",
        "wait",
        "waitpid",
        "waitid",
        "accept",
        "accept4",
        "connect",
    }
)
STATES = ("cuda_sync", "cuda_copy", "cuda_launch", "cuda_other", "os_wait", "os_call", "cpu")


def api_category(name: str) -> str:
    """The gap state a CUDA API call puts its thread in."""
    if name in SYNC_APIS:
        return "cuda_sync"
    if name in LAUNCH_APIS:
        return "cuda_launch"
    if name.startswith(("cudaMemcpy", "cuMemcpy")):
        return "cuda_copy"
    return "cuda_other"


# OS calls that start a process (a DataLoader worker, a subprocess).
BIRTH_CALLS = frozenset(
    {"fork", "vfork", "_Fork", "__fork", "clone", "clone3", "posix_spawn", "posix_spawnp"}
)


def osrt_category(name: str) -> str:
    """The gap state an OS-runtime call puts its thread in."""
    return "os_wait" if name in OS_WAITS else "os_call"


@dataclass(frozen=True)
class DeviceActivity:
    device_id: int
    kernel_count: int
    memcpy_count: int
    memset_count: int
    busy_ns: int  # union of kernels, memcpy and memset
    kernel_busy_ns: int  # union of kernels
    memcpy_busy_ns: int  # union of memcpy
    span_ns: int  # first operation's start to last operation's end
    busy_ratio: float  # busy_ns / span_ns
    idle_ns: int  # span_ns - busy_ns
    gap_count: int
    gap_ns: int  # sum (= union) of gaps longer than the threshold


@dataclass(frozen=True)
class Overlap:
    name: str
    thread: str
    overlap_ns: int


@dataclass(frozen=True)
class Gap:
    device_id: int
    start_ns: int
    end_ns: int
    duration_ns: int
    state: str  # what the waited-on thread did for most of the gap (STATES)
    innermost_range: str | None  # innermost NVTX range on that thread
    nvtx: tuple[Overlap, ...]
    osrt: tuple[Overlap, ...]
    cuda_api: tuple[Overlap, ...]


@dataclass(frozen=True)
class IdleShare:
    label: str
    idle_ns: int
    share_ratio: float  # of all gap time


@dataclass(frozen=True)
class CauseShare:
    state: str  # what the waited-on thread did (see STATES)
    range: str | None  # its innermost NVTX range, None when it had none open
    idle_ns: int
    share_ratio: float  # of all gap time


@dataclass(frozen=True)
class GapsResult(Tables):
    TABLES = {
        "devices": DeviceActivity,
        "longest": Gap,
        "by_cause": CauseShare,
        "by_state": IdleShare,
        "by_range": IdleShare,
    }

    min_gap_ns: int
    devices: tuple[DeviceActivity, ...]
    gap_count: int
    gap_ns: int  # sum over devices
    by_state: tuple[IdleShare, ...]  # what the waited-on thread did, largest first
    by_range: tuple[IdleShare, ...]  # innermost NVTX range on that thread
    by_cause: tuple[CauseShare, ...]  # both at once, largest first
    longest: tuple[Gap, ...]  # the longest gaps, longest first, attributed in detail


def analyze_gaps(events: Events, min_gap_ns: int = DEFAULT_MIN_GAP_NS) -> GapsResult:
    gaps = events.device_gaps(min_gap_ns)
    devices = tuple(_device_activity(events, d, gaps[d]) for d in events.device_ids)
    state_ns: dict[str, int] = {}
    range_ns: dict[str, int] = {}
    cause_ns: dict[tuple[str, str | None], int] = {}
    detailed: list[Gap] = []
    candidates = []  # (device, index, its gaps' starts, ends, states, innermost range rows)
    for dev in events.device_ids:
        g_s, g_e = gaps[dev]
        if not g_s.size:
            continue
        threads = _waited_on_threads(events, dev, g_e)
        states = np.empty(g_s.size, dtype=object)
        inner_row = np.full(g_s.size, -1, dtype=np.int64)
        inner_pattern = np.full(g_s.size, NO_RANGE, dtype=object)
        for thread in first_seen(threads)[0].tolist():
            sel = np.flatnonzero(threads == thread)
            st, row, pattern = _attribute(
                events, None if thread < 0 else int(thread), g_s[sel], g_e[sel]
            )
            states[sel] = st
            inner_row[sel] = row
            inner_pattern[sel] = pattern
        dur = g_e - g_s
        # Each sum in the order of its labels, as the first device's give the ties' order.
        for totals, keys in ((state_ns, [states]), (range_ns, [inner_pattern])):
            by = Groups(keys, sort=True)
            for label, ns in zip(by.keys[0].tolist(), by.sum(dur).tolist()):
                totals[label] = totals.get(label, 0) + ns
        by = Groups([states, inner_pattern], sort=True)
        for state, rng, ns in zip(*(k.tolist() for k in by.keys), by.sum(dur).tolist()):
            key = (str(state), None if rng == NO_RANGE else str(rng))
            cause_ns[key] = cause_ns.get(key, 0) + ns
        for k in np.argsort(-dur, kind="stable")[:LONGEST_GAPS_LISTED].tolist():
            candidates.append((dev, k, g_s, g_e, states, inner_row))
    # The longest gaps over all devices (ties in device, then time order), described: each
    # description scans the calls and ranges around it, so only those listed are described.
    candidates.sort(key=lambda c: -(c[3][c[1]] - c[2][c[1]]))
    listed = candidates[:LONGEST_GAPS_LISTED]
    for dev in dict.fromkeys(c[0] for c in listed):
        mine = [c for c in listed if c[0] == dev]
        detailed += _described(events, dev, mine)
    total_gap = sum(d.gap_ns for d in devices)
    detailed.sort(key=lambda g: -g.duration_ns)
    return GapsResult(
        min_gap_ns=min_gap_ns,
        devices=devices,
        gap_count=sum(d.gap_count for d in devices),
        gap_ns=total_gap,
        by_state=_shares(state_ns, total_gap),
        by_range=_shares(range_ns, total_gap),
        by_cause=tuple(
            CauseShare(state=k[0], range=k[1], idle_ns=v, share_ratio=v / total_gap)
            for k, v in sorted(cause_ns.items(), key=lambda kv: -kv[1])
        ),
        longest=tuple(detailed[:LONGEST_GAPS_LISTED]),
    )


def _described(events: Events, dev: int, listed) -> list[Gap]:
    """The gaps ``listed`` (``analyze_gaps``' candidates) of device ``dev``, with what ran
    around each."""
    g_s, g_e, states, inner_row = listed[0][2:]
    chosen = np.array([c[1] for c in listed], dtype=np.int64)
    pids = events.device_pids.get(dev, set())
    shown = np.sort(chosen)  # in time order
    within = (g_s[shown], g_e[shown])
    nvtx = _OverlapIndex(events.nvtx, pids, within, "row", events.nvtx_names, events)
    names = _names_of(events, api_name)
    osrt = _OverlapIndex(events.osrt, pids, within, "nameId", names, events)
    api = _OverlapIndex(events.runtime, pids, within, "nameId", names, events)
    held = inner_row[chosen]
    held = held[held >= 0]
    inner_names = dict(zip(held.tolist(), events.nvtx_names(held)))
    return [
        Gap(
            device_id=dev,
            start_ns=int(g_s[k]),
            end_ns=int(g_e[k]),
            duration_ns=int(g_e[k] - g_s[k]),
            state=str(states[k]),
            innermost_range=inner_names.get(int(inner_row[k])),
            nvtx=nvtx.overlaps(g_s[k], g_e[k]),
            osrt=osrt.overlaps(g_s[k], g_e[k]),
            cuda_api=api.overlaps(g_s[k], g_e[k]),
        )
        for k in chosen.tolist()
    ]


def _device_activity(events: Events, dev: int, gaps: iv.Intervals) -> DeviceActivity:
    busy = events.device_busy(dev)
    span = int(busy[1][-1] - busy[0][0]) if busy[0].size else 0
    busy_ns = iv.total(busy)
    count = {
        name: int(np.count_nonzero(df["deviceId"] == dev))
        for name, df in (("k", events.kernels), ("c", events.memcpy), ("s", events.memset))
    }
    return DeviceActivity(
        device_id=dev,
        kernel_count=count["k"],
        memcpy_count=count["c"],
        memset_count=count["s"],
        busy_ns=busy_ns,
        kernel_busy_ns=events.device_time(dev, "kernel"),
        memcpy_busy_ns=events.device_time(dev, "memcpy"),
        span_ns=span,
        busy_ratio=iv.busy_ratio(busy_ns, span),
        idle_ns=span - busy_ns,
        gap_count=int(gaps[0].size),
        gap_ns=iv.total(gaps),
    )


def _waited_on_threads(events: Events, dev: int, gap_ends: np.ndarray) -> np.ndarray:
    """Per gap, the CPU thread the GPU waited on: the one whose API call issued the operation
    that ended the gap (joined on process and correlation id). Falls back to the process's
    busiest CUDA thread, then -1."""
    # A gap ends where a busy interval starts, which is the start of some operation.
    # Of the operations starting at a gap's end, the first in table order (kernels, copies,
    # memsets) issued it.
    tables = (events.kernels, events.memcpy, events.memset)
    hits = [(df["deviceId"] == dev) & np.isin(df["start"], gap_ends) for df in tables]
    start, corr, gpid = (
        np.concatenate([df[c][hit].astype(np.int64) for df, hit in zip(tables, hits)])
        for c in ("start", "correlationId", "globalPid")
    )
    row = first_row_of(start, gap_ends)  # -1 where none: it picks the -1 appended last
    pids = pid_of(np.append(gpid, -1)[row])
    calls = events.issuing_calls(pids, np.append(corr, -1)[row])
    threads = events.launch_threads
    fallback = np.array([threads.get(p, -1) for p in pids.tolist()], dtype=np.int64)
    tid = calls["tid"]
    return np.where(np.isnan(tid), fallback, tid).astype(np.int64)


def _attribute(
    events: Events, thread: int | None, g_s: np.ndarray, g_e: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per gap: the training thread's dominant state, and its innermost NVTX range's ``row``
    (-1 for none) and pattern (``NO_RANGE`` for none). The gaps are taken a run at a time, with
    the thread's calls and ranges overlapping them (a thread may make millions of calls)."""
    tables = (events.runtime, events.osrt, events.nvtx)
    if thread is None:
        return _attribute_run(events, *(df.head(0) for df in tables), g_s, g_e)
    n = g_s.size
    out = (np.empty(n, dtype=object), np.full(n, -1, np.int64), np.full(n, NO_RANGE, dtype=object))
    calls = [ThreadCalls(df, thread) for df in tables]
    for lo, hi in sweep(calls, g_s, g_e):
        by = (g_s[lo:hi], g_e[lo:hi])
        for whole, part in zip(out, _attribute_run(events, *(c.take(by) for c in calls), *by)):
            whole[lo:hi] = part
    return out


def _attribute_run(events: Events, api, osrt, ranges, g_s: np.ndarray, g_e: np.ndarray):
    """``_attribute`` for some gaps, given the thread's calls and ranges overlapping them."""
    n = g_s.size
    covered_parts: list[iv.Intervals] = []
    per_state = {}
    api_cat = _categorize(api["nameId"], lambda i: api_category(api_name(events.name_of(i))))
    # A launch that takes this long is lazy module loading or JIT, not launch overhead.
    slow = (api["end"] - api["start"]) > SLOW_LAUNCH_NS
    launch = STATES.index("cuda_launch")
    api_cat[slow & (api_cat == launch)] = STATES.index("cuda_other")
    os_cat = _categorize(osrt["nameId"], lambda i: osrt_category(events.name_of(i)))
    for code, state in enumerate(STATES[:-1]):
        src, cats = (api, api_cat) if state.startswith("cuda") else (osrt, os_cat)
        rows = src.take(cats == code) if len(src) else src
        u = iv.union(rows["start"], rows["end"])
        covered_parts.append(u)
        per_state[state] = iv.covered(g_s, g_e, u)
    all_cov = iv.union_of(covered_parts)
    per_state["cpu"] = (g_e - g_s) - iv.covered(g_s, g_e, all_cov)
    matrix = np.vstack([per_state[s] for s in STATES])
    states = np.array(STATES)[np.argmax(matrix, axis=0)]

    inner_row = np.full(n, -1, dtype=np.int64)
    inner_pattern = np.full(n, NO_RANGE, dtype=object)
    if len(ranges):
        r_s, r_e = ranges["start"], ranges["end"]
        for lo, hi in _pair_chunks(r_s, r_e, g_s, g_e):
            r, g = _innermost_holders(r_s, r_e, g_s[lo:hi], g_e[lo:hi])
            inner_row[lo + g] = ranges["row"][r]
            inner_pattern[lo + g] = label_at(ranges["pattern"], r)
    return states, inner_row, inner_pattern


def _pair_chunks(r_s, r_e, g_s, g_e):
    """Runs of consecutive gaps [lo, hi) over which at most about ``PAIRS_PER_CHUNK`` (range,
    gap) pairs overlap, so memory stays bounded however deeply the ranges nest (a gap alone
    may exceed it)."""
    budget = PAIRS_PER_CHUNK
    # Ranges overlapping [s, e): started before e, less those ended by s.
    per_gap = np.searchsorted(np.sort(r_s), g_e, side="left") - np.searchsorted(
        np.sort(r_e), g_s, side="right"
    )
    yield from iv.runs(np.cumsum(np.maximum(per_gap, 1)), budget)


def _innermost_holders(r_s, r_e, g_s, g_e) -> tuple[np.ndarray, np.ndarray]:
    """(range index, gap index) of each gap's innermost range open for at least half of it;
    when none covers half, the range covering the most of it."""
    r_idx, g_idx, ov = iv.overlap_pairs(r_s, r_e, g_s, g_e)
    if not r_idx.size:
        return r_idx, g_idx
    half = ov * 2 >= (g_e - g_s)[g_idx]
    key = np.where(half, (r_e - r_s)[r_idx], -ov)
    # By gap, then those covering half first, then the key; ties in pair order (lexsort is
    # stable), and the first of each gap wins.
    order = np.lexsort((key, ~half, g_idx))
    g_sorted = g_idx[order]
    first = np.ones(g_sorted.size, dtype=bool)
    first[1:] = g_sorted[1:] != g_sorted[:-1]
    best = order[first]
    return r_idx[best], g_idx[best]


def _categorize(name_ids: np.ndarray, category_of) -> np.ndarray:
    """Each row's category (its index in ``STATES``), ``category_of`` called once per
    distinct name id."""
    return per_distinct(name_ids, lambda i: STATES.index(category_of(i)), np.int64)


def _names_of(events: Events, shown):
    """Names of string ids, as ``shown`` writes them (once per distinct id: a long gap may
    hold a million calls)."""
    return lambda ids: per_distinct(ids, lambda i: shown(events.name_of(i)))


class _OverlapIndex:
    """One table's calls in the device's processes that overlap one of the gaps ``within``,
    sorted by start, so each gap scans only the calls that can reach it. ``names`` gives the
    names of the values of ``key`` (string ids, NVTX rows)."""

    def __init__(self, df, pids: set[int], within: iv.Intervals, key: str, names, events):
        wanted = np.array(sorted(pids), dtype=np.int64)

        def in_pids(tids):
            return np.isin(pid_of(tids), wanted) if wanted.size else np.ones(tids.size, bool)

        mine = rows_overlapping(df, within, in_pids)
        mine = mine.take(np.argsort(mine["start"], kind="stable"))
        self.events = events
        self.names = names
        self.start = mine["start"]
        self.end = mine["end"]
        self.tid = mine["globalTid"]
        self.key = mine[key]
        self.longest = int((self.end - self.start).max()) if len(mine) else 0

    def overlaps(self, start: int, end: int) -> tuple[Overlap, ...]:
        lo = np.searchsorted(self.start, start - self.longest, side="left")
        hi = np.searchsorted(self.start, end, side="left")
        s, e = self.start[lo:hi], self.end[lo:hi]
        hit = np.flatnonzero(e > start)
        if not hit.size:
            return ()
        ov = np.minimum(e[hit], end) - np.maximum(s[hit], start)
        names = self.names(self.key[lo:hi][hit])
        by = Groups([names, self.tid[lo:hi][hit]], sort=False)
        ns = by.sum(ov)
        top = descending(ns)[:OVERLAPS_LISTED]
        return tuple(
            Overlap(name=str(name), thread=self.events.thread_label(tid), overlap_ns=int(n))
            for name, tid, n in zip(by.keys[0][top], by.keys[1][top].tolist(), ns[top].tolist())
        )


def _shares(ns_by_label: dict[str, int], total: int) -> tuple[IdleShare, ...]:
    rows = sorted(ns_by_label.items(), key=lambda kv: -kv[1])
    return tuple(
        IdleShare(label=k, idle_ns=int(v), share_ratio=v / total if total else 0.0) for k, v in rows
    )
