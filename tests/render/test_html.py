"""The HTML report, loaded in a real headless Chromium (Debian's; scripts/install_chromium.sh).

Figures are checked by their SVG elements against figures computed here from the ladder's
definition (tests/exports.py) or straight from the SQLite file, and the screenshot by its
pixels; hostile trace strings must reach the DOM as text, never as elements.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
import subprocess
from pathlib import Path

import independent
import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

import nsysprobe
from nsysprobe.analyses.cross_rank import cross_rank
from nsysprobe.analyses.timeline import PAD_RATIO
from nsysprobe.cli import main
from nsysprobe.errors import InputError
from nsysprobe.render import render
from nsysprobe.render.html import ENVIRONMENT, render_html
from nsysprobe.render.many import render_many_html

from exports import MS, Export, ladder_rung

CHROMIUM = shutil.which("chromium")


@pytest.fixture
def chromium_present():
    # scripts/test.sh installs it; a missing browser is a failure, not a skip
    assert CHROMIUM, "no chromium on PATH: run scripts/install_chromium.sh as root"


needs_chromium = pytest.mark.usefixtures("chromium_present")
BROWSER_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--enable-logging=stderr",
    "--v=0",
]


def browse(page, tmp_path, *extra) -> tuple[str, list[str]]:
    """(the DOM after load, the console messages) of ``page`` in headless Chromium."""
    done = subprocess.run(
        [
            CHROMIUM,
            *BROWSER_FLAGS,
            f"--user-data-dir={tmp_path / 'chromium'}",
            *extra,
            f"file://{page}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    return done.stdout, console


def dump_dom(page, tmp_path) -> tuple[str, list[str]]:
    return browse(page, tmp_path, "--dump-dom")


def html_of(path, tmp_path, name="report.html"):
    out = tmp_path / name
    result = CliRunner().invoke(
        main, ["analyze", str(path), "--html", str(out), "--no-history"], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    return out


@needs_chromium
def test_console_check_sees_errors(tmp_path):
    """The console check below would catch a script error (a control for the real tests)."""
    bad = tmp_path / "bad.html"
    bad.write_text("<p>x</p><script>undefined_fn()</script>")
    _, console = dump_dom(bad, tmp_path)
    assert any("undefined_fn is not defined" in line for line in console)


@needs_chromium
def test_baseline_report_shows_the_starvation(rung, tmp_path):
    page = html_of(rung("baseline"), tmp_path)
    dom, console = dump_dom(page, tmp_path)
    assert console == []
    verdict = re.search(r'<section class="card verdict" id="verdict">(.*?)</section>', dom, re.S)
    assert "multiprocess_loading" in verdict.group(1)
    # ladder: 300 ms of loading in the training thread, then 0.5 ms to the next step
    idle = re.findall(r'<rect class="idle"[^>]*><title>GPU 0 idle ([\d.]+) ms</title>', dom)
    assert idle[:3] == ["300.5"] * 3
    # per step: wall 400 ms = 300 ms get batch + 40 ms copy + 60 ms compute; GPU busy 100 ms;
    # each step after the first from the last one's end: the 0.5 ms between them idle too
    idle_bars = re.findall(r'class="gpu-idle"[^>]*><title>Batch \d: GPU idle ([\d.]+) ms<', dom)
    assert idle_bars == ["300.0"] + ["300.5"] * 5
    gets = re.findall(r'class="seg"[^>]*><title>Batch \d: get batch ([\d.]+) ms \(CPU\)<', dom)
    assert gets == ["300.0"] * 6
    assert dom.count('<g class="step"') == 6
    # the overlap figure: all 240 ms of pageable copies exposed
    assert re.search(r'class="exposed"[^>]*><title>exposed 240.0 ms<', dom)


@needs_chromium
def test_step_account_bars_add_up_to_each_step(rung, tmp_path):
    """One bar per step, split into the account's buckets; from the ladder's definition each
    baseline step is 300 ms of loading (idle), a 40 ms pageable copy and 60 ms of kernels, and
    each after the first also the 0.5 ms of the thread's own code since the last one ended,
    before its batch's copy: loading too."""
    dom, console = dump_dom(html_of(rung("baseline"), tmp_path), tmp_path)
    assert console == []
    assert dom.count('<g class="account-step"') == 6
    bars = re.findall(
        r'class="bucket"[^>]*data-bucket="([^"]+)"[^>]*><title>Batch (\d): \1 ([\d.,]+) ms<', dom
    )
    per_step: dict[str, dict[str, float]] = {}
    for bucket, step, value in bars:
        per_step.setdefault(step, {})[bucket] = float(value.replace(",", ""))
    expected = {"loading": 300.0, "memcpy HtoD Pageable": 40.0, "compute": 60.0}
    assert per_step == {str(i): {**expected, "loading": 300.5 if i else 300.0} for i in range(6)}


