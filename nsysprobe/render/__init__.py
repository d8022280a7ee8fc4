"""Report -> text, JSON or Markdown. Deterministic: the same report renders the same bytes.

The JSON is the report's saved form (``nsysprobe.report.saved``), which documents its keys.
Each format's renderer is imported when that format is asked for."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nsysprobe.errors import InputError

if TYPE_CHECKING:
    from nsysprobe.report.analyze import Report

FORMATS = ("text", "json", "markdown")


def render(report: Report, fmt: str = "text", width: int | None = None) -> str:
    """``report`` as ``fmt``; text is laid out for ``width`` columns (None: each row on one
    line; see ``nsysprobe.render.layout``)."""
    if fmt == "text":
        from nsysprobe.render.text import render_text

        return render_text(report, width)
    if fmt == "json":
        from nsysprobe.report.saved import to_json

        return to_json(report)
    if fmt == "markdown":
        from nsysprobe.render.markdown import render_markdown

        return render_markdown(report)
    raise InputError(f"--format {fmt!r}: unknown; use one of {', '.join(FORMATS)}")
