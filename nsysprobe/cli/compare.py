"""``nsysprobe compare``: runs side by side, and whether each is faster than the first."""

from __future__ import annotations

from pathlib import Path

import click

from nsysprobe.analyses.gaps import DEFAULT_MIN_GAP_NS
from nsysprobe.compare import compare_runs, load_run
from nsysprobe.progress import Progress
from nsysprobe.render.comparison import RENDERERS


@click.command()
@click.argument("runs", nargs=-1, required=True, metavar="RUN RUN [RUN...]")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(list(RENDERERS)),
    default="text",
    show_default=True,
    help="text for people, markdown for issues and PRs, json for scripts.",
)
@click.option(
    "--min-gap-ms",
    type=float,
    default=DEFAULT_MIN_GAP_NS / 1e6,
    show_default=True,
    help="Gap threshold for traces analyzed now.",
)
@click.option("--step-range", metavar="NAME", help="The per-iteration NVTX range of the traces.")
@click.option("--nsys", metavar="PATH", help="The nsys to export .nsys-rep reports with.")
@click.option(
    "--history",
    "history_path",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="PATH",
    help="History database that ids refer to [default: as `nsysprobe history`].",
)
def compare(
    runs: tuple[str, ...],
    fmt: str,
    min_gap_ms: float,
    step_range: str | None,
    nsys: str | None,
    history_path: Path | None,
) -> None:
    """Compare RUNs side by side; the first is the reference.

    A RUN is a trace (.sqlite, .nsys-rep), a run folder (its analysis.json, else its one
    .sqlite) or an id from `nsysprobe history`. Each later run gets its speed-up and whether
    its per-step times differ from the first run's beyond noise (Mann-Whitney U test).

    \b
    Examples:
      nsysprobe compare baseline.sqlite pinned.sqlite pipelined.sqlite
      nsysprobe compare 12 14 --format markdown
    """
    options = {"min_gap_ms": min_gap_ms, "step_range": step_range, "nsys": nsys}
    progress = Progress()
    loaded = []
    with progress.task("loading runs"):
        for spec in runs:
            progress(f"loading {spec}")
            loaded.append(load_run(spec, history_path=history_path, analyze_options=options))
    click.echo(RENDERERS[fmt](compare_runs(loaded)), nl=False)