@needs_chromium
@pytest.mark.parametrize("rung_name", ["baseline", "multiworker", "pinned", "pipelined"])
def test_timeline_draws_the_events_of_its_window(rung, tmp_path, rung_name):
    path = rung(rung_name)
    page = html_of(path, tmp_path)
    dom, console = dump_dom(page, tmp_path)
    assert console == []
    assert dom.count('id="timeline-svg"') == dom.count('id="steps-svg"') == 1
    # the three steps after the first (all steps of a rung are alike, bar the first)
    w0, w1 = timeline_window(path)
    db = sqlite3.connect(path)
    kernels = db.execute(
        "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE end > ? AND start < ?", (w0, w1)
    ).fetchone()[0]
    copies = db.execute(
        "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE end > ? AND start < ?", (w0, w1)
    ).fetchone()[0]
    db.close()
    drawn = re.findall(r'data-kind="([^"]+)"', dom)
    assert drawn.count("kernel") == kernels
    assert sum(k.startswith("memcpy HtoD") for k in drawn) == copies
    pageable = rung_name in ("baseline", "multiworker")
    assert ("memcpy HtoD pageable" in drawn) is pageable
    labels = re.findall(r"<text[^>]*>(Batch \d) · ", dom)
    assert labels == ["Batch 1", "Batch 2", "Batch 3"]
    idle = dom.count('<rect class="idle"')
    assert (idle > 0) is (rung_name != "pipelined")


@needs_chromium
def test_nvtx_rows_use_their_own_colors(rung, tmp_path):
    dom, _ = dump_dom(html_of(rung("pinned"), tmp_path), tmp_path)
    # tests/exports.py colors: Batch blue 0x0000FF, get batch red, copy yellow, Compute green
    for name, color in [("Batch 2", "#0000ff"), ("get batch", "#ff0000"), ("Compute", "#008000")]:
        assert re.search(rf'fill="{color}" data-kind="nvtx"[^>]*><title>{name} · ', dom), name


def hostile_export() -> Export:
    ex = Export()
    names = ['<script>alert("x")</script>', "Batch \"quoted\" & 'single' <b>"]
    for i in range(3):
        t = (1000 + i * 100) * MS
        ex.nvtx(t, t + 90 * MS, f"{names[1]} {i}", color=0x00FF00)
        ex.nvtx(t + MS, t + 40 * MS, names[0], color=0xFF0000)
        ex.kernel(t + 41 * MS, t + 80 * MS, name="<img src=x onerror=alert(1)>", launch_at=t)
    ex.thread_name("<svg onload=alert(2)>")
    return ex


def test_hostile_names_are_escaped_in_the_file(build, tmp_path):
    path = build(hostile_export())
    report = nsysprobe.analyze(path)
    text = html_of(path, tmp_path).read_text()
    assert "<script" not in text.lower()
    assert "<img" not in text and "<svg onload" not in text and "<b>" not in text
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in text
    assert "&#34;quoted&#34; &amp; &#39;single&#39; &lt;b&gt;" in text
    assert "&lt;img src=x onerror=alert(1)&gt;" in text
    assert report.steps is not None  # the hostile step names were found as steps


@needs_chromium
def test_hostile_names_stay_text_in_the_browser(build, tmp_path):
    dom, console = dump_dom(html_of(build(hostile_export()), tmp_path), tmp_path)
    assert console == []
    assert (
        "<script" not in dom.lower()
        and "<img" not in dom
        and "onload=" not in dom.replace("&lt;svg onload=", "")
    )
    assert '&lt;script&gt;alert("x")&lt;/script&gt;' in dom


def timeline_window(path) -> tuple[int, int]:
    """The timeline's window of a ladder rung: its steps 1 to 3 (each from the last one's
    completion to its own, ``independent.completion_windows``), padded by PAD_RATIO."""
    steps = independent.step_windows(path, "Batch %")
    w0, w1 = steps[1][0], steps[3][1]
    pad = int((w1 - w0) * PAD_RATIO)
    return w0 - pad, w1 + pad


