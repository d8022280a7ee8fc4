"""GPU-idle time: the idle intervals between the GPU's work cut into pieces, each charged to
its cause (the package docstring): what issued the work that ended it, what the issuing thread
was doing until then, nsys's overhead, and the drains."""

from __future__ import annotations

import threading
from functools import partial
from types import SimpleNamespace

import numpy as np

from nsysprobe.analyses import intervals as iv
from nsysprobe.analyses.account.arrays import Texts, joined, one, runs, size_labels
from nsysprobe.analyses.account.causes import (
    API,
    CAT_CAUSE,
    CAUSE,
    COPY,
    IDLE_CAUSES,
    LAUNCH,
    OS_CALL,
    OS_WAIT,
    OTHER,
    OWN,
    SYNC,
)
from nsysprobe.analyses.account.copies import first_htod
from nsysprobe.analyses.account.drains import (
    charge_drains,
    drain_episodes,
    draining_at,
    draining_calls,
)
from nsysprobe.analyses.account.scope import Scope
from nsysprobe.analyses.account.threads import thread_calls, thread_states
from nsysprobe.analyses.rows import per_distinct, sweep
from nsysprobe.common.table import distinct
from nsysprobe.trace.values import pid_of

# Idle shorter than this between back-to-back launches is the per-operation cost of issuing
# work (framework dispatch plus the launch call): fixed by fewer launches, not by moving code.
LAUNCH_GAP_NS = 100_000
# A read-back of fewer bytes is a synchronization whose copy costs nothing (NVIDIA's
# cuda_memcpy_sync rule leaves out copies of 64,000 bytes or less).
READBACK_MIN_BYTES = 64_000


def idle_pieces(scope: Scope, idle_s: np.ndarray, idle_e: np.ndarray, hi: int):
    """Idle intervals -> (the bytes of each read-back that drained the GPU, the details'
    texts, the number of runs of intervals, ``make``, ``finish``): ``make(k)`` makes the
    pieces of the intervals of run k before the drains are charged, ``finish`` charges them;
    ``finish(make(0))``, ``finish(make(1))`` ... are the labeled pieces of the intervals in time
    order, each a tuple of (start, end, cause, detail) arrays, cause an index into
    IDLE_CAUSES, detail a code of the texts.

    Two passes over runs of intervals, so that what is held grows with a run, not with
    the millions of idle intervals of a kernel-heavy capture: the first finds the drains
    (their chains of episodes span runs), the second makes the pieces (``sweep``: a
    thread with millions of calls cuts the idle time into tens of millions of them),
    the figures of each run's intervals made again as it goes. ``make`` may run in two
    threads at once, each taking its runs in order (each sweeps the calls on its own); it
    codes a run's texts apart, and ``finish``, called in the order of the runs, codes them
    in the account's texts in the order the run met them, so the codes do not depend on
    which thread made which run."""
    texts = Texts()
    facts = _interval_facts(scope, idle_s, idle_e, hi)
    drained, waited, drain_cause, drain_detail, readback_bytes, threads = _drains_of(
        facts, idle_s.size, texts
    )
    episode, chain = drain_episodes(scope, idle_s, idle_e, drained)
    of_drain = chain[drained]
    ok = of_drain >= 0
    budget = np.bincount(of_drain[ok], weights=waited[ok]).astype(np.int64)
    del drained, waited
    ovh = scope.ev.overhead
    ovh = ovh.take(pid_of(ovh["globalTid"]) == scope.pid)
    overhead = iv.union(ovh["start"], ovh["end"])
    del ovh
    calls = {t: thread_calls(scope, int(t)) for t in sorted(threads)}
    # Two runs at least: the caller and a thread of its own make them (``in_order``).
    runs = list(sweep([c for t in sorted(threads) for c in calls[t]], idle_s, idle_e, parts=2))
    own = threading.local()  # each thread's sweep of the calls

    def make(k: int):
        """The pieces of the intervals of run k in time order, before the drains are
        charged, with the interval of each, their details coded in texts of the run's own."""
        if not hasattr(own, "calls"):
            own.calls = {t: [c.fork() for c in cs] for t, cs in calls.items()}
        lo, hi_ = runs[k]
        mine = Texts()
        f = facts(lo, hi_, mine)
        start, end, cause_idx, detail, interval = _labeled(
            scope, f, idle_s[lo:hi_], idle_e[lo:hi_], mine, own.calls
        )
        return _overhead_first(
            overhead, start, end, cause_idx, detail, interval + lo, mine.code("nsys")
        ), mine

    spent = [-1, 0]  # the chain of drains under way between runs, and its time so far

    def finish(made):
        """A run's pieces (``make``) with the drains charged, in the account's texts."""
        (start, end, cause_idx, detail, interval), mine = made
        return charge_drains(
            start,
            end,
            cause_idx,
            texts.adopt(mine, detail),
            episode[interval],
            chain[interval],
            budget,
            drain_cause,
            drain_detail,
            spent,
            partial(_in_range, texts),
        )

    return readback_bytes, texts, len(runs), make, finish


