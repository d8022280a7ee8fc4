"""The HTML report: one self-contained file, readable offline, deterministic.

The verdict and the ranked recommendations come first, then the figures, drawn as inline SVG
(no script, no network: a Content-Security-Policy forbids both):

- a timeline of a few representative steps in the style of the Nsight Systems GUI (NVTX rows
  in their own colors, CUDA API and OS-runtime calls per thread, kernels and copies per
  stream, GPU idle gaps hatched), from ``nsysprobe.analyses.timeline``. A GPU row is drawn as
  what the GPU did in each pixel column: the column shaded by the share of its time the
  work ran, each kind in its color (``busy_colors``), so a step of thousands of tiny kernels
  reads as the mostly idle row it is, not as one solid bar;
- where each step's time went: the step thread's CPU time by child range, and GPU busy/idle;
- copy/compute overlap per device;

then every table the text report has (``render.sections``), so the formats cannot disagree.

The page is written by the Jinja2 templates in ``render/templates``: ``base.html`` the
skeleton every nsysprobe page extends (the many-ranks page too), ``cards.html`` the tables,
``svg.html`` the figures, ``report.html`` this page. This module only lays the figures out
as shapes (coordinates, colors, the words that fit a bar); the templates escape every string
they write, so trace text (NVTX, kernel, thread and function names) reaches the page escaped
by construction, its control characters dropped.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import ClassVar

import jinja2
import numpy as np
from markupsafe import Markup

from nsysprobe.analyses.events import range_pattern
from nsysprobe.analyses.timeline import KINDS, Busy, Lane, Timeline
from nsysprobe.render.sections import Section, headline, ms, pct, sections
from nsysprobe.report.analyze import Report

STEPS_CHARTED = 40
ACCOUNT_TITLE = "Where the step time went (step account)"
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_NUMERIC = re.compile(r"^[-+]?[\d,.]+\s*(%|ms|s|B|kB|MB|GB)?$")

# Every kind at least 20 CIELAB units (delta E 1976) from every other and from white
# (tests/render/test_palette.py): told apart side by side, and a GPU row mixes them.
KIND_COLORS = {
    "nvtx": "#a4b7d5",
    "kernel": "#3f6fd1",
    "memcpy HtoD": "#2e9d4a",
    "memcpy HtoD pageable": "#92c22c",
    "memcpy DtoH": "#c52172",
    "memcpy DtoD": "#8946b1",
    "memcpy other": "#926238",
    "memset": "#0093a8",
    "cuda_sync": "#da394c",
    "cuda_copy": "#eb8c1e",
    "cuda_launch": "#7bb69b",
    "cuda_other": "#ccb19a",
    "os_wait": "#ffdf4a",
    "os_call": "#956590",
    "mixed": "#6d7271",
}
KIND_LABELS = {
    "nvtx": "NVTX range (its own color)",
    "kernel": "kernel",
    "memcpy HtoD": "memcpy HtoD (pinned)",
    "memcpy HtoD pageable": "HtoD from pageable memory",
    "memcpy DtoH": "memcpy DtoH",
    "memcpy DtoD": "memcpy DtoD",
    "memcpy other": "other copy",
    "memset": "memset",
    "cuda_sync": "CUDA synchronize",
    "cuda_copy": "CUDA memcpy call",
    "cuda_launch": "CUDA launch",
    "cuda_other": "other CUDA call",
    "os_wait": "OS wait (poll, futex, read...)",
    "os_call": "other OS call",
    "mixed": "several kinds merged",
}
CHILD_PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f")
GPU_BUSY, GPU_IDLE, OTHER_CPU = "#2e9d4a", "#e05d5d", "#c9ced6"


# -- the templates -----------------------------------------------------------------------


def _num(x: float) -> str:
    return f"{x:.1f}".rstrip("0").rstrip(".")


def _ms_label(ns: float) -> str:
    v = ns / 1e6
    return f"{v:,.0f} ms" if abs(v) >= 10 or v == 0 else f"{v:,.2g} ms"


def _numeric_columns(section: Section) -> list[bool]:
    """Per column: every cell a number (or "-"), so the column is right-aligned."""
    return [
        all(_NUMERIC.match(r[i].strip()) or r[i].strip() == "-" for r in section.rows)
        for i in range(len(section.header))
    ]


def _clean(value: object) -> object:
    """What a template writes, before it is escaped: text without control characters."""
    if isinstance(value, str) and not isinstance(value, Markup):
        return _CONTROL.sub("", value)
    return value


def _version() -> str:
    try:
        return version("nsysprobe")
    except PackageNotFoundError:
        return "(not installed)"


ENVIRONMENT = jinja2.Environment(
    loader=jinja2.PackageLoader("nsysprobe.render", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
    finalize=_clean,
)
ENVIRONMENT.filters.update(
    num=_num, ms=ms, ms_label=_ms_label, pct=pct, numeric_columns=_numeric_columns
)
ENVIRONMENT.globals["version"] = _version


def page(template: str, **context: object) -> str:
    """The page ``template`` (a file of ``render/templates``) writes from ``context``."""
    return ENVIRONMENT.get_template(template).render(**context)


# -- the shapes a figure is drawn with ----------------------------------------------------


@dataclass(frozen=True)
class Rect:
    shape: ClassVar[str] = "rect"
    x: float
    y: float
    w: float  # drawn at least 0.6 wide
    h: float
    fill: str
    title: str | None = None  # the tooltip
    cls: str | None = None
    data: tuple[tuple[str, object], ...] = ()  # data-NAME attributes
    stroke: str | None = None
    stroke_width: float = 0


@dataclass(frozen=True)
class Text:
    shape: ClassVar[str] = "text"
    x: float
    y: float
    text: str
    size: int = 11
    fill: str = "#1d2330"
    anchor: str = "start"
    weight: int | None = None
    cls: str | None = None


@dataclass(frozen=True)
class Line:
    shape: ClassVar[str] = "line"
    x1: float
    y1: float
    x2: float
    y2: float
    stroke: str
    width: float | None = None
    dash: str | None = None


@dataclass(frozen=True)
class Group:
    shape: ClassVar[str] = "group"
    cls: str
    data: tuple[tuple[str, object], ...]
    items: tuple[Rect | Text | Line, ...]


Shape = Rect | Text | Line | Group


@dataclass(frozen=True)
class Figure:
    id: str
    label: str  # aria-label
    width: float
    height: float
    items: tuple[Shape, ...]
    defs: bool = False  # uses the striped patterns (pageable, idle, exposed)


@dataclass(frozen=True)
class Card:
    """A figure's card: the figure, or None and why not; its table; how many steps it draws."""

    figure: Figure | None
    section: Section | None = None
    drawn: int = 0
    count: int = 0
    why: str = ""
    fix: str = ""


