"""The ``nsysprobe`` command (``python -m nsysprobe`` too).

Until the command line has loaded (click, the commands' modules), Ctrl-C ends the run at once
with its one line and exit 130: nothing has been read or written yet, and a KeyboardInterrupt
raised inside an import would print a traceback. The command line then handles Ctrl-C itself.
"""

import gc
import os
import signal


def _interrupted_while_starting(_signum, _frame) -> None:
    os.write(2, b"nsysprobe: interrupted\n")
    os._exit(128 + signal.SIGINT)


def main() -> None:
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
