"""The HTML report: one self-contained file, readable offline, deterministic.

The verdict and the ranked recommendations come first, then the figures, drawn as inline SVG
(no script, no network: a Content-Security-Policy forbids both):

- a timeline of a few representative steps in the style of the Nsight Systems GUI (NVTX rows
  in their own colors, CUDA API and OS-runtime calls per thread, kernels and copies per
  stream, GPU idle gaps shaded), from ``nsysprobe.analyses.timeline``;
- where each step's time went: the step thread's CPU time by child range, and GPU busy/idle;
- copy/compute overlap per device;

then every table the text report has (``render.sections``), so the formats cannot disagree.
Every trace string (NVTX, kernel, thread and function names) is HTML-escaped.
"""

from __future__ import annotations

import html
import re
from importlib.metadata import PackageNotFoundError, version

from nsysprobe.analyses.events import range_pattern
from nsysprobe.analyses.timeline import KINDS, Timeline
from nsysprobe.render.sections import Section, headline, ms, pct, sections
from nsysprobe.report.analyze import Report

STEPS_CHARTED = 40
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_NUMERIC = re.compile(r"^[-+]?[\d,.]+\s*(%|ms|s|B|kB|MB|GB)?$")

KIND_COLORS = {
    "nvtx": "#9aa5b1",
    "kernel": "#3f6fd1",
    "memcpy HtoD": "#2e9d4a",
    "memcpy HtoD pageable": "url(#pageable)",
    "memcpy DtoH": "#c2417a",
    "memcpy DtoD": "#8a5cc2",
    "memcpy other": "#8c6d4b",
    "memset": "#1aa3b5",
    "cuda_sync": "#d64545",
    "cuda_copy": "#e8893a",
    "cuda_launch": "#6fb5ae",
    "cuda_other": "#b9b2aa",
    "os_wait": "#e6c229",
    "os_call": "#a77bb0",
    "mixed": "#8f8f8f",
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

CSS = """
:root { --ink: #1d2330; --muted: #5d6675; --line: #dde1e7; --bg: #f6f7f9; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--ink);
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }
main { max-width: 1280px; margin: 0 auto; padding: 24px 28px 48px; }
h1 { font-size: 22px; margin: 0 0 2px; }
h2 { font-size: 17px; margin: 28px 0 8px; }
section.card > h2 { margin-top: 0; }
p.meta, p.note, .caption { color: var(--muted); margin: 4px 0; }
section.card { background: #fff; border: 1px solid var(--line); border-radius: 8px;
  padding: 14px 18px; margin-top: 16px; }
.verdict { border-left: 6px solid #d64545 !important; }
.verdict.fed { border-left-color: #2e9d4a !important; }
.verdict .id { font: 600 13px ui-monospace, "DejaVu Sans Mono", monospace; color: var(--muted); }
.verdict h2 { margin: 2px 0 8px; font-size: 20px; }
.verdict dl { display: grid; grid-template-columns: 48px 1fr; gap: 4px 10px; margin: 0; }
.verdict dt { font-weight: 600; color: var(--muted); }
.verdict dd { margin: 0; }
.gain { font-weight: 600; color: #b23a3a; white-space: nowrap; }
table { border-collapse: collapse; width: 100%; font-size: 13px; margin-top: 6px; }
th.num { text-align: right; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid var(--line);
  vertical-align: top; }
th { background: #eef0f4; font-weight: 600; white-space: nowrap; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr:nth-child(even) td { background: #fafbfc; }
.bar { display: inline-block; height: 8px; background: #d64545; border-radius: 2px;
  margin-right: 6px; vertical-align: middle; }
svg { display: block; width: 100%; height: auto; margin-top: 8px; }
svg text { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }
details > summary { cursor: pointer; color: var(--muted); margin-top: 10px; }
footer { color: var(--muted); margin-top: 32px; font-size: 12px; }
"""


def esc(text: object) -> str:
    """Trace text made safe as HTML text or attribute value."""
    return html.escape(_CONTROL.sub("", str(text)), quote=True)


def render_html(report: Report, timeline: Timeline | None = None) -> str:
    t = report.trace
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta http-equiv="Content-Security-Policy" '
        "content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>nsysprobe: {esc(t.path)}</title>",
        f"<style>{CSS}</style></head><body><main>",
        "<header><h1>nsysprobe report</h1>",
        f'<p class="meta">{esc(headline(report))}</p></header>',
        _verdict(report),
    ]
    all_sections = sections(report)
    by_title = {s.title: s for s in all_sections}
    parts.append(_table_card(all_sections[0], "recommendations"))
    parts.append(_account_card(report, by_title.get(ACCOUNT_TITLE)))
    parts.append(_timeline_card(timeline, report))
    parts.append(_steps_card(report, by_title.get("Steps"), timeline))
    parts.append(_overlap_card(report, by_title.get("Copy/compute overlap")))
    shown = {all_sections[0].title, ACCOUNT_TITLE, "Steps", "Copy/compute overlap"}
    rest = [s for s in all_sections if s.title not in shown]
    if rest:
        parts.append('<h2 id="evidence">Evidence</h2>')
        parts += [_table_card(s) for s in rest]
    parts.append(
        f"<footer>nsysprobe {esc(_version())}, report schema {report.schema_version}. "
        "Times are from the trace's own clock; busy times are unions over streams.</footer>"
    )
    parts.append("</main></body></html>")
    return "\n".join(parts) + "\n"


