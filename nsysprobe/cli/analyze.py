"""``nsysprobe analyze``: diagnose a report or its SQLite export."""

from __future__ import annotations

import click

from nsysprobe.analyses.gaps import DEFAULT_MIN_GAP_NS
from nsysprobe.cli.outputs import analyze_with_outputs, report_outputs
from nsysprobe.numa import Topology, discover, load_recorded
from nsysprobe.render import FORMATS, render


def load_topology(where: str | None) -> Topology | None:
    """``live`` -> this machine; a folder -> its recorded command outputs; None -> none."""
    if where is None:
        return None
    return discover("/") if where == "live" else load_recorded(where)


@click.command()
@click.argument("path", type=click.Path(dir_okay=True, path_type=str))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="text",
    show_default=True,
    help="text for people, json for scripts (has schema_version), markdown for issues and PRs.",
)
@click.option(
    "--min-gap-ms",
    type=float,
    default=DEFAULT_MIN_GAP_NS / 1e6,
    show_default=True,
    help="Report GPU idle gaps longer than this. Step-level starvation shows at ~1 ms; "
    "NVIDIA's gpu_gaps rule uses 500.",
)
@click.option(
    "--step-range",
    metavar="NAME",
    help="The per-iteration NVTX range, e.g. 'Batch #' or 'train_step'. Found by itself "
    "when omitted.",
)
@click.option(
    "--nsys",
    metavar="PATH",
    help="The nsys to export a .nsys-rep with (else $NSYS, PATH, known install folders).",
)
@click.option(
    "--topology",
    metavar="live|DIR",
    help="Place the traced threads on NUMA nodes (needs a capture with --cpuctxsw): 'live' "
    "for this machine, or a folder of recorded lscpu.txt / numactl-hardware.txt / "
    "nvidia-smi-topo-m.txt from the machine that was profiled.",
)
@report_outputs
def analyze(
    path: str,
    fmt: str,
    min_gap_ms: float,
    step_range: str | None,
    nsys: str | None,
    topology: str | None,
    **outputs,
):
    """Diagnose GPU starvation in PATH: a .sqlite export or a .nsys-rep/.qdrep report.

    A report is exported to SQLite next to it first (and the export reused while it is newer
    than the report). The analysis reads the export read-only and prints the ranked
    recommendations first, then the evidence: GPU idle gaps and what the CPU was doing
    during them, transfers by memory kind, copy/compute overlap, OS-runtime stalls and the
    per-step breakdown.

    \b
    Examples:
      nsysprobe analyze run.nsys-rep
      nsysprobe analyze run.sqlite --format json | jq '.recommendations[0].id'
      nsysprobe analyze run.sqlite --min-gap-ms 0.5 --step-range 'Batch #'
      nsysprobe analyze run.sqlite --html run.html
    """
    report = analyze_with_outputs(
        path,
        outputs,
        min_gap_ms=min_gap_ms,
        step_range=step_range,
        nsys=nsys,
        topology=load_topology(topology),
    )
    click.echo(render(report, fmt), nl=False)
