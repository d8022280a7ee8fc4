"""The progress line: drawn and cleared on a terminal, silent otherwise."""

from __future__ import annotations

import io
import time

from nsysprobe.common import progress as progress_mod
from nsysprobe.common.progress import Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_terminal_shows_the_task_and_clears_it(monkeypatch):
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setattr(progress_mod, "REFRESH_S", 0.01)
    out = Terminal()
    p = Progress(out)
    assert p.enabled
    with p.task("analyzing big.sqlite"):
        time.sleep(0.05)
        p("exporting big.nsys-rep")
        time.sleep(0.05)
    text = out.getvalue()
    assert "\r\x1b[2Knsysprobe: analyzing big.sqlite ... 0.0 s" in text
    assert "nsysprobe: exporting big.nsys-rep ... " in text
    assert text.count("analyzing big.sqlite") >= 2  # redrawn while it runs
    assert text.endswith("\r\x1b[2K")


def test_quiet_when_not_a_terminal():
    out = io.StringIO()
    p = Progress(out)
    assert not p.enabled
    with p.task("analyzing"):
        p("exporting")
    assert out.getvalue() == ""


def test_quiet_on_a_dumb_terminal(monkeypatch):
    monkeypatch.setenv("TERM", "dumb")
    assert not Progress(Terminal()).enabled
