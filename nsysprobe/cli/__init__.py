"""The ``nsysprobe`` command: parse options, call the library, render. Nothing else lives here.

Errors raised by the library (``nsysprobe.errors``) become one line on stderr and an exit code
here, in one place.
"""

from __future__ import annotations

import sys

import click

from nsysprobe.errors import NsysprobeError


class _Group(click.Group):
    """A group that turns library errors into ``nsysprobe: error: ...`` and their exit code."""

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


def _register() -> None:
    from nsysprobe.cli import analyze as _analyze

    main.add_command(_analyze.analyze)

    from nsysprobe.cli import scrub as _scrub

    main.add_command(_scrub.scrub)

    from nsysprobe.cli import run as _run

    main.add_command(_run.run)
    main.add_command(_run.doctor)

    from nsysprobe.cli import numa as _numa

    main.add_command(_numa.topo)
    main.add_command(_numa.numa)
    main.add_command(_numa.launch)

    from nsysprobe.cli import compare as _compare
    from nsysprobe.cli import history as _history

    main.add_command(_compare.compare)
    main.add_command(_history.history)

    from nsysprobe.cli import ladder as _ladder

    main.add_command(_ladder.ladder)


_register()
