"""``nsysprobe ladder``: parse options, call nsysprobe.ladder.run, print the table."""

from __future__ import annotations

from pathlib import Path

import click

from nsysprobe.cli import echo
from nsysprobe.cli.options import format_option, nsys_option, text_width, width_option
from nsysprobe.common.writer import write_output
from nsysprobe.ladder.run import (
    LADDER_JSON,
    LADDER_MD,
    RUNGS,
    WorkloadOptions,
    check_ladder,
    run_ladder,
    select_rungs,
)
from nsysprobe.render import render_as
from nsysprobe.render.ladder import RENDERERS


def _say(line: str) -> None:
    echo(f"nsysprobe: {line}", err=True)


@click.command()
@width_option
@click.option(
    "--rungs",
    metavar="A,B,...",
    help=f"Rungs to run, in any order; the table keeps the ladder's [default: {', '.join(RUNGS)}].",
)
@click.option(
    "--repeats",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Plain and profiled runs per rung; steps/s are medians over them.",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(file_okay=False, path_type=Path),
    help="New or empty folder for the runs, ladder.json and ladder.md "
    "[default: nsysprobe-runs/ladder-<time>].",
)
@click.option("--steps", type=click.IntRange(min=1), help="Measured steps per run.")
@click.option("--warmup", type=click.IntRange(min=0), help="Unmeasured steps first.")
@click.option(
    "--workers", type=click.IntRange(min=0), help="Loader workers of the rungs that use them."
)
@click.option("--batch-size", type=click.IntRange(min=1), help="Images per step.")
@click.option("--image-size", type=click.IntRange(min=1), help="Image side in px.")
@click.option("--device", help="auto, cpu or cuda:N [default: the workloads' auto].")
@nsys_option()
@click.option(
    "--workloads",
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder with the rungs' scripts [default: nsysprobe's own, nsysprobe.workloads].",
)
@format_option(RENDERERS, "text for people, markdown for issues and PRs, json for scripts.")
def ladder(
    rungs: str | None,
    repeats: int,
    output: Path | None,
    steps: int | None,
    warmup: int | None,
    workers: int | None,
    batch_size: int | None,
    image_size: int | None,
    device: str | None,
    nsys: str | None,
    workloads: Path | None,
    fmt: str,
    width: int | None,
) -> None:
    """Run the optimization ladder with and without nsys, and check each rung's diagnosis.

    Each rung runs plain and then under nsys, --repeats times, taking turns so that drift
    on the machine hits both. The table gives steps/s, speed-up over the baseline, share
    of the cached ceiling, GPU busy, profiled/plain steps/s and nsysprobe's top
    recommendation, which should name the next rung (gpu_bound at the top).

    Exits 1, with the table written, when a workload fails or a diagnosis is not the
    expected one; without GPU activity (a CPU-only machine) the diagnosis is not checked.

    \b
    Examples:
      nsysprobe ladder --output ladder-h200 --steps 20 --warmup 5 --workers 8
      nsysprobe ladder --rungs baseline,cached --device cpu --image-size 32 --steps 2
    """
    result = run_ladder(
        select_rungs(rungs.split(",") if rungs is not None else None),
        WorkloadOptions(
            steps=steps,
            warmup=warmup,
            workers=workers,
            batch_size=batch_size,
            image_size=image_size,
            device=device,
        ),
        repeats=repeats,
        output=output,
        nsys=nsys,
        workloads=workloads,
        progress=_say,
    )
    for summary, file in (("json", LADDER_JSON), ("markdown", LADDER_MD)):
        write_output(
            render_as(RENDERERS, result, summary),
            result.folder / file,
            force=False,
            option="--output",
        )
    echo(render_as(RENDERERS, result, fmt, text_width(width)), nl=False)
    _say(f"runs, ladder.json and ladder.md in {result.folder}")
    check_ladder(result)
