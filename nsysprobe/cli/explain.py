"""``nsysprobe explain``: what an analysis measures, what a recommendation means."""

from __future__ import annotations

import click

from nsysprobe.cli import echo


@click.command()
@click.argument("name", required=False)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "markdown"]),
    default="text",
    show_default=True,
    help="markdown: the README's tables of analyses and recommendations.",
)
def explain(name: str | None, fmt: str) -> None:
    """Explain an analysis (gaps, steps, account, ...) or a recommendation id (pinned_memory,
    host_sync, ...); without NAME, list them all with one line each.

    The text is each analysis module's own definition and the diagnosis's catalogue of ids,
    the same text the README's tables are made from.

    \b
    Examples:
      nsysprobe explain                  every analysis and recommendation, a line each
      nsysprobe explain gaps             how idle gaps are found and attributed
      nsysprobe explain pinned_memory    what the recommendation means
    """
    from nsysprobe.report import explain as catalogue

    if fmt == "markdown" and name is not None:
        raise click.UsageError("--format markdown prints the tables of every name; give no NAME")
    if fmt == "markdown":
        echo(catalogue.markdown_tables(), nl=False)
    elif name is None:
        for topic in catalogue.topics():
            echo(f"{topic.name:<22} {topic.kind:<15} {topic.summary}")
    else:
        echo(catalogue.explain(name).text)