KERNEL_RGB = (0x3F, 0x6F, 0xD1)  # the timeline's kernel color, KIND_COLORS["kernel"]


def kernel_lane_pixels(png: Path) -> tuple[np.ndarray, int, int]:
    """(per pixel column of the timeline's plot: a kernel drawn there, its first and last+1
    column) from a screenshot of the page.

    The kernel lane is the first band of rows, from the top, with 20 or more pixels of the
    kernel color (the legend's swatch is 14 wide), and a timeline row tall (20 px at this
    width; the overlap figure's kernel bar is 14). The plot's extent is the longest run of
    non-white pixels in a row just above the lane (its background, #fbfbfc, on the white
    card)."""
    img = np.asarray(Image.open(png).convert("RGB")).astype(int)
    kernel = np.all(np.abs(img - KERNEL_RGB) <= 3, axis=2)
    rows = np.flatnonzero(kernel.sum(axis=1) >= 20)
    assert len(rows), "no row of the screenshot shows kernels"
    top = bottom = rows[0]
    while bottom + 1 in rows:
        bottom += 1
    assert 17 <= bottom + 1 - top <= 21, (top, bottom)
    drawn = np.any(img[top - 2] != 255, axis=1).astype(int)
    edges = np.flatnonzero(np.diff(np.concatenate([[0], drawn, [0]])))
    x0, x1 = max(zip(edges[::2], edges[1::2]), key=lambda run: run[1] - run[0])
    return kernel[top : bottom + 1, x0:x1].any(axis=0), x0, x1


@needs_chromium
@pytest.mark.parametrize("rung_name", ["baseline", "multiworker"])
def test_screenshot_shows_the_kernels_where_the_trace_has_them(rung, tmp_path, rung_name):
    """The page as Chromium paints it: the timeline's kernel lane has the kernel color in the
    pixel columns, and so the share of its width, where the SQLite export has a kernel
    running (the union of the kernels over the window, read here with plain sqlite3)."""
    path = rung(rung_name)
    page = html_of(path, tmp_path)
    png = tmp_path / "report.png"
    browse(page, tmp_path, "--hide-scrollbars", "--window-size=1300,1600", f"--screenshot={png}")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert Image.open(png).size == (1300, 1600)

    w0, w1 = timeline_window(path)
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        kernels = db.execute(
            "SELECT max(start, ?), min(end, ?) FROM CUPTI_ACTIVITY_KIND_KERNEL "
            "WHERE end > ? AND start < ?",
            (w0, w1, w0, w1),
        ).fetchall()
    drawn, x0, x1 = kernel_lane_pixels(png)
    assert abs((x1 - x0) - 930 * 1186 / 1200) < 4  # the plot, 930 of 1200 at 1186 px wide
    at = w0 + (np.arange(x0, x1) + 0.5 - x0) / (x1 - x0) * (w1 - w0)  # each column's time
    running = np.zeros(len(at), bool)
    for start, end in kernels:
        running |= (at >= start) & (at < end)
    busy_ratio = running.mean()  # the union of the kernels over the window's span
    assert 0.1 < busy_ratio < 0.9
    assert abs(drawn.mean() - busy_ratio) < 0.03, (drawn.mean(), busy_ratio)
    # where, not only how much: bar edges (white strokes, antialiasing) are the only misses
    assert (drawn != running).mean() < 0.03


def test_empty_trace_renders(build):
    report = nsysprobe.analyze(build(Export()))
    out = render_html(report, None)
    assert out.startswith("<!DOCTYPE html>") and out.endswith("</html>\n")
    assert "The trace has no events to draw." in out
    assert render_html(report, None) == out


def test_same_report_same_bytes(build):
    path = build(ladder_rung("pinned"))
    one = nsysprobe.analyze(path, timeline=True)
    two = nsysprobe.analyze(path, timeline=True)
    assert render_html(one, one.timeline) == render_html(two, two.timeline)


