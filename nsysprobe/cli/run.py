"""``nsysprobe run`` and ``nsysprobe doctor``: parse options, call nsysprobe.capture, print."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from nsysprobe.capture.doctor import run_checks
from nsysprobe.capture.health import nvtx_note
from nsysprobe.capture.profile import ProfileOptions, capture
from nsysprobe.cli import echo, text_width, width_option
from nsysprobe.cli.outputs import report_outputs, save_outputs
from nsysprobe.errors import InputError


def _with_rung(rung: str | None, workload: tuple[str, ...]) -> tuple[str, ...]:
    """The command to profile: WORKLOAD, or nsysprobe's own workload ``rung`` with WORKLOAD as
    its options."""
    if rung is None:
        if not workload:
            raise InputError("give a WORKLOAD (a script or a command) or --rung NAME")
        return workload
    from nsysprobe.ladder.run import WORKLOADS

    script = WORKLOADS / f"{rung}.py"
    known = sorted(
        p.stem for p in WORKLOADS.glob("*.py") if p.stem not in ("__init__", "ladder", "mistakes")
    )
    if rung not in known:
        raise InputError(f"--rung {rung}: no such workload; one of {', '.join(known)}")
    return (str(script), *workload)


def _say(line: str) -> None:
    echo(f"nsysprobe: {line}", err=True)


@click.command(
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.argument("workload", nargs=-1, type=click.UNPROCESSED)
@click.option(
    "--rung",
    metavar="NAME",
    help="Profile one of nsysprobe's own workloads (baseline, multiworker, pinned, streams, "
    "prefetch, cached, or a training mistake such as readback); WORKLOAD is then its options.",
)
@click.option("--output", "-o", type=click.Path(path_type=Path), help="Run folder to write.")
@click.option("--nsys", "nsys_path", metavar="PATH", help="The nsys executable to use.")
@click.option("--trace", help="nsys --trace list [default: cuda,nvtx,osrt; nvtx,osrt w/o GPU].")
@click.option("--no-capture-range", is_flag=True, help="Capture the whole run, not the range.")
@click.option("--cpuctxsw", is_flag=True, help="Trace CPU context switches (NUMA analysis).")
@click.option("--sample", is_flag=True, help="Collect CPU IP/backtrace samples.")
@click.option("--nsys-args", default="", metavar='"..."', help="More arguments for nsys profile.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "markdown"]),
    default="text",
    show_default=True,
)
@width_option
@report_outputs
def run(
    workload: tuple[str, ...],
    rung: str | None,
    output: Path | None,
    nsys_path: str | None,
    trace: str | None,
    no_capture_range: bool,
    cpuctxsw: bool,
    sample: bool,
    nsys_args: str,
    fmt: str,
    width: int | None,
    **outputs,
) -> None:
    """Profile WORKLOAD under Nsight Systems, export it and print the diagnosis.

    \b
    nsysprobe run train.py --epochs 1
    nsysprobe run -- python -m mypkg.train
    nsysprobe run --rung baseline --steps 10     # nsysprobe's own workloads, from anywhere

    The workload calls torch.cuda.profiler.start()/stop() around the steps to capture
    (or pass --no-capture-range). Its exit code is this command's exit code.
    """
    from nsysprobe.render import render
    from nsysprobe.report.analyze import analyze
    from nsysprobe.report.saved import save_analysis

    workload = _with_rung(rung, workload)
    options = ProfileOptions(
        trace=trace,
        capture_range=not no_capture_range,
        cpuctxsw=cpuctxsw,
        sample=sample,
        nsys_args=tuple(shlex.split(nsys_args)),
    )
    result = capture(workload, output, options, nsys_path, progress=_say)
    report = analyze(result.sqlite, timeline=outputs.get("html") is not None)
    save_analysis(report, result.folder)
    save_outputs(report, result.sqlite, outputs, paths={"folder": result.folder})
    echo(render(report, fmt, text_width(width)))
    note = nvtx_note(result.sqlite, result.trace, result.nsys.version)
    if note:
        _say(f"warning: {note}")
    _say(f"run files in {result.folder}")
    if result.interrupted:
        _say("interrupted; kept what was captured")
    elif result.exit_code != 0:
        _say(f"the workload exited with code {result.exit_code}")
    sys.exit(result.exit_code)


@click.command()
@click.option("--nsys", "nsys_path", metavar="PATH", help="The nsys executable to check.")
def doctor(nsys_path: str | None) -> None:
    """Check nsys, its importer, Python nvtx, the GPU and NUMA tools; each line with its fix.

    FAIL: a required check failed (nsys or its importer is unusable, so no capture can be
    made) and doctor exits 1. warn: an optional one failed; the line says what is lost
    without it, and the exit code stays 0.
    """
    failed = False
    for check in run_checks(nsys_path):
        mark = {True: "ok", False: "FAIL" if check.required else "warn", None: "info"}[check.ok]
        fix = f" -> {check.fix}" if check.fix else ""
        echo(f"{mark:4} {check.name}: {check.detail}{fix}")
        failed = failed or mark == "FAIL"
    sys.exit(1 if failed else 0)
