"""The ``nsysprobe`` command: parse options, call the library, render. Nothing else lives here.

Errors raised by the library (``nsysprobe.errors``) become one line on stderr and an exit code
here, in one place.
"""

from __future__ import annotations

import importlib
import sys

import click

from nsysprobe.errors import NsysprobeError

# Each command's module is imported when that command runs (or --help lists them all), so
# ``nsysprobe analyze`` does not pay for the launcher, the ladder or the comparisons.
COMMANDS = {
    "analyze": "analyze",
    "scrub": "scrub",
    "run": "run",
    "doctor": "run",
    "topo": "numa",
    "numa": "numa",
    "launch": "numa",
    "compare": "compare",
    "history": "history",
    "ladder": "ladder",
}


class _Group(click.Group):
    """A group that turns library errors into ``nsysprobe: error: ...`` and their exit code,
    and imports a command's module only when that command is asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module = importlib.import_module(f"nsysprobe.cli.{COMMANDS[name]}")
        return getattr(module, name)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except NsysprobeError as exc:
            click.echo(f"nsysprobe: error: {exc}", err=True)
            sys.exit(exc.exit_code)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="nsysprobe")
def main() -> None:
    """Profile PyTorch training with Nsight Systems and learn why the GPU starves.

    \b
    nsysprobe run workloads/baseline.py     capture, export and diagnose a script
    nsysprobe run --rung baseline           the same for the installed package's own rung
    nsysprobe analyze report.nsys-rep       diagnose a report or its .sqlite export
    """
