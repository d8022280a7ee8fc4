"""Report -> text, JSON or Markdown. Deterministic: the same report renders the same bytes.

The JSON is the report's saved form (``nsysprobe.report.saved``), which documents its keys."""

from __future__ import annotations

from nsysprobe.errors import InputError
from nsysprobe.render.markdown import render_markdown
from nsysprobe.render.text import render_text
from nsysprobe.report.analyze import Report
from nsysprobe.report.saved import to_json

FORMATS = ("text", "json", "markdown")


def render(report: Report, fmt: str = "text") -> str:
    if fmt == "text":
        return render_text(report)
    if fmt == "json":
        return to_json(report)
    if fmt == "markdown":
        return render_markdown(report)
    raise InputError(f"--format {fmt!r}: unknown; use one of {', '.join(FORMATS)}")
