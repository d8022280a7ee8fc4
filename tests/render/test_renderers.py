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
