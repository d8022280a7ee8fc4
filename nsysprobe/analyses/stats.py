"""Rank tests shared by the comparisons: ``nsysprobe compare`` (runs), the cross-rank step
times (``cross_rank.py``) and the arrivals at the collectives (``arrivals.py``).

``mann_whitney`` is the two-sided Mann-Whitney U test: exact over every split of the pooled
samples when there are at most ``EXACT_SPLITS`` splits, else the normal approximation with tie
and continuity correction. ``one_sided`` asks only whether the first sample is larger.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

EXACT_SPLITS = 20_000
# The comparisons' significance level, and the fewest steps a sample needs to be tested.
ALPHA = 0.05
MIN_STEPS = 3


def mann_whitney(a, b) -> tuple[float, float]:
    """(U of ``a``, two-sided p) for samples ``a`` and ``b``.

    U counts the pairs where the ``a`` value is larger (ties count one half). Exact when the
    pooled sample has at most ``EXACT_SPLITS`` ways to be split, by enumerating them with the
    pooled ranks (ties keep their mid-ranks); else the normal approximation with tie correction
    and continuity correction.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    n1, n2 = a.size, b.size
    if not n1 or not n2:
        raise ValueError("both samples need at least one value")
    pooled = np.concatenate([a, b])
    ranks = _midranks(pooled)
    u = float(ranks[:n1].sum() - n1 * (n1 + 1) / 2)
    mean = n1 * n2 / 2
    if _splits_at_most(n1 + n2, n1, EXACT_SPLITS):
        dist = (
            np.fromiter(
                (ranks[list(c)].sum() for c in itertools.combinations(range(n1 + n2), n1)),
                dtype=np.float64,
            )
            - n1 * (n1 + 1) / 2
        )
        extreme = np.abs(dist - mean) >= abs(u - mean) - 1e-9
        return u, float(extreme.mean())
    _, counts = np.unique(pooled, return_counts=True)
    n = n1 + n2
    var = n1 * n2 / 12 * ((n + 1) - float((counts**3 - counts).sum()) / (n * (n - 1)))
    if var <= 0:
        return u, 1.0
    z = max(abs(u - mean) - 0.5, 0.0) / math.sqrt(var)
    return u, float(min(1.0, math.erfc(z / math.sqrt(2))))


def _splits_at_most(n: int, k: int, limit: int) -> bool:
    """comb(n, k) <= limit, without computing a huge comb (samples of thousands)."""
    k = min(k, n - k)
    value = 1
    for i in range(1, k + 1):
        value = value * (n - k + i) // i
        if value > limit:
            return False
    return True


def _midranks(values: np.ndarray) -> np.ndarray:
    order = np.argsort(values, kind="stable")
    sorted_vals = values[order]
    ranks = np.empty(values.size, dtype=np.float64)
    # ranks 1..n, then every run of equal values gets the mean of its ranks
    _, first, counts = np.unique(sorted_vals, return_index=True, return_counts=True)
    mid = first + (counts + 1) / 2
    ranks[order] = np.repeat(mid, counts)
    return ranks


def one_sided(a, b) -> tuple[float, float]:
    """(P(a value of ``a`` > one of ``b``, ties half), one-sided p that ``a`` is larger)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    u, p = mann_whitney(a, b)
    share = u / (a.size * b.size)
    return share, (p / 2 if share > 0.5 else 1.0 - p / 2)
