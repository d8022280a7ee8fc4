"""A one-line progress display for the slow parts (export, analysis of a large trace).

Shown on stderr only when it is a terminal (and ``TERM`` is not ``dumb``), so pipes, files and
CI logs stay clean; the line is cleared when the work ends:

    nsysprobe: analyzing run.sqlite ... 3.4 s
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from nsysprobe.common.safetext import one_line

REFRESH_S = 0.2
_CLEAR = "\r\x1b[2K"


class Progress:
    """``with progress.task("analyzing x"):`` shows the task and its elapsed time until done;
    ``progress("exporting ...")`` (a callback the capture code takes) relabels the task."""

    def __init__(self, stream: TextIO | None = None, enabled: bool | None = None):
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = _is_terminal(self.stream) if enabled is None else enabled
        self._label = ""
        self._started: float | None = None
        self._lock = threading.Lock()

    def __call__(self, message: str) -> None:
        with self._lock:
            self._label = message
        self._draw()

    @contextmanager
    def task(self, message: str) -> Iterator[Progress]:
        if not self.enabled:
            yield self
            return
        self._started = time.monotonic()
        self(message)
        done = threading.Event()
        ticker = threading.Thread(target=self._tick, args=(done,), daemon=True)
        ticker.start()
        try:
            yield self
        finally:
            done.set()
            ticker.join()
            self._write(_CLEAR)
            self._started = None

    def _tick(self, done: threading.Event) -> None:
        while not done.wait(REFRESH_S):
            self._draw()

    def _draw(self) -> None:
        if not self.enabled or self._started is None:
            return
        with self._lock:
            elapsed = time.monotonic() - self._started
            self._write(f"{_CLEAR}nsysprobe: {one_line(self._label)} ... {elapsed:.1f} s")

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a closed or broken terminal must not fail the analysis
            self.enabled = False


def _is_terminal(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty()) and os.environ.get("TERM") != "dumb"
    except (AttributeError, ValueError):
        return False
