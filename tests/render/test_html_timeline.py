"""The timeline's GPU rows, as Chromium paints them, held to the busy time SQL finds.

A GPU row is drawn as what the GPU did in each of the page's columns
(``timeline_figure.COLUMNS``, one a pixel at full width): the column shaded from the row's
track (idle) toward its kind's color (busy throughout) by the share of its time the row's
work ran. Here every screenshot pixel column of every GPU row is measured against that
share, computed with SQL over the export for the column's time span: a launch-bound step, 8 %
busy, must read as a mostly idle row, never as the solid bar that merged sub-pixel kernels
made of it (issue 34).

Where the figure lies in a screenshot of the page at a 1300-px window:

    x  the layout (style.css): main 1280 wide with 28 px padding, a card's 1 px border and
       18 px padding; the SVG is 1186 px wide from x = 57, for 1200 units.
    y  a GPU row's track (TRACK, the color of its idle columns) is the one wide area of its
       color on the page: the pixel rows with TRACK in 30 or more columns are the row's fully
       covered rows, the first of them r (every row drawn is found so, or the test fails).

         row top, y units: a fraction of a pixel above r
         r         +-----------------------------------------+
         r+1, r+2  | measured: 1 to 5 units below the top,   |  above every label's glyphs
                   | one color a column                      |  (their tops lie below 6)
         row end   +-----------------------------------------+

A pixel mixes the page columns it covers (anti-aliasing), so its expected share is theirs,
weighted by how much of each it covers; its painted intensity is how far it lies from the
track toward the full color of the work that ran there: 0 idle, 1 solid.
"""

from __future__ import annotations

import re

import independent
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image
from test_html import (
    browse,
    chromium_present,
    dense_kernels,
    dump_dom,
    html_of,
    needs_chromium,
)

import nsysprobe
import nsysprobe.render.html as html
import nsysprobe.render.timeline_figure as timeline_figure
from nsysprobe.analyses import intervals as iv
from nsysprobe.analyses.timeline import Busy
from nsysprobe.render.svg import KIND_COLORS, W
from nsysprobe.render.timeline_figure import COLUMNS, TRACK, X0, X1, busy_colors

from conftest import SAMPLE_TRACES, shared_trace
from exports import MS, Export

WINDOW = (1300, 4000)
SVG_LEFT, SVG_WIDTH = 57, 1186
SCALE = SVG_WIDTH / W
DTOD = 8  # copyKind of device-to-device copies (ENUM_CUDA_MEMCPY_OPER)
__all__ = ["chromium_present"]  # the fixture ``needs_chromium`` asks for, from test_html


def rgb(color: str) -> np.ndarray:
    return np.array([int(color[i : i + 2], 16) for i in (1, 3, 5)], dtype=float)


# -- the export's side: SQL ---------------------------------------------------------------


def row_work(path, device: int, stream: int | None) -> dict[str, list[tuple[int, int]]]:
    """The GPU work of one timeline row (a stream, or every stream of a device), by the
    timeline's kinds, read with SQL."""
    where = "deviceId = ?" + ("" if stream is None else " AND streamId = ?")
    params = (device,) if stream is None else (device, stream)
    have = independent.tables(path)
    pageable = {0}  # ENUM_CUDA_MEM_KIND's ids of "Pageable"; 0 where the export has none
    if "ENUM_CUDA_MEM_KIND" in have:
        pageable = {
            i
            for (i,) in independent.query(
                path, "SELECT id FROM ENUM_CUDA_MEM_KIND WHERE label = 'Pageable'"
            )
        }
    out: dict[str, list[tuple[int, int]]] = {}
    sql = "SELECT start, end FROM CUPTI_ACTIVITY_KIND_{} WHERE " + where
    for table, kind in (("KERNEL", "kernel"), ("MEMSET", "memset")):
        if f"CUPTI_ACTIVITY_KIND_{table}" in have:
            out[kind] = independent.query(path, sql.format(table), params)
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in have:
        rows = independent.query(
            path,
            f"SELECT start, end, copyKind, srcKind FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE {where}",
            params,
        )
        for s, e, copy_kind, src in rows:
            if copy_kind == independent.HTOD:
                kind = "memcpy HtoD pageable" if src in pageable else "memcpy HtoD"
            else:
                kind = {independent.DTOH: "memcpy DtoH", DTOD: "memcpy DtoD"}.get(
                    copy_kind, "memcpy other"
                )
            out.setdefault(kind, []).append((s, e))
    return {k: v for k, v in out.items() if v}


