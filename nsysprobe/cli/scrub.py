"""``nsysprobe scrub``: a copy of an export that is safe to share."""

from __future__ import annotations

import click

from nsysprobe.trace.scrub import scrub as scrub_export


@click.command()
@click.argument("export", type=click.Path(path_type=str))
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(path_type=str),
    help="Where to write the scrubbed copy (never the input).",
)
@click.option("--force", is_flag=True, help="Overwrite OUTPUT if it exists.")
def scrub(export: str, output: str, force: bool) -> None:
    """Copy EXPORT (.sqlite) without the environment and local paths nsys stored in it.

    nsys records the profiled process's whole environment (API tokens included) in every
    report. The copy keeps all events, ids and timestamps; it drops the environment rows,
    environment strings and TARGET_INFO_SYSTEM_ENV, and replaces home/tmp/work paths and host
    names. The input is never modified.

    \b
    Example:
      nsysprobe scrub run.sqlite -o run-shareable.sqlite
    """
    result = scrub_export(export, output, force=force)
    click.echo(
        f"wrote {result.output}: removed {result.environment_rows} environment rows, "
        f"blanked {result.strings_blanked} strings and {result.paths_blanked} metadata paths"
    )
