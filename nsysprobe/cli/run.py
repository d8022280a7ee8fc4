"""``nsysprobe run`` and ``nsysprobe doctor``: parse options, call nsysprobe.capture, print."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from nsysprobe.capture.doctor import run_checks
from nsysprobe.capture.health import nvtx_note
from nsysprobe.capture.profile import ProfileOptions, capture
from nsysprobe.cli import echo
from nsysprobe.cli.options import format_option, nsys_option, text_width, width_option
from nsysprobe.cli.outputs import Outputs, report_outputs, save_outputs
from nsysprobe.errors import InputError
from nsysprobe.render import RENDERERS, render_as


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


# Options of run that some of nsysprobe's own workloads take too (gpu_bound --width 4096):
# after --rung, whose one is meant cannot be told, so it is refused with the fix.
_WORKLOADS_TOO = frozenset({"--width"})


def own_options_first(
    command: click.Command, args: list[str], ctx: click.Context | None = None
) -> list[str]:
    """``args`` with run's own options that follow ``--rung NAME``, among the workload's,
    moved before them, and a ``--`` after them: ``run --rung baseline --device cpu --nsys PATH``
    profiles under that nsys, and ``--device cpu`` goes to the workload. What follows a ``--``
    is the workload's whatever its name; a name in ``_WORKLOADS_TOO`` before it is refused.
    Without ``--rung``, everything after WORKLOAD is WORKLOAD's, as before."""
    takes_value = {
        flag: not (param.is_flag or param.count)
        for param in command.params
        if isinstance(param, click.Option)
        for flag in (*param.opts, *param.secondary_opts)
    }

    def name(token: str) -> str:
        return token.split("=", 1)[0]

    def span(at: int, tokens: list[str]) -> int:
        """How many tokens the option at ``at`` spans (1, or 2 with its value)."""
        return 1 + (takes_value[name(tokens[at])] and "=" not in tokens[at])

    i, rung = 0, None
    while rung is None and i < len(args) and name(args[i]) in takes_value:
        if name(args[i]) == "--rung":
            rung = args[i].partition("=")[2] if "=" in args[i] else "".join(args[i + 1 : i + 2])
        i += span(i, args)
    head, tail = args[:i], args[i:]
    if rung is None or not tail:
        return args
    moved, rest, j = [], [], 0
    while j < len(tail) and tail[j] != "--":
        option = name(tail[j])
        if option in _WORKLOADS_TOO:
            raise click.UsageError(
                f"{option} after --rung {rung}: run's {option} or the workload's? Give run's "
                f"before --rung and the workload's after --: nsysprobe run {option} 100 --rung "
                f"{rung} -- {option} 64",
                ctx,
            )
        if option not in takes_value:
            rest.append(tail[j])
            j += 1
            continue
        n = span(j, tail)
        if n == 2 and (j + 1 >= len(tail) or tail[j + 1] == "--"):
            raise click.BadOptionUsage(option, f"Option '{option}' requires an argument.", ctx)
        moved += tail[j : j + n]
        j += n
    return [*head, *moved, "--", *rest, *tail[j + 1 :]]