def column_shares(work, w0: int, w1: int, columns: int):
    """Per page column of [w0, w1): (the busy share of the union of ``work``, each kind's
    share of it). Kinds that ran at once split the union's time by their own busy time."""
    edges = [w0 + k * (w1 - w0) // columns for k in range(columns + 1)]
    width = np.diff(edges).astype(float)

    def shares(spans):
        u = independent.union(spans)
        return np.array([independent.inside(u, a, b) for a, b in zip(edges, edges[1:])]) / width

    union = shares([span for spans in work.values() for span in spans])
    kinds = {kind: shares(spans) for kind, spans in work.items()}
    total = sum(kinds.values())
    scale = np.divide(union, total, out=np.zeros_like(union), where=total > 0)
    return union, {kind: share * scale for kind, share in kinds.items()}


# -- the page's side: pixels ------------------------------------------------------------------

PLOT = (SVG_LEFT + X0 * SCALE, SVG_LEFT + X1 * SCALE)
# the pixel columns measured: inside the plot, clear of the line drawn at its left edge
PIXELS = np.arange(int(np.ceil(PLOT[0])) + 2, int(np.floor(PLOT[1])) - 1)


def pixel_weights() -> np.ndarray:
    """(pixel column, page column) -> the share of the pixel that the page column covers."""
    left = (PIXELS - SVG_LEFT) / SCALE - X0  # each pixel's extent in page columns
    right = (PIXELS + 1 - SVG_LEFT) / SCALE - X0
    k = np.arange(COLUMNS)
    cover = np.clip(np.minimum(right[:, None], k + 1) - np.maximum(left[:, None], k), 0, None)
    return cover / (right - left)[:, None]


def gpu_rows(png, dom) -> list[dict]:
    """Each GPU row the page draws: its name and time axis (from the DOM), and the color of
    each measured pixel column (from the screenshot)."""
    rows = re.findall(
        r'<g class="busy" data-lane="([^"]+)" data-start-ns="(\d+)" data-end-ns="(\d+)" '
        r'data-columns="(\d+)">\s*<rect x="([\d.]+)" y="([\d.]+)"',
        dom,
    )
    assert rows, "no GPU row in the page"
    img = np.asarray(Image.open(png).convert("RGB")).astype(float)
    assert img.shape[:2] == (WINDOW[1], WINDOW[0])
    track = np.all(img[:, PIXELS] == rgb(TRACK), axis=2).sum(axis=1) >= 30
    edges = np.flatnonzero(np.diff(np.concatenate([[0], track.astype(int), [0]])))
    runs = list(zip(edges[::2], edges[1::2]))
    assert len(runs) == len(rows), (runs, [r[0] for r in rows])
    out = []
    for (lane, start, end, columns, x, y), (first, last) in zip(rows, runs):
        assert int(columns) == COLUMNS and float(x) == X0
        assert 18 <= last - first <= 20, (lane, first, last)  # 20 units, 19.8 px
        # rows apart as in the figure, to a pixel
        assert abs((first - runs[0][0]) - (float(y) - float(rows[0][5])) * SCALE) <= 1
        color = img[first + 1 : first + 3, PIXELS].mean(axis=0)
        out.append(dict(lane=lane, start=int(start), end=int(end), color=color))
    # the plot ends where the figure says: the track to its last pixel, white beyond
    row = img[runs[0][0] + 1]
    assert (row[int(PLOT[1]) + 1] == 255).all() and (row[int(PLOT[1]) - 1] != 255).any()
    return out


def measure(path, row) -> dict:
    """One GPU row: each measured pixel column's busy share by SQL (``expected``), its painted
    intensity (``painted``) and how far its color is from the expected one, in RGB units."""
    match = re.fullmatch(r"GPU (\d+) (?:stream (\d+)|all streams)", row["lane"])
    device, stream = int(match.group(1)), match.group(2) and int(match.group(2))
    work = row_work(path, device, stream)
    union, kinds = column_shares(work, row["start"], row["end"], COLUMNS)
    weights = pixel_weights()
    expected = weights @ union
    full = {kind: rgb(KIND_COLORS[kind]) - rgb(TRACK) for kind in kinds}
    mix = weights @ sum(np.outer(share, full[kind]) for kind, share in kinds.items())
    expected_color = rgb(TRACK) + mix
    # the color of the work at full strength: where it ran its mix, else a kernel's
    solid = np.where(
        expected[:, None] > 0.01,
        mix / np.maximum(expected, 1e-9)[:, None],
        rgb(KIND_COLORS["kernel"]) - rgb(TRACK),
    )
    painted = ((row["color"] - rgb(TRACK)) * solid).sum(axis=1) / (solid**2).sum(axis=1)
    error = np.abs(row["color"] - expected_color).max(axis=1)
    return dict(expected=expected, painted=painted, color_error=error, work=work, **row)


def assert_painted_as_busy(m: dict) -> None:
    """A row's pixels as SQL says: none under 15 % busy painted solid (the bug this guards),
    each column's intensity within 0.03 of its busy share (0.005 on average), and its color
    the kinds' mix to 6 RGB units (Chromium 150 paints them to 0.016 and 3)."""
    expected, painted = m["expected"], m["painted"]
    solid = (expected < 0.15) & (painted > 0.9)
    assert not solid.any(), (
        f"{m['lane']}: {solid.sum()} columns under 15% busy painted solid, e.g. column "
        f"{PIXELS[solid][0]}: {expected[solid][0]:.1%} busy"
    )
    worst = np.argmax(np.abs(painted - expected))
    assert abs(painted[worst] - expected[worst]) <= 0.03, (
        m["lane"],
        PIXELS[worst],
        painted[worst],
        expected[worst],
    )
    assert np.abs(painted - expected).mean() <= 0.005
    assert m["color_error"].max() <= 6, (m["lane"], PIXELS[np.argmax(m["color_error"])])


def screenshot(path, tmp_path, name="report"):
    page = html_of(path, tmp_path, f"{name}.html")
    png = tmp_path / f"{name}.png"
    browse(
        page,
        tmp_path,
        "--hide-scrollbars",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        f"--screenshot={png}",
    )
    dom, console = dump_dom(page, tmp_path)
    assert console == []
    return png, dom


def sub_ms_gaps(m: dict) -> list[int]:
    """The measured pixel columns whose page columns lie wholly inside idle time shorter than
    1 ms between the row's work (by SQL): shorter than the report's idle gaps, so unhatched."""
    starts, ends = zip(*independent.union(s for spans in m["work"].values() for s in spans))
    left = (PIXELS - SVG_LEFT) / SCALE - X0  # each pixel's extent in page columns
    right = (PIXELS + 1 - SVG_LEFT) / SCALE - X0
    column_ns = (m["end"] - m["start"]) / COLUMNS
    t0 = m["start"] + np.floor(left) * column_ns
    t1 = m["start"] + np.ceil(right) * column_ns
    out = []
    for gap_start, gap_end in zip(ends[:-1], starts[1:]):
        if gap_end - gap_start < 1 * MS:
            out += np.flatnonzero((t0 >= gap_start) & (t1 <= gap_end)).tolist()
    return out


TRACES = [
    pytest.param("h200_tiny_layers.sqlite", ["GPU 0 stream 7"], id="launch-bound"),
    pytest.param("h200_baseline.sqlite", ["GPU 0 stream 7"], id="loader-bound"),
    pytest.param(
        "nsysai_mfu_2gpu_before_nsys2026.2.sqlite",
        ["GPU 0 stream 7", "GPU 1 stream 15"],
        id="two-gpu",
    ),
]


def trace_path(name: str):
    return SAMPLE_TRACES / name if (SAMPLE_TRACES / name).exists() else shared_trace(name)


@needs_chromium
@pytest.mark.parametrize("name, lanes", TRACES)
def test_gpu_rows_are_painted_as_busy_as_sql_says(name, lanes, tmp_path):
    path = trace_path(name)
    png, dom = screenshot(path, tmp_path)
    rows = [measure(path, row) for row in gpu_rows(png, dom)]
    assert [m["lane"] for m in rows] == lanes
    for m in rows:
        assert_painted_as_busy(m)


@needs_chromium
def test_a_launch_bound_step_reads_as_mostly_idle(tmp_path):
    """h200_tiny_layers: thousands of kernels of a few microseconds, the GPU 8 % busy (by SQL,
    over the timeline's window as over the steps). Its stream row was one solid bar; now the
    row as a whole is as pale as the GPU was busy, and so is each column of it."""
    path = SAMPLE_TRACES / "h200_tiny_layers.sqlite"
    png, dom = screenshot(path, tmp_path)
    (m,) = [measure(path, row) for row in gpu_rows(png, dom)]
    starts, ends = independent.gpu_work(path)
    window_busy = independent.union_ns(starts, ends, m["start"], m["end"]) / (m["end"] - m["start"])
    steps = independent.step_windows(path, "iteration %")
    assert 0.06 < window_busy < 0.10
    assert 0.06 < independent.busy_ratio_over_steps(path, steps) < 0.10
    assert abs(m["painted"].mean() - window_busy) < 0.01
    light = (m["expected"] > 0.04) & (m["expected"] < 0.12)
    assert light.sum() > 200 and m["painted"][light].max() < 0.2
    gaps = sub_ms_gaps(m)
    assert gaps and m["painted"][gaps].max() < 0.02  # idle under a millisecond, drawn idle
    assert_painted_as_busy(m)


@needs_chromium
def test_sub_millisecond_idle_shows_between_kernels(tmp_path):
    """The two-GPU capture's window is 13.5 ms (15 us a pixel): the idle between its kernels,
    shorter than the report's 1 ms gaps, is drawn as the track on both GPUs."""
    path = shared_trace("nsysai_mfu_2gpu_before_nsys2026.2.sqlite")
    png, dom = screenshot(path, tmp_path)
    for m in [measure(path, row) for row in gpu_rows(png, dom)]:
        gaps = sub_ms_gaps(m)
        assert len(gaps) > 20, m["lane"]
        assert m["painted"][gaps].max() < 0.02, m["lane"]
        assert (m["painted"] > 0.98).sum() > 100  # and the kernels between them solid


@needs_chromium
def test_the_check_fails_a_row_painted_solid(tmp_path, monkeypatch):
    """A control: the page painting every column the GPU touched in its kind's full color,
    as the merged bars did, fails the check on the launch-bound trace."""

    def solid(busy, starts, ends):
        share, colors = real(busy, starts, ends)
        full = KIND_COLORS[busy.kinds[0]] if busy.kinds else TRACK
        return share, [full if s > 0 else TRACK for s in share.tolist()]

    real = timeline_figure.busy_colors
    monkeypatch.setattr(timeline_figure, "busy_colors", solid)
    path = SAMPLE_TRACES / "h200_tiny_layers.sqlite"
    png, dom = screenshot(path, tmp_path, "solid")
    (m,) = [measure(path, row) for row in gpu_rows(png, dom)]
    with pytest.raises(AssertionError, match="under 15% busy painted solid"):
        assert_painted_as_busy(m)


# -- the figure without a browser -------------------------------------------------------------


@given(
    st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 60)), max_size=30),
    st.lists(st.tuples(st.integers(-50, 1100), st.integers(0, 300)), min_size=1, max_size=20),
)
def test_busy_time_in_any_span_is_the_union_within_it(ops, spans):
    s = np.array([a for a, _ in ops], dtype=np.int64)
    e = np.array([a + n for a, n in ops], dtype=np.int64)
    union = iv.union(s, e)
    busy = Busy(("kernel",), (union,), union)
    lo = np.array([a for a, _ in spans], dtype=np.int64)
    hi = lo + np.array([n for _, n in spans], dtype=np.int64)
    expected = [independent.inside(independent.union(zip(s, e)), a, b) for a, b in zip(lo, hi)]
    assert busy.busy_ns(lo, hi).tolist() == expected


