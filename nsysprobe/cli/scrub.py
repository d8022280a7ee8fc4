"""``nsysprobe scrub``: a copy of an export that is safe to share."""

from __future__ import annotations

import click

from nsysprobe.cli import echo
from nsysprobe.cli.options import force_option, format_option
from nsysprobe.render import render_as
from nsysprobe.render.scrub import RENDERERS


@click.command()
@click.argument("export", type=click.Path(path_type=str))
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(path_type=str),
    help="Where to write the copy: a new file (never the export itself, a FIFO or a device).",
)
@force_option("Replace OUTPUT if it is an existing regular file.")
@format_option(RENDERERS, "json: what was kept and dropped, for scripts (with a schema_version).")
def scrub(export: str, output: str, force: bool, fmt: str) -> None:
    """Copy EXPORT (.sqlite) keeping only what nsysprobe's analyses read, its text scrubbed.

    nsys stores far more than events in a report: the profiled process's environment and
    command line (API tokens included), its program output, NVTX payloads, local paths, user
    and host names. Rather than hunt for those, scrub starts from an empty database and copies
    in only the tables and columns the analyses read (an allow-list):

    \b
    - timestamps, ids, sizes and kinds, as they are;
    - kernel, CUDA API, OS-call, thread, process, GPU and NVTX names, enum labels and the
      nsys version, with secrets (the value after a name such as password, HF_TOKEN,
      api_key or session and any separator: =, :, :=, =>, their look-alikes, quotes,
      brackets or a new line, up to the next whitespace outside quotes whatever punctuation
      it holds; JSON, header and URL forms; the password flags of common tools such as
      sshpass -p; Bearer ...; hf_/ghp_/sk-/sk_live_/AKIA/ya29./JWT keys and long random
      strings, inside words too), absolute paths, e-mail addresses, URLs, host names and
      IPv4/IPv6 addresses replaced by placeholders such as <secret:kqzvwmbtxyaq>.

    A placeholder carries a keyed hash of what it replaced (a new random key each run, so
    nothing can be guessed back from it): names that were equal stay equal, names that
    differed stay different, and NVTX ranges group by their numbers as before.

    Everything else stays behind: other tables and columns, metadata and diagnostics the
    analyses do not read, strings no kept row names, views, virtual tables, triggers and
    indexes. `nsysprobe analyze` gives the same figures on the copy as on EXPORT (names
    holding placeholders aside). Names you chose yourself (NVTX ranges, threads) are kept: a
    secret in them is caught only in the forms above, so look at them before sharing.

    EXPORT is only read, as analyze reads it (a WAL export with a pending -wal file from a
    private copy: nothing appears beside it), and neither it nor its -wal, -shm or -journal
    file can be OUTPUT. The copy is built in a private folder beside OUTPUT and gets its name
    when complete; a run killed outright (SIGKILL) may leave that hidden folder behind,
    holding part of the scrubbed copy and nothing else. A full disk, the file size limit
    (ulimit -f) or the copy's growth limit (twice EXPORT's size, plus what placeholders add
    to its text) ends the run with a one-line error saying which.

    \b
    Examples:
      nsysprobe scrub run.sqlite -o run-shareable.sqlite
      nsysprobe scrub run.sqlite -o run-shareable.sqlite --force --format json
    """
    from nsysprobe.trace.scrub import scrub as scrub_export

    echo(render_as(RENDERERS, scrub_export(export, output, force=force), fmt), nl=False)
