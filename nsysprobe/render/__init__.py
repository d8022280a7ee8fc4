"""Report -> text, JSON or Markdown. Deterministic: the same report renders the same bytes.

Each kind of report (an analysis report here, many ranks, a comparison, a ladder, the history,
a scrub, an explain page, NUMA topologies, plans and placements) has one ``RENDERERS``-style
mapping, format -> function, in its render module, in the order ``--help`` lists the formats.
``render_as`` looks a format up in one; the CLI chooses renderers only through it.

The JSON is the report's saved form (``nsysprobe.report.saved``), which documents its keys.
Each format's renderer is imported when that format is asked for."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from nsysprobe.errors import InputError

if TYPE_CHECKING:
    from nsysprobe.report.analyze import Report


def render_as(
    renderers: Mapping[str, Callable[..., str]], report: Any, fmt: str, width: int | None = None
) -> str:
    """``report`` as ``fmt``, by ``renderers`` (one kind's format -> function). Only text is
    laid out for a width: ``width`` columns goes to the text renderer when given (None: each
    row on one line; see ``nsysprobe.render.layout``)."""
    if fmt not in renderers:
        raise InputError(f"--format {fmt!r}: unknown; use one of {', '.join(renderers)}")
    if fmt == "text" and width is not None:
        return renderers[fmt](report, width)
    return renderers[fmt](report)


def imported_when_called(target: str) -> Callable[..., str]:
    """The function ``module:name``, its module imported on the first call, so that a
    format's renderer costs nothing until that format is asked for."""
    module, _, attribute = target.partition(":")

    def call(*args):
        return getattr(importlib.import_module(module), attribute)(*args)

    return call


RENDERERS = {
    "text": imported_when_called("nsysprobe.render.text:render_text"),
    "json": imported_when_called("nsysprobe.report.saved:to_json"),
    "markdown": imported_when_called("nsysprobe.render.markdown:render_markdown"),
}
FORMATS = tuple(RENDERERS)


def render(report: Report, fmt: str = "text", width: int | None = None) -> str:
    """``report`` as ``fmt``; text is laid out for ``width`` columns (None: each row on one
    line; see ``nsysprobe.render.layout``)."""
    return render_as(RENDERERS, report, fmt, width)