def test_a_column_is_shaded_by_its_busy_share():
    """8 % busy: 8 % of the way from the track to the kernel color; busy throughout: the
    kernel color; two kinds at once on two streams: the union's share, split between them."""
    kernels = iv.union([0, 1000], [80, 2000])
    copies = iv.union([1500], [2500])
    busy = Busy(("kernel",), (kernels,), kernels)
    share, colors = busy_colors(busy, [0, 1000, 3000], [1000, 2000, 4000])
    assert share.tolist() == [0.08, 1.0, 0.0]
    mixed = np.rint(rgb(TRACK) * 0.92 + rgb(KIND_COLORS["kernel"]) * 0.08)
    assert colors == [
        "#{:02x}{:02x}{:02x}".format(*mixed.astype(int)),
        KIND_COLORS["kernel"],
        TRACK,
    ]
    both = Busy(("kernel", "memcpy HtoD"), (kernels, copies), iv.union_of([kernels, copies]))
    share, colors = busy_colors(both, [1000], [3000])
    # 1,500 of 2,000 ns busy: kernels 1,000 ns and the copy 1,000 ns share it half each
    half = (
        rgb(TRACK) * 0.25 + (rgb(KIND_COLORS["kernel"]) + rgb(KIND_COLORS["memcpy HtoD"])) * 0.375
    )
    assert share.tolist() == [0.75]
    assert colors == ["#{:02x}{:02x}{:02x}".format(*np.rint(half).astype(int))]


