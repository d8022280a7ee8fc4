"""The timeline figure of the HTML page: a few representative steps in the style of the
Nsight Systems GUI (NVTX rows in their own colors, CUDA API and OS-runtime calls per thread,
kernels and copies per stream, GPU idle gaps hatched), from ``nsysprobe.analyses.timeline``.

A GPU row is drawn as what the GPU did in each pixel column: the column shaded by the share
of its time the work ran, each kind in its color (``busy_colors``), so a step of thousands of
tiny kernels reads as the mostly idle row it is, not as one solid bar.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from nsysprobe.analyses.timeline import KINDS, Busy, Lane, Timeline
from nsysprobe.render.sections import ms, pct
from nsysprobe.render.svg import (
    KIND_COLORS,
    KIND_LABELS,
    Figure,
    Group,
    Line,
    Rect,
    Shape,
    Text,
    W,
    argb,
    fit,
    ink_on,
    ms_label,
    ticks,
)

LABEL_W = 250
X0, X1 = LABEL_W + 8, W - 12
ROW_H, ROW_GAP, GROUP_H = 20, 3, 20
# A GPU row: one column a unit (a pixel at the page's full width) shaded by how busy it was,
# from its track (the color of idle time) to solid. Runs of one color are one rect, and each
# goes on under the next for RUN_ON units (never past its end), so that where two meet inside a
# pixel the pixel mixes the two: anti-aliased edges laid side by side would let the page
# behind show through.
TRACK = "#f3f4f7"
COLUMNS = X1 - X0
RUN_ON = 2


def timeline_figure(tl: Timeline) -> Figure:
    span = max(tl.end_ns - tl.start_ns, 1)

    def x(ns: int) -> float:
        return X0 + (ns - tl.start_ns) / span * (X1 - X0)

    top = 44
    y = top
    lane_y = []
    group = None
    group_rows: list[tuple[float, str]] = []
    for lane in tl.lanes:
        if lane.group != group:
            group = lane.group
            group_rows.append((y, lane.group))
            y += GROUP_H
        lane_y.append((y, lane))
        y += ROW_H + ROW_GAP
    bottom = y + 4
    kinds = _legend_kinds(tl)
    height = bottom + 8 + 18 * ((len(kinds) + 3) // 4) + 10
    out: list[Shape] = [
        Rect(0, 0, W, height, "#ffffff"),
        Rect(X0, top, X1 - X0, bottom - top, "#fbfbfc"),
    ]

    # time axis, from the first step's start (else the window's)
    origin = tl.steps[0].start_ns if tl.steps else tl.start_ns
    step = ticks(span)
    tick = origin - ((origin - tl.start_ns) // step) * step
    while tick < tl.end_ns:
        tx = x(tick)
        out.append(Line(tx, top - 4, tx, bottom, "#e6e8ec", width=1))
        out.append(Text(tx, top - 8, ms_label(tick - origin), 10, "#5d6675", "middle", cls="tick"))
        tick += step

    # idle gaps, behind the bars; each label in its device's last row, over its track
    label_y = {lane.group: ly + ROW_H - 5 for ly, lane in lane_y}
    idle_labels: list[Text] = []
    for gap in tl.idle:
        x0, x1 = x(gap.start_ns), x(gap.end_ns)
        title = f"GPU {gap.device_id} idle {ms(gap.end_ns - gap.start_ns)}"
        out.append(Rect(x0, top, x1 - x0, bottom - top, "url(#idle)", title, cls="idle"))
        label = fit(title, x1 - x0)
        if label:
            ty = label_y.get(f"GPU {gap.device_id}", bottom - 6)
            idle_labels.append(Text((x0 + x1) / 2, ty, label, 10, "#b23a3a", "middle", 600))

    # steps: boundaries and names
    edges = sorted({m.start_ns for m in tl.steps} | {tl.steps[-1].end_ns} if tl.steps else set())
    for edge in edges:
        out.append(Line(x(edge), top - 26, x(edge), bottom, "#7a8394", width=1, dash="3 3"))
    for mark in tl.steps:
        sx0, sx1 = x(mark.start_ns), x(mark.end_ns)
        name = fit(f"{mark.name} · {ms(mark.end_ns - mark.start_ns)}", sx1 - sx0, 11)
        if name:
            out.append(Text((sx0 + sx1) / 2, top - 24, name, 11, "#1d2330", "middle", 600))

    # group headings and lanes
    for gy, name in group_rows:
        out.append(Line(0, gy, W, gy, "#dde1e7"))
        out.append(Text(8, gy + 14, fit(name, LABEL_W + 200, 12) or name, 12, weight=700))
    for ly, lane in lane_y:
        out.append(Text(24, ly + 14, lane.title, 11, "#5d6675", cls="lane-label"))
        if lane.busy is not None:
            columns = _busy_columns(lane.busy, tl.start_ns, tl.end_ns, ly)
            axis = (("start-ns", tl.start_ns), ("end-ns", tl.end_ns), ("columns", COLUMNS))
            out.append(Group("busy", (("lane", f"{lane.group} {lane.title}"), *axis), columns))
            out.append(Group("lane", (("title", lane.title),), _gpu_bars(lane, x, ly)))
            continue
        bars: list[Rect | Text] = []
        for bar in lane.bars:
            bx0, bx1 = x(bar.start_ns), x(bar.end_ns)
            fill = argb(bar.color) if bar.kind == "nvtx" else KIND_COLORS.get(bar.kind, "#999")
            wide = bx1 - bx0 > 4
            bars.append(
                Rect(
                    bx0,
                    ly,
                    bx1 - bx0,
                    ROW_H,
                    fill,
                    f"{bar.name} · {ms(bar.end_ns - bar.start_ns)}",
                    "ev",
                    (("kind", bar.kind),),
                    "#ffffff" if wide else None,
                    0.7,
                )
            )
            label = fit(bar.name, bx1 - bx0)
            if label:
                bars.append(Text(bx0 + 3, ly + 14, label, 10, ink_on(fill)))
        out.append(Group("lane", (("title", lane.title),), tuple(bars)))
    out += idle_labels
    out.append(Line(X0, top, X0, bottom, "#aab1bd"))
    out.append(_legend(kinds, bottom + 10))
    return Figure("timeline-svg", "timeline", W, height, tuple(out), defs=True)


def _rgb(fill: str) -> np.ndarray:
    return np.array([int(fill[i : i + 2], 16) for i in (1, 3, 5)], dtype=float)


def _hex(rgb: list[int]) -> str:
    return "#{:02x}{:02x}{:02x}".format(*rgb)


def busy_colors(busy: Busy, starts, ends) -> tuple[np.ndarray, list[str]]:
    """(the share of each [start, end) that the GPU was busy (the union of the row's work),
    the color it is painted): the track mixed with each kind's color by the share that kind
    ran, so a column busy 8 % of its time is 8 % of the way from idle to solid. Kinds that ran
    at once (on several streams) share the union's time by their own shares."""
    starts, ends = np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)
    width = (ends - starts).astype(float)
    share = np.divide(busy.busy_ns(starts, ends), width, out=np.zeros(width.shape), where=width > 0)
    if not busy.kinds:
        return share, [TRACK] * len(share)
    ran = np.array([busy.busy_ns(starts, ends, k) for k in busy.kinds], dtype=float)
    total = ran.sum(axis=0)
    ran *= np.divide(share, total, out=np.zeros(share.shape), where=total > 0)
    colors = np.array([_rgb(KIND_COLORS[k]) for k in busy.kinds])
    rgb = np.rint(_rgb(TRACK) * (1 - share)[:, None] + ran.T @ colors).astype(int)
    return share, [_hex(c) for c in rgb.tolist()]


