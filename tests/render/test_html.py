"""The HTML report, loaded in a real headless Chromium (Debian's; scripts/install_chromium.sh).

Figures are checked by their SVG elements against figures computed here from the ladder's
definition (tests/exports.py) or straight from the SQLite file; hostile trace strings must
reach the DOM as text, never as elements.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
import subprocess

import pytest
from click.testing import CliRunner

import nsysprobe
from nsysprobe.analyses.timeline import PAD_RATIO, build_timeline
from nsysprobe.cli import main
from nsysprobe.errors import InputError
from nsysprobe.render.html import render_html

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
    # per step: wall 400 ms = 300 ms get batch + 40 ms copy + 60 ms compute; GPU busy 100 ms
    idle_bars = re.findall(r'class="gpu-idle"[^>]*><title>Batch \d: GPU idle ([\d.]+) ms<', dom)
    assert idle_bars == ["300.0"] * 6
    gets = re.findall(r'class="seg"[^>]*><title>Batch \d: get batch ([\d.]+) ms \(CPU\)<', dom)
    assert gets == ["300.0"] * 6
    assert dom.count('<g class="step"') == 6
    # the overlap figure: all 240 ms of pageable copies exposed
    assert re.search(r'class="exposed"[^>]*><title>exposed 240.0 ms<', dom)


@needs_chromium
def test_step_account_bars_add_up_to_each_step(rung, tmp_path):
    """One bar per step, split into the account's buckets; from the ladder's definition each
    baseline step is 300 ms of loading (idle), a 40 ms pageable copy and 60 ms of kernels."""
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
    assert per_step == {str(i): expected for i in range(6)}


@needs_chromium
@pytest.mark.parametrize("rung_name", ["baseline", "multiworker", "pinned", "pipelined"])
def test_timeline_draws_the_events_of_its_window(rung, tmp_path, rung_name):
    path = rung(rung_name)
    page = html_of(path, tmp_path)
    dom, console = dump_dom(page, tmp_path)
    assert console == []
    assert dom.count('id="timeline-svg"') == dom.count('id="steps-svg"') == 1
    db = sqlite3.connect(path)
    steps = db.execute(
        "SELECT n.start, n.end FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.textId "
        "WHERE s.value LIKE 'Batch %' ORDER BY n.start"
    ).fetchall()
    # the three steps after the first (all steps of a rung are alike, bar the first),
    # padded by PAD_RATIO on each side
    w0, w1 = steps[1][0], steps[3][1]
    pad = int((w1 - w0) * PAD_RATIO)
    w0, w1 = w0 - pad, w1 + pad
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
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in text
    assert "&quot;quoted&quot; &amp; &#x27;single&#x27; &lt;b&gt;" in text
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


@needs_chromium
def test_screenshot_of_a_ladder_report(rung, tmp_path):
    page = html_of(rung("multiworker"), tmp_path)
    png = tmp_path / "report.png"
    browse(page, tmp_path, "--hide-scrollbars", "--window-size=1300,1600", f"--screenshot={png}")
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1300, 1600)


def test_empty_trace_renders(build):
    report = nsysprobe.analyze(build(Export()))
    out = render_html(report, None)
    assert out.startswith("<!DOCTYPE html>") and out.endswith("</html>\n")
    assert "The trace has no events to draw." in out
    assert render_html(report, None) == out


def test_same_report_same_bytes(build):
    path = build(ladder_rung("pinned"))
    report = nsysprobe.analyze(path)
    from nsysprobe.analyses.timeline import load_timeline

    one = render_html(report, load_timeline(path, report.steps, report.gaps))
    two = render_html(report, load_timeline(path, report.steps, report.gaps))
    assert one == two


def test_timeline_rows_are_bounded(build):
    """10,000 back-to-back 2 us kernels in one step: merged to about a bar per pixel."""
    ex = Export()
    for step in range(3):
        t0 = (1000 + step * 100) * MS
        ex.nvtx(t0, t0 + 90 * MS, f"step {step}")
        for k in range(10_000):
            s = t0 + k * 8_000
            ex.kernel(s, s + 2_000, name=f"k{k % 7}")
    path = build(ex)
    report = nsysprobe.analyze(path)
    from nsysprobe.analyses.events import Events
    from nsysprobe.trace.reader import Trace

    with Trace(path) as trace:
        tl = build_timeline(Events.load(trace), report.steps, report.gaps)
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
    import sqlite3

    from conftest import SAMPLE_TRACES

    trace = SAMPLE_TRACES / name
    expected = json.loads((SAMPLE_TRACES / "manifest.json").read_text())["traces"][name]
    db = sqlite3.connect(f"file:{trace}?mode=ro", uri=True)
    walls = [
        w
        for (w,) in db.execute(
            "SELECT n.end - n.start FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId "
            "WHERE n.eventType = 59 AND coalesce(n.text, s.value) LIKE 'Batch %'"
        )
    ]
    db.close()
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
