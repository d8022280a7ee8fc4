"""The ``nsysprobe`` command: parse options, call the library, render. Nothing else lives here.

Every way a run can end is turned into an exit code and at most one line on stderr here, in
one place (``_Group.main``):

- a library error (``nsysprobe.errors``), a bad option or argument (click's usage errors), an
  ``OSError`` or ``UnicodeError`` the library did not foresee, running out of memory:
  ``nsysprobe: error: WHAT: WHY; FIX``, exit 2 (or the error's own code);
- Ctrl-C: ``nsysprobe: interrupted``, exit 130; SIGTERM and SIGHUP end it the same way (exit
  128 + the signal), so files being written are removed on the way out;
- a closed pipe (``| head``): nothing more is printed, exit 141 as for SIGPIPE;
- a standard stream closed before the start (``>&-``, ``2>&-``): nobody reads it, as nobody
  reads a closed pipe, so the run is quiet there: the console script gives it /dev/null
  (``nsysprobe.__main__``), the command does its work and exits with its own code (0 when
  all went well);
- a report that cannot be written whole (ulimit -f, a full disk): ``OutputError``, exit 2;
  what was written before stays, so a script must go by the exit code;
- a bug: ``nsysprobe: internal error: ...``, exit 70, the traceback with ``NSYSPROBE_DEBUG=1``.

Everything printed goes through ``echo``, which escapes control and format characters
(``nsysprobe.common.safetext``): names from a trace cannot drive the terminal.
"""

from __future__ import annotations

import errno
import importlib
import os
import signal
import sys
import traceback

import click

from nsysprobe.common.safetext import name, one_line, printable
from nsysprobe.common.writer import write_all
from nsysprobe.errors import NsysprobeError

# Exit codes besides the errors' own (2).
INTERRUPTED = 128 + signal.SIGINT
BROKEN_PIPE = 128 + signal.SIGPIPE
INTERNAL_ERROR = 70  # EX_SOFTWARE
DEBUG_ENV = "NSYSPROBE_DEBUG"
# An error line is cut here: it may quote what the user gave (a 100 kB option value).
ERROR_CHARS = 2_000
_STOPPING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class OutputError(NsysprobeError):
    """Standard output or error could not be written (a full disk, a size limit)."""


def echo(text: str = "", *, err: bool = False, nl: bool = True) -> None:
    """Print ``text`` (a report, a line) whole, with control and format characters escaped;
    text the stream's encoding cannot hold is written as backslash escapes. A write the
    system cuts short (ulimit -f, a full disk) is an ``OutputError``, never a cut report."""
    text = printable(text) + ("\n" if nl else "")
    stream = sys.stderr if err else sys.stdout
    try:
        _write(stream, text)
    except OSError as exc:
        if exc.errno == errno.EPIPE:
            raise
        where = "standard error" if err else "standard output"
        raise OutputError(
            f"{where}: cannot write to it ({exc.strerror or exc}); write the report to a file "
            f"on a disk with space (and within ulimit -f), or to a pipe"
        ) from None


def _write(stream, text: str) -> None:
    """``text`` to ``stream``'s descriptor through ``write_all``; to ``stream`` itself when it
    has none (click's test runner, a notebook)."""
    if stream is None:  # closed at the start, in a process that is not the console script
        return
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
        try:
            click.echo(text, file=stream, nl=False)
        except UnicodeEncodeError:
            click.echo(_encoded(text, encoding, "strict").decode(encoding), file=stream, nl=False)
        return
    raw = _encoded(text, encoding, getattr(stream, "errors", None) or "strict")
    stream.flush()  # what went through the stream itself (click's own messages) comes first
    write_all(fd, raw)


def _encoded(text: str, encoding: str, errors: str) -> bytes:
    try:
        return text.encode(encoding, errors)
    except UnicodeEncodeError:
        return text.encode(encoding, "backslashreplace")


class _Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where the program is so that ``finally`` blocks run."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


class _PipeClosed(Exception):
    """The reader of standard output went away (``| head``)."""


