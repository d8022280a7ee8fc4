"""``nsysprobe analyze``: diagnose a report or its SQLite export."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from nsysprobe.capture.runfolder import is_run_folder
from nsysprobe.cli import echo
from nsysprobe.cli.options import (
    format_option,
    min_gap_option,
    nsys_option,
    step_range_option,
    text_width,
    width_option,
)
from nsysprobe.cli.outputs import (
    Outputs,
    analyze_many_with_outputs,
    analyze_with_outputs,
    report_outputs,
)
from nsysprobe.common.units import counted
from nsysprobe.errors import InputError
from nsysprobe.render import RENDERERS, render_as

if TYPE_CHECKING:
    from nsysprobe.numa.topology import Topology


def is_many(path: str) -> bool:
    """A folder (other than a run folder), or a glob that names no file, means one report
    per rank."""
    p = Path(path)
    if p.is_dir():
        return not is_run_folder(p)
    return not p.exists() and any(c in path for c in "*?[")


# Each per-report limit's unit and an example value, for its error message.
RANK_LIMITS = {"--rank-timeout-s": ("seconds", "600"), "--rank-memory-gb": ("GB", "8")}


def check_rank_limit(_ctx, param: click.Parameter, value: float | None) -> float | None:
    """--rank-timeout-s and --rank-memory-gb: a finite number above 0."""
    if value is not None and not 0 < value < 1e12:  # NaN fails both
        name = param.opts[0]
        unit, example = RANK_LIMITS[name]
        raise InputError(f"{name} {value}: give a number of {unit} above 0, e.g. {name} {example}")
    return value


def warn_over_cpus(workers: int | None) -> None:
    """Say that a --workers above the CPUs this process may use starts fewer workers."""
    from nsysprobe.ranks.cluster import usable_cpus

    cpus = usable_cpus()
    if workers is not None and workers > cpus:
        echo(
            f"nsysprobe: warning: --workers {workers}: this process may use "
            f"{counted(cpus, 'CPU')} (its affinity); the local cluster gets "
            f"{counted(cpus, 'worker')} at most",
            err=True,
        )


def load_topology(where: str | None) -> Topology | None:
    """``live`` -> this machine; a folder -> its recorded command outputs; None -> none."""
    if where is None:
        return None
    if where == "live":
        from nsysprobe.numa.topology import discover

        return discover("/")
    from nsysprobe.numa.recorded import load_recorded

    return load_recorded(where)


@click.command()
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@format_option(
    RENDERERS,
    "text for people, json for scripts (has schema_version), markdown for issues and PRs.",
)
@min_gap_option(
    "List the step account's idle gaps longer than this. Step-level starvation shows at "
    "~1 ms; NVIDIA's gpu_gaps rule uses 500. It changes what is listed, never a cause or "
    "the verdict (they read all idle time)."
)
@step_range_option(
    "The per-iteration NVTX range, e.g. 'Batch #' or 'train_step'. Found by itself when omitted."
)
@nsys_option("The nsys to export a .nsys-rep with (else $NSYS, PATH, known install folders).")
@click.option(
    "--topology",
    metavar="live|DIR",
    help="Place the traced threads on NUMA nodes (needs a capture with --cpuctxsw): 'live' "
    "for this machine, or a folder of recorded lscpu.txt / numactl-hardware.txt / "
    "nvidia-smi-topo-m.txt from the machine that was profiled.",
)
@click.option(
    "--ranks",
    is_flag=True,
    help="Compare ranks even for one PATH: each process with GPU work is a rank.",
)
@click.option(
    "--scheduler",
    metavar="ADDRESS",
    help="Dask scheduler to analyze many reports on (else Dask's scheduler-address "
    "setting, else a local cluster with one worker process per CPU); it must connect within "
    "10 s and answer within 10 s more.",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    help="Local cluster size (at most the CPUs this process may use, one per report).",
)
@click.option(
    "--rank-timeout-s",
    type=float,
    callback=check_rank_limit,
    metavar="SECONDS",
    help="Many ranks: stop a report's analysis after this many seconds; it becomes that "
    "rank's error and the others are compared [default: 60 + 1 per MB of the report].",
)
@click.option(
    "--rank-memory-gb",
    type=float,
    callback=check_rank_limit,
    metavar="GB",
    help="Many ranks: stop a report's analysis when its process holds more than this many GB "
    "(10^9 bytes) resident [default: the worker's memory over its threads; in a local "
    "cluster, the machine's memory over the workers].",
)
@width_option
@report_outputs
def analyze(
    paths: tuple[str, ...],
    fmt: str,
    min_gap_ms: float,
    step_range: str | None,
    nsys: str | None,
    topology: str | None,
    ranks: bool,
    scheduler: str | None,
    workers: int | None,
    rank_timeout_s: float | None,
    rank_memory_gb: float | None,
    width: int | None,
    outputs: Outputs,
):
    """Diagnose GPU starvation in PATH: a .sqlite export, a .nsys-rep/.qdrep report, or the
    run folder of an `nsysprobe run` (finishing a capture it left as .nsys-rep or .qdstrm).

    A report is exported to SQLite next to it first (and the export reused while it is newer
    than the report). The analysis reads the export read-only and prints the ranked
    recommendations first, then the evidence: GPU idle gaps and what the CPU was doing
    during them, transfers by memory kind, copy/compute overlap, OS-runtime stalls and the
    per-step breakdown. Text fits the terminal's width (cells wrapped at spaces); written to a
    file or a pipe, each table row is one line; no word is ever cut (--width sets the columns).

    Several PATHs, a folder or a glob (one report per rank) give the cross-rank view
    instead: each report analyzed on its own on Dask workers, then the ranks side by side,
    which rank arrives last at the collectives (NCCL) and by how much, the straggler and why
    it is late (its own step account against the others'). --ranks gives that view for one
    report holding several processes; without it, such a report's verdict still names the
    rank the others wait for (late_rank).

    \b
    Examples:
      nsysprobe analyze run.nsys-rep
      nsysprobe analyze run.sqlite --format json | jq '.recommendations[0].id'
      nsysprobe analyze run.sqlite --min-gap-ms 0.5 --step-range 'Batch #'
      nsysprobe analyze run.sqlite --html run.html
      nsysprobe analyze 'ranks/rank*.nsys-rep' --format markdown
      nsysprobe analyze ranks/ --scheduler tcp://HOST:8786
    """
    options = {"min_gap_ms": min_gap_ms, "step_range": step_range, "nsys": nsys}
    if ranks or len(paths) > 1 or is_many(paths[0]):
        from nsysprobe.render.many import RENDERERS as MANY_RENDERERS

        if scheduler is None:
            warn_over_cpus(workers)
        many = analyze_many_with_outputs(
            paths,
            outputs,
            scheduler=scheduler,
            workers=workers,
            rank_timeout_s=rank_timeout_s,
            rank_memory_bytes=None if rank_memory_gb is None else int(rank_memory_gb * 1e9),
            topology=load_topology(topology),
            **options,
        )
        echo(render_as(MANY_RENDERERS, many, fmt, text_width(width)), nl=False)
        if many.ranks and len(many.errors) == len(many.ranks):
            # The table says why for each; the exit status says that nothing was analyzed.
            raise InputError(
                f"none of the {len(many.ranks)} reports could be analyzed (see the errors "
                "above); give exports or reports nsys wrote"
            )
        return
    report = analyze_with_outputs(
        paths[0],
        outputs,
        topology=load_topology(topology),
        **options,
    )
    echo(render_as(RENDERERS, report, fmt, text_width(width)), nl=False)
