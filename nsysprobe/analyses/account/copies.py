"""Host-to-device copies: which carry a step's batch, the NVTX ranges that issued them, and
the pageable ones beside pinned ones of a like size."""

from __future__ import annotations

import numpy as np

from nsysprobe.analyses import intervals as iv
from nsysprobe.analyses.account.causes import NO_RANGE
from nsysprobe.analyses.account.model import LIKE_SIZE, LINK_BOUND_BYTES, Detail, HtodCopies
from nsysprobe.analyses.account.scope import Scope
from nsysprobe.analyses.account.tally import DETAILS_LISTED
from nsysprobe.analyses.rows import label_at
from nsysprobe.common.table import distinct


def copy_ranges(scope: Scope) -> tuple[Detail, ...]:
    """The steady steps' host-to-device copy time by the innermost NVTX range (numbers
    masked) on the thread of the call that issued each copy, largest first."""
    ops, rt, nv = scope.ops, scope.runtime, scope.ev.nvtx
    sel = _steady_htod(scope)
    if not sel.size:
        return ()
    dur = ops["end"][sel] - ops["start"][sel]
    call = scope.op_calls[sel]
    where = np.full(sel.size, NO_RANGE, dtype=object)
    known = np.flatnonzero(call >= 0)
    tids, at = rt["globalTid"][call[known]], rt["start"][call[known]]
    for tid in distinct(tids).tolist():
        these = np.flatnonzero(tids == tid)
        # Only the thread's ranges that hold a call: a few per call, of its millions.
        rows = _holding(nv, tid, np.sort(at[these]))
        j = iv.innermost_cover(nv["start"][rows], nv["end"][rows], at[these])
        hit = j >= 0
        where[known[these[hit]]] = label_at(nv["pattern"], rows[j[hit]])
    totals: dict[str, int] = {}
    for name, ns in zip(where.tolist(), dur.tolist()):
        totals[name] = totals.get(name, 0) + int(ns)
    ranked = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:DETAILS_LISTED]
    return tuple(Detail(name, ns) for name, ns in ranked)


# NVTX rows tested at a time (``_holding``): what it holds beside the table is of this size.
HOLDING_BLOCK = 1 << 20


def _holding(nv, tid: int, points: np.ndarray) -> np.ndarray:
    """Rows of the NVTX ranges of thread ``tid`` that hold one of ``points`` (sorted) at
    least: a range [start, end) does where the first point at or after its start comes before
    its end. Every range holding a point is kept, and those that hold none make no cover
    innermost (nested ranges: the one started last of those holding the point)."""
    out = [np.empty(0, np.int64)]
    for lo in range(0, len(nv), HOLDING_BLOCK):
        part = slice(lo, lo + HOLDING_BLOCK)
        mine = np.flatnonzero(nv["globalTid"][part] == tid)
        s, e = nv["start"][part][mine], nv["end"][part][mine]
        k = np.searchsorted(points, s, side="left")
        held = k < points.size
        held[held] = points[k[held]] < e[held]
        out.append(mine[held] + lo)
    return np.concatenate(out)


def _steady_htod(scope: Scope) -> np.ndarray:
    """Rows of ``ops``: the host-to-device copies that start in the steady steps."""
    ops = scope.ops
    names = ops["copy"].categories.tolist()
    if "HtoD" not in names or not scope.win_s.size:
        return np.empty(0, np.int64)
    lo, hi = scope.win_s[scope.steady][0], scope.win_e[scope.steady][-1]
    start = ops["start"]
    htod = ops["copy"].codes == names.index("HtoD")
    return np.flatnonzero(htod & (start >= lo) & (start < hi))


def htod_copies(scope: Scope) -> HtodCopies:
    sel = _steady_htod(scope)
    kinds = scope.ops["kind"]
    kind = label_at(kinds, sel) if sel.size else np.empty(0, object)
    nbytes = scope.ops["bytes"][sel]
    dur = scope.ops["end"][sel] - scope.ops["start"][sel]
    pageable = kind == "memcpy HtoD Pageable"
    step = np.searchsorted(scope.win_s, scope.ops["start"][sel], side="right") - 1
    with_copy = int(distinct(step).size)
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


def first_htod(scope: Scope, is_htod: np.ndarray) -> np.ndarray:
    """Per operation: does it carry a batch: is it the first host-to-device copy its step
    launched (from inside the step's CPU range; a copy launched outside every step range:
    the first in its window), or a copy of the same size as one of those (the next
    micro-batch of a step that accumulates gradients)?"""
    htod = np.flatnonzero(is_htod)
    out = np.zeros(is_htod.size, dtype=bool)
    if not htod.size:
        return out
    call = scope.op_calls[htod]
    known = call >= 0
    launched = scope.ops["start"][htod].copy()
    launched[known] = scope.runtime["start"][call[known]]
    cpu_s, cpu_e = scope.steps.cpu_start, scope.steps.cpu_end
    step = np.searchsorted(cpu_s, launched, side="right") - 1
    inside = step >= 0
    inside[inside] = launched[inside] < cpu_e[step[inside]]
    window = np.searchsorted(scope.win_s, scope.ops["start"][htod], side="right") - 1
    # Steps are 0 .. n-1; the windows' groups follow them (before the first window: n).
    group = np.where(inside, step, cpu_s.size + 1 + window)
    _, first = np.unique(group, return_index=True)
    nbytes = scope.ops["bytes"][htod]
    out[htod[np.isin(nbytes, nbytes[first])]] = True
    return out
