"""The account's gaps: the idle stretches of its steady steps longer than ``min_gap_ns``, and
their time by cause and detail, summed as the idle pieces come (``IdleGaps``, read by
``gaps.py``)."""

from __future__ import annotations

import numpy as np

from nsysprobe.analyses.account.arrays import _Texts
from nsysprobe.analyses.account.causes import IDLE_CAUSES
from nsysprobe.analyses.account.model import IdleGaps
from nsysprobe.common.table import Groups

# Idle stretches longer than this are the account's gaps (``IdleGaps``), by default.
DEFAULT_MIN_GAP_NS = 1_000_000


class GapSums:
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
