"""``nsysprobe history``: the runs recorded by ``analyze`` and ``run``, newest first."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import click

from nsysprobe.cli import echo, text_width, width_option
from nsysprobe.common.safetext import one_line
from nsysprobe.render.layout import table as layout
from nsysprobe.render.sections import pct
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
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
@click.option(
    "--history",
    "history_path",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="PATH",
    help="History database [default: $NSYSPROBE_HISTORY, else "
    "$XDG_DATA_HOME/nsysprobe/history.db, i.e. ~/.local/share/nsysprobe/history.db].",
)
@width_option
def history(limit: int, fmt: str, history_path: Path | None, width: int | None) -> None:
    """List the recorded runs, newest first; `nsysprobe compare` takes their ids.

    Every `nsysprobe analyze` and `nsysprobe run` records its command, paths and headline
    figures unless given --no-history. Long names and commands are cut, control characters
    escaped.
    """
    path = history_path or history_db.default_path()
    entries = history_db.entries(path, limit=limit)
    if fmt == "json":
        data = [
            {
                **{k: v for k, v in dataclasses.asdict(e).items() if k != "metrics"},
                **{k: v for k, v in dataclasses.asdict(e.metrics).items() if k != "step_wall_ns"},
            }
            for e in entries
        ]
        echo(json.dumps({"history": str(path), "entries": data}, indent=2))
        return
    if not entries:
        echo(f"no runs recorded yet in {path}")
        return
    header = (
        "id",
        "recorded (UTC)",
        "trace",
        "steps/s",
        "GPU busy",
        "top recommendation",
        "command",
    )
    table = []
    for e in entries:
        m = e.metrics
        row = (
            str(e.id),
            e.recorded_utc.replace("+00:00", ""),
            m.trace,
            "-" if m.steps_per_s is None else f"{m.steps_per_s:,.2f}",
            "-" if m.gpu_busy_ratio is None else pct(m.gpu_busy_ratio),
            m.top_recommendation or "-",
            e.command,
        )
        table.append(tuple(one_line(cell) for cell in row))  # a hand-edited row, too
    echo("\n".join(layout(header, table, text_width(width))))
    echo(f"({len(entries)} newest in {path})")
