"""The options several commands share, each declared once: ``--format``, ``--nsys``,
``--width``, ``--force``, ``--history``, ``--min-gap-ms`` and ``--step-range``.

A command gives its own help text where its use differs (what ``--nsys`` is for, what the
``--history`` database holds); the name, type, metavar and default are the same everywhere.
``--html``, ``--force``, ``--history`` and ``--no-history`` together are
``nsysprobe.cli.outputs.report_outputs``.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterable
from pathlib import Path

import click


def format_option(formats: Iterable[str], help: str | None = None):
    """Decorator adding ``--format`` (the parameter ``fmt``): one of ``formats``, the keys of
    the report kind's renderers (``nsysprobe.render.render_as``), text by default."""
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(list(formats)),
        default="text",
        show_default=True,
        help=help,
    )


def nsys_option(help: str = "The nsys executable to use."):
    """Decorator adding ``--nsys PATH`` (the parameter ``nsys``)."""
    return click.option("--nsys", "nsys", metavar="PATH", help=help)


def force_option(help: str, *, eager: bool = False):
    """Decorator adding the flag ``--force`` (the parameter ``force``)."""
    return click.option("--force", is_flag=True, is_eager=eager, help=help)


def history_option(help: str):
    """Decorator adding ``--history PATH`` (the parameter ``history_path``)."""
    return click.option(
        "--history",
        "history_path",
        type=click.Path(dir_okay=False, path_type=Path),
        metavar="PATH",
        help=help,
    )


def min_gap_option(help: str):
    """Decorator adding ``--min-gap-ms`` (checked by ``check_min_gap_ms``). Its imports are
    here: only the commands that analyze traces pay for the analyses."""
    from nsysprobe.analyses.account import DEFAULT_MIN_GAP_NS
    from nsysprobe.report.analyze import check_min_gap_ms

    return click.option(
        "--min-gap-ms",
        type=float,
        callback=lambda _ctx, _param, value: check_min_gap_ms(value),
        default=DEFAULT_MIN_GAP_NS / 1e6,
        show_default=True,
        help=help,
    )


def step_range_option(help: str):
    """Decorator adding ``--step-range NAME``."""
    return click.option("--step-range", metavar="NAME", help=help)


def text_width(width: int | None) -> int | None:
    """The columns text output is laid out for: ``--width`` (0: none), else the terminal's
    (``$COLUMNS``, else the terminal's own size) when standard output is a terminal, else
    None: a file or a pipe gets each row on one line."""
    if width is not None:
        return width or None
    try:
        tty = sys.stdout is not None and sys.stdout.isatty()
    except (ValueError, OSError):  # closed, or a stream without a descriptor
        tty = False
    return shutil.get_terminal_size().columns if tty else None


def width_option(command):
    """Decorator adding ``--width COLUMNS`` (its value goes through ``text_width``)."""
    return click.option(
        "--width",
        type=click.IntRange(min=0),
        metavar="COLUMNS",
        help="Lay text out for this many columns, cells wrapped at spaces (0: each row on one "
        "line) [default: the terminal's width when standard output is a terminal, else each "
        "row on one line]. Nothing is cut either way.",
    )(command)
