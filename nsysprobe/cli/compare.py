"""``nsysprobe compare``: runs side by side, and whether each is faster than the first."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import click

from nsysprobe.cli import echo
from nsysprobe.cli.options import (
    format_option,
    history_option,
    min_gap_option,
    nsys_option,
    step_range_option,
    text_width,
    width_option,
)
from nsysprobe.common.progress import Progress
from nsysprobe.common.safetext import name
from nsysprobe.render import render_as
from nsysprobe.render.comparison import RENDERERS
from nsysprobe.runs.compare import check_percentage, compare_runs, gate, load_run, parse_condition


@click.command()
@click.argument("runs", nargs=-1, required=True, metavar="RUN RUN [RUN...]")
@format_option(RENDERERS, "text for people, markdown for issues and PRs, json for scripts.")
@min_gap_option("Gap threshold for traces analyzed now.")
@step_range_option("The per-iteration NVTX range of the traces.")
@nsys_option("The nsys to export .nsys-rep reports with.")
@history_option("History database that ids refer to [default: as `nsysprobe history`].")
@click.option(
    "--fail-if-slower",
    type=float,
    metavar="PCT",
    help="Exit 1 when a later run's steps are slower than the first's beyond noise and its "
    "time per step (1 / steps/s) is more than PCT % longer (a CI regression gate).",
)
@click.option(
    "--fail-if",
    "conditions",
    multiple=True,
    metavar="EXPR",
    help="Exit 1 when a later run's figure meets EXPR, e.g. 'gpu_busy_ratio<0.9' or "
    "'speedup<0.95' (repeatable; a figure the run lacks fails too).",
)
@width_option
def compare(
    runs: tuple[str, ...],
    fmt: str,
    fail_if_slower: float | None,
    conditions: tuple[str, ...],
    min_gap_ms: float,
    step_range: str | None,
    nsys: str | None,
    history_path: Path | None,
    width: int | None,
) -> None:
    """Compare RUNs side by side; the first is the reference.

    A RUN is a trace (.sqlite, .nsys-rep), a run folder (its analysis.json, else its one
    .sqlite) or an id from `nsysprobe history`. Each later run gets its speed-up and whether
    its per-step times differ from the first run's beyond noise (Mann-Whitney U test). Runs
    whose GPU work ran on different GPUs (a CPU run beside an H200 run) get a warning.

    With --fail-if-slower or --fail-if, every later run is checked against the first and the
    command exits 1 when a check fails (a line on stderr says which), 0 when all pass: a CI
    job compares the main branch's capture with the pull request's and posts the Markdown.

    \b
    Examples:
      nsysprobe compare baseline.sqlite pinned.sqlite pipelined.sqlite
      nsysprobe compare 12 14 --format markdown
      nsysprobe compare main.sqlite pr.sqlite --fail-if-slower 5 --format markdown
      nsysprobe compare main.sqlite pr.sqlite --fail-if 'gpu_busy_ratio<0.9'
    """
    for text in conditions:
        parse_condition(text)  # a bad condition is refused before any run is loaded
    check_percentage(fail_if_slower)  # so is a bad percentage
    options = {"min_gap_ms": min_gap_ms, "step_range": step_range, "nsys": nsys}
    progress = Progress()
    loaded = []
    with progress.task("loading runs"):
        for spec in runs:
            progress(f"loading {name(spec)}")
            loaded.append(load_run(spec, history_path=history_path, analyze_options=options))
    comparison = compare_runs(loaded)
    if fail_if_slower is not None or conditions:
        comparison = replace(comparison, gate=gate(comparison, fail_if_slower, conditions))
    echo(render_as(RENDERERS, comparison, fmt, text_width(width)), nl=False)
    if comparison.gate is not None and comparison.gate.failed:
        failed = [f"{c.run}: {c.check} ({c.why})" for c in comparison.gate.checks if c.failed]
        echo(f"nsysprobe: gate failed: {'; '.join(failed)}", err=True)
        sys.exit(1)
