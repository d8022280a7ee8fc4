"""Drains: a call the thread was inside, begun earlier, as the GPU went idle; each drain's
episode (until the thread gets ahead again), chains of them, and the idle they are charged
with (the package docstring)."""

from __future__ import annotations

import numpy as np

from nsysprobe.analyses import intervals as iv
from nsysprobe.analyses.account.causes import DRAINING, IDLE_CAUSES
from nsysprobe.analyses.account.scope import Scope

# Idle that keeps its own cause inside a drain's episode: GPU-side time, nsys's, and the
# input: a thread that makes the batch itself or waits for a loader would spend that time
# whether or not it had waited for the GPU first (a loader's batches come at the loader's
# pace), and the loading fix removes it with or without the drain.
KEPT_AFTER_DRAINS = (
    "queued",
    "other_process",
    "profiler_overhead",
    "loading",
    "loader_wait",
    "os_wait",
)


def drain_episodes(
    scope: Scope, idle_s: np.ndarray, idle_e: np.ndarray, drained: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per idle interval, the latest drain whose episode it belongs to (its number among
    the drained intervals, in time order; -1 for none), and the chain of that episode.

    After a call drains the GPU, the queue is empty and the GPU idles between the
    thread's next launches until the thread gets ahead again: until it issues an
    operation while the GPU is still busy with earlier work. That is the drain's
    episode, across step boundaries too. Drains that follow one another before the
    thread gets ahead (``loss.item()`` then ``acc.cpu()``) form one chain, whose idle
    ``charge_drains`` shares out.
    """
    n = idle_s.size
    # Numbers of drains and chains: 32 bits while they fit (millions of idle intervals).
    kind = iv.index_type(n)
    d_idx = np.flatnonzero(drained)
    if not d_idx.size:
        return np.full(n, -1, dtype=kind), np.full(n, -1, dtype=kind)
    op_s = scope.ops["start"]
    call = scope.op_calls
    known = call >= 0
    issued_at = scope.runtime["start"][np.clip(call, 0, None)]
    issued_at[~known] = op_s[~known]
    ahead = np.zeros(op_s.size, dtype=bool)
    ahead[1:] = known[1:] & (issued_at[1:] < scope.reach[:-1])
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


def draining_calls(scope: Scope, thread: int) -> tuple[np.ndarray, ...]:
    """The thread's calls that can drain the GPU (sync, copy, allocator): start, end,
    category and API name (a code of the runtime's ``api`` labels), by start."""
    rt = scope.runtime
    mine = np.flatnonzero((rt["globalTid"] == thread) & np.isin(rt["cat"], DRAINING))
    return rt["start"][mine], rt["end"][mine], rt["cat"][mine], rt["api"].codes[mine]


def draining_at(draining: tuple[np.ndarray, ...], at: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per time: the category, API (its code) and start of the draining call
    (``draining_calls``) the thread was inside at that time, begun before it; -1, -1 and the
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


def charge_drains(s, e, c, d, episode, chain, budget, drain_cause, drain_detail, spent, named=None):
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
