"""Renderers on empty input and on hostile trace strings."""

from __future__ import annotations

import json

import pytest

import nsysprobe
from nsysprobe.errors import InputError
from nsysprobe.render import FORMATS, render
from nsysprobe.render.markdown import escape

from exports import Export


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_renders_an_empty_trace(build, fmt):
    report = nsysprobe.analyze(build(Export()))
    out = render(report, fmt)
    # The verdict names the capture as incomplete in every format; the finding behind it
    # (capture_not_started) is listed in text and JSON.
    assert "capture_incomplete" in out
    assert ("capture_not_started" in out) == (fmt != "markdown")
    assert render(report, fmt) == out  # deterministic


def test_json_is_valid_and_ordered(build):
    data = json.loads(render(nsysprobe.analyze(build(Export())), "json"))
    assert list(data)[:3] == ["schema_version", "trace", "devices"]
    assert data["recommendations"][0]["id"] == "capture_incomplete"


def test_markdown_escapes_trace_strings(build):
    ex = Export()
    evil = "<script>alert(1)</script> | `x` *y*"
    ex.nvtx(0, 10, evil)
    ex.nvtx(20, 30, evil)
    ex.kernel(0, 5)
    out = render(nsysprobe.analyze(build(ex)), "markdown")
    assert "<script>" not in out
    assert escape(evil) == r"\<script\>alert\(1\)\</script\> \| \`x\` \*y\*"


def test_unknown_format():
    with pytest.raises(InputError, match="--format 'xml': unknown; use one of text, json"):
        render(None, "xml")


def test_every_table_that_shows_a_subset_says_so_in_every_format():
    """The H200 slow-loader capture: 20 steps (12 in the per-step table), its OS-runtime
    (function, thread) pairs and GPU idle gaps over 1 ms in its steady steps (a few in each
    table), counted with SQL here; each cut table says how many it shows of how many, in text,
    Markdown and HTML, and the JSON holds what the note says it holds."""
    import independent

    from nsysprobe.render.html import render_html

    from conftest import SAMPLE_TRACES

    path = SAMPLE_TRACES / "h200_slow_loader.sqlite"
    ((pairs,),) = independent.query(
        path, "SELECT count(*) FROM (SELECT DISTINCT nameId, globalTid FROM OSRT_API)"
    )
    s, e = independent.gpu_work(path)
    (pid,) = independent.gpu_pids(path)
    wins = independent.completion_windows(path, independent.step_ranges(path, pid), pid)
    walls = [w_e - w_s for _, w_s, w_e in wins]
    first = independent.startup_count(walls)
    last = len(wins) - independent.final_count(walls, first) - 1
    # Between two pieces of GPU work: none before the first or after the last.
    lo, hi = max(wins[first][1], min(s)), min(wins[last][2], max(e))
    idle = independent.minus([(lo, hi)], independent.union(zip(s, e)))
    gaps = sum(1 for a, b in idle if b - a > 1_000_000)
    report = nsysprobe.analyze(path)
    data = json.loads(render(report, "json"))
    assert len(data["steps"]["rows"]) == len(data["account"]["accounts"][0]["steps"]) == 20
    assert len(data["osrt"]["rows"]) == 30 < pairs and len(data["gaps"]["longest"]) == min(20, gaps)
    wanted = [
        "12 of 20 steps shown; every step's buckets are in the JSON",
        f"15 of {pairs} (function, thread) pairs shown, most time in gaps first; the JSON has "
        "the first 30",
        f"the 8 longest of {gaps} gaps shown; the JSON has the 20 longest",
    ]
    for out in (render(report, "text"), render(report, "markdown"), render_html(report)):
        flat = " ".join(out.replace("\\", "").replace("&#39;", "'").split())
        for note in wanted:
            assert note in flat, note
