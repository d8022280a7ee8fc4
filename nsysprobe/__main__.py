"""The ``nsysprobe`` command (``python -m nsysprobe`` too).

A standard stream closed before the start (``nsysprobe analyze t.sqlite >&-``) is given
/dev/null first, before anything is opened: nobody reads it, as nobody reads a closed pipe
(which ends a run quietly), so the run does its work, says nothing there and exits with its
own code. Left closed, Python has no ``sys.stdout`` (or ``sys.stderr``), and the first file
opened (the trace, an --html file, a Dask worker's socket) would take its descriptor and get
what is printed.

Until the command line has loaded (click, the commands' modules), Ctrl-C ends the run at once
with its one line and exit 130: nothing has been read or written yet, and a KeyboardInterrupt
raised inside an import would print a traceback. The command line then handles Ctrl-C itself.
"""

import gc
import os
import signal
import sys

# The standard streams: descriptor, name in ``sys``, how /dev/null is opened for it.
_STREAMS = ((0, "stdin", os.O_RDONLY), (1, "stdout", os.O_WRONLY), (2, "stderr", os.O_WRONLY))


def _open_closed_streams() -> None:
    """Give each standard descriptor that is closed /dev/null, and Python a stream on it."""
    for fd, attribute, flags in _STREAMS:
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        null = os.open(os.devnull, flags)  # the lowest free descriptor: fd, as those below are open
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
        if getattr(sys, attribute) is None:
            mode = "r" if flags == os.O_RDONLY else "w"
            setattr(sys, attribute, open(fd, mode, encoding="utf-8", closefd=False))


def _interrupted_while_starting(_signum, _frame) -> None:
    os.write(2, b"nsysprobe: interrupted\n")
    os._exit(128 + signal.SIGINT)


def main() -> None:
    _open_closed_streams()
    signal.signal(signal.SIGINT, _interrupted_while_starting)
    from nsysprobe.cli import main as command

    try:
        command(prog_name="nsysprobe")
    finally:
        # The process ends here: what the command made is given back with it, so Python's
        # last full collection at exit has nothing to look through (0.02-0.03 s of the 0.3 s
        # a small report takes; benchmarks/README.md).
        gc.freeze()


if __name__ == "__main__":
    main()
