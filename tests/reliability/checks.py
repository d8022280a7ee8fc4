"""The one contract every bad input is held to, through click's CliRunner or a subprocess.

``nsysprobe analyze`` either prints a report (exit 0; valid JSON with ``--format json``) or
one line ``nsysprobe: error: ...`` with exit code 2. Never a traceback, never another code,
never a change to the file analyzed or a file beside it, never a control or format character
on the terminal (what a trace's names may hold), never more than ``MAX_OUTPUT_CHARS`` of
report, whatever the names' length.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import unicodedata
from pathlib import Path

from click.testing import CliRunner

from nsysprobe.cli import main

from .conftest import CASES

SIDECARS = ("-journal", "-wal", "-shm")
# A report of a sample trace is some 20,000 characters; a long name must not make it more.
MAX_OUTPUT_CHARS = 500_000


def unsafe_characters(text: str, keep: str = "\n\t") -> list[str]:
    """The characters of ``text`` that can drive a terminal (Unicode control and format
    characters, separators, lone surrogates), but ``keep``: found with ``unicodedata``,
    independently of nsysprobe's own table."""
    return sorted(
        {
            c
            for c in text
            if c not in keep and unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp")
        }
    )


def check_terminal_safe(stdout: str, stderr: str, where: str) -> None:
    bad = unsafe_characters(stdout) + unsafe_characters(stderr)
    assert not bad, f"{where}: raw {[hex(ord(c)) for c in bad]} reached the terminal"


def digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def folder_state(path: Path) -> dict[str, str | None]:
    """Name -> sha256 of every file beside ``path`` (the whole folder when it is one)."""
    folder = path if path.is_dir() else path.parent
    return {p.name: digest(p) for p in sorted(folder.iterdir())}


def _reject_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def check_outcome(exit_code: int, stdout: str, stderr: str, fmt: str, where: str) -> str:
    check_terminal_safe(stdout, stderr, where)
    assert len(stdout) + len(stderr) < MAX_OUTPUT_CHARS, f"{where}: {len(stdout):,} chars of output"
    if exit_code == 0:
        if fmt == "json":
            json.loads(stdout, parse_constant=_reject_constant)
        assert stdout.strip(), f"{where}: empty report"
        return "report"
    assert exit_code == 2, f"{where}: exit code {exit_code}\n{stderr}"
    lines = [line for line in stderr.splitlines() if not line.startswith("nsysprobe: warning")]
    errors = [line for line in lines if line.startswith("nsysprobe: error: ")]
    assert len(errors) == 1 and "Traceback" not in stderr, f"{where}: {stderr}"
    return "error"


def check_analyze(
    path: Path, *options: str, fmt: str = "text", subprocess_run: bool = False
) -> str:
    """Analyze ``path`` and hold the result to the contract; returns "report" or "error"."""
    before = folder_state(path) if path.exists() else None
    args = ["analyze", str(path), "--format", fmt, *options]
    try:
        if subprocess_run:
            done = subprocess.run(
                [sys.executable, "-m", "nsysprobe", *args],
                capture_output=True,
                text=True,
                timeout=300,
            )
            outcome = check_outcome(done.returncode, done.stdout, done.stderr, fmt, str(path))
        else:
            result = CliRunner().invoke(main, args, catch_exceptions=True)
            exc = result.exception
            assert exc is None or (isinstance(exc, SystemExit) and exc.code == 2), (
                f"{path}: {exc!r}\n" + "".join(_traceback(result.exc_info))
            )
            outcome = check_outcome(result.exit_code, result.stdout, result.stderr, fmt, str(path))
        if before is not None:
            after = folder_state(path)
            made = {n for n in after if n not in before and n.endswith(SIDECARS)}
            assert not made, f"{path}: analyze left {made} beside the trace"
            changed = {n for n in before if n in after and before[n] != after[n]}
            assert not changed, f"{path}: analyze changed {changed}"
    except BaseException:
        CASES["crash"] += 1
        raise
    CASES[outcome] += 1
    return outcome


def _traceback(exc_info) -> list[str]:
    import traceback

    return traceback.format_exception(*exc_info) if exc_info else []