def test_copy_sizes_in_the_reports_unit(rung):
    """A 64 MiB copy reads 67.11 MB, GB and MB being 10^9 and 10^6 bytes as in the text."""
    report = nsysprobe.analyze(rung("pinned"), timeline=True)
    page = render_html(report, report.timeline)
    sizes = re.findall(r"<title>HtoD ([^<]*) \(Pinned\) · ", page)
    assert len(sizes) >= 3 and set(sizes) == {"67.11 MB"}
    assert f"{6 * (64 << 20) / 1e6:,.2f} MB" in render(report)  # the transfers: 402.65 MB


def test_control_characters_never_reach_the_page(build):
    """The reader spells them out (\\u0001); the templates drop any that would get past it."""
    ex = Export()
    for i in range(3):
        t = (1000 + i * 100) * MS
        ex.nvtx(t, t + 90 * MS, f"step\x01\x1b[31m {i}")
        ex.kernel(t + MS, t + 80 * MS, name="k\x07ernel")
    report = nsysprobe.analyze(build(ex), timeline=True)
    page = render_html(report, report.timeline)
    assert re.search(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]", page) is None
    assert "<title>step\\u0001\\u001b[31m 1 · 90.0 ms</title>" in page
    template = ENVIRONMENT.from_string('<p title="{{ x }}">{{ x }}</p>')
    assert template.render(x="a\x01\x1b<b>") == '<p title="a&lt;b&gt;">a&lt;b&gt;</p>'


def test_one_skeleton_for_both_pages(build):
    """The single report and the many-ranks page extend the same base.html: same head, same
    style, same footer line; no page carries a script."""
    report = nsysprobe.analyze(build(Export()))
    pages = [render_html(report, None), render_many_html(cross_rank([]))]

    def head(page):
        return re.sub(r"<title>.*?</title>", "", page[: page.index("</head>")])

    assert head(pages[0]) == head(pages[1])
    for page in pages:
        assert "<script" not in page and "default-src 'none'" in page
        assert re.search(r"<footer>nsysprobe [^<]+, (report|cross-rank) schema \d", page)


def test_templates_never_mark_text_safe():
    """Escaping is by construction: no template or renderer turns escaping off."""
    import nsysprobe.render.html as html_module

    folder = Path(html_module.__file__).parent
    templates = list((folder / "templates").iterdir())
    assert {t.name for t in templates} >= {"base.html", "cards.html", "svg.html", "report.html"}
    modules = ("html.py", "svg.py", "timeline_figure.py", "charts.py", "many.py")
    for source in [*templates, *(folder / m for m in modules)]:
        text = source.read_text()
        assert not re.search(r"\|\s*safe|autoescape\s+false|Markup\(", text), source.name


def dense_kernels() -> Export:
    """Three steps of 90 ms, each with 10,000 kernels of 2 us, 8 us apart (25 % busy)."""
    ex = Export()
    for step in range(3):
        t0 = (1000 + step * 100) * MS
        ex.nvtx(t0, t0 + 90 * MS, f"step {step}")
        for k in range(10_000):
            s = t0 + k * 8_000
            ex.kernel(s, s + 2_000, name=f"k{k % 7}")
    return ex


def test_timeline_rows_are_bounded(build):
    """10,000 back-to-back 2 us kernels in one step: merged to about a bar per pixel."""
    tl = nsysprobe.analyze(build(dense_kernels()), timeline=True).timeline
    (lane,) = [lane for lane in tl.lanes if lane.group == "GPU 0"]
    assert lane.events == 30_000
    assert len(lane.bars) <= 2_400
    assert sum(b.count for b in lane.bars) == 30_000


def test_html_refuses_to_overwrite_without_force(rung, tmp_path):
    path = rung("pinned")
    out = tmp_path / "r.html"
    out.write_text("keep me")
    result = CliRunner().invoke(main, ["analyze", str(path), "--html", str(out), "--no-history"])
    assert result.exit_code == 2
    assert (
        f"--html {out}: file exists; pass --force to overwrite it or choose another name"
        in result.output
    )
    assert out.read_text() == "keep me"
    result = CliRunner().invoke(
        main, ["analyze", str(path), "--html", str(out), "--force", "--no-history"]
    )
    assert result.exit_code == 0, result.output
    assert out.read_text().startswith("<!DOCTYPE html>")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_html_never_replaces_a_file_that_appeared(tmp_path, monkeypatch):
    out = tmp_path / "late.html"
    import nsysprobe.common.writer as writer

    # the file appears after the early checks (another process), before the write lands
    checks = []
    real_check = writer.check_output

    def check_then_appear(path, **kwargs):
        checks.append(path)
        result = real_check(path, **kwargs)
        if len(checks) == 2:  # write_output's own check passed; the link comes next
            out.write_text("theirs")
        return result

    monkeypatch.setattr(writer, "check_output", check_then_appear)
    with pytest.raises(InputError, match="file exists"):
        writer.write_output("<p>mine</p>", out, force=False, option="--html")
    assert out.read_text() == "theirs"
    assert [p.name for p in tmp_path.iterdir()] == ["late.html"]