def _busy_columns(busy: Busy, w0: int, w1: int, y: float) -> tuple[Rect, ...]:
    """A GPU row as COLUMNS columns over [w0, w1), each shaded by how busy it was."""
    edges = w0 + np.arange(COLUMNS + 1, dtype=np.int64) * (w1 - w0) // COLUMNS
    _, colors = busy_colors(busy, edges[:-1], edges[1:])
    firsts = [0] + [i for i in range(1, COLUMNS) if colors[i] != colors[i - 1]]
    ends = firsts[1:] + [COLUMNS]
    out = []
    for k, (a, b) in enumerate(zip(firsts, ends)):
        under_next = min(b + RUN_ON, ends[k + 1]) if b < COLUMNS else b
        out.append(Rect(X0 + a, y, under_next - a, ROW_H, colors[a]))
    return tuple(out)


def _gpu_bars(lane: Lane, x: Callable[[int], float], y: float) -> tuple[Rect | Text, ...]:
    """A GPU row's events, unpainted (the columns below show them): each a tooltip with its
    name and length, and with how busy the GPU was under it when it merges several, and a
    label where one fits."""
    if not lane.bars:
        return ()
    starts = np.array([b.start_ns for b in lane.bars], dtype=np.int64)
    ends = np.array([b.end_ns for b in lane.bars], dtype=np.int64)
    shares, fills = busy_colors(lane.busy, starts, ends)
    out: list[Rect | Text] = []
    for bar, share, fill in zip(lane.bars, shares.tolist(), fills):
        bx0, bx1 = x(bar.start_ns), x(bar.end_ns)
        busy = f" · GPU busy {pct(share)}" if bar.count > 1 else ""
        title = f"{bar.name} · {ms(bar.end_ns - bar.start_ns)}{busy}"
        out.append(
            Rect(bx0, y, bx1 - bx0, ROW_H, "transparent", title, "ev", (("kind", bar.kind),))
        )
        label = fit(bar.name + (f" · {pct(share)} busy" if bar.count > 1 else ""), bx1 - bx0)
        if label:
            out.append(Text(bx0 + 3, y + 14, label, 10, ink_on(fill)))
    return tuple(out)


