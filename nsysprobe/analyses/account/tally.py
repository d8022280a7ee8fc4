"""The account's table (window x bucket) summed from pieces of time, and read as buckets
with their details."""

from __future__ import annotations

import numpy as np

from nsysprobe.analyses import intervals as iv
from nsysprobe.analyses.account.arrays import runs
from nsysprobe.analyses.account.model import Bucket, Detail
from nsysprobe.analyses.account.scope import Scope
from nsysprobe.common.table import descending

DETAILS_LISTED = 6


def sum_into(scope: Scope, table, details, s, e, bucket, detail, texts) -> None:
    """Add the pieces [s, e) (disjoint, sorted) of ``bucket`` to ``table`` (window x
    bucket) and, where ``detail`` (codes of ``texts``) names one, to ``details`` (the steady
    steps' details: of the other steps, then of the periodic ones); cut at every window edge,
    the time outside the windows left out. A run of ``INTERVALS_PER_RUN`` pieces at a time:
    the cut pieces are not held all at once."""
    for lo, hi in runs(s.size):
        run = slice(lo, hi)
        part = None if detail is None else detail[run]
        _sum_run_into(scope, table, details, s[run], e[run], bucket[run], part, texts)


def _sum_run_into(scope: Scope, table, details, s, e, bucket, detail, texts) -> None:
    p_s, p_e, origin, w = iv.split_by(s, e, (scope.win_s, scope.win_e))
    inside = w >= 0
    dur = (p_e - p_s)[inside]
    origin, w = origin[inside], w[inside]
    del p_s, p_e, inside
    sums = np.bincount(w * table.shape[1] + bucket[origin], weights=dur, minlength=table.size)
    table += sums.astype(np.int64).reshape(table.shape)
    if detail is None:
        return
    codes = detail[origin]
    steady = (w >= scope.steady.start) & (w < scope.steady.stop)
    named = (codes >= 0) & steady  # the steady steps' details only
    periodic = scope.periodic[w]
    n_t = len(texts.texts)
    for into, these in (
        (details[0], named & ~periodic),
        (details[1], named & periodic),
    ):
        if not these.any():
            continue
        key = bucket[origin][these] * n_t + codes[these]
        sums = np.bincount(key, weights=dur[these])
        for k in np.flatnonzero(np.bincount(key)).tolist():
            b, text = divmod(k, n_t)
            name = texts.texts[text]
            into[(b, name)] = into.get((b, name), 0) + int(sums[k])


def buckets_of(labels, n_busy, rows, total_wall, by_bucket, scale=1.0) -> tuple[Bucket, ...]:
    """The buckets of the steps ``rows`` (step x bucket), their totals times ``scale``:
    busy kinds, then idle causes, each largest first."""
    out = []
    for b, name in enumerate(labels):
        total = int(rows[:, b].sum() * scale)
        if not total:
            continue
        out.append(
            Bucket(
                name=name,
                kind="busy" if b < n_busy else "idle",
                total_ns=total,
                median_ns=int(np.median(rows[:, b])),
                share_ratio=total / total_wall if total_wall else 0.0,
                details=by_bucket.get(b, ()),
            )
        )
    out.sort(key=lambda x: (x.kind != "busy", -x.total_ns))
    return tuple(out)


def details_by_bucket(details: dict[tuple[int, str], int]) -> dict[int, tuple[Detail, ...]]:
    """Per bucket, its ``DETAILS_LISTED`` largest details (ns per (bucket, detail text)):
    largest first, ties in the order ``descending`` leaves the texts sorted."""
    texts: dict[int, list[str]] = {}
    for b, text in sorted(details, key=lambda k: (k[0], str(k[1]))):
        texts.setdefault(b, []).append(text)
    out = {}
    for b, names in texts.items():
        ns = np.array([details[b, t] for t in names], dtype=np.int64)
        top = descending(ns)[:DETAILS_LISTED].tolist()
        out[b] = tuple(Detail(str(names[i]), int(ns[i])) for i in top)
    return out
