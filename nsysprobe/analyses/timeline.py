"""Timeline: the raw events of a few representative steps, as the rows a figure draws.

The window is ``STEPS_SHOWN`` consecutive steps whose median wall time is closest to the
median step (the first step, often a warm-up, only when there is no other choice); without a
step range, the longest GPU idle gap with as much time on each side; else everything. Rows
follow the Nsight Systems GUI, per thread then per GPU:

    python (4242/4242)  NVTX        [Batch 1...............................)[Batch 2...
                        NVTX 2      [get batch.........)[copy)[Compute.....)[get batch
                        CUDA API                              [sync........)
                        OS runtime  [poll..............)
    GPU 0               stream 7                        [HtoD)[k)[k)[k)
    idle                            ///////////////////                     ////////////

The count is bounded whatever the trace: at most ``MAX_THREADS`` threads (those launching
CUDA work first, then the busiest), ``MAX_NVTX_DEPTH`` NVTX levels and ``MAX_STREAMS`` streams;
within a row, events of one kind closer together than one ``PIXELS``-th of the window are
merged into one bar that counts them (a screen cannot show them apart anyway). A merged bar of
kernels says nothing of how busy the GPU was under it, so each GPU row also keeps its work as
time covered (``Busy``: the union per kind of work): a figure asks it how much of each pixel
column's time the GPU was busy, at any zoom. A GPU with several streams gets a first row,
"all streams", with the union of them all (the busy time the verdict counts):

    stream 7      [k][k] [k]   [k]  [k][k][k][k]   kernels, many to a pixel column in a real step
    column        |  60%  | 20% |20%|  100%   |    how much of each column's time was busy

Idle spans are the gaps between the union of GPU work on a device longer than the report's
threshold.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from nsysprobe.analyses import intervals as iv
from nsysprobe.analyses.calls import API_KINDS, api_kind, osrt_category, slow_launches
from nsysprobe.analyses.events import Events
from nsysprobe.analyses.gaps import GapsResult
from nsysprobe.analyses.rows import api_name
from nsysprobe.analyses.steps import StepsResult
from nsysprobe.common.table import Groups, Table, by_count, distinct
from nsysprobe.common.units import size

STEPS_SHOWN = 3
MAX_THREADS = 6
MAX_NVTX_DEPTH = 4
MAX_STREAMS = 16
PIXELS = 1200
PAD_RATIO = 0.015

# Bar kinds, in legend order. NVTX bars carry their own color.
KINDS = (
    "nvtx",
    "kernel",
    "memcpy HtoD",
    "memcpy HtoD pageable",
    "memcpy DtoH",
    "memcpy DtoD",
    "memcpy other",
    "memset",
    *API_KINDS,  # a thread's CUDA calls
    "os_wait",
    "os_call",
    "mixed",
)


@dataclass(frozen=True)
class Bar:
    start_ns: int
    end_ns: int
    name: str  # the event's name, or "N events" when several were merged
    kind: str  # one of KINDS
    color: int | None  # NVTX ARGB color, None when the range has none or for other kinds
    count: int  # events merged into this bar


@dataclass(frozen=True, eq=False)
class Busy:
    """A GPU row's work as time covered, clipped to the window: per kind of work (``KINDS``)
    the union of its operations, and the union of them all."""

    kinds: tuple[str, ...]
    by_kind: tuple[iv.Intervals, ...]
    union: iv.Intervals

    def busy_ns(self, starts, ends, kind: str | None = None) -> np.ndarray:
        """Busy nanoseconds in each [start, end): of the union, or of one kind's work."""
        spans = self.union if kind is None else self.by_kind[self.kinds.index(kind)]
        return _busy_before(spans, ends) - _busy_before(spans, starts)


def _busy_before(spans: iv.Intervals, points) -> np.ndarray:
    """Busy nanoseconds of disjoint sorted ``spans`` before each point."""
    s, e = spans
    points = np.asarray(points, dtype=np.int64)
    if not s.size:
        return np.zeros(points.shape, dtype=np.int64)
    done = np.concatenate(([0], np.cumsum(e - s)))
    begun = np.searchsorted(s, points, side="right")  # spans begun at or before each point
    # every span begun but the last ended before the point; the last may run past it
    running = np.maximum(e[np.maximum(begun - 1, 0)] - points, 0)
    return done[begun] - np.where(begun > 0, running, 0)