class _RunCommand(click.Command):
    """``run``, whose own options work after ``--rung NAME`` too (``own_options_first``)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, own_options_first(self, list(args), ctx))


@click.command(
    cls=_RunCommand,
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.argument("workload", nargs=-1, type=click.UNPROCESSED)
@click.option(
    "--rung",
    metavar="NAME",
    help="Profile one of nsysprobe's own workloads (baseline, multiworker, pinned, streams, "
    "prefetch, cached, or a training mistake such as readback); WORKLOAD is then its options. "
    "run's own options may follow them too (--rung baseline --device cpu --nsys PATH); "
    "--width there is refused (some workloads have one): the workload's goes after --.",
)
@click.option("--output", "-o", type=click.Path(path_type=Path), help="Run folder to write.")
@nsys_option()
@click.option("--trace", help="nsys --trace list [default: cuda,nvtx,osrt; nvtx,osrt w/o GPU].")
@click.option("--no-capture-range", is_flag=True, help="Capture the whole run, not the range.")
@click.option("--cpuctxsw", is_flag=True, help="Trace CPU context switches (NUMA analysis).")
@click.option("--sample", is_flag=True, help="Collect CPU IP/backtrace samples.")
@click.option(
    "--python",
    is_flag=True,
    help="Sample the Python stacks 1,000 times a second (nsys --python-sampling=true "
    "--python-sampling-frequency=1000), so that the report names, for each idle bucket, the "
    "function and line that held the training thread: 'torch.serialization.save <- step at "
    "train.py:87, 595.4 ms'. The export must keep the frames: nsysprobe passes nsys export "
    "--include-json=true where nsys has it (2025.3 does; 2023.4 samples but cannot export "
    "them).",
)
@click.option("--nsys-args", default="", metavar='"..."', help="More arguments for nsys profile.")
@format_option(RENDERERS)
@width_option
@report_outputs
def run(
    workload: tuple[str, ...],
    rung: str | None,
    output: Path | None,
    nsys: str | None,
    trace: str | None,
    no_capture_range: bool,
    cpuctxsw: bool,
    sample: bool,
    python: bool,
    nsys_args: str,
    fmt: str,
    width: int | None,
    outputs: Outputs,
) -> None:
    """Profile WORKLOAD under Nsight Systems, export it and print the diagnosis.

    \b
    nsysprobe run train.py --epochs 1
    nsysprobe run -- python -m mypkg.train
    nsysprobe run --rung baseline --steps 10     # nsysprobe's own workloads, from anywhere
    nsysprobe run --python train.py              # and the Python line behind each idle bucket

    The workload calls torch.cuda.profiler.start()/stop() around the steps to capture
    (or pass --no-capture-range). Its exit code is this command's exit code.
    """
    from nsysprobe.report.analyze import analyze
    from nsysprobe.report.saved import save_analysis

    workload = _with_rung(rung, workload)
    options = ProfileOptions(
        trace=trace,
        capture_range=not no_capture_range,
        cpuctxsw=cpuctxsw,
        sample=sample,
        nsys_args=tuple(shlex.split(nsys_args)),
        python=python,
    )
    result = capture(workload, output, options, nsys, progress=_say)
    report = analyze(result.sqlite, timeline=outputs.html is not None)
    save_analysis(report, result.folder)
    save_outputs(report, result.sqlite, outputs, paths={"folder": result.folder})
    echo(render_as(RENDERERS, report, fmt, text_width(width)))
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
@nsys_option("The nsys executable to check.")
@click.option(
    "--install",
    is_flag=True,
    help="First install Nsight Systems 2023.4.4 without root, from Debian's packages (about "
    "190 MB; amd64 with apt-get and dpkg), into nsysprobe's own folder, where run finds it: "
    "$NSYSPROBE_NSYS_HOME, .nsys/ in a checkout, else ~/.local/share/nsysprobe/nsys "
    "($XDG_DATA_HOME). Nothing is downloaded when that install works already.",
)
def doctor(nsys: str | None, install: bool) -> None:
    """Check nsys, its importer, Python nvtx, the GPU and NUMA tools; each line with its fix.

    FAIL: a required check failed (nsys or its importer is unusable, so no capture can be
    made) and doctor exits 1. warn: an optional one failed; the line says what is lost
    without it, and the exit code stays 0.

    \b
    nsysprobe doctor
    nsysprobe doctor --install     # no nsys on this machine: get one, then check
    """
    if install:
        from nsysprobe.capture.install import ensure_nsys

        got, new = ensure_nsys(progress=_say)
        _say(f"{'installed' if new else 'already installed:'} nsys {got.version} at {got.path}")
    failed = False
    for check in run_checks(nsys):
        mark = {True: "ok", False: "FAIL" if check.required else "warn", None: "info"}[check.ok]
        fix = f" -> {check.fix}" if check.fix else ""
        echo(f"{mark:4} {check.name}: {check.detail}{fix}")
        failed = failed or mark == "FAIL"
    sys.exit(1 if failed else 0)