@needs_chromium
@pytest.mark.parametrize(
    "name, starved",
    [
        ("h200_baseline.sqlite", True),
        ("h200_multiworker.sqlite", False),
        ("h200_pinned.sqlite", False),
        ("h200_streams.sqlite", False),
        ("h200_prefetch.sqlite", False),
        ("h200_cached.sqlite", False),
    ],
)
def test_h200_ladder_reports_show_what_the_text_report_says(name, starved, tmp_path):
    """Each real H200 rung, in the browser: its verdict first, all 20 steps drawn, and GPU
    idle bars that add up to the step time the GPU was idle (large only for the baseline)."""
    import json

    from conftest import SAMPLE_TRACES

    trace = SAMPLE_TRACES / name
    expected = json.loads((SAMPLE_TRACES / "manifest.json").read_text())["traces"][name]
    walls = [e - s for s, e in independent.step_windows(trace, "Batch %")]
    dom, console = dump_dom(html_of(trace, tmp_path), tmp_path)
    assert console == []
    verdict = re.search(
        r'<section class="card verdict[^"]*" id="verdict">(.*?)</section>', dom, re.S
    )
    assert expected["expected_verdict"] in verdict.group(1)
    assert dom.count('<g class="step"') == len(walls) == 20
    idle_ms = re.findall(r'class="gpu-idle"[^>]*><title>Batch \d+: GPU idle ([\d.,]+) ms<', dom)
    idle_share = sum(float(v.replace(",", "")) for v in idle_ms) * 1e6 / sum(walls)
    assert (idle_share > 0.5) is starved, idle_share


@needs_chromium
def test_steps_are_drawn_where_the_gpu_ran_them_with_the_cpu_range_beside_them(tmp_path):
    """The GPU-bound fp32 loop captured on the H200: the CPU queued every step long before the
    GPU ran it. Each step's CPU bar starts where its NVTX range starts and its window bar
    where the last step completed (both by SQL, on the figure's time axis), so the CPU bars
    run ahead of the windows; the window's busy and idle add up to the window."""
    from conftest import SAMPLE_TRACES

    trace = SAMPLE_TRACES / "h200_gpu_bound_fp32.sqlite"
    ranges = independent.nvtx_ranges(trace, "step %")
    windows = independent.step_windows(trace, "step %")
    dom, console = dump_dom(html_of(trace, tmp_path), tmp_path)
    assert console == []
    figure = re.search(r'<svg id="steps-svg".*?</svg>', dom, re.S).group(0)
    groups = re.findall(r'<g class="step" data-step="(\d+)">(.*?)</g>', figure, re.S)
    assert [int(i) for i, _ in groups] == list(range(20))

    def x(cls: str, body: str) -> float:
        return float(re.search(rf'<rect class="{cls}" x="([\d.]+)"', body).group(1))

    cpu_x = [x("seg", body) for _, body in groups]
    gpu_x = [x("gpu-busy", body) for _, body in groups]
    origin = min(ranges[0][0], windows[0][0])
    # x = x0 + (t - origin) * scale, the same scale for both bars: fit it on the windows
    times = [s - origin for s, _ in windows] + [s - origin for s, _ in ranges]
    pixels = gpu_x + cpu_x
    scale, x0 = np.polyfit(times, pixels, 1)
    assert np.allclose(np.polyval([scale, x0], times), pixels, atol=0.1)
    assert scale > 0 and all(c < g for c, g in zip(cpu_x[1:], gpu_x[1:]))
    for (_, body), (s, e) in zip(groups, windows):
        busy = float(re.search(r"GPU busy ([\d.,]+) ms<", body).group(1).replace(",", ""))
        idle = float(re.search(r"GPU idle ([\d.,]+) ms<", body).group(1).replace(",", ""))
        assert abs(busy + idle - (e - s) / 1e6) <= 0.1