def _legend_kinds(tl: Timeline) -> list[str]:
    present = set()
    for lane in tl.lanes:
        present |= set(lane.busy.kinds) if lane.busy else {b.kind for b in lane.bars}
    kinds = [k for k in KINDS if k in present]
    if tl.idle:
        kinds.append("idle")
    if any(lane.busy for lane in tl.lanes):
        kinds.append("busy")
    return kinds


def _legend(kinds: list[str], y: float) -> Group:
    out: list[Rect | Text] = []
    for i, kind in enumerate(kinds):
        lx = X0 + (i % 4) * 230
        ly = y + (i // 4) * 18
        if kind == "busy":  # the shades of a GPU row's columns, from idle to busy throughout
            for j, share in enumerate((0, 0.25, 0.5, 0.75, 1)):
                fill = _mix(TRACK, KIND_COLORS["kernel"], share)
                out.append(Rect(lx + 9 * j, ly, 9, 12, fill, stroke="#aab1bd", stroke_width=0.5))
            out.append(Text(lx + 50, ly + 10, "GPU busy 0-100% of a column", 11, "#5d6675"))
            continue
        fill = "url(#idle)" if kind == "idle" else KIND_COLORS[kind]
        label = "GPU idle gap" if kind == "idle" else KIND_LABELS[kind]
        out.append(Rect(lx, ly, 14, 12, fill, stroke="#aab1bd", stroke_width=0.5))
        out.append(Text(lx + 20, ly + 10, label, 11, "#5d6675"))
    return Group("legend", (), tuple(out))


def _mix(a: str, b: str, share: float) -> str:
    return _hex(np.rint(_rgb(a) * (1 - share) + _rgb(b) * share).astype(int).tolist())
