"""Periodic steps: an event every N steady steps (a checkpoint, an evaluation) split from
the other steps, with the NVTX ranges run only in its steps (the package docstring)."""

from __future__ import annotations

import numpy as np

from nsysprobe.analyses import intervals as iv
from nsysprobe.analyses.account.busy import hideable_by_kind
from nsysprobe.analyses.account.model import Detail, PeriodicSteps
from nsysprobe.analyses.account.scope import Scope
from nsysprobe.analyses.account.tally import DETAILS_LISTED, buckets_of, details_by_bucket
from nsysprobe.analyses.calls import BIRTH_CALLS
from nsysprobe.common.table import descending, distinct

# A range is the periodic event's when it covers at least this share of the periodic steps'
# time and over this many times its share of the other steady steps' time, with at least
# ``PERIODIC_RANGE_HELD`` of its time in the periodic steps.
PERIODIC_RANGE_SHARE = 0.1
PERIODIC_RANGE_RATIO = 2
PERIODIC_RANGE_HELD = 0.75


def periodic_split(scope: Scope, labels, n_busy, steady, details, free) -> PeriodicSteps | None:
    """The periodic event's split of the steady steps (module docstring), or None.
    ``details``: the other steady steps' details, then the periodic steps' (``sum_into``)."""
    if not scope.period:
        return None
    details, periodic_details = details
    sl = scope.steady
    per = scope.periodic[sl]
    n, n_p = per.size, int(per.sum())
    others = steady[~per]
    excess = steady[per].sum(axis=0) - n_p * others.mean(axis=0)
    total = float(excess.sum())
    inputs = sum(float(excess[labels.index(x)]) for x in ("loading", "loader_wait"))
    # Starting DataLoader workers is the input's too (a new epoch's loader).
    if scope.loaders:
        inputs += sum(ns for (_, name), ns in periodic_details.items() if name in BIRTH_CALLS)
    ranges, own = _periodic_ranges(scope)
    # Waiting for the input, in no range of its own (a range the other steps run too, such
    # as 'data', only takes longer): the input pipeline's rhythm (a new epoch's workers, a
    # loader's burst), not a periodic event of the loop.
    if total <= 0 or (inputs > total / 2 and not own):
        return None
    scale = n / (n - n_p)
    wall = steady.sum(axis=1)
    scaled = {key: int(ns * scale) for key, ns in details.items()}
    spent = details_by_bucket(periodic_details)
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
        period=scope.period,
        steps=tuple(str(x) for x in scope.win_names[sl][per]),
        indices=tuple(int(i) for i in np.flatnonzero(scope.periodic)),
        occurrences=tuple(
            str(x) for x in scope.win_names[sl][per & ~np.concatenate([[False], per[:-1]])]
        ),
        typical_wall_ns=int(np.median(wall[~per])),
        median_wall_ns=int(np.median(wall[per])),
        excess_ns=int(total),
        excess_busy_ns=int(excess[:n_busy].sum()),
        excess_idle_ns=int(total) - int(excess[:n_busy].sum()),
        excess_buckets=tuple(sorted(grew, key=lambda d: -d.ns)[:DETAILS_LISTED]),
        ranges=ranges,
        details=tuple(idle_details[:DETAILS_LISTED]),
        normal_buckets=buckets_of(
            labels, n_busy, others, int(wall.sum()), details_by_bucket(scaled), scale
        ),
        normal_hideable_ns={
            k: int(v * scale)
            for k, v in hideable_by_kind(labels[:n_busy], others, free, sl, ~per).items()
        },
    )


def _periodic_ranges(scope: Scope) -> tuple[tuple[Detail, ...], bool]:
    """The step thread's NVTX ranges (numbers masked) that cover, of the periodic steps'
    time, at least ``PERIODIC_RANGE_SHARE`` and over ``PERIODIC_RANGE_RATIO`` times their
    share of the other steady steps' time, most of their time in the periodic steps
    (``PERIODIC_RANGE_HELD``): so neither a range enclosing the steps nor one run briefly
    in every step is the event's. Their time in the periodic steps, largest first; and
    whether one of them runs in at most a tenth of the other steps (its own range, not
    one of every step that took longer)."""
    nv = scope.ev.nvtx
    if not len(nv) or scope.steps is None:
        return (), False
    rows = np.flatnonzero(nv["globalTid"] == scope.home)
    sl = scope.steady
    w_s, w_e = scope.win_s[sl], scope.win_e[sl]
    # A range started in a step's CPU range is that step's, whole (the CPU may run steps
    # ahead of their windows); any other is cut at the windows' edges.
    steps, at = scope.steps, nv["start"][rows]
    step = np.searchsorted(steps.cpu_start, at, side="right") - 1
    held = step >= 0
    held[held] = at[held] < steps.cpu_end[step[held]]
    outside = rows[~held]
    p_s, p_e, origin, w = iv.split_by(nv["start"][outside], nv["end"][outside], (w_s, w_e))
    codes = np.concatenate([nv["pattern"].codes[rows[held]], nv["pattern"].codes[outside][origin]])
    dur = np.concatenate([nv["end"][rows[held]] - at[held], p_e - p_s])
    w = np.concatenate([step[held] - sl.start, w])
    inside = (w >= 0) & (w < w_s.size)
    if not inside.any():
        return (), False
    codes, dur, w = codes[inside], dur[inside], w[inside]
    per = scope.periodic[sl]
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
    chosen[cats == scope.steps.pattern] = False  # the steps' own range holds the event
    if not chosen.any():
        return (), False
    # The other steps each name runs in.
    pairs = distinct(codes[~per[w]].astype(np.int64) * w_s.size + w[~per[w]])
    runs_in = np.bincount(pairs // w_s.size, minlength=n_c)
    own = bool((chosen & (runs_in <= 0.1 * int((~per).sum()))).any())
    ns = np.where(chosen, in_p, 0)
    top = descending(ns)[:DETAILS_LISTED].tolist()
    return tuple(Detail(str(cats[c]), int(ns[c])) for c in top if ns[c] > 0), own