def test_a_gpu_row_is_at_most_a_rect_a_column(build):
    """30,000 kernels of 2 us, 8 us apart (25 % busy): the row is at most one
    rect a column however many kernels there are, each column a quarter of the way to solid."""
    report = nsysprobe.analyze(build(dense_kernels()), timeline=True)
    page = html.render_html(report, report.timeline)
    (row,) = re.findall(r'<g class="busy"[^>]*>(.*?)</g>', page, re.S)
    fills = re.findall(r'fill="(#[0-9a-f]{6})"', row)
    assert len(fills) <= COLUMNS
    quarter = np.rint(rgb(TRACK) * 0.75 + rgb(KIND_COLORS["kernel"]) * 0.25).astype(int)
    assert fills.count("#{:02x}{:02x}{:02x}".format(*quarter)) >= 1
    assert KIND_COLORS["kernel"] not in fills


def test_a_gpu_with_two_streams_gets_a_row_of_their_union(build):
    """Kernels on stream 7 and a copy on stream 9 under them: a first row, "all streams",
    holds the union of both (the busy time the verdict counts), each stream its own."""
    ex = Export()
    for step in range(3):
        t0 = (1000 + step * 100) * MS
        ex.nvtx(t0, t0 + 90 * MS, f"step {step}")
        ex.kernel(t0 + 10 * MS, t0 + 50 * MS)
        ex.memcpy(t0 + 40 * MS, t0 + 70 * MS, 64 << 20, src=1, stream=9)
    tl = nsysprobe.analyze(build(ex), timeline=True).timeline
    gpu = [lane for lane in tl.lanes if lane.group == "GPU 0"]
    assert [lane.title for lane in gpu] == ["all streams", "stream 7", "stream 9"]
    union, kernels, copies = (iv.total(lane.busy.union) for lane in gpu)
    assert kernels == 3 * 40 * MS and copies == 3 * 30 * MS and union == 3 * 60 * MS
    assert gpu[0].busy.kinds == ("kernel", "memcpy HtoD")


