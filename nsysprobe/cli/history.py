"""``nsysprobe history``: the runs recorded by ``analyze`` and ``run``, newest first."""

from __future__ import annotations

from pathlib import Path

import click

from nsysprobe.cli import echo
from nsysprobe.cli.options import format_option, history_option, text_width, width_option
from nsysprobe.render import render_as
from nsysprobe.render.history import RENDERERS
from nsysprobe.runs import history as history_db

# More rows than anybody reads, and within SQLite's LIMIT (a 64-bit integer).
MAX_LIMIT = 1_000_000


@click.command()
@click.option(
    "--limit",
    "-n",
    type=click.IntRange(1, MAX_LIMIT),
    default=20,
    show_default=True,
    help="How many of the newest runs to list.",
)
@format_option(RENDERERS)
@history_option(
    "History database [default: $NSYSPROBE_HISTORY, else "
    "$XDG_DATA_HOME/nsysprobe/history.db, i.e. ~/.local/share/nsysprobe/history.db]."
)
@width_option
def history(limit: int, fmt: str, history_path: Path | None, width: int | None) -> None:
    """List the recorded runs, newest first; `nsysprobe compare` takes their ids.

    Every `nsysprobe analyze` and `nsysprobe run` records its command, paths and headline
    figures unless given --no-history. Long names and commands are cut, control characters
    escaped.
    """
    listing = history_db.newest(history_path, limit=limit)
    echo(render_as(RENDERERS, listing, fmt, text_width(width)), nl=False)
