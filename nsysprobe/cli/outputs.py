"""What ``analyze`` and ``run`` write besides their report: ``--html`` and the history.

``report_outputs`` adds the options, which reach the command as one ``Outputs``;
``analyze_with_outputs`` (analyze), ``analyze_many_with_outputs`` (analyze of many ranks) and
``save_outputs`` (run, after its capture) are the one call each command makes.
"""

from __future__ import annotations

import functools
import shlex
from dataclasses import dataclass
from pathlib import Path

import click

from nsysprobe.capture.runfolder import export_of
from nsysprobe.cli import echo
from nsysprobe.cli.options import force_option, history_option
from nsysprobe.common.progress import Progress
from nsysprobe.common.writer import check_output, write_output
from nsysprobe.errors import NsysprobeError
from nsysprobe.report.analyze import Report


@dataclass(frozen=True)
class Outputs:
    """What the options ask to be written besides the report."""

    html: Path | None = None  # --html FILE
    force: bool = False  # --force: overwrite the --html file
    history_path: Path | None = None  # --history PATH [default: history.default_path()]
    no_history: bool = False  # --no-history


def _check_html(ctx: click.Context, _param, value: Path | None) -> Path | None:
    """Refuse a --html that cannot be written before any work starts."""
    if value is not None:
        check_output(value, force=bool(ctx.params.get("force")), option="--html")
    return value


def _write_html(text: str, outputs: Outputs, inputs) -> Path:
    return write_output(text, outputs.html, force=outputs.force, inputs=inputs, option="--html")


def report_outputs(command):
    """Decorator adding --html FILE, --force, --history PATH and --no-history, which the
    command receives as one ``outputs: Outputs``."""
    options = [
        click.option(
            "--html",
            "html",
            type=click.Path(dir_okay=True, path_type=Path),
            callback=_check_html,
            metavar="FILE",
            help="Also write the report as one self-contained HTML file with the timeline.",
        ),
        force_option("Overwrite the --html file if it exists.", eager=True),
        history_option(
            "History database to record this run in [default: $NSYSPROBE_HISTORY, else "
            "$XDG_DATA_HOME/nsysprobe/history.db]."
        ),
        click.option("--no-history", is_flag=True, help="Do not record this run in the history."),
    ]

    @functools.wraps(command)
    def with_outputs(*args, html, force, history_path, no_history, **kwargs):
        return command(*args, outputs=Outputs(html, force, history_path, no_history), **kwargs)

    for option in reversed(options):
        with_outputs = option(with_outputs)
    return with_outputs


def analyze_with_outputs(path: str, outputs: Outputs, **options) -> Report:
    """Export if needed and analyze ``path`` with a progress line, then write the outputs."""
    from nsysprobe.report.analyze import analyze

    source = Path(path)
    if outputs.html is not None:  # the trace itself is known now
        check_output(outputs.html, force=outputs.force, inputs=[source], option="--html")
    progress = Progress()
    with progress.task(f"analyzing {source.name}"):
        sqlite = export_of(source, nsys=options.get("nsys"), progress=progress)
        if sqlite != source:
            progress(f"analyzing {sqlite.name}")
        report = analyze(sqlite, timeline=outputs.html is not None, **options)
        save_outputs(report, sqlite, outputs, paths={"trace": source}, progress=progress)
    return report


def analyze_many_with_outputs(paths: tuple[str, ...], outputs: Outputs, **options):
    """Analyze one report per rank on Dask with a progress line, then write ``--html``. The
    history records single reports, so the cross-rank view is not recorded there."""
    from nsysprobe.ranks.many import analyze_many, expand_paths

    inputs = expand_paths(paths)
    if outputs.html is not None:  # the reports are known now
        check_output(outputs.html, force=outputs.force, inputs=inputs, option="--html")
    progress = Progress()
    with progress.task("analyzing ranks"):
        many = analyze_many(paths, progress=progress, **options)
        if outputs.html is not None:
            from nsysprobe.render.many import render_many_html

            _write_html(render_many_html(many), outputs, inputs)
    return many


def save_outputs(
    report: Report,
    sqlite: Path,
    outputs: Outputs,
    *,
    paths: dict[str, Path] | None = None,
    progress: Progress | None = None,
) -> None:
    """Write ``--html`` (from ``report.timeline``: analyze with ``timeline=True``) and record
    the history entry, as the options ask."""
    paths = {**(paths or {}), "sqlite": Path(sqlite)}
    html = outputs.html
    if html is not None:
        from nsysprobe.render.html import render_html

        if progress is not None:
            progress(f"writing {html.name}")
        _write_html(render_html(report, report.timeline), outputs, paths.values())
        paths["html"] = html
    if not outputs.no_history:
        from nsysprobe.runs import history

        try:
            history.record(report, command_line(), paths, outputs.history_path)
        except (NsysprobeError, OSError) as exc:
            echo(f"nsysprobe: warning: not recorded in the history: {exc}", err=True)


def command_line() -> str:
    """The current command as a shell line: the options not at their defaults, then the
    arguments (a workload's own arguments come last)."""
    ctx = click.get_current_context()
    words = ["nsysprobe", ctx.info_name or ctx.command.name or ""]
    arguments = []
    for param in ctx.command.params:
        value = ctx.params.get(param.name)
        if isinstance(param, click.Argument):
            arguments += [str(v) for v in (value if isinstance(value, tuple) else (value,))]
        elif value is None or value is False or value == param.default:
            continue
        elif value is True:
            words.append(param.opts[0])
        else:
            words += [param.opts[0], str(value)]
    return shlex.join(words + arguments)