def _version() -> str:
    try:
        return version("nsysprobe")
    except PackageNotFoundError:
        return "(not installed)"


# -- verdict and tables -------------------------------------------------------------------


def _verdict(report: Report) -> str:
    v = report.verdict
    if v is None:
        return '<section class="card verdict" id="verdict"><h2>No verdict</h2></section>'
    fed = " fed" if v.id == "gpu_bound" else ""
    gain = (
        f' <span class="gain">· saves ~{esc(pct(v.expected_gain_ratio))}</span>'
        if v.expected_gain_ratio
        else ""
    )
    return (
        f'<section class="card verdict{fed}" id="verdict">'
        f'<div class="id">VERDICT · {esc(v.id)}</div>'
        f"<h2>{esc(v.title)}{gain}</h2>"
        f"<dl><dt>why</dt><dd>{esc(v.reason)}</dd>"
        f"<dt>do</dt><dd>{esc(v.advice)}</dd></dl></section>"
    )


def _table(section: Section) -> str:
    numeric = [
        all(_NUMERIC.match(r[i].strip()) or r[i].strip() == "-" for r in section.rows)
        for i in range(len(section.header))
    ]
    cls = ['class="num"' if n else "" for n in numeric]
    head = "".join(f"<th {c}>{esc(h)}</th>" for c, h in zip(cls, section.header))
    rows = []
    for row in section.rows:
        cells = "".join(f"<td {c}>{esc(v)}</td>" for c, v in zip(cls, row))
        rows.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _notes(section: Section) -> str:
    return "".join(f'<p class="note">{esc(n)}</p>' for n in section.notes)


def _table_card(section: Section, anchor: str | None = None) -> str:
    ident = f' id="{esc(anchor)}"' if anchor else ""
    table = _table(section) if section.rows else ""
    return (
        f'<section class="card"{ident}><h2>{esc(section.title)}</h2>'
        f"{_notes(section)}{table}</section>"
    )


# -- SVG helpers --------------------------------------------------------------------------


def _num(x: float) -> str:
    return f"{x:.1f}".rstrip("0").rstrip(".")


def _rect(x, y, w, h, fill, title=None, cls=None, extra="") -> str:
    c = f' class="{cls}"' if cls else ""
    tip = f"<title>{esc(title)}</title>" if title else ""
    body = f'<rect{c} x="{_num(x)}" y="{_num(y)}" width="{_num(max(w, 0.6))}" height="{_num(h)}"'
    body += f' fill="{fill}"{extra}'
    return f"{body}>{tip}</rect>" if tip else f"{body}/>"


