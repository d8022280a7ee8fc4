"""GPU-busy time: the layers of each busy kind, their partition (the first kind running
wins), what compute could still hide, and the communication figures."""

from __future__ import annotations

import numpy as np

from nsysprobe.analyses import intervals as iv
from nsysprobe.analyses.account.causes import COMMUNICATION, COMPUTE, MEMSET
from nsysprobe.analyses.account.model import EQUAL_WINDOWS, CommunicationOps
from nsysprobe.analyses.account.scope import Scope
from nsysprobe.analyses.communication import CollectiveSummary, summarize
from nsysprobe.analyses.rows import label_at


def busy(scope: Scope):
    """The busy kinds in order (``_busy_order``); the partition of the GPU's busy time
    (segments: start, end, index of the kind); the communication layer and, when it holds
    any work, the compute layer; and what compute could hide (``_compute_free``)."""
    ops = scope.ops
    kinds = ops["kind"].categories.tolist()
    busy_names = _busy_order(kinds)
    codes = ops["kind"].codes
    op_s, op_e = ops["start"], ops["end"]
    layers = []
    for n in busy_names:
        mine = codes == kinds.index(n)
        layers.append(iv.union(op_s[mine], op_e[mine]))
    # Busy time outside the windows is cut away with the rest below.
    segments = iv.partition(layers)
    # The communication figures need the communication layer and, when it holds any work,
    # the compute layer; the others are dropped now (the millions of intervals of a
    # kernel-heavy capture).
    layers = dict(zip(busy_names, layers))
    free = _compute_free((scope.win_s, scope.win_e), layers)
    empty = iv.union([], [])
    comm = layers.get(COMMUNICATION, empty)
    layers = {
        COMMUNICATION: comm,
        COMPUTE: layers.get(COMPUTE, empty) if comm[0].size else empty,
    }
    return busy_names, segments, layers, free


def _busy_order(kinds) -> list[str]:
    copies = sorted(
        (k for k in kinds if str(k).startswith("memcpy")),
        key=lambda k: (0 if " HtoD" in k else 1 if " DtoH" in k else 2, k),
    )
    head = [k for k in (COMPUTE, COMMUNICATION) if k in set(kinds)]
    tail = [MEMSET] if MEMSET in set(kinds) else []
    return head + copies + tail


def _per_window(windows: iv.Intervals, u: iv.Intervals) -> np.ndarray:
    """The time of disjoint sorted intervals ``u`` in each window of ``windows``: for
    windows that do not overlap (steps), the time ``u`` covers up to each window's end less
    that up to its start (prefix sums: 10 M intervals are not cut and sorted again); else
    each piece of ``u`` cut at the windows' edges counted in the window holding it."""
    if not windows[0].size or bool((windows[0][1:] >= windows[1][:-1]).all()):
        return iv.Coverage(u).of(*windows)
    s, e, _, holder = iv.split_by(u[0], u[1], windows)
    inside = holder >= 0
    return np.bincount(holder[inside], weights=(e - s)[inside], minlength=windows[0].size).astype(
        np.int64
    )


def _compute_free(windows: iv.Intervals, layers: dict[str, iv.Intervals]) -> dict[str, np.ndarray]:
    """Per kind of work that compute could hide (copies, communication): in each window,
    the compute time not already running under that kind's work, all that overlapping
    could still put under it (the step cannot drop below the longer of the two)."""
    compute = layers.get(COMPUTE)
    if compute is None or not compute[0].size:
        return {}
    comp_w = _per_window(windows, compute)
    out = {}
    for name, u in layers.items():
        if name in (COMPUTE, MEMSET) or not u[0].size:
            continue
        both = comp_w + _per_window(windows, u) - _per_window(windows, iv.union_of([compute, u]))
        out[name] = comp_w - both
    return out


def hideable_by_kind(busy_names, rows, free, sl, of=None) -> dict[str, int]:
    """Per busy kind, the most of it overlap could hide in the steps ``rows`` (the steady
    steps ``sl``, or those of them where ``of``): under compute not already running under it."""
    out = {}
    for b, name in enumerate(busy_names):
        if name in (COMPUTE, MEMSET) or not rows[:, b].any():
            continue
        room = free[name][sl] if name in free else None
        if room is not None and of is not None:
            room = room[of]
        out[name] = int(np.minimum(rows[:, b], room).sum()) if room is not None else 0
    return out


def communication(scope: Scope, layers, busy_names, labels, table):
    """Per window, NCCL's work (union) and its exposed part; over the steady steps, all of
    it and the part under compute kernels; per collective, its figures (``summarize``); and
    every NCCL operation (``CommunicationOps``)."""
    sl, wall = scope.steady, scope.win_e - scope.win_s
    comm_ns = overlapped = 0
    comm_w = np.zeros(wall.size, dtype=np.int64)
    exposed_w = comm_w
    collectives: tuple[CollectiveSummary, ...] = ()
    comm_ops = None
    if COMMUNICATION in busy_names:
        comm = layers[COMMUNICATION]
        comm_w = _per_window((scope.win_s, scope.win_e), comm)
        exposed_w = table[:, labels.index(COMMUNICATION)]
        comm_ns, overlapped = int(comm_w[sl].sum()), int((comm_w - exposed_w)[sl].sum())
        ops = scope.ops
        mine = ops["kind"] == COMMUNICATION
        c_s, c_e = ops["start"][mine], ops["end"][mine]
        c_n = label_at(ops["coll"], np.flatnonzero(mine))
        steady_windows = (scope.win_s[sl], scope.win_e[sl])
        collectives = summarize(c_s, c_e, c_n, layers[COMPUTE], steady_windows)
        comm_ops = CommunicationOps(
            c_s,
            c_e,
            c_n,
            scope.win_s,
            scope.win_e,
            scope.win_names,
            stepped=not scope.windows.startswith(EQUAL_WINDOWS),
        )
    return comm_ns, overlapped, comm_w, exposed_w, collectives, comm_ops
