"""Outputs under hostile conditions (issue 33): closed standard streams, a file size limit, a
Dask connect timeout nobody can use, and Markdown of trace names that would ping, link or
typeset on GitHub.

Every case runs ``python -m nsysprobe`` of this tree (cwd and PYTHONPATH set to it) as a real
process: descriptors really closed before it starts, ``RLIMIT_FSIZE`` really set in it (with
SIGXFSZ ignored, so that a write past it fails with EFBIG, as under a shell's ulimit -f).
"""

from __future__ import annotations

import errno
import html
import json
import os
import re
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "sample_traces" / "h200_pinned.sqlite"
TIMEOUT_S = 300
# Smaller than every report below, larger than anything else the runs write.
LIMIT_BYTES = 512
CONNECT = "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT"


@dataclass
class Ran:
    code: int
    stdout: bytes
    stderr: str

    @property
    def lines(self) -> list[str]:
        return self.stderr.splitlines()


def nsysprobe(
    *args,
    tmp: Path,
    closed: tuple[int, ...] = (),
    limit_bytes: int | None = None,
    env: dict[str, str] | None = None,
) -> Ran:
    """``python -m nsysprobe ARGS`` with the descriptors ``closed`` closed before it starts
    and its files limited to ``limit_bytes``; stdout and stderr go to regular files."""
    out_path, err_path = tmp / "stdout.bin", tmp / "stderr.txt"

    def preexec() -> None:
        if limit_bytes is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))
        for fd in closed:
            os.close(fd)

    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    full_env = {
        **os.environ,
        "PYTHONPATH": path,
        "NSYSPROBE_HISTORY": str(tmp / "default-history.db"),
        **(env or {}),
    }
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "nsysprobe", *map(str, args)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            cwd=ROOT,
            env=full_env,
            preexec_fn=preexec,
            start_new_session=True,
        )
        try:
            code = proc.wait(TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise AssertionError(f"nsysprobe {args}: still running after {TIMEOUT_S} s") from None
    return Ran(code, out_path.read_bytes(), err_path.read_text("utf-8", "replace"))


def copy_of(tmp: Path, name: str) -> Path:
    """A copy of the pinned sample named ``name``."""
    path = tmp / name
    shutil.copyfile(BASE, path)
    return path


def folder(tmp: Path, name: str) -> Path:
    path = tmp / name
    path.mkdir()
    return path


# -- closed standard streams ------------------------------------------------------------------
# A closed stdout is one nobody reads, as a closed pipe is: the run does its work, says nothing
# and exits with its own code (README: "a closed pipe (`| head`) ends quietly").


def _trace(tmp):
    return copy_of(tmp, "t.sqlite")


CLOSED_STDOUT = {
    "analyze": lambda tmp: ["analyze", _trace(tmp), "--no-history"],
    "analyze-markdown": lambda tmp: ["analyze", _trace(tmp), "--format", "markdown"],
    "analyze-many": lambda tmp: [
        "analyze",
        copy_of(tmp, "r0.sqlite"),
        copy_of(tmp, "r1.sqlite"),
        "--workers",
        "1",
    ],
    "compare-json": lambda tmp: ["compare", _trace(tmp), _trace(tmp), "--format", "json"],
    "history": lambda tmp: ["history", "--history", tmp / "none.db"],
    "explain": lambda tmp: ["explain", "--format", "markdown"],
}


@pytest.mark.parametrize("case", sorted(CLOSED_STDOUT))
def test_a_closed_stdout_ends_quietly_with_exit_0(tmp_path, case):
    work = folder(tmp_path, "work")
    done = nsysprobe(*CLOSED_STDOUT[case](work), tmp=tmp_path, closed=(1,))
    assert (done.code, done.stderr) == (0, ""), (case, done.stderr)


def test_a_closed_stdout_still_writes_the_html_and_the_history(tmp_path):
    work = folder(tmp_path, "work")
    page, db = work / "r.html", work / "history.db"
    done = nsysprobe(
        "analyze", _trace(work), "--html", page, "--history", db, tmp=tmp_path, closed=(1,)
    )
    assert (done.code, done.stderr) == (0, "")
    assert page.read_text(encoding="utf-8").rstrip().endswith("</html>")
    listed = nsysprobe("history", "--history", db, "--format", "json", tmp=tmp_path)
    assert listed.code == 0
    assert len(json.loads(listed.stdout)["entries"]) == 1


def test_a_closed_stdout_keeps_the_gate_s_exit_code(tmp_path):
    work = folder(tmp_path, "work")
    trace = _trace(work)
    done = nsysprobe(
        "compare", trace, trace, "--fail-if", "gpu_busy_ratio<2", tmp=tmp_path, closed=(1,)
    )
    assert done.code == 1
    assert len(done.lines) == 1 and done.lines[0].startswith("nsysprobe: gate failed: ")


@pytest.mark.parametrize("case", ["analyze", "analyze-many", "compare-json"])
def test_a_closed_stderr_leaves_the_report_whole(tmp_path, case):
    work = folder(tmp_path, "work")
    args = CLOSED_STDOUT[case](work)
    expected = nsysprobe(*args, tmp=tmp_path)
    assert expected.code == 0 and expected.stdout
    done = nsysprobe(*args, tmp=tmp_path, closed=(2,))
    assert (done.code, done.stdout) == (0, expected.stdout)


def test_all_standard_streams_closed_is_still_a_run(tmp_path):
    work = folder(tmp_path, "work")
    page = work / "ranks.html"
    args = [*CLOSED_STDOUT["analyze-many"](work), "--html", page]
    done = nsysprobe(*args, tmp=tmp_path, closed=(0, 1, 2))
    assert done.code == 0
    assert page.read_text(encoding="utf-8").rstrip().endswith("</html>")


# -- Dask's connect timeout -------------------------------------------------------------------


@pytest.mark.parametrize("value", ["-5", "nan", "1e400", "abc", "", "0", "1e12", "None", "[1]"])
def test_a_dask_connect_timeout_dask_cannot_use_is_one_line(tmp_path, value):
    work = folder(tmp_path, "work")
    args = CLOSED_STDOUT["analyze-many"](work)
    done = nsysprobe(*args, tmp=tmp_path, env={CONNECT: value})
    assert done.code == 2, done.stderr
    assert len(done.lines) == 1, done.stderr
    assert done.lines[0].startswith(f"nsysprobe: error: {CONNECT}=")
    assert "unset it" in done.lines[0]
    assert done.stdout == b""


def test_a_dask_connect_timeout_dask_cannot_use_is_one_line_with_a_scheduler(tmp_path):
    work = folder(tmp_path, "work")
    args = [*CLOSED_STDOUT["analyze-many"](work)[:3], "--scheduler", "tcp://127.0.0.1:9"]
    done = nsysprobe(*args, tmp=tmp_path, env={CONNECT: "-5"})
    assert done.code == 2 and len(done.lines) == 1, done.stderr
    assert done.lines[0].startswith(f"nsysprobe: error: {CONNECT}=-5: ")


def test_a_dask_connect_timeout_dask_can_use_still_runs(tmp_path):
    work = folder(tmp_path, "work")
    done = nsysprobe(*CLOSED_STDOUT["analyze-many"](work), tmp=tmp_path, env={CONNECT: "20s"})
    assert done.code == 0, done.stderr
    assert done.stdout


# -- a file size limit: the whole report, or one line and exit 2 -------------------------------


def _with_history(tmp):
    db = tmp / "history.db"
    assert nsysprobe("analyze", _trace(tmp), "--history", db, tmp=tmp).code == 0
    return ["history", "--history", db, "--format", "json"]


CUT_STDOUT = {
    "analyze-text": lambda tmp: ["analyze", _trace(tmp), "--no-history"],
    "analyze-markdown": lambda tmp: [
        "analyze",
        _trace(tmp),
        "--no-history",
        "--format",
        "markdown",
    ],
    "analyze-json": lambda tmp: ["analyze", _trace(tmp), "--no-history", "--format", "json"],
    "analyze-many-json": lambda tmp: [*CLOSED_STDOUT["analyze-many"](tmp), "--format", "json"],
    "compare-json": CLOSED_STDOUT["compare-json"],
    "history-json": _with_history,
    "explain-markdown": CLOSED_STDOUT["explain"],
}


@pytest.mark.parametrize("case", sorted(CUT_STDOUT))
def test_a_report_cut_by_the_file_size_limit_is_one_line_and_exit_2(tmp_path, case):
    work = folder(tmp_path, "work")
    args = CUT_STDOUT[case](work)
    whole = nsysprobe(*args, tmp=tmp_path)
    assert whole.code == 0 and len(whole.stdout) > LIMIT_BYTES, case
    done = nsysprobe(*args, tmp=tmp_path, limit_bytes=LIMIT_BYTES)
    assert done.code == 2, (case, done.code, done.stderr)
    assert len(done.lines) == 1, done.stderr
    line = done.lines[0]
    assert line.startswith("nsysprobe: error: standard output: ")
    assert os.strerror(errno.EFBIG) in line and "ulimit -f" in line


@pytest.mark.parametrize("option", ["--html", "scrub -o"])
def test_a_file_cut_by_the_file_size_limit_is_one_line_and_left_out(tmp_path, option):
    work, out = folder(tmp_path, "work"), folder(tmp_path, "out")
    if option == "--html":
        args = ["analyze", _trace(work), "--no-history", "--html", out / "r.html"]
    else:
        args = ["scrub", _trace(work), "-o", out / "s.sqlite"]
    done = nsysprobe(*args, tmp=tmp_path, limit_bytes=LIMIT_BYTES)
    assert done.code == 2 and len(done.lines) == 1, done.stderr
    assert done.lines[0].startswith("nsysprobe: error: ") and "ulimit -f" in done.lines[0]
    assert list(out.iterdir()) == []


# -- Markdown that pings, links or typesets nothing on GitHub ---------------------------------

# Names planted into the trace (StringIds): the main thread, and the three NVTX ranges inside
# each step. Digits in NVTX names are grouped as '#', so the numbered references go in the
# thread name and the file name.
PLANTED = {
    211: "py @octocat see #123 and GH-45",
    248: "get @nvidia/gpu-team at www.evil.example",
    249: "copy <http://evil.example/x> https://evil.example/y ftp://evil.example",
    250: "Compute mail admin@example.com $x^y$ and $$z$$",
}
# What GitHub makes live in rendered text: mentions and e-mail addresses, #123 and GH-123
# references, URLs with a scheme, www. hosts.
LIVE = re.compile(r"@\w|#\d|(?i:\bgh-\d)|://|(?i:www\.)")
# CommonMark's backslash escapes: a backslash before ASCII punctuation.
BACKSLASHED = re.compile(r"\\([!-/:-@\[-`{-~])")


def rendered(markdown: str) -> str:
    """The text GitHub shows for ``markdown``'s text (escapes and entities resolved)."""
    return html.unescape(BACKSLASHED.sub(r"\1", markdown))


def planted(tmp: Path, name: str) -> Path:
    path = copy_of(tmp, name)
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.executemany(
            "UPDATE StringIds SET value = ? WHERE id = ?", [(v, k) for k, v in PLANTED.items()]
        )
    finally:
        db.close()
    return path


def check_defused(markdown: str, shown: list[str]) -> None:
    assert "$" not in markdown  # math starts at a literal dollar
    text = rendered(markdown)
    assert [m.group() for m in LIVE.finditer(text)] == []
    plain = text.replace("\u2060", "")  # the word joiners that break the patterns
    for name in shown:
        assert name in plain, name


def test_markdown_of_a_report_defuses_the_names_it_shows(tmp_path):
    work = folder(tmp_path, "work")
    trace = planted(work, "run #77 GH-9 @octocat.sqlite")
    done = nsysprobe("analyze", trace, "--no-history", "--format", "markdown", tmp=tmp_path)
    assert done.code == 0, done.stderr
    check_defused(done.stdout.decode(), [*PLANTED.values(), trace.name])


def test_markdown_of_many_ranks_defuses_the_rank_names(tmp_path):
    work = folder(tmp_path, "work")
    ranks = [planted(work, "rank-@octocat.sqlite"), planted(work, "www.evil.example.sqlite")]
    done = nsysprobe("analyze", *ranks, "--workers", "1", "--format", "markdown", tmp=tmp_path)
    assert done.code == 0, done.stderr
    check_defused(done.stdout.decode(), [r.stem for r in ranks])


def test_markdown_of_a_comparison_defuses_the_run_names(tmp_path):
    work = folder(tmp_path, "work")
    runs = [planted(work, "main-ci@example.com.sqlite"), planted(work, "pr-#12-$x$.sqlite")]
    done = nsysprobe("compare", *runs, "--format", "markdown", tmp=tmp_path)
    assert done.code == 0, done.stderr
    check_defused(done.stdout.decode(), [r.name for r in runs])