def _text(x, y, text, size=11, fill="#1d2330", anchor="start", weight=None, cls=None) -> str:
    w = f' font-weight="{weight}"' if weight else ""
    c = f' class="{cls}"' if cls else ""
    return (
        f'<text{c} x="{_num(x)}" y="{_num(y)}" font-size="{size}" fill="{fill}" '
        f'text-anchor="{anchor}"{w}>{esc(text)}</text>'
    )


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


def _ms_label(ns: float) -> str:
    v = ns / 1e6
    return f"{v:,.0f} ms" if abs(v) >= 10 or v == 0 else f"{v:,.2g} ms"


_DEFS = (
    "<defs>"
    '<pattern id="pageable" width="6" height="6" patternUnits="userSpaceOnUse" '
    'patternTransform="rotate(45)"><rect width="6" height="6" fill="#2e9d4a"/>'
    '<rect width="2.2" height="6" fill="#b9e4c4"/></pattern>'
    '<pattern id="idle" width="8" height="8" patternUnits="userSpaceOnUse" '
    'patternTransform="rotate(45)"><rect width="8" height="8" fill="#e05d5d" fill-opacity="0.10"/>'
    '<rect width="2" height="8" fill="#e05d5d" fill-opacity="0.28"/></pattern>'
    '<pattern id="exposed" width="6" height="6" patternUnits="userSpaceOnUse" '
    'patternTransform="rotate(45)"><rect width="6" height="6" fill="#e05d5d"/>'
    '<rect width="2" height="6" fill="#f4b4b4"/></pattern>'
    "</defs>"
)


# -- timeline -----------------------------------------------------------------------------

W = 1200
LABEL_W = 250
X0, X1 = LABEL_W + 8, W - 12
ROW_H, ROW_GAP, GROUP_H = 20, 3, 20


def _timeline_card(tl: Timeline | None, report: Report) -> str:
    head = '<section class="card" id="timeline"><h2>Timeline</h2>'
    if tl is None or not tl.lanes:
        return head + '<p class="note">The trace has no events to draw.</p></section>'
    caption = (
        f'<p class="caption">{esc(tl.chosen)}. Shaded: the GPU idle longer than '
        f"{esc(_ms_label(tl.min_gap_ns))}. Bars narrower than a pixel are merged; hover a bar "
        "for its name and length.</p>"
    )
    if tl.omitted:
        caption += f'<p class="note">Not drawn: {esc("; ".join(tl.omitted))}.</p>'
    return head + caption + timeline_svg(tl) + "</section>"


