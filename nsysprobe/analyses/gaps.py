"""GPU activity per device, and the step account's idle gaps: its idle stretches longer
than --min-gap-ms, each with the cause the account gives it.

Busy time is the **union** of kernels, memcpy and memset on a device (overlapping streams are
counted once); the span runs from the device's first operation to its last.

A *gap* is an idle stretch of the step account (``account/``) longer than the threshold
(default 1 ms: step-level starvation; NVIDIA's ``gpu_gaps`` rule uses 500 ms and misses it):
from the end of one piece of a process's GPU work to the start of the next, in its steady
steps, across step edges, while no other process's work held the device (on a shared GPU, the
time another process's kernels ran is not idle). The gaps are part of the account's idle time,
cut into the same causes (``loading``, ``sync``, ``blocking_copy``, ``cpu``, ...: ``nsysprobe
explain account``) by the same rules, so the threshold chooses which idle is listed and changes
no cause, bucket or recommendation. Each cause's time is named as the account names it (the
NVTX range its code ran in, the API or OS call). A gap's cause is the one holding most of its
time. The longest gaps are also listed with every NVTX range, OS-runtime call and CUDA API call
that overlapped them, on every thread of the process. Gap time is a sum over the accounts' gaps
(one account's gaps are disjoint); a device's, the union of its accounts' gaps, so it is part
of the device's idle time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nsysprobe.analyses import intervals as iv
from nsysprobe.analyses.account import DEFAULT_MIN_GAP_NS, IDLE_CAUSES, AccountResult
from nsysprobe.analyses.events import Events
from nsysprobe.analyses.rows import api_name, per_distinct, rows_overlapping
from nsysprobe.common.frames import Tables
from nsysprobe.common.table import Groups, descending
from nsysprobe.trace.values import pid_of

LONGEST_GAPS_LISTED = 20
OVERLAPS_LISTED = 8


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
    gap_count: int  # the union of the accounts' gaps on this device: part of ``idle_ns``
    gap_ns: int


@dataclass(frozen=True)
class Overlap:
    name: str
    thread: str
    overlap_ns: int


@dataclass(frozen=True)
class Gap:
    device_id: int
    pid: int  # the process whose account it is in
    start_ns: int
    end_ns: int
    duration_ns: int
    cause: str  # the account's idle cause holding most of it (``account.IDLE_CAUSES``)
    name: str | None  # what names most of that cause's time in it (None: nothing does)
    nvtx: tuple[Overlap, ...]
    osrt: tuple[Overlap, ...]
    cuda_api: tuple[Overlap, ...]


@dataclass(frozen=True)
class IdleShare:
    cause: str  # the account's idle cause
    idle_ns: int
    share_ratio: float  # of all gap time


@dataclass(frozen=True)
class CauseShare:
    cause: str  # the account's idle cause
    name: str | None  # what the account names that time by; None when nothing
    idle_ns: int
    share_ratio: float  # of all gap time


@dataclass(frozen=True)
class GapsResult(Tables):
    TABLES = {
        "devices": DeviceActivity,
        "longest": Gap,
        "by_name": CauseShare,
        "by_cause": IdleShare,
    }

    min_gap_ns: int
    devices: tuple[DeviceActivity, ...]
    gap_count: int
    gap_ns: int  # sum over the accounts' gaps
    idle_ns: int  # the accounts' idle time in their steady steps, the gaps' and the rest
    by_cause: tuple[IdleShare, ...]  # the gaps' time by cause, largest first
    by_name: tuple[CauseShare, ...]  # by cause and what names it, largest first
    longest: tuple[Gap, ...]  # the longest gaps, longest first, attributed in detail


def gap_intervals(accounts: AccountResult | None) -> dict[int, iv.Intervals]:
    """Per device, the union of its accounts' gaps (the OS-runtime table's "in gaps", the
    HTML timeline's marks)."""
    out: dict[int, list[iv.Intervals]] = {}
    for a in accounts.accounts if accounts else ():
        g = a.idle_gaps
        if g is not None and len(g):
            out.setdefault(a.device_id, []).append((g.start_ns, g.end_ns))
    return {dev: iv.union_of(parts) for dev, parts in out.items()}


