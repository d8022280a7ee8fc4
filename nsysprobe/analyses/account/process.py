"""The accounts of a report, one per process and GPU: each window's wall time summed into
buckets (busy kinds, then the idle pieces by cause) and read as the ``Account``."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from nsysprobe.analyses import intervals as iv
from nsysprobe.analyses.account.busy import busy, communication, hideable_by_kind
from nsysprobe.analyses.account.causes import IDLE_CAUSES
from nsysprobe.analyses.account.copies import copy_ranges, htod_copies
from nsysprobe.analyses.account.gap_sums import DEFAULT_MIN_GAP_NS, GapSums
from nsysprobe.analyses.account.idle import idle_pieces
from nsysprobe.analyses.account.model import (
    Account,
    AccountResult,
    AccountStep,
    IdleSpans,
    Readbacks,
)
from nsysprobe.analyses.account.periodic import periodic_split
from nsysprobe.analyses.account.scope import Scope, scope_of
from nsysprobe.analyses.account.tally import buckets_of, details_by_bucket, sum_into
from nsysprobe.analyses.communication import nccl_issued
from nsysprobe.analyses.events import Events
from nsysprobe.analyses.steps import find_steps
from nsysprobe.analyses.windows import StepWindows
from nsysprobe.common.ahead import in_order
from nsysprobe.errors import InputError

STEP_ROWS_LISTED = 2_000
# Accounts made at most: the (process, GPU) pairs with the most GPU operations. A report holds
# a few processes per GPU (ranks, a second context); thousands make a damaged or crafted one.
MAX_ACCOUNTS = 64


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
    (``windows.project``; None when it found none), or a function that gives them (asked
    once the process's operations are made, ``scope_of``), so a report holding one process
    does not look for its steps twice; without it they are found here. A report holding
    several processes has each one's steps found in its own events. ``min_gap_ns``: the
    shortest idle stretch listed as a gap (``Account.idle_gaps``); it changes no bucket.
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
                work = scope_of(events, pid, dev, found, loaders, issued.get(pid))
                accounts.append(account(work, keep_spans=idle_spans, min_gap_ns=min_gap_ns))
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


def account(
    scope: Scope, keep_spans: bool = False, min_gap_ns: int = DEFAULT_MIN_GAP_NS
) -> Account:
    """The account of ``scope``'s process on its device, with its gaps longer than
    ``min_gap_ns``; with ``keep_spans``, its ``idle_spans`` too."""
    lo, hi = int(scope.win_s.min()), int(scope.win_e.max())
    # The union of the busy segments below is the union of every operation: the idle time
    # is known before the busy kinds' partition, and its pieces are made on a second core
    # while the busy time is summed, then on both (``in_order``).
    busy_u = iv.union(scope.ops["start"], scope.ops["end"])
    idle_s, idle_e = iv.complement(busy_u, lo, hi)
    first_work, last_work = (int(busy_u[0][0]), int(busy_u[1][-1])) if busy_u[0].size else (hi, hi)
    del busy_u

    def idle():
        readback_bytes, texts, n, make, finish = idle_pieces(scope, idle_s, idle_e, hi)
        return (readback_bytes, texts, finish), n, make

    with in_order(idle) as pieces:
        by_range = copy_ranges(scope)
        busy_names, (seg_s, seg_e, seg_k), layers, free = busy(scope)
        labels = list(busy_names) + list(IDLE_CAUSES)
        n_b = len(labels)
        # Per window and bucket; details per (bucket, text). Busy segments and idle pieces
        # are disjoint: each is cut at the window edges and summed on its own.
        table = np.zeros((scope.win_s.size, n_b), dtype=np.int64)
        # The details of the steady steps: of the periodic ones apart (``sum_into``).
        details: tuple[dict[tuple[int, str], int], ...] = ({}, {})
        sum_into(scope, table, details, seg_s, seg_e, seg_k, None, None)
        del seg_s, seg_e, seg_k
        # The steady steps' pieces, kept when asked for (``Account.idle_spans``).
        kept: list[tuple[np.ndarray, ...]] = [(np.empty(0, np.int64),) * 3]
        steady_s, steady_e = scope.win_s[scope.steady], scope.win_e[scope.steady]
        lo_s = int(steady_s[0]) if steady_s.size else hi
        hi_s = int(steady_e[-1]) if steady_s.size else hi
        # Gaps lie between two pieces of the process's GPU work, where no other process's
        # work held the device.
        held = iv.clip(scope.held, lo, hi)
        gaps = GapSums(
            idle_s, idle_e, max(lo_s, first_work), min(hi_s, last_work), min_gap_ns, held
        )
        readback_bytes, texts, finish = next(pieces)
        for made in pieces:
            p_s, p_e, cause, detail = finish(made)
            sum_into(scope, table, details, p_s, p_e, cause + len(busy_names), detail, texts)
            gaps.add(p_s, p_e, cause, detail)
            if keep_spans:
                inside = (p_e > lo_s) & (p_s < hi_s)
                kept.append((p_s[inside], p_e[inside], cause[inside]))
    spans = None
    if keep_spans:
        s_, e_, c_ = (np.concatenate(x) for x in zip(*kept))
        spans = IdleSpans(np.clip(s_, lo_s, None), np.clip(e_, None, hi_s), c_)
    wall = scope.win_e - scope.win_s
    made = _result(
        scope,
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
    return replace(made, idle_gaps=gaps.result(texts), copy_ranges=by_range)


def _result(
    scope: Scope, labels, n_busy, table, wall, details, layers, busy_names, rb, free, spans=None
) -> Account:
    # Every total is the steady steps': the start-up steps are listed, and counted apart.
    k, sl = scope.startup, scope.steady
    steady, steady_wall = table[sl], wall[sl]
    total_wall = int(steady_wall.sum())
    longest = int(steady_wall.max()) if steady_wall.size else 0
    # Unstepped, the named range's span is start-up; stepped, work before the first step
    # that spans more than a whole step.
    stepped = scope.steps is not None and scope.steps.count
    before = scope.before_ns if not stepped or scope.before_ns > longest else 0
    periodic = periodic_split(scope, labels, n_busy, steady, details, free)
    every = dict(details[0])  # the steady steps' details, the periodic ones' too
    for key, ns in details[1].items():
        every[key] = every.get(key, 0) + ns
    buckets = buckets_of(labels, n_busy, steady, total_wall, details_by_bucket(every))
    busy_total = int(steady[:, :n_busy].sum())
    hideable = hideable_by_kind(labels[:n_busy], steady, free, sl)
    comm_ns, overlapped, comm_w, exposed_w, collectives, comm_ops = communication(
        scope, layers, busy_names, labels, table
    )
    steps = _steps(scope, labels, n_busy, table, comm_w, exposed_w)
    return Account(
        pid=scope.pid,
        device_id=scope.dev,
        thread=scope.ev.thread_label(scope.home),
        thread_id=scope.home,
        windows=scope.windows,
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
        loader_processes=scope.loaders,
        collectives=collectives,
        communication_ops=comm_ops,
        startup_steps=k,
        startup_ns=int(wall[:k].sum()) + before,
        final_steps=int(wall.size - sl.stop),
        final_ns=int(wall[sl.stop :].sum()),
        startup_before_ns=before,
        steady_longest_ns=longest,
        hideable_ns=hideable,
        htod=htod_copies(scope),
        startup_range=scope.startup_range if before else "",
        idle_spans=spans,
        periodic=periodic,
    )


def _steps(scope: Scope, labels, n_busy, table, comm_w, exposed_w) -> tuple[AccountStep, ...]:
    """The rows of the steps listed (``STEP_ROWS_LISTED``), start-up and final ones marked."""
    k, sl = scope.startup, scope.steady
    wall = scope.win_e - scope.win_s
    return tuple(
        AccountStep(
            index=i,
            name=str(scope.win_names[i]),
            start_ns=int(scope.win_s[i]),
            wall_ns=int(wall[i]),
            busy_ns=int(table[i, :n_busy].sum()),
            idle_ns=int(table[i, n_busy:].sum()),
            buckets=tuple((labels[b], int(table[i, b])) for b in range(len(labels)) if table[i, b]),
            communication_ns=int(comm_w[i]),
            communication_overlapped_ns=int(comm_w[i] - exposed_w[i]),
            startup=i < k,
            final=i >= sl.stop,
        )
        for i in range(min(wall.size, STEP_ROWS_LISTED))
    )
