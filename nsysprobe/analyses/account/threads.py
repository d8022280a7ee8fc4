"""What a thread was doing while the GPU idled: inside a CUDA call, an OS call, or its own
code (named by its innermost NVTX range)."""

from __future__ import annotations

import re

import numpy as np

from nsysprobe.analyses import intervals as iv
from nsysprobe.analyses.account.arrays import Texts
from nsysprobe.analyses.account.causes import API, COPY, NO_RANGE, OS_CALL, OS_WAIT, OWN
from nsysprobe.analyses.account.scope import Scope
from nsysprobe.analyses.calls import osrt_category
from nsysprobe.analyses.rows import ThreadCalls, per_distinct
from nsysprobe.common.table import distinct

# OS calls that give memory back (a pageable copy's source buffer, freed after it).
_RELEASE = re.compile(r"(?:munmap|madvise|mremap)")
PAGEABLE_HTOD = "memcpy HtoD Pageable"
AFTER_PAGEABLE = "(before a pageable copy)"


def _pageable_calls(scope: Scope, thread: int) -> np.ndarray:
    """Starts of the calls of ``thread`` that issued pageable host-to-device copies."""
    if thread in scope.pageable:
        return scope.pageable[thread]
    kinds = scope.ops["kind"]
    names = kinds.categories.tolist()
    if PAGEABLE_HTOD not in names:
        return np.empty(0, np.int64)
    call = scope.op_calls[kinds.codes == names.index(PAGEABLE_HTOD)]
    call = call[call >= 0]
    rt = scope.runtime
    out = np.sort(rt["start"][call[rt["globalTid"][call] == thread]])
    scope.pageable[thread] = out
    return out


def thread_calls(scope: Scope, thread: int) -> list[ThreadCalls]:
    """The thread's CUDA API calls, OS-runtime calls and NVTX ranges, to sweep."""
    return [ThreadCalls(df, thread) for df in (scope.runtime, scope.ev.osrt, scope.ev.nvtx)]


def thread_states(scope: Scope, calls: list[ThreadCalls], s, e, texts: Texts, thread: int):
    """Split the intervals [s, e) (disjoint, sorted, after those of the last call) by what
    the thread of ``calls`` (``thread_calls``) was doing.

    Returns (starts, ends, interval index, state, detail): ``API + category`` inside a
    CUDA call (detail: its name),
    ``OS_WAIT``/``OS_CALL`` inside an OS call (its name), else ``OWN``, the thread's
    own code (detail: its innermost NVTX range, numbers masked); details as codes of
    ``texts``."""
    keep = e > s
    idx = np.flatnonzero(keep)
    s, e = s[keep], e[keep]
    ev = scope.ev
    # Only the calls and ranges that overlap an interval can hold one of its pieces (a
    # range holding a point there overlaps it, and so does every range enclosing it).
    rt, os_, nv = (c.take((s, e)) for c in calls)
    points = np.concatenate([df[c] for df in (rt, os_, nv) for c in ("start", "end")])
    p_s, p_e, origin = iv.split_at(s, e, points)
    del points
    mid = p_s + (p_e - p_s) // 2
    state = np.full(p_s.size, OWN, dtype=np.int64)
    no_range = texts.code(NO_RANGE)
    detail = np.full(p_s.size, no_range, dtype=np.int64)
    free = np.ones(p_s.size, dtype=bool)
    j = iv.outermost_cover(rt["start"], rt["end"], mid)
    hit = free & (j >= 0)
    state[hit] = API + rt["cat"][j[hit]]
    detail[hit] = texts.of_category(rt["api"], j[hit])
    free &= ~hit
    j = iv.outermost_cover(os_["start"], os_["end"], mid)
    hit = free & (j >= 0)
    if hit.any():
        # Millions of OS calls, a few names: each name is looked up once.
        ids = os_["nameId"][j[hit]]

        def os_state(i: int) -> int:
            return OS_WAIT if osrt_category(ev.name_of(i)) == "os_wait" else OS_CALL

        state[hit] = per_distinct(ids, os_state, np.int64)
        detail[hit] = per_distinct(ids, lambda i: texts.code(ev.name_of(i)), np.int64)
        # Memory given back before a pageable copy of the thread, in no range that ends
        # before that copy: the last batch's source buffer (a pageable batch is freed to
        # the OS, a pinned one kept by the caching host allocator), the copies' own cost,
        # gone with pinned memory.
        released = per_distinct(ids, lambda i: bool(_RELEASE.match(ev.name_of(i))), bool)
        if released.any():
            at = np.flatnonzero(hit)[released]
            copies = _pageable_calls(scope, thread)
            k = np.searchsorted(copies, mid[at])
            between = k < copies.size
            # Not inside a range that ends before that copy (a checkpoint's own munmap).
            if between.any() and len(nv):
                j = iv.innermost_cover(nv["start"], nv["end"], mid[at])
                ends = np.where(j >= 0, nv["end"][np.clip(j, 0, None)], np.iinfo(np.int64).max)
                nxt = copies[np.clip(k, 0, max(copies.size - 1, 0))] if copies.size else ends
                between &= ends >= nxt
            at = at[between]
            state[at] = API + COPY
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
        texts.ranges.update(distinct(named[j >= 0]).tolist())
    return p_s, p_e, idx[origin], state, detail
