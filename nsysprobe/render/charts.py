"""The bar charts of the HTML page, one bar or stack of bars per step or device: where each
step ran (its CPU range by child range, its GPU window by busy and idle share:
``steps_figure``), the step account's buckets per step (``account_figure``), and copy/compute
overlap per device (``overlap_figure``).
"""

from __future__ import annotations

from nsysprobe.analyses.timeline import Timeline
from nsysprobe.render.sections import ms, pct
from nsysprobe.render.svg import (
    KIND_COLORS,
    Figure,
    Group,
    Line,
    Rect,
    Shape,
    Text,
    W,
    argb,
    fit,
    ms_label,
    ticks,
)
from nsysprobe.report.analyze import Report
from nsysprobe.trace.values import range_pattern

STEPS_CHARTED = 40
CHILD_PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f")
GPU_BUSY, GPU_IDLE, OTHER_CPU = "#2e9d4a", "#e05d5d", "#c9ced6"

# -- where the time went, per step -----------------------------------------------------------


def _child_colors(report: Report, tl: Timeline | None) -> dict[str, str]:
    """Each child range's NVTX color as the timeline shows it, else a palette color."""
    names = [c.name for c in report.steps.children] if report.steps else []
    nvtx_colors: dict[str, str] = {}
    if tl is not None:
        for lane in tl.lanes:
            for b in lane.bars:
                if b.kind == "nvtx" and b.color is not None and b.count == 1:
                    nvtx_colors.setdefault(range_pattern(b.name), argb(b.color))
    out = {}
    for i, name in enumerate(names):
        out[name] = nvtx_colors.get(name, CHILD_PALETTE[i % len(CHILD_PALETTE)])
    return out


def _bar_axis(longest: int, x0: float, scale: float, top: float, bottom: float) -> list[Shape]:
    """Vertical grid lines and their ms labels for a chart of bars from ``x0``."""
    out: list[Shape] = []
    step = ticks(longest, 6)
    tick = 0
    while tick <= longest:
        tx = x0 + tick * scale
        out.append(Line(tx, top - 6, tx, bottom, "#eceef2"))
        out.append(Text(tx, top - 10, ms_label(tick), 10, "#5d6675", "middle", cls="tick"))
        tick += step
    return out


def _bar_legend(items: list[tuple[str, str]], x0: float, y: float) -> list[Shape]:
    """(color, label) swatches, four to a row."""
    out: list[Shape] = []
    for i, (fill, label) in enumerate(items):
        lx = x0 + (i % 4) * 250
        yy = y + (i // 4) * 18
        out.append(Rect(lx, yy, 14, 12, fill))
        out.append(Text(lx + 20, yy + 10, fit(label, 228, 11) or "", 11, "#5d6675"))
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
            Text(label_w - 8, y + 12, fit(r.name, label_w, 11) or "", 11, anchor="end")
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
    "other_process": "#7a1e5b",
}
COPY_COLORS = ("#91d2a8", "#aad35c", "#9eb9ff")


def _bucket_colors(names: list[str]) -> dict[str, str]:
    out, others = {}, iter(COPY_COLORS * (len(names) // len(COPY_COLORS) + 1))
    for n in names:
        out[n] = BUCKET_COLORS.get(n) or next(others)
    return out


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
            Text(label_w - 8, y + 12, fit(r.name, label_w, 11) or "", 11, anchor="end")
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