def analyze_gaps(
    events: Events, accounts: AccountResult | None, min_gap_ns: int = DEFAULT_MIN_GAP_NS
) -> GapsResult:
    """The accounts' gaps (``Account.idle_gaps``, made with ``analyze_account``'s
    ``min_gap_ns``, the same as here), with the device activity of every device of the
    trace."""
    mine = [a for a in (accounts.accounts if accounts else ()) if a.idle_gaps is not None]
    rows: dict[tuple[str, str | None], int] = {}
    candidates = []  # (duration, account index, gap index)
    for i, a in enumerate(mine):
        g = a.idle_gaps
        dur = g.end_ns - g.start_ns
        for cause, name, ns in g.by_cause:
            rows[(cause, name)] = rows.get((cause, name), 0) + ns
        for k in np.argsort(-dur, kind="stable")[:LONGEST_GAPS_LISTED].tolist():
            candidates.append((int(dur[k]), i, k))
    total = sum(int((a.idle_gaps.end_ns - a.idle_gaps.start_ns).sum()) for a in mine)
    # A device's gaps: the union of its accounts' (processes sharing it may idle at once).
    on_device = gap_intervals(accounts)
    empty = iv.union([], [])
    devices = tuple(_device_activity(events, d, on_device.get(d, empty)) for d in events.device_ids)
    # The longest over all accounts (ties in account, then time order), described: each
    # description scans the calls and ranges around it, so only those listed are described.
    candidates.sort(key=lambda c: -c[0])
    listed = candidates[:LONGEST_GAPS_LISTED]
    detailed: list[Gap] = []
    for i in dict.fromkeys(c[1] for c in listed):
        detailed += _described(events, mine[i], [c[2] for c in listed if c[1] == i])
    detailed.sort(key=lambda g: -g.duration_ns)
    by_cause: dict[str, int] = {}
    for (cause, _), ns in rows.items():
        by_cause[cause] = by_cause.get(cause, 0) + ns
    return GapsResult(
        min_gap_ns=min_gap_ns,
        devices=devices,
        gap_count=sum(len(a.idle_gaps) for a in mine),
        gap_ns=total,
        idle_ns=sum(a.idle_ns for a in mine),
        by_cause=_shares(by_cause, total),
        by_name=tuple(
            CauseShare(cause=k[0], name=k[1], idle_ns=v, share_ratio=v / total)
            for k, v in sorted(rows.items(), key=lambda kv: -kv[1])
        ),
        longest=tuple(detailed[:LONGEST_GAPS_LISTED]),
    )


def _described(events: Events, account, chosen: list[int]) -> list[Gap]:
    """The gaps ``chosen`` (indexes into ``account.idle_gaps``), with what ran around each
    on every thread of the account's process."""
    g = account.idle_gaps
    g_s, g_e = g.start_ns, g.end_ns
    shown = np.sort(np.array(chosen, dtype=np.int64))  # in time order
    within = (g_s[shown], g_e[shown])
    pids = {account.pid}
    nvtx = _OverlapIndex(events.nvtx, pids, within, "row", events.nvtx_names, events)
    names = _names_of(events, api_name)
    osrt = _OverlapIndex(events.osrt, pids, within, "nameId", names, events)
    api = _OverlapIndex(events.runtime, pids, within, "nameId", names, events)
    return [
        Gap(
            device_id=account.device_id,
            pid=account.pid,
            start_ns=int(g_s[k]),
            end_ns=int(g_e[k]),
            duration_ns=int(g_e[k] - g_s[k]),
            cause=IDLE_CAUSES[int(g.cause[k])],
            name=g.name[k],
            nvtx=nvtx.overlaps(g_s[k], g_e[k]),
            osrt=osrt.overlaps(g_s[k], g_e[k]),
            cuda_api=api.overlaps(g_s[k], g_e[k]),
        )
        for k in chosen
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


def _names_of(events: Events, shown):
    """Names of string ids, as ``shown`` writes them (once per distinct id: a long gap may
    hold a million calls)."""
    return lambda ids: per_distinct(ids, lambda i: shown(events.name_of(i)))


class _OverlapIndex:
    """One table's calls in the device's processes that overlap one of the gaps ``within``,
    sorted by start, so each gap scans only the calls that can reach it. ``names`` gives the
    names of the values of ``key`` (string ids, NVTX rows): read once for all the gaps (a
    range nested over every listed gap is named once, not once per gap)."""

    def __init__(self, df, pids: set[int], within: iv.Intervals, key: str, names, events):
        wanted = np.array(sorted(pids), dtype=np.int64)

        def in_pids(tids):
            return np.isin(pid_of(tids), wanted) if wanted.size else np.ones(tids.size, bool)

        mine = rows_overlapping(df, within, in_pids)
        mine = mine.take(np.argsort(mine["start"], kind="stable"))
        self.events = events
        self.names = np.asarray(names(mine[key]), dtype=object)
        self.start = mine["start"]
        self.end = mine["end"]
        self.tid = mine["globalTid"]
        self.longest = int((self.end - self.start).max()) if len(mine) else 0

    def overlaps(self, start: int, end: int) -> tuple[Overlap, ...]:
        lo = np.searchsorted(self.start, start - self.longest, side="left")
        hi = np.searchsorted(self.start, end, side="left")
        s, e = self.start[lo:hi], self.end[lo:hi]
        hit = np.flatnonzero(e > start)
        if not hit.size:
            return ()
        ov = np.minimum(e[hit], end) - np.maximum(s[hit], start)
        names = self.names[lo:hi][hit]
        by = Groups([names, self.tid[lo:hi][hit]], sort=False)
        ns = by.sum(ov)
        top = descending(ns)[:OVERLAPS_LISTED]
        return tuple(
            Overlap(name=str(name), thread=self.events.thread_label(tid), overlap_ns=int(n))
            for name, tid, n in zip(by.keys[0][top], by.keys[1][top].tolist(), ns[top].tolist())
        )


def _shares(ns_by_cause: dict[str, int], total: int) -> tuple[IdleShare, ...]:
    rows = sorted(ns_by_cause.items(), key=lambda kv: -kv[1])
    return tuple(
        IdleShare(cause=k, idle_ns=int(v), share_ratio=v / total if total else 0.0) for k, v in rows
    )