def render_html(report: Report, timeline: Timeline | None = None) -> str:
    all_sections = sections(report)
    by_title = {s.title: s for s in all_sections}
    shown = {all_sections[0].title, ACCOUNT_TITLE, "Steps", "Copy/compute overlap"}
    return page(
        "report.html",
        report=report,
        headline=headline(report),
        recommendations=all_sections[0],
        account=_account_card(report, by_title.get(ACCOUNT_TITLE)),
        tl=timeline,
        timeline=Card(timeline_figure(timeline) if timeline and timeline.lanes else None),
        steps=_steps_card(report, by_title.get("Steps"), timeline),
        overlap=_overlap_card(report, by_title.get("Copy/compute overlap")),
        evidence=[s for s in all_sections if s.title not in shown],
    )


# -- layout helpers -----------------------------------------------------------------------


def _fit(text: str, width_px: float, size: int = 10) -> str | None:
    """``text`` cut to fit ``width_px`` (about 0.58 em a character), or None if nothing fits."""
    chars = int((width_px - 4) / (size * 0.58))
    if chars < 3:
        return None
    return text if len(text) <= chars else text[: chars - 1] + "…"


def _argb(color: int | None) -> str:
    if color is None:
        return KIND_COLORS["nvtx"]
    return f"#{color & 0xFFFFFF:06x}"