@dataclass(frozen=True)
class Lane:
    group: str  # the thread or "GPU n"
    title: str  # "NVTX", "NVTX 2", "CUDA API", "OS runtime", "stream 7", "all streams"
    bars: tuple[Bar, ...]
    events: int  # events in the window before merging
    busy: Busy | None = None  # GPU rows: their work as time covered


@dataclass(frozen=True)
class StepMark:
    index: int
    name: str
    start_ns: int
    end_ns: int


@dataclass(frozen=True)
class IdleSpan:
    device_id: int
    start_ns: int
    end_ns: int


@dataclass(frozen=True)
class Timeline:
    start_ns: int
    end_ns: int
    chosen: str  # how the window was chosen, in words
    steps: tuple[StepMark, ...]
    lanes: tuple[Lane, ...]
    idle: tuple[IdleSpan, ...]
    min_gap_ns: int
    omitted: tuple[str, ...]  # what the bounds left out, in words


def build_timeline(
    events: Events,
    steps: StepsResult | None,
    gaps: GapsResult | None,
    gap_spans: dict[int, iv.Intervals],
    *,
    steps_shown: int = STEPS_SHOWN,
) -> Timeline | None:
    """The rows for the chosen window, or None when the trace has no events at all;
    ``gap_spans``: the idle gaps per device (``gaps.gap_intervals``), marked where they fall
    in it."""
    window = _window(events, steps, gaps, steps_shown)
    if window is None:
        return None
    w0, w1, chosen, marks = window
    tol = max((w1 - w0) // PIXELS, 1)
    omitted: list[str] = []
    lanes = _thread_lanes(events, w0, w1, tol, omitted) + _gpu_lanes(events, w0, w1, tol, omitted)
    min_gap = gaps.min_gap_ns if gaps is not None else 0
    idle = []
    for dev, (gs, ge) in sorted(gap_spans.items()):
        keep = (ge > w0) & (gs < w1)
        idle += [
            IdleSpan(dev, int(max(s, w0)), int(min(e, w1))) for s, e in zip(gs[keep], ge[keep])
        ]
    return Timeline(
        start_ns=int(w0),
        end_ns=int(w1),
        chosen=chosen,
        steps=tuple(marks),
        lanes=tuple(lanes),
        idle=tuple(idle),
        min_gap_ns=min_gap,
        omitted=tuple(omitted),
    )


def _window(events: Events, steps, gaps, shown: int):
    if steps is not None and steps.rows:
        rows = steps.rows
        k = max(1, min(shown, len(rows)))
        walls = np.array([r.wall_ns for r in rows], dtype=np.int64)
        starts = range(1, len(rows) - k + 1) if len(rows) > k else range(0, 1)
        best = min(
            starts, key=lambda i: (abs(np.median(walls[i : i + k]) - steps.median_step_ns), i)
        )
        chosen_rows = rows[best : best + k]
        w0 = chosen_rows[0].start_ns
        w1 = max(r.start_ns + r.wall_ns for r in chosen_rows)
        marks = [StepMark(r.index, r.name, r.start_ns, r.start_ns + r.wall_ns) for r in chosen_rows]
        names = (
            chosen_rows[0].name if k == 1 else f"{chosen_rows[0].name} to {chosen_rows[-1].name}"
        )
        why = f"{names}: {k} of {steps.count} steps, chosen as the run of median step time"
    elif gaps is not None and gaps.longest:
        g = gaps.longest[0]
        w0, w1 = g.start_ns - g.duration_ns, g.end_ns + g.duration_ns
        marks = []
        why = f"the longest GPU idle gap ({g.duration_ns / 1e6:,.1f} ms) with context (no steps)"
    else:
        frames = [events.kernels, events.memcpy, events.memset, events.nvtx, events.osrt]
        frames = [f for f in frames if len(f)]
        if not frames:
            return None
        w0 = min(int(f["start"].min()) for f in frames)
        w1 = max(int(f["end"].max()) for f in frames)
        marks = []
        why = "the whole trace (no steps and no idle gaps to focus on)"
    pad = max(int((w1 - w0) * PAD_RATIO), 1)
    return int(w0 - pad), int(w1 + pad), why, marks


def _in(df: Table, w0: int, w1: int) -> Table:
    return df.take((df["end"] > w0) & (df["start"] < w1))


def _thread_lanes(events: Events, w0: int, w1: int, tol: int, omitted: list[str]) -> list[Lane]:
    nvtx, runtime, osrt = (_in(f, w0, w1) for f in (events.nvtx, events.runtime, events.osrt))
    # Threads by their events in the window, most first, ties in order of first appearance.
    tids = np.concatenate([nvtx["globalTid"], runtime["globalTid"], osrt["globalTid"]])
    busiest = by_count(tids).tolist()
    seen = set(busiest)
    launchers = [t for t in events.launch_threads.values() if t in seen]
    order = launchers + [int(t) for t in busiest if int(t) not in launchers]
    if len(order) > MAX_THREADS:
        omitted.append(f"{len(order) - MAX_THREADS} threads with fewer events")
    lanes: list[Lane] = []
    for tid in order[:MAX_THREADS]:
        group = events.thread_label(tid)
        lanes += _nvtx_lanes(
            events, nvtx.take(nvtx["globalTid"] == tid), group, w0, w1, tol, omitted
        )
        api = runtime.take(runtime["globalTid"] == tid)
        if len(api):
            names = [api_name(events.name_of(i)) for i in api["nameId"]]
            codes = np.array([api_kind(n) for n in names], dtype=np.int8)
            codes = slow_launches(codes, np.asarray(api["end"]) - np.asarray(api["start"]))
            kinds = [API_KINDS[k] for k in codes.tolist()]
            lanes.append(_lane(group, "CUDA API", api, names, kinds, None, w0, w1, tol))
        calls = osrt.take(osrt["globalTid"] == tid)
        if len(calls):
            names = [events.name_of(i) for i in calls["nameId"]]
            kinds = [osrt_category(n) for n in names]
            lanes.append(_lane(group, "OS runtime", calls, names, kinds, None, w0, w1, tol))
    return lanes


def _nvtx_lanes(events, df, group, w0, w1, tol, omitted) -> list[Lane]:
    if not len(df):
        return []
    df = df.take(np.lexsort((~df["end"], df["start"])))  # by start, longest first (stable)
    depth = _depths(df["start"], df["end"])
    if (depth >= MAX_NVTX_DEPTH).any():
        omitted.append(
            f"{int((depth >= MAX_NVTX_DEPTH).sum())} NVTX ranges nested deeper than "
            f"{MAX_NVTX_DEPTH} levels on {group}"
        )
    lanes = []
    for level in range(min(int(depth.max()) + 1, MAX_NVTX_DEPTH)):
        part = df.take(depth == level)
        title = "NVTX" if level == 0 else f"NVTX {level + 1}"
        shown = events.nvtx_details(part["row"])
        names = [name for name, _ in shown]
        colors = [None if c < 0 else int(c) for _, c in shown]
        lanes.append(_lane(group, title, part, names, ["nvtx"] * len(part), colors, w0, w1, tol))
    return lanes


def _depths(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Nesting level of each range (sorted by start, longest first): ranges still open."""
    depth = np.zeros(starts.size, dtype=np.int64)
    open_ends: list[int] = []
    for i, (s, e) in enumerate(zip(starts.tolist(), ends.tolist())):
        while open_ends and open_ends[-1] <= s:
            open_ends.pop()
        depth[i] = len(open_ends)
        open_ends.append(e)
    return depth


def _gpu_lanes(events: Events, w0: int, w1: int, tol: int, omitted: list[str]) -> list[Lane]:
    labels = events.lookups.mem_kind_labels
    parts = []
    k = _in(events.kernels, w0, w1)
    if len(k):
        parts.append((k, [events.name_of(i) for i in k["nameId"].tolist()], ["kernel"] * len(k)))
    c = _in(events.memcpy, w0, w1)
    if len(c):
        copy_labels = events.lookups.copy_kind_labels
        kind_names = [copy_labels.get(int(x), f"kind {int(x)}") for x in c["copyKind"]]
        src = [labels.get(int(x), "Unknown") for x in c["srcKind"]]
        names = [f"{kn} {size(b)} ({s})" for kn, b, s in zip(kind_names, c["bytes"].tolist(), src)]
        parts.append((c, names, [_copy_kind(kn, s) for kn, s in zip(kind_names, src)]))
    m = _in(events.memset, w0, w1)
    if len(m):
        parts.append((m, [f"memset {size(b)}" for b in m["bytes"].tolist()], ["memset"] * len(m)))
    if not parts:
        return []
    columns = ("start", "end", "deviceId", "streamId")
    ops = Table({col: np.concatenate([p[col] for p, _, _ in parts]) for col in columns})
    ops["name"] = np.array([n for _, names, _ in parts for n in names], dtype=object)
    ops["kind"] = np.array([k for _, _, kinds in parts for k in kinds], dtype=object)
    keys = Groups([ops["deviceId"], ops["streamId"]], sort=True).keys
    if keys[0].size > MAX_STREAMS:
        omitted.append(f"{keys[0].size - MAX_STREAMS} streams")
    lanes = []
    for dev, stream in list(zip(keys[0].tolist(), keys[1].tolist()))[:MAX_STREAMS]:
        on_device = ops["deviceId"] == dev
        group = f"GPU {int(dev)}"
        if not lanes or lanes[-1].group != group:
            streams = distinct(ops["streamId"][on_device]).size
            if streams > 1:  # the device's union, of every stream (shown or not)
                whole = ops.take(on_device)
                busy = _busy(whole, w0, w1)
                lanes.append(Lane(group, "all streams", (), int(len(whole)), busy))
        part = ops.take(on_device & (ops["streamId"] == stream))
        lane = _lane(
            group,
            f"stream {int(stream)}",
            part,
            part["name"].tolist(),
            part["kind"].tolist(),
            None,
            w0,
            w1,
            tol,
        )
        lanes.append(replace(lane, busy=_busy(part, w0, w1)))
    return lanes


def _busy(ops: Table, w0: int, w1: int) -> Busy:
    """The union of ``ops`` over the window, per kind and in all."""
    s = np.clip(ops["start"].astype(np.int64), w0, w1)
    e = np.clip(ops["end"].astype(np.int64), w0, w1)
    present = set(ops["kind"].tolist())
    kinds = tuple(k for k in KINDS if k in present)
    by_kind = tuple(iv.union(s[ops["kind"] == k], e[ops["kind"] == k]) for k in kinds)
    return Busy(kinds, by_kind, iv.union_of(list(by_kind)))


def _copy_kind(kind: str, src: str) -> str:
    if kind == "HtoD":
        return "memcpy HtoD pageable" if src == "Pageable" else "memcpy HtoD"
    if kind in ("DtoH", "DtoD"):
        return f"memcpy {kind}"
    return "memcpy other"


def _lane(group, title, df, names, kinds, colors, w0, w1, tol) -> Lane:
    """One row: the events sorted, clipped to the window, close ones of one kind merged."""
    s = np.maximum(df["start"].astype(np.int64), w0)
    e = np.minimum(df["end"].astype(np.int64), w1)
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    names = [names[i] for i in order]
    kinds = [kinds[i] for i in order]
    colors = [colors[i] for i in order] if colors is not None else [None] * len(names)
    bars = _merge(s, e, names, kinds, colors, tol, by_kind=True)
    if len(bars) > 2 * PIXELS:
        bars = _merge(
            np.array([b.start_ns for b in bars]),
            np.array([b.end_ns for b in bars]),
            [b.name for b in bars],
            [b.kind for b in bars],
            [b.color for b in bars],
            tol,
            by_kind=False,
            counts=[b.count for b in bars],
        )
    return Lane(group=group, title=title, bars=tuple(bars), events=int(len(df)))


def _merge(s, e, names, kinds, colors, tol, *, by_kind: bool, counts=None) -> list[Bar]:
    """Merge runs of consecutive events narrower than ``tol`` that lie within ``tol`` of each
    other (and are of one kind when ``by_kind``); wider events always keep their own bar.
    Without ``by_kind`` (the fallback for a row still too dense) any close events merge."""
    n = len(s)
    if n == 0:
        return []
    counts = np.ones(n, dtype=np.int64) if counts is None else np.asarray(counts)
    run_end = np.maximum.accumulate(e)
    close = np.zeros(n, dtype=bool)
    close[1:] = s[1:] <= run_end[:-1] + tol
    if by_kind:
        small = (e - s) < tol
        kind = np.array(kinds, dtype=object)
        close[1:] &= small[1:] & small[:-1] & (kind[1:] == kind[:-1]).astype(bool)
    first = np.flatnonzero(~close)
    last = np.append(first[1:], n)
    ends = np.maximum.reduceat(e, first)
    merged = np.add.reduceat(counts, first)
    bars = []
    for a, b, end, count in zip(first.tolist(), last.tolist(), ends.tolist(), merged.tolist()):
        same_name = len(set(names[a:b])) == 1
        kind = kinds[a] if len(set(kinds[a:b])) == 1 else "mixed"
        if count == 1:
            name = names[a]
        elif same_name:
            name = f"{count:,} × {names[a]}" if b - a > 1 else names[a]
        else:
            name = f"{count:,} events"
        bars.append(Bar(int(s[a]), int(end), name, kind, colors[a], int(count)))
    return bars