def test_a_thread_s_calls_are_coloured_by_the_account_s_categories(build):
    """The CUDA API row speaks the step account's words (one classifier, ``calls.api_kind``):
    an allocator call, a module load and a launch slow enough to be lazy loading each get
    their own colour, as the account gives their idle its own cause (``allocator``,
    ``module_loading``)."""
    calls = [  # (name, start, length in ms), each followed by a kernel it issued
        ("cudaStreamSynchronize", 2, 1),
        ("cudaMemcpyAsync", 6, 1),
        ("cudaMemsetAsync", 10, 1),
        ("cudaMalloc", 14, 1),
        ("cuModuleLoadData", 18, 1),
        ("cudaLaunchKernel", 22, 3),  # over calls.SLOW_LAUNCH_NS: module loading
        ("cudaLaunchKernel", 28, 0.01),
        ("cudaEventRecord", 32, 1),
        ("cuLinkComplete", 35, 1),  # JIT linking: module loading too
    ]
    expected = [
        "cuda_sync",
        "cuda_copy",
        "cuda_copy",
        "cuda_alloc",
        "cuda_module",
        "cuda_module",
        "cuda_launch",
        "cuda_other",
        "cuda_module",
    ]
    ex = Export()
    for step in range(3):
        t0 = (1000 + step * 100) * MS
        ex.nvtx(t0, t0 + 40 * MS, f"step {step}")
        for name, at, length in calls:
            corr = ex.api(t0 + at * MS, t0 + int((at + length) * MS), name)
            end = t0 + int((at + length) * MS)
            ex.kernel(end + MS // 2, end + MS, corr=corr)
    report = nsysprobe.analyze(build(ex), timeline=True)
    (api,) = [lane for lane in report.timeline.lanes if lane.title == "CUDA API"]
    step_bars = [b for b in api.bars if b.start_ns < api.bars[0].start_ns + 40 * MS]
    assert [(b.name, b.kind) for b in step_bars] == [
        (name, kind) for (name, _, _), kind in zip(calls, expected)
    ]
    buckets = {b.name: b for b in report.account.main.buckets}
    assert "allocator" in buckets
    assert {"cuModuleLoadData", "cuLinkComplete"} <= {
        d.name for d in buckets["module_loading"].details
    }
