"""The account's idle stretches where the device was idle: the idle intervals of its steady
steps between two pieces of its GPU work, less any time another process's work held the
device. The long ones are its gaps, with their time by cause and detail summed as the idle
pieces come (``IdleGaps``, read by ``gaps.py``); in the short ones, the queued time is the
GPU's own start of work it already had (``IdleGaps.queued_start_ns``, read by the
``kernel_gaps`` rule)."""

from __future__ import annotations

import numpy as np

from nsysprobe.analyses import intervals as iv
from nsysprobe.analyses.account.arrays import Texts
from nsysprobe.analyses.account.causes import IDLE_CAUSES
from nsysprobe.analyses.account.model import IdleGaps
from nsysprobe.common.table import Groups

# Idle stretches longer than this are the account's gaps (``IdleGaps``), by default.
DEFAULT_MIN_GAP_NS = 1_000_000
# Queued idle in a stretch no longer than this is the GPU starting work it already had, not
# a wait on other work. Measured on the H200 captures (sample_traces/): in h200_tiny_layers
# 94% of the queued idle lies in pieces of at most 10 us, 97.7% of at most 20 us and all of
# it under 50 us; in the other captures all of it under 10 us, except h200_shared_gpu, where
# 77% lies in longer stretches (the other process's kernels).
QUEUED_START_NS = 20_000
_QUEUED = IDLE_CAUSES.index("queued")


class GapSums:
    """The idle intervals [``idle_s``, ``idle_e``) cut to [``lo``, ``hi``) (the steady steps
    from the first piece of GPU work to the last) less ``held`` (other processes' work on the
    device): the stretches longer than ``min_gap_ns`` are the gaps, and the time of each
    (gap, cause, detail) is summed as the idle pieces come, a run at a time (``add``), with
    the queued time in the stretches of at most ``QUEUED_START_NS``; ``result``:
    ``IdleGaps``."""

    def __init__(self, idle_s, idle_e, lo: int, hi: int, min_gap_ns: int, held: iv.Intervals):
        s, e = iv.clip((idle_s, idle_e), lo, hi)
        # A stretch between two of its own kernels is short or not by its own length, whatever
        # other processes ran in it.
        short = (e - s) <= QUEUED_START_NS
        self.short = iv.Coverage((s[short], e[short]))
        # Cut by other processes' work, one idle interval may hold several stretches, and
        # one idle piece meet several gaps (``add``).
        self.cut = bool(held[0].size)
        if self.cut:
            p_s, p_e, _, by = iv.split_by(s, e, held)
            s, e = iv.union(p_s[by < 0], p_e[by < 0])
        self.min_gap_ns = min_gap_ns
        long = (e - s) > max(min_gap_ns, 0)
        self.start, self.end = s[long], e[long]
        self.queued_start_ns = 0
        self.sums: list[tuple[np.ndarray, ...]] = []

    def add(self, p_s, p_e, cause, detail) -> None:
        """Sum the idle pieces [``p_s``, ``p_e``) (disjoint, sorted) with their causes and
        details (codes of the account's texts) into the gaps and the queued start time."""
        queued = cause == _QUEUED
        if queued.any():
            self.queued_start_ns += int(self.short.of(p_s[queued], p_e[queued]).sum())
        if self.cut:
            q_s, q_e, origin, g = iv.split_by(p_s, p_e, (self.start, self.end))
            hit = g >= 0
            g, origin = g[hit], origin[hit]
            ns = (q_e - q_s)[hit]
            cause, detail = cause[origin], detail[origin]
        else:  # a piece lies inside one idle interval, so it meets at most one gap
            g = np.searchsorted(self.end, p_s, side="right")
            hit = g < self.start.size
            hit[hit] = p_e[hit] > self.start[g[hit]]
            g = g[hit]
            ns = np.minimum(p_e[hit], self.end[g]) - np.maximum(p_s[hit], self.start[g])
            cause, detail = cause[hit], detail[hit]
        if not g.size:
            return
        by = Groups([g, cause, detail], sort=True)
        self.sums.append((*by.keys, by.sum(ns)))

    def result(self, texts: Texts) -> IdleGaps:
        n = self.start.size
        cause = np.zeros(n, dtype=np.int64)
        name = np.full(n, None, dtype=object)
        if not self.sums:
            return self._gaps(cause, name, ())
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
        return self._gaps(cause, name, tuple(rows))

    def _gaps(self, cause, name, rows) -> IdleGaps:
        return IdleGaps(
            self.min_gap_ns, self.start, self.end, cause, name, rows, self.queued_start_ns
        )