def _labeled(scope: Scope, f, i_s, i_e, texts: Texts, calls):
    """The pieces of the idle intervals [i_s, i_e) of a run (``f``: their facts) with their
    causes before the drains and nsys's overhead: start, end, cause, detail and the interval
    (in the run) of each, by interval."""
    kind, api = scope.ops["kind"], scope.runtime["api"]
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

    def emit_issued(s, e, c, d, k):
        """Pieces after the work ending them was issued: where another process's work held
        the GPU (a shared GPU), that work is why it waited (``other_process``)."""
        near = _within(scope.held, s, e)
        if near is None:
            return emit(s, e, c, d, k)
        c = np.broadcast_to(np.asarray(c, dtype=np.int64), s.shape)
        d = np.broadcast_to(np.asarray(d, dtype=np.int64), s.shape)
        q_s, q_e, origin, by = iv.split_by(s, e, near)
        under = by >= 0
        c = np.where(under, CAUSE["other_process"], c[origin])
        emit(q_s, q_e, c, np.where(under, -1, d[origin]), k[origin])

    # Work issued before the idle began: the GPU started it late, no CPU cause.
    at = np.flatnonzero(f.queued)
    emit_issued(i_s[at], i_e[at], CAUSE["queued"], -1, at)
    # After the issuing call began, the idle is the cost of that call, named by the
    # call and the copy it issued: "cudaMemcpyAsync (memcpy HtoD Pageable)".
    at = np.flatnonzero(f.issued)
    kind_of = np.where(f.end_copy[at] > 0, kind.codes[f.first[at]], -1)
    named = joined((api.codes[f.call[at]], api.categories), (kind_of, kind.categories), " ({})")
    # Within the interval: a call begun after the idle ended (a crafted or damaged export: the
    # work starts before the call that issued it) leaves no piece, and the pieces stay
    # disjoint and in order for ``split_by``.
    late = np.clip(f.call_start[at], i_s[at], i_e[at])
    emit_issued(late, i_e[at], CAT_CAUSE[f.cat[at]], texts.codes(named), at)
    del at, kind_of, named, late
    # Before it, what the issuing thread was doing.
    early_e = np.minimum(i_e, f.call_start)
    for thread in distinct(f.tid[~f.queued]).tolist():
        sel = np.flatnonzero(~f.queued & (f.tid == thread))
        p_s, p_e, p_idx, state, detail = thread_states(
            scope, calls[thread], i_s[sel], early_e[sel], texts, thread
        )
        g = sel[p_idx]  # the idle interval of each piece (in this run)
        emit(p_s, p_e, _own_causes(f, g, state, detail), detail, g)
        del p_s, p_e, p_idx, state, detail, g
    parts = list(zip(*out))
    out.clear()
    return tuple(p[0] if len(p) == 1 else np.concatenate(p) for p in parts)


def _within(held: iv.Intervals, s: np.ndarray, e: np.ndarray) -> iv.Intervals | None:
    """The intervals of ``held`` that reach into [s[0], max(e)) (the pieces' stretch of
    time, ``s`` sorted), None when none does."""
    if not held[0].size or not s.size:
        return None
    lo = np.searchsorted(held[1], s[0], side="right")
    hi = np.searchsorted(held[0], e.max(), side="left")
    return (held[0][lo:hi], held[1][lo:hi]) if hi > lo else None