def timeline_svg(tl: Timeline) -> str:
    span = max(tl.end_ns - tl.start_ns, 1)

    def x(ns: int) -> float:
        return X0 + (ns - tl.start_ns) / span * (X1 - X0)

    out: list[str] = []
    top = 44
    y = top
    lane_y: list[tuple[float, object]] = []
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
    height = bottom + 8 + 18 * ((len(_legend_kinds(tl)) + 3) // 4) + 10

    out.append(
        f'<svg id="timeline-svg" viewBox="0 0 {W} {_num(height)}" role="img" '
        f'aria-label="timeline" xmlns="http://www.w3.org/2000/svg">{_DEFS}'
    )
    out.append(_rect(0, 0, W, height, "#ffffff"))
    out.append(_rect(X0, top, X1 - X0, bottom - top, "#fbfbfc"))

    # time axis, from the first step's start (else the window's)
    origin = tl.steps[0].start_ns if tl.steps else tl.start_ns
    step = _ticks(span)
    tick = origin - ((origin - tl.start_ns) // step) * step
    while tick < tl.end_ns:
        tx = x(tick)
        out.append(
            f'<line x1="{_num(tx)}" y1="{top - 4}" x2="{_num(tx)}" y2="{_num(bottom)}" '
            'stroke="#e6e8ec" stroke-width="1"/>'
        )
        out.append(
            _text(tx, top - 8, _ms_label(tick - origin), 10, "#5d6675", "middle", cls="tick")
        )
        tick += step

    # idle gaps, behind the bars; each label in its device's last row
    label_y = {lane.group: ly + ROW_H - 5 for ly, lane in lane_y}
    for span_ in tl.idle:
        x0, x1 = x(span_.start_ns), x(span_.end_ns)
        title = f"GPU {span_.device_id} idle {ms(span_.end_ns - span_.start_ns)}"
        out.append(_rect(x0, top, x1 - x0, bottom - top, "url(#idle)", title, cls="idle"))
        label = _fit(f"GPU {span_.device_id} idle {ms(span_.end_ns - span_.start_ns)}", x1 - x0)
        if label:
            ty = label_y.get(f"GPU {span_.device_id}", bottom - 6)
            out.append(_text((x0 + x1) / 2, ty, label, 10, "#b23a3a", "middle", 600))

    # steps: boundaries and names
    edges = sorted({m.start_ns for m in tl.steps} | {tl.steps[-1].end_ns} if tl.steps else set())
    for edge in edges:
        ex = x(edge)
        out.append(
            f'<line x1="{_num(ex)}" y1="{top - 26}" x2="{_num(ex)}" y2="{_num(bottom)}" '
            'stroke="#7a8394" stroke-width="1" stroke-dasharray="3 3"/>'
        )
    for mark in tl.steps:
        sx0, sx1 = x(mark.start_ns), x(mark.end_ns)
        name = _fit(f"{mark.name} · {ms(mark.end_ns - mark.start_ns)}", sx1 - sx0, 11)
        if name:
            out.append(_text((sx0 + sx1) / 2, top - 24, name, 11, "#1d2330", "middle", 600))

    # group headings and lanes
    for gy, name in group_rows:
        out.append(f'<line x1="0" y1="{_num(gy)}" x2="{W}" y2="{_num(gy)}" stroke="#dde1e7"/>')
        out.append(_text(8, gy + 14, _fit(name, LABEL_W + 200, 12) or name, 12, weight=700))
    for ly, lane in lane_y:
        out.append(_text(24, ly + 14, lane.title, 11, "#5d6675", cls="lane-label"))
        out.append(f'<g class="lane" data-title="{esc(lane.title)}">')
        for bar in lane.bars:
            bx0, bx1 = x(bar.start_ns), x(bar.end_ns)
            fill = _argb(bar.color) if bar.kind == "nvtx" else KIND_COLORS.get(bar.kind, "#999")
            title = f"{bar.name} · {ms(bar.end_ns - bar.start_ns)}"
            edge = ' stroke="#ffffff" stroke-width="0.7"' if bx1 - bx0 > 4 else ""
            out.append(
                _rect(
                    bx0,
                    ly,
                    bx1 - bx0,
                    ROW_H,
                    fill,
                    title,
                    "ev",
                    f' data-kind="{esc(bar.kind)}"{edge}',
                )
            )
            label = _fit(bar.name, bx1 - bx0)
            if label:
                out.append(_text(bx0 + 3, ly + 14, label, 10, _ink_on(fill)))
        out.append("</g>")
    out.append(f'<line x1="{X0}" y1="{top}" x2="{X0}" y2="{_num(bottom)}" stroke="#aab1bd"/>')
    out.append(_legend(_legend_kinds(tl), bottom + 10))
    out.append("</svg>")
    return "".join(out)


def _legend_kinds(tl: Timeline) -> list[str]:
    present = {b.kind for lane in tl.lanes for b in lane.bars}
    kinds = [k for k in KINDS if k in present]
    if tl.idle:
        kinds.append("idle")
    return kinds


def _legend(kinds: list[str], y: float) -> str:
    out = ['<g class="legend">']
    for i, kind in enumerate(kinds):
        lx = X0 + (i % 4) * 230
        ly = y + (i // 4) * 18
        fill = "url(#idle)" if kind == "idle" else KIND_COLORS[kind]
        label = "GPU idle gap" if kind == "idle" else KIND_LABELS[kind]
        out.append(_rect(lx, ly, 14, 12, fill, extra=' stroke="#aab1bd" stroke-width="0.5"'))
        out.append(_text(lx + 20, ly + 10, label, 11, "#5d6675"))
    out.append("</g>")
    return "".join(out)


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


def _steps_card(report: Report, section: Section | None, tl: Timeline | None) -> str:
    head = '<section class="card" id="steps"><h2>Where each step\'s time went</h2>'
    st = report.steps
    if st is None or section is None:
        why = next((s.reason for s in report.skipped if s.analysis == "steps"), "no steps")
        fix = next((s.fix for s in report.skipped if s.analysis == "steps"), "")
        return (
            head + f'<p class="note">No per-step breakdown: {esc(why)}; {esc(fix)}.</p></section>'
        )
    rows = st.rows[:STEPS_CHARTED]
    more = f" The first {len(rows)} of {st.count} steps are drawn." if st.count > len(rows) else ""
    caption = (
        '<p class="caption">Upper bar: CPU time of the step thread in each child NVTX range '
        "(sums), the rest outside them. Lower bar: the GPU busy (union of its work) or idle "
        f"during the step.{esc(more)}</p>"
    )
    return head + _notes(section) + caption + steps_svg(report, tl) + _table(section) + "</section>"


def _bar_axis(longest: int, x0: float, scale: float, top: float, bottom: float) -> list[str]:
    """Vertical grid lines and their ms labels for a chart of bars from ``x0``."""
    out = []
    step = _ticks(longest, 6)
    tick = 0
    while tick <= longest:
        tx = x0 + tick * scale
        out.append(
            f'<line x1="{_num(tx)}" y1="{top - 6}" x2="{_num(tx)}" y2="{bottom}" stroke="#eceef2"/>'
        )
        out.append(_text(tx, top - 10, _ms_label(tick), 10, "#5d6675", "middle", cls="tick"))
        tick += step
    return out


def _bar_legend(items: list[tuple[str, str]], x0: float, y: float) -> list[str]:
    """(color, label) swatches, four to a row."""
    out = []
    for i, (fill, label) in enumerate(items):
        lx = x0 + (i % 4) * 250
        yy = y + (i // 4) * 18
        out.append(_rect(lx, yy, 14, 12, fill))
        out.append(_text(lx + 20, yy + 10, _fit(label, 228, 11) or "", 11, "#5d6675"))
    return out


def steps_svg(report: Report, tl: Timeline | None = None) -> str:
    st = report.steps
    assert st is not None
    rows = st.rows[:STEPS_CHARTED]
    colors = _child_colors(report, tl)
    names = list(colors)
    label_w, right_w = 150, 90
    x0, x1 = label_w, W - right_w
    longest = max((r.wall_ns for r in rows), default=1) or 1
    scale = (x1 - x0) / longest
    cpu_h, gpu_h, pitch, top = 13, 7, 28, 30
    legend_items = [(colors[n], f"{n} (CPU)") for n in names]
    legend_items += [(OTHER_CPU, "outside child ranges (CPU)"), (GPU_BUSY, "GPU busy")]
    legend_items += [(GPU_IDLE, "GPU idle")]
    legend_rows = (len(legend_items) + 3) // 4
    height = top + pitch * len(rows) + 16 + 18 * legend_rows + 8
    out = [
        f'<svg id="steps-svg" viewBox="0 0 {W} {height}" role="img" aria-label="steps" '
        f'xmlns="http://www.w3.org/2000/svg">',
        _rect(0, 0, W, height, "#ffffff"),
    ]
    out += _bar_axis(longest, x0, scale, top, top + pitch * len(rows) - 6)
    for i, r in enumerate(rows):
        y = top + i * pitch
        out.append(f'<g class="step" data-step="{r.index}">')
        out.append(_text(label_w - 8, y + 12, _fit(r.name, label_w, 11) or "", 11, anchor="end"))
        cx = x0
        child = {c.name: c.cpu_ns for c in r.children}
        used = 0
        for name in names:
            ns = child.get(name, 0)
            if ns <= 0:
                continue
            w = ns * scale
            out.append(
                _rect(cx, y, w, cpu_h, colors[name], f"{r.name}: {name} {ms(ns)} (CPU)", "seg")
            )
            cx += w
            used += ns
        rest = max(r.wall_ns - used, 0)
        if rest:
            out.append(
                _rect(
                    cx, y, rest * scale, cpu_h, OTHER_CPU, f"{r.name}: other CPU {ms(rest)}", "seg"
                )
            )
        busy_w = r.gpu_busy_ns * scale
        out.append(
            _rect(
                x0,
                y + cpu_h + 1,
                busy_w,
                gpu_h,
                GPU_BUSY,
                f"{r.name}: GPU busy {ms(r.gpu_busy_ns)}",
                "gpu-busy",
            )
        )
        out.append(
            _rect(
                x0 + busy_w,
                y + cpu_h + 1,
                r.gpu_idle_ns * scale,
                gpu_h,
                GPU_IDLE,
                f"{r.name}: GPU idle {ms(r.gpu_idle_ns)}",
                "gpu-idle",
            )
        )
        out.append(_text(x0 + r.wall_ns * scale + 6, y + 12, ms(r.wall_ns), 11, "#1d2330"))
        out.append("</g>")
    out += _bar_legend(legend_items, x0, top + pitch * len(rows) + 10)
    out.append("</svg>")
    return "".join(out)


# -- the step account -------------------------------------------------------------------------

ACCOUNT_TITLE = "Where the step time went (step account)"
# Busy kinds in blues and greens, idle causes in warm colors, the rest grey.
BUCKET_COLORS = {
    "compute": "#2f7d32",
    "communication": "#6a4fb3",
    "memset": "#8aa29e",
    "loading": "#d1495b",
    "loader_wait": "#ee7b30",
    "sync": "#edae49",
    "readback": "#b5651d",
    "blocking_copy": "#c9a227",
    "allocator": "#8c564b",
    "launch": "#e377c2",
    "cpu": "#ff9896",
    "os_call": "#9467bd",
    "os_wait": "#c5b0d5",
    "module_loading": "#7f7f7f",
    "cuda_api": "#bcbd22",
    "queued": "#c7c7c7",
    "profiler_overhead": "#dbdbdb",
}
COPY_COLORS = ("#1f77b4", "#4a98c9", "#17becf", "#9ecae1", "#6baed6")


def _bucket_colors(names: list[str]) -> dict[str, str]:
    out, copies = {}, iter(COPY_COLORS * 4)
    for n in names:
        out[n] = BUCKET_COLORS.get(n) or next(copies)
    return out


def _account_card(report: Report, section: Section | None) -> str:
    head = '<section class="card" id="account"><h2>Where the step time went</h2>'
    a = report.account.main if report.account else None
    if a is None or section is None:
        return head + '<p class="note">No step account: no GPU work in the trace.</p></section>'
    caption = (
        '<p class="caption">Each bar is one step\'s wall time split into GPU-busy kinds and '
        "the causes of GPU idle time; every nanosecond is in exactly one bucket. "
        f"The first {min(len(a.steps), STEPS_CHARTED)} of {a.step_count} steps are drawn.</p>"
    )
    return head + _notes(section) + caption + account_svg(report) + _table(section) + "</section>"


def account_svg(report: Report) -> str:
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
    out = [
        f'<svg id="account-svg" viewBox="0 0 {W} {height}" role="img" aria-label="step account" '
        f'xmlns="http://www.w3.org/2000/svg">',
        _rect(0, 0, W, height, "#ffffff"),
    ]
    out += _bar_axis(longest, x0, scale, top, top + pitch * len(rows) - 6)
    for i, r in enumerate(rows):
        y = top + i * pitch
        out.append(f'<g class="account-step" data-step="{r.index}">')
        out.append(_text(label_w - 8, y + 12, _fit(r.name, label_w, 11) or "", 11, anchor="end"))
        cx = x0
        by = dict(r.buckets)
        for name in names:
            ns = by.get(name, 0)
            if ns <= 0:
                continue
            w = ns * scale
            title = f"{r.name}: {name} {ms(ns)}"
            out.append(
                _rect(cx, y, w, bar_h, colors[name], title, "bucket", f' data-bucket="{esc(name)}"')
            )
            cx += w
        out.append(_text(x0 + r.wall_ns * scale + 6, y + 12, ms(r.wall_ns), 11, "#1d2330"))
        out.append("</g>")
    out += _bar_legend([(colors[n], n) for n in names], x0, top + pitch * len(rows) + 10)
    out.append("</svg>")
    return "".join(out)


# -- copy/compute overlap ------------------------------------------------------------------


def _overlap_card(report: Report, section: Section | None) -> str:
    head = '<section class="card" id="overlap"><h2>Copy/compute overlap</h2>'
    o = report.overlap
    if o is None or not o.htod_ns:
        why = "no GPU activity in the trace" if o is None else "no host-to-device copies"
        return head + f'<p class="note">Nothing to show: {esc(why)}.</p></section>'
    caption = (
        '<p class="caption">Per device: kernel time (union), and host-to-device copy time '
        "(union) split into the part that ran under kernels and the exposed rest that a copy "
        "stream or a prefetcher can hide.</p>"
    )
    table = _table(section) if section is not None else ""
    return head + caption + overlap_svg(report) + table + "</section>"


def overlap_svg(report: Report) -> str:
    o = report.overlap
    assert o is not None
    kernels = {d.device_id: d.kernel_busy_ns for d in report.gaps.devices} if report.gaps else {}
    label_w, right_w = 150, 330
    x0, x1 = label_w, W - right_w
    longest = max([d.htod_ns for d in o.devices] + list(kernels.values()) + [1])
    scale = (x1 - x0) / longest
    pitch, top = 58, 12
    height = top + pitch * len(o.devices) + 30
    out = [
        f'<svg id="overlap-svg" viewBox="0 0 {W} {height}" role="img" aria-label="overlap" '
        f'xmlns="http://www.w3.org/2000/svg">{_DEFS}',
        _rect(0, 0, W, height, "#ffffff"),
    ]
    for i, d in enumerate(o.devices):
        y = top + i * pitch
        out.append(f'<g class="device" data-device="{d.device_id}">')
        out.append(_text(8, y + 12, f"GPU {d.device_id}", 12, weight=700))
        k = kernels.get(d.device_id, 0)
        out.append(_text(label_w - 8, y + 12, "kernels", 11, "#5d6675", "end"))
        out.append(
            _rect(x0, y + 2, k * scale, 14, KIND_COLORS["kernel"], f"kernels {ms(k)}", "kernels")
        )
        out.append(_text(x0 + k * scale + 6, y + 13, ms(k), 11))
        y2 = y + 22
        out.append(_text(label_w - 8, y2 + 12, "HtoD copies", 11, "#5d6675", "end"))
        ow = d.overlapped_ns * scale
        out.append(
            _rect(
                x0,
                y2 + 2,
                ow,
                14,
                KIND_COLORS["memcpy HtoD"],
                f"overlapped with kernels {ms(d.overlapped_ns)}",
                "overlapped",
            )
        )
        out.append(
            _rect(
                x0 + ow,
                y2 + 2,
                d.exposed_ns * scale,
                14,
                "url(#exposed)",
                f"exposed {ms(d.exposed_ns)}",
                "exposed",
            )
        )
        out.append(
            _text(
                x0 + d.htod_ns * scale + 6,
                y2 + 13,
                f"{ms(d.htod_ns)}: {pct(d.overlap_ratio)} under kernels, "
                f"{ms(d.exposed_ns)} exposed",
                11,
            )
        )
        out.append("</g>")
    ly = top + pitch * len(o.devices)
    for i, (fill, label) in enumerate(
        [
            (KIND_COLORS["kernel"], "kernels"),
            (KIND_COLORS["memcpy HtoD"], "copy overlapped with kernels"),
            ("url(#exposed)", "copy exposed (no kernel running)"),
        ]
    ):
        lx = x0 + i * 250
        out.append(_rect(lx, ly, 14, 12, fill))
        out.append(_text(lx + 20, ly + 10, label, 11, "#5d6675"))
    out.append("</svg>")
    return "".join(out)