class _StoppedOutside(Exception):
    """A ``_Stopped`` on its way out of the command, past click's Ctrl-C handling (which
    would print a blank line for a ^C that was never typed)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


# Signals _stop has raised: SQLite swallows an exception raised in its callbacks, and the
# reader raises a plain KeyboardInterrupt in its place (``connection.WorkBudget.resume``).
_RECEIVED: list[int] = []


def _stop(signum, _frame):
    _RECEIVED.append(signum)
    raise _Stopped(signum)


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
    "explain": "explain",
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
        except _Stopped as exc:
            raise _StoppedOutside(exc.signum) from None
        except BrokenPipeError:  # past click's own handler, which would exit 1
            raise _PipeClosed from None

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        previous = {}
        try:
            for sig in _STOPPING_SIGNALS:
                previous[sig] = signal.signal(sig, _stop)
            # Ctrl-C as Python raises it (the entry point's own handler ends a run that is
            # still starting), turned into its line and exit 130 below.
            previous[signal.SIGINT] = signal.signal(signal.SIGINT, signal.default_int_handler)
        except ValueError:  # not the main thread: leave the signals alone
            pass
        try:
            code = _exit_code(super().main(args, prog_name, complete_var, False, **extra))
            if sys.stdout is not None:
                sys.stdout.flush()
        except BaseException as exc:  # noqa: BLE001 -- every ending gets its code and line
            code = _ended(exc)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        sys.exit(code)


def _exit_code(value) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _ended(exc: BaseException) -> int:
    """Say how the run ended, in at most one line on stderr, and return its exit code."""
    if isinstance(exc, click.Abort) and isinstance(exc.__cause__, BaseException):
        exc = exc.__cause__  # click's form of Ctrl-C
    if isinstance(exc, SystemExit):
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    if isinstance(exc, KeyboardInterrupt) and not isinstance(exc, _Stopped) and _RECEIVED:
        exc = _Stopped(_RECEIVED[-1])  # raised again in its stead
    if isinstance(exc, (_Stopped, _StoppedOutside)):
        _say(f"nsysprobe: stopped by {signal.Signals(exc.signum).name}")
        return 128 + exc.signum
    if isinstance(exc, (KeyboardInterrupt, click.Abort)):
        _say("nsysprobe: interrupted")
        return INTERRUPTED
    if isinstance(exc, _PipeClosed) or (isinstance(exc, OSError) and exc.errno == errno.EPIPE):
        _silence_stdout()
        return BROKEN_PIPE
    if isinstance(exc, click.UsageError):
        hint = f"; see `{exc.ctx.command_path} --help`" if exc.ctx is not None else ""
        return _error(f"{exc.format_message().rstrip('.')}{hint}", 2)
    if isinstance(exc, click.ClickException):
        return _error(exc.format_message(), 2)
    if isinstance(exc, NsysprobeError):
        if isinstance(exc, OutputError):
            _silence_stdout()
        return _error(str(exc), exc.exit_code)
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename is not None else ""
        return _error(
            f"{where}{exc.strerror or exc}; check the path, its permissions and the disk", 2
        )
    if isinstance(exc, UnicodeError):
        return _error(
            f"text that is not valid in its encoding ({exc}); check the file names and the "
            f"terminal's encoding",
            2,
        )
    if isinstance(exc, MemoryError):
        return _error(
            "ran out of memory; analyze a shorter capture range, or on a machine with more memory",
            2,
        )
    if not isinstance(exc, Exception):
        raise exc
    if os.environ.get(DEBUG_ENV):
        traceback.print_exception(exc)
    _say(
        f"nsysprobe: internal error: {type(exc).__name__}: {exc} (a bug in nsysprobe; please "
        f"report it with the command and, if you can, the input; {DEBUG_ENV}=1 shows the "
        f"traceback)"
    )
    return INTERNAL_ERROR


def _error(message: str, code: int) -> int:
    _say(f"nsysprobe: error: {name(message, ERROR_CHARS)}")
    return code


def _say(line: str) -> None:
    """One line on stderr, whatever the line holds and whatever stderr can take."""
    try:
        echo(one_line(line), err=True)
    except (OSError, NsysprobeError):
        pass


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that the flush at exit cannot fail a second time."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="nsysprobe")
def main() -> None:
    """Profile PyTorch training with Nsight Systems and learn why the GPU starves.

    \b
    nsysprobe run workloads/baseline.py     capture, export and diagnose a script
    nsysprobe run --rung baseline           the same for the installed package's own rung
    nsysprobe analyze report.nsys-rep       diagnose a report or its .sqlite export
    """