# The causes of the thread's own code, whose drain's detail names its NVTX range.
_OWN_CODE = np.array([CAUSE[x] for x in ("cpu", "loading", "launch")])


def _in_range(texts: Texts, drain: np.ndarray, detail: np.ndarray, cause: np.ndarray):
    """The drain's detail, with the NVTX range its host work ran in when it was the
    thread's own code: "after cudaFree in 'forward'"."""
    ranged = np.isin(cause, _OWN_CODE) & np.isin(detail, list(texts.ranges))
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


def _drains_of(facts, n: int, texts: Texts):
    """The first pass over the idle intervals' ``facts``, a run at a time: which intervals
    drained the GPU; per drain (in time order) the time its thread waited, its cause and its
    detail; the bytes of the read-backs; and the threads that issued work ending an idle."""
    drained = np.zeros(n, dtype=bool)
    waited, drain_cause, drain_detail, readback_bytes = [], [], [], []
    threads: set[int] = set()
    for lo, hi in runs(n):
        f = facts(lo, hi, texts)
        drained[lo : lo + f.n] = f.drained
        waited.append(f.waited[f.drained])
        drain_cause.append(f.drain_cause[f.drained])
        drain_detail.append(f.drain_detail[f.drained])
        readback_bytes.append(f.readback_bytes)
        threads.update(distinct(f.tid[~f.queued]).tolist())
    # Per drain (in time order): its cause, its detail, and the time its thread waited.
    waited, drain_cause, drain_detail, readback_bytes = (
        np.concatenate([np.empty(0, dtype=np.int64), *x])
        for x in (waited, drain_cause, drain_detail, readback_bytes)
    )
    return drained, waited, drain_cause, drain_detail, readback_bytes, threads


def _own_causes(f, g: np.ndarray, state: np.ndarray, detail: np.ndarray) -> np.ndarray:
    """The causes of a thread's pieces by its ``state`` (``thread_states``) in the idle
    intervals ``g`` (of the run's ``facts`` ``f``); ``detail`` relabeled in place where the
    read-back's wait is."""
    c = np.full(state.size, CAUSE["cpu"], dtype=np.int64)
    own = state == OWN
    loading = f.input_copy[g]
    c[own & loading] = CAUSE["loading"]
    c[own & f.short[g] & f.launched[g] & ~loading] = CAUSE["launch"]
    wait = state == OS_WAIT
    c[wait] = np.where(loading[wait], CAUSE["loader_wait"], CAUSE["os_wait"])
    c[state == OS_CALL] = CAUSE["os_call"]
    in_api = state >= API
    c[in_api] = CAT_CAUSE[state[in_api] - API]
    # Inside the call that read back, the wait is the read-back's.
    rb = f.read[g] & ((state == API + SYNC) | (state == API + COPY))
    c[rb] = f.drain_cause[g][rb]
    detail[rb] = f.drain_detail[g][rb]
    return c