def _ink_on(fill: str) -> str:
    if not fill.startswith("#"):  # striped patterns: dark text reads on both stripes
        return "#111111"
    r, g, b = (int(fill[i : i + 2], 16) for i in (1, 3, 5))
    return "#111111" if 0.299 * r + 0.587 * g + 0.114 * b > 150 else "#ffffff"


def _ticks(span_ns: int, target: int = 8) -> float:
    """A round tick step in ns giving about ``target`` ticks over ``span_ns``."""
    raw = max(span_ns / target, 1)
    mag = 10 ** (len(str(int(raw))) - 1)
    for m in (1, 2, 5, 10):
        if m * mag >= raw:
            return m * mag
    return 10 * mag


# -- timeline -----------------------------------------------------------------------------

W = 1200
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
    step = _ticks(span)
    tick = origin - ((origin - tl.start_ns) // step) * step
    while tick < tl.end_ns:
        tx = x(tick)
        out.append(Line(tx, top - 4, tx, bottom, "#e6e8ec", width=1))
        out.append(Text(tx, top - 8, _ms_label(tick - origin), 10, "#5d6675", "middle", cls="tick"))
        tick += step

    # idle gaps, behind the bars; each label in its device's last row, over its track
    label_y = {lane.group: ly + ROW_H - 5 for ly, lane in lane_y}
    idle_labels: list[Text] = []
    for gap in tl.idle:
        x0, x1 = x(gap.start_ns), x(gap.end_ns)
        title = f"GPU {gap.device_id} idle {ms(gap.end_ns - gap.start_ns)}"
        out.append(Rect(x0, top, x1 - x0, bottom - top, "url(#idle)", title, cls="idle"))
        label = _fit(title, x1 - x0)
        if label:
            ty = label_y.get(f"GPU {gap.device_id}", bottom - 6)
            idle_labels.append(Text((x0 + x1) / 2, ty, label, 10, "#b23a3a", "middle", 600))

    # steps: boundaries and names
    edges = sorted({m.start_ns for m in tl.steps} | {tl.steps[-1].end_ns} if tl.steps else set())
    for edge in edges:
        out.append(Line(x(edge), top - 26, x(edge), bottom, "#7a8394", width=1, dash="3 3"))
    for mark in tl.steps:
        sx0, sx1 = x(mark.start_ns), x(mark.end_ns)
        name = _fit(f"{mark.name} · {ms(mark.end_ns - mark.start_ns)}", sx1 - sx0, 11)
        if name:
            out.append(Text((sx0 + sx1) / 2, top - 24, name, 11, "#1d2330", "middle", 600))

    # group headings and lanes
    for gy, name in group_rows:
        out.append(Line(0, gy, W, gy, "#dde1e7"))
        out.append(Text(8, gy + 14, _fit(name, LABEL_W + 200, 12) or name, 12, weight=700))
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
            fill = _argb(bar.color) if bar.kind == "nvtx" else KIND_COLORS.get(bar.kind, "#999")
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
            label = _fit(bar.name, bx1 - bx0)
            if label:
                bars.append(Text(bx0 + 3, ly + 14, label, 10, _ink_on(fill)))
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
        label = _fit(bar.name + (f" · {pct(share)} busy" if bar.count > 1 else ""), bx1 - bx0)
        if label:
            out.append(Text(bx0 + 3, y + 14, label, 10, _ink_on(fill)))
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


# -- where the time went, per step -----------------------------------------------------------


def _child_colors(report: Report, tl: Timeline | None) -> dict[str, str]:
    """Each child range's NVTX color as the timeline shows it, else a palette color."""
    names = [c.name for c in report.steps.children] if report.steps else []
    nvtx_colors: dict[str, str] = {}
    if tl is not None:
        for lane in tl.lanes:
            for b in lane.bars:
                if b.kind == "nvtx" and b.color is not None and b.count == 1:
                    nvtx_colors.setdefault(range_pattern(b.name), _argb(b.color))
    out = {}
    for i, name in enumerate(names):
        out[name] = nvtx_colors.get(name, CHILD_PALETTE[i % len(CHILD_PALETTE)])
    return out


def _steps_card(report: Report, section: Section | None, tl: Timeline | None) -> Card:
    st = report.steps
    if st is None or section is None:
        why = next((s.reason for s in report.skipped if s.analysis == "steps"), "no steps")
        fix = next((s.fix for s in report.skipped if s.analysis == "steps"), "")
        return Card(None, why=why, fix=fix)
    drawn = min(len(st.rows), STEPS_CHARTED)
    return Card(steps_figure(report, tl), section, drawn, st.count)


def _bar_axis(longest: int, x0: float, scale: float, top: float, bottom: float) -> list[Shape]:
    """Vertical grid lines and their ms labels for a chart of bars from ``x0``."""
    out: list[Shape] = []
    step = _ticks(longest, 6)
    tick = 0
    while tick <= longest:
        tx = x0 + tick * scale
        out.append(Line(tx, top - 6, tx, bottom, "#eceef2"))
        out.append(Text(tx, top - 10, _ms_label(tick), 10, "#5d6675", "middle", cls="tick"))
        tick += step
    return out


def _bar_legend(items: list[tuple[str, str]], x0: float, y: float) -> list[Shape]:
    """(color, label) swatches, four to a row."""
    out: list[Shape] = []
    for i, (fill, label) in enumerate(items):
        lx = x0 + (i % 4) * 250
        yy = y + (i // 4) * 18
        out.append(Rect(lx, yy, 14, 12, fill))
        out.append(Text(lx + 20, yy + 10, _fit(label, 228, 11) or "", 11, "#5d6675"))
    return out


def steps_figure(report: Report, tl: Timeline | None = None) -> Figure:
    """Each step where it ran, on one time axis: its CPU range (the step thread's time in each
    child NVTX range, then the rest of the range) and, below, its window on the GPU (from the
    last step's completion to its own) split into the GPU's busy and idle shares. In a loop
    where the CPU runs ahead, the CPU bars run ahead of the windows."""
    st = report.steps
    assert st is not None
    rows = st.rows[:STEPS_CHARTED]
    colors = _child_colors(report, tl)
    names = list(colors)
    label_w, right_w = 150, 90
    x0, x1 = label_w, W - right_w
    origin = min((min(r.cpu_start_ns, r.start_ns) for r in rows), default=0)
    last = max((r.start_ns + r.wall_ns for r in rows), default=origin + 1)
    span = max(last - origin, 1)
    scale = (x1 - x0) / span
    cpu_h, gpu_h, pitch, top = 9, 9, 28, 30
    legend_items = [(colors[n], f"{n} (CPU)") for n in names]
    legend_items += [(OTHER_CPU, "rest of the CPU range"), (GPU_BUSY, "GPU busy (share)")]
    legend_items += [(GPU_IDLE, "GPU idle (share)")]
    legend_rows = (len(legend_items) + 3) // 4
    height = top + pitch * len(rows) + 16 + 18 * legend_rows + 8
    out: list[Shape] = [Rect(0, 0, W, height, "#ffffff")]
    out += _bar_axis(span, x0, scale, top, top + pitch * len(rows) - 6)
    for i, r in enumerate(rows):
        y = top + i * pitch
        bars: list[Rect | Text] = [
            Text(label_w - 8, y + 12, _fit(r.name, label_w, 11) or "", 11, anchor="end")
        ]
        cx = x0 + (r.cpu_start_ns - origin) * scale
        child = {c.name: c.cpu_ns for c in r.children}
        used = 0
        for name in names:
            ns = child.get(name, 0)
            if ns <= 0:
                continue
            w = ns * scale
            bars.append(
                Rect(cx, y, w, cpu_h, colors[name], f"{r.name}: {name} {ms(ns)} (CPU)", "seg")
            )
            cx += w
            used += ns
        rest = max(r.cpu_ns - used, 0)
        if rest:
            title = f"{r.name}: other CPU {ms(rest)}"
            bars.append(Rect(cx, y, rest * scale, cpu_h, OTHER_CPU, title, "seg"))
        wx = x0 + (r.start_ns - origin) * scale
        busy_w = r.gpu_busy_ns * scale
        bars.append(
            Rect(
                wx,
                y + cpu_h + 1,
                busy_w,
                gpu_h,
                GPU_BUSY,
                f"{r.name}: GPU busy {ms(r.gpu_busy_ns)}",
                "gpu-busy",
            )
        )
        bars.append(
            Rect(
                wx + busy_w,
                y + cpu_h + 1,
                r.gpu_idle_ns * scale,
                gpu_h,
                GPU_IDLE,
                f"{r.name}: GPU idle {ms(r.gpu_idle_ns)}",
                "gpu-idle",
            )
        )
        end_x = x0 + (r.start_ns + r.wall_ns - origin) * scale
        bars.append(Text(end_x + 6, y + 15, ms(r.wall_ns), 11, "#1d2330"))
        out.append(Group("step", (("step", r.index),), tuple(bars)))
    out += _bar_legend(legend_items, x0, top + pitch * len(rows) + 10)
    return Figure("steps-svg", "steps", W, height, tuple(out))


# -- the step account -------------------------------------------------------------------------

# Busy kinds in greens and blues, idle causes mostly in warm colors; the common copy kinds
# named, other copies from COPY_COLORS in turn. Every color at least 20 CIELAB units from every
# other and from white (tests/render/test_palette.py), so that no two buckets of an account
# look alike while it has at most len(COPY_COLORS) other copy kinds.
BUCKET_COLORS = {
    "compute": "#108436",
    "communication": "#4447ba",
    "memset": "#5d918e",
    "memcpy HtoD Pinned": "#0172be",
    "memcpy HtoD Pageable": "#15cbca",
    "memcpy DtoH Pinned": "#9de1ff",
    "memcpy DtoH Pageable": "#132f59",
    "memcpy DtoD": "#009dca",
    "memcpy PtoP": "#9278cf",
    "loading": "#f25867",
    "loader_wait": "#f57324",
    "sync": "#f8bd5b",
    "readback": "#853a00",
    "blocking_copy": "#9c7407",
    "allocator": "#86443e",
    "launch": "#ea74d7",
    "cpu": "#e79392",
    "os_call": "#1b1261",
    "os_wait": "#d8a3d2",
    "module_loading": "#7f6b75",
    "cuda_api": "#cbca00",
    "queued": "#c2b3a3",
    "profiler_overhead": "#263a36",
}
COPY_COLORS = ("#91d2a8", "#aad35c", "#9eb9ff")


def _bucket_colors(names: list[str]) -> dict[str, str]:
    out, others = {}, iter(COPY_COLORS * (len(names) // len(COPY_COLORS) + 1))
    for n in names:
        out[n] = BUCKET_COLORS.get(n) or next(others)
    return out


def _account_card(report: Report, section: Section | None) -> Card:
    a = report.account.main if report.account else None
    if a is None or section is None:
        return Card(None)
    return Card(account_figure(report), section, min(len(a.steps), STEPS_CHARTED), a.step_count)


def account_figure(report: Report) -> Figure:
    a = report.account.main
    rows = a.steps[:STEPS_CHARTED]
    names = [b.name for b in a.buckets]
    colors = _bucket_colors(names)
    label_w, right_w = 150, 90
    x0, x1 = label_w, W - right_w
    longest = max((r.wall_ns for r in rows), default=1) or 1
    scale = (x1 - x0) / longest
    bar_h, pitch, top = 16, 24, 30
    legend_rows = (len(names) + 3) // 4
    height = top + pitch * len(rows) + 16 + 18 * legend_rows + 8
    out: list[Shape] = [Rect(0, 0, W, height, "#ffffff")]
    out += _bar_axis(longest, x0, scale, top, top + pitch * len(rows) - 6)
    for i, r in enumerate(rows):
        y = top + i * pitch
        bars: list[Rect | Text] = [
            Text(label_w - 8, y + 12, _fit(r.name, label_w, 11) or "", 11, anchor="end")
        ]
        cx = x0
        by = dict(r.buckets)
        for name in names:
            ns = by.get(name, 0)
            if ns <= 0:
                continue
            w = ns * scale
            title = f"{r.name}: {name} {ms(ns)}"
            bars.append(Rect(cx, y, w, bar_h, colors[name], title, "bucket", (("bucket", name),)))
            cx += w
        bars.append(Text(x0 + r.wall_ns * scale + 6, y + 12, ms(r.wall_ns), 11, "#1d2330"))
        out.append(Group("account-step", (("step", r.index),), tuple(bars)))
    out += _bar_legend([(colors[n], n) for n in names], x0, top + pitch * len(rows) + 10)
    return Figure("account-svg", "step account", W, height, tuple(out))


# -- copy/compute overlap ------------------------------------------------------------------


def _overlap_card(report: Report, section: Section | None) -> Card:
    o = report.overlap
    if o is None or not o.htod_ns:
        why = "no GPU activity in the trace" if o is None else "no host-to-device copies"
        return Card(None, why=why)
    return Card(overlap_figure(report), section)


def overlap_figure(report: Report) -> Figure:
    o = report.overlap
    assert o is not None
    kernels = {d.device_id: d.kernel_busy_ns for d in report.gaps.devices} if report.gaps else {}
    label_w, right_w = 150, 330
    x0, x1 = label_w, W - right_w
    longest = max([d.htod_ns for d in o.devices] + list(kernels.values()) + [1])
    scale = (x1 - x0) / longest
    pitch, top = 58, 12
    height = top + pitch * len(o.devices) + 30
    out: list[Shape] = [Rect(0, 0, W, height, "#ffffff")]
    for i, d in enumerate(o.devices):
        y = top + i * pitch
        k = kernels.get(d.device_id, 0)
        y2 = y + 22
        ow = d.overlapped_ns * scale
        exposed = (
            f"{ms(d.htod_ns)}: {pct(d.overlap_ratio)} under kernels, {ms(d.exposed_ns)} exposed"
        )
        shapes = (
            Text(8, y + 12, f"GPU {d.device_id}", 12, weight=700),
            Text(label_w - 8, y + 12, "kernels", 11, "#5d6675", "end"),
            Rect(x0, y + 2, k * scale, 14, KIND_COLORS["kernel"], f"kernels {ms(k)}", "kernels"),
            Text(x0 + k * scale + 6, y + 13, ms(k), 11),
            Text(label_w - 8, y2 + 12, "HtoD copies", 11, "#5d6675", "end"),
            Rect(
                x0,
                y2 + 2,
                ow,
                14,
                KIND_COLORS["memcpy HtoD"],
                f"overlapped with kernels {ms(d.overlapped_ns)}",
                "overlapped",
            ),
            Rect(
                x0 + ow,
                y2 + 2,
                d.exposed_ns * scale,
                14,
                "url(#exposed)",
                f"exposed {ms(d.exposed_ns)}",
                "exposed",
            ),
            Text(x0 + d.htod_ns * scale + 6, y2 + 13, exposed, 11),
        )
        out.append(Group("device", (("device", d.device_id),), shapes))
    ly = top + pitch * len(o.devices)
    legend = [
        (KIND_COLORS["kernel"], "kernels"),
        (KIND_COLORS["memcpy HtoD"], "copy overlapped with kernels"),
        ("url(#exposed)", "copy exposed (no kernel running)"),
    ]
    for i, (fill, label) in enumerate(legend):
        lx = x0 + i * 250
        out.append(Rect(lx, ly, 14, 12, fill))
        out.append(Text(lx + 20, ly + 10, label, 11, "#5d6675"))
    return Figure("overlap-svg", "overlap", W, height, tuple(out), defs=True)
