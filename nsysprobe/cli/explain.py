"""``nsysprobe explain``: what an analysis measures, what a recommendation means."""

from __future__ import annotations

import click

from nsysprobe.cli import echo
from nsysprobe.cli.options import format_option
from nsysprobe.render import render_as
from nsysprobe.render.explain import RENDERERS


@click.command()
@click.argument("name", required=False)
@format_option(
    RENDERERS,
    "markdown: NAME's page, or without NAME the README's tables of analyses and recommendations.",
)
def explain(name: str | None, fmt: str) -> None:
    """Explain an analysis (gaps, steps, account, ...) or a recommendation id (pinned_memory,
    host_sync, ...); without NAME, list them all with one line each.

    An analysis is its module's own definition. A recommendation's page says when it fires
    (its thresholds, read from the code), the evidence it reads and writes, the fix with
    code, an example from a real trace (analyzed now where the repository's sample_traces/
    is at hand) and how to confirm the fix worked. The README's tables are made from the
    same text.

    \b
    Examples:
      nsysprobe explain                  every analysis and recommendation, a line each
      nsysprobe explain gaps             how idle gaps are found and attributed
      nsysprobe explain pinned_memory    when it fires, the fix, an example, how to confirm
      nsysprobe explain host_sync --format markdown
    """
    echo(render_as(RENDERERS, name, fmt), nl=False)