def _interval_facts(scope: Scope, idle_s: np.ndarray, idle_e: np.ndarray, hi: int):
    """facts(lo, hi, texts) -> what is known of each idle interval of [lo, hi) before it is cut
    into pieces: the operation ending it (``first``), the call that issued that
    (``call``, ``call_start``, ``tid``, ``cat``; ``queued`` when issued before the idle
    began, else ``issued``), its copy (``end_copy``, ``input_copy``), ``short`` and
    ``launched`` stretches, and the drain (``drained``, ``waited``, ``read``,
    ``drain_cause``, ``drain_detail`` as a code of ``texts``, ``readback_bytes`` of the
    read-backs in a window)."""
    ops, rt = scope.ops, scope.runtime
    op_start, op_end = ops["start"], ops["end"]
    op_bytes = ops["bytes"]
    op_call, rt_start = scope.op_calls, rt["start"]
    rt_tid, rt_cat = rt["globalTid"], rt["cat"]
    api_names = rt["api"].categories
    last = max(len(ops) - 1, 0)
    home = scope.home
    copy_code = ops["copy"].codes
    copy_names = ops["copy"].categories.tolist()
    htod = copy_names.index("HtoD") if "HtoD" in copy_names else -2
    dtoh = copy_names.index("DtoH") if "DtoH" in copy_names else -2
    # The step's input: a host-to-device copy ends loading. With DataLoader workers in
    # the report, only the step's first copy and those of its size carry batches (the
    # workers make the batches; other copies carry what the step's own code made).
    is_input = copy_code == htod
    if scope.loaders and scope.step_thread is not None:
        is_input = first_htod(scope, is_input)
    draining: dict[int, tuple] = {}  # thread -> its draining calls (``draining_calls``)

    def facts(lo: int, hi_: int, texts: Texts) -> SimpleNamespace:
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
        cat = np.where(known, rt_cat[call] if len(rt) else OTHER, OTHER)
        if not len(rt):
            known[:] = False
        end_copy = np.where(has_op, copy_code[first], 0) if len(ops) else first
        input_copy = has_op & is_input[first] if len(ops) else has_op
        # The operation that ran just before each idle interval ends at its start.
        # No operation spans an idle start: the first to end at it is the first whose
        # running maximum of the ends reaches it.
        prev = np.clip(np.searchsorted(scope.reach, s, side="left"), 0, last)
        before = (op_end[prev] == s) if len(ops) else np.zeros(m, dtype=bool)
        prev_dtoh = before & (copy_code[prev] == dtoh) if len(ops) else before
        prev_bytes = np.where(before, op_bytes[prev], 0) if len(ops) else prev
        del prev, before
        queued = known & (call_start < s)
        drain_cat = np.full(m, -1, dtype=np.int64)
        drain_api = np.full(m, -1, dtype=np.int64)  # codes of the API names
        waited = np.zeros(m, dtype=np.int64)
        for thread in distinct(tid[~queued]).tolist():
            sel = np.flatnonzero(~queued & (tid == thread))
            if thread not in draining:
                draining[thread] = draining_calls(scope, thread)
            drain_cat[sel], drain_api[sel], began = draining_at(draining[thread], s[sel])
            waited[sel] = np.where(drain_cat[sel] >= 0, s[sel] - began, 0)
        drained = (drain_cat >= 0) & ~queued
        read, readback, drain_cause, drain_detail = _drain_names(
            drained, drain_cat, drain_api, api_names, prev_dtoh, prev_bytes, texts
        )
        sl = scope.steady  # the steady steps' read-backs only
        in_window = iv.overlaps_any(s, e, (scope.win_s[sl], scope.win_e[sl]))
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
            launched=known & (cat == LAUNCH),
            drained=drained,
            waited=waited,
            read=read,
            drain_cause=drain_cause,
            drain_detail=drain_detail,
            readback_bytes=prev_bytes[readback & in_window],
        )

    return facts


def _drain_names(drained, drain_cat, drain_api, api_names, prev_dtoh, prev_bytes, texts):
    """Per idle interval: is its drain a read-back (``read``), of ``READBACK_MIN_BYTES`` or
    more (``readback``); the drain's cause and its detail, a code of ``texts``."""
    m = drained.size
    # A drain after a device-to-host copy is a read-back; one of a few bytes (.item())
    # is a synchronization whose copy costs nothing.
    read = drained & prev_dtoh & np.isin(drain_cat, (SYNC, COPY))
    readback = read & (prev_bytes >= READBACK_MIN_BYTES)
    drain_cause = np.where(readback, CAUSE["readback"], CAT_CAUSE[np.clip(drain_cat, 0, None)])
    drain_cause = np.where(read & ~readback, CAUSE["sync"], drain_cause)
    # Named only where there is a drain: "read back 4 B", "after cudaFree".
    drain_detail = np.full(m, -1, dtype=np.int64)
    at = np.flatnonzero(drained & read)
    drain_detail[at] = texts.codes(
        joined(one("read back", at.size), size_labels(prev_bytes[at]), " {}")
    )
    at = np.flatnonzero(drained & ~read)
    drain_detail[at] = texts.codes(joined(one("after", at.size), (drain_api[at], api_names), " {}"))
    return read, readback, drain_cause, drain_detail


def _overhead_first(overhead: iv.Intervals, s, e, c, d, k, nsys: int):
    """Relabel the idle pieces under nsys's own overhead in the process (``overhead``, a
    union over its threads): it wins over every other cause, detail ``nsys``. Pieces come back
    in time order, with the idle interval ``k`` of each."""
    if not iv.ascending(s):
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
