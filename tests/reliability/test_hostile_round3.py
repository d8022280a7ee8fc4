"""Hostile inputs of the third review round (issue 12): each failed before its fix."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys

import tomllib

from .checks import check_terminal_safe
from .hostile import SAMPLES, crafted, pause_at, run_cli, wait_for

PYTHON_OVERHEAD = SAMPLES / "h200_python_overhead.sqlite"


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_nvtx_ranges_all_of_zero_length_are_no_ranges(tmp_path):
    # Was: internal error (IndexError in intervals.innermost_cover), exit 70.
    path = crafted(tmp_path, 'UPDATE NVTX_EVENTS SET "end" = "start"', base=PYTHON_OVERHEAD)
    done = run_cli("analyze", str(path), "--no-history")
    assert done.code == 0, done.stderr
    assert "VERDICT:" in done.stdout


def test_scrub_keeps_no_secret_in_a_version_or_behind_a_nul_in_an_option_name(tmp_path):
    # Was: both secrets byte for byte in the copy.
    key, token = "AKIAIOSFODNN7EXAMPLE", "ghp_NULTRICKsecretTOKEN1234567890"
    path = crafted(
        tmp_path,
        f"UPDATE META_DATA_EXPORT SET value = '2025.3.2-{key}' "
        "WHERE name = 'EXPORT_PRODUCT_VERSION'",
        "INSERT INTO META_DATA_CAPTURE (name, value) VALUES "
        f"('PROCESS_9:COLLECT_CUDA_TRACE' || char(0) || ':{token}', 'true')",
        base=PYTHON_OVERHEAD,
    )
    out = tmp_path / "shared.sqlite"
    done = run_cli("scrub", str(path), "-o", str(out))
    assert done.code == 0, done.stderr
    data = out.read_bytes()
    assert key.encode() not in data and token.encode() not in data
    with sqlite3.connect(out) as db:
        (version,) = db.execute(
            "SELECT value FROM META_DATA_EXPORT WHERE name = 'EXPORT_PRODUCT_VERSION'"
        ).fetchone()
        names = {n for (n,) in db.execute("SELECT name FROM META_DATA_CAPTURE")}
    assert version == "2025.3.2"
    assert names == {"CAPTURE_EVENT_TYPE", "COLLECT_NVTX_TRACE", "COLLECT_CUDA_TRACE", None}


def test_the_history_is_never_the_trace_nor_a_database_whose_defaults_run(tmp_path):
    # Was: the trace got a runs table; a DEFAULT (zeroblob(...)) grew the history to 900 MB.
    path = crafted(tmp_path, base=PYTHON_OVERHEAD)
    before = _digest(path)
    done = run_cli("analyze", str(path), "--history", str(path))
    assert done.code == 0
    assert "the history database would be the trace itself" in done.stderr
    assert _digest(path) == before
    history = tmp_path / "h.db"
    with sqlite3.connect(history) as db:
        db.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, d TEXT DEFAULT (zeroblob(1000)))")
    size = history.stat().st_size
    done = run_cli("analyze", str(path), "--history", str(history))
    assert "runs has columns with DEFAULT values" in done.stderr
    assert history.stat().st_size == size
    check_terminal_safe(done.stdout, done.stderr, "history")


def test_many_ranks_exit_2_when_none_is_analyzed_and_cap_the_ranks_of_one_report(tmp_path):
    # Was: exit 0 with a table of errors; 2,400 processes ran past a minute (37 ms a rank).
    empty = [tmp_path / "a.sqlite", tmp_path / "b.sqlite"]
    for p in empty:
        p.write_bytes(b"")
    done = run_cli("analyze", *map(str, empty), "--no-history")
    assert done.code == 2
    assert done.error_lines[-1].startswith("nsysprobe: error: none of the 2 reports could be")
    spread = crafted(
        tmp_path,
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL",
        'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "globalPid" = rowid << 24',
        name="spread.sqlite",
        base=PYTHON_OVERHEAD,
    )
    done = run_cli(
        "analyze", str(spread), "--ranks", "--no-history", "--format", "json", timeout=60
    )
    assert done.code == 2
    (rank,) = json.loads(done.stdout)["ranks"]
    assert "processes ran GPU work, more than the 64 ranks one report holds" in rank["error"]
    assert done.wall_s < 30


def test_ctrl_c_while_the_local_cluster_starts_prints_one_line(tmp_path):
    # Was: "nsysprobe: interrupted" and then Dask's exit hook's 30-line AssertionError
    # (Status.init) traceback about the worker that was still starting.
    ranks = [crafted(tmp_path, name=f"rank{i}.sqlite", base=PYTHON_OVERHEAD) for i in (0, 1)]
    marker = tmp_path.parent / f"{tmp_path.name}-starting"
    done = run_cli(
        "analyze",
        *map(str, ranks),
        "--no-history",
        patch=pause_at("distributed.nanny:Nanny.start_unsafe", marker, seconds=2),
        on_start=lambda proc: (wait_for(marker), os.kill(proc.pid, signal.SIGINT)),
        timeout=90,
    )
    assert done.code == 130
    assert done.stderr.strip() == "nsysprobe: interrupted"


def test_ctrl_c_while_the_command_line_loads_prints_one_line():
    # Was: a KeyboardInterrupt traceback from inside an import (click, traceback, ipaddress).
    # The console script's own target (pyproject.toml), with Ctrl-C sent as click loads.
    pyproject = tomllib.loads((SAMPLES.parent / "pyproject.toml").read_text())
    module, function = pyproject["project"]["scripts"]["nsysprobe"].split(":")
    code = (
        "import builtins, importlib, os, signal, sys\n"
        "_import = builtins.__import__\n"
        "def _interrupting(name, *a, **k):\n"
        "    if name == 'click':\n"
        "        builtins.__import__ = _import\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "    return _import(name, *a, **k)\n"
        "builtins.__import__ = _interrupting\n"
        "sys.argv = ['nsysprobe', '--version']\n"
        f"getattr(importlib.import_module({module!r}), {function!r})()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 130, done.stderr
    assert done.stderr == "nsysprobe: interrupted\n"
    assert done.stdout == ""


def test_an_analysis_json_of_a_million_empty_objects_is_refused_before_it_is_built(tmp_path):
    # Was: the right one-line error, after 443 MB for this 4.8 MB file (1.25 GB at 15 MB).
    run = tmp_path / "run"
    run.mkdir()
    (run / "analysis.json").write_text(
        '{"steps": {"rows": [' + ",".join(["{}"] * 1_600_000) + "]}}"
    )
    done = run_cli("compare", str(PYTHON_OVERHEAD), str(run))
    assert done.code == 2
    assert "1,600,003 objects and arrays, more than the 262,144" in done.stderr
    assert done.peak_rss_mib < 250, done.peak_rss_mib


def test_scrub_of_a_16_mib_value_of_headers_stays_small(tmp_path):
    # Was: 2.1 GB (the regex engine kept a backtracking state per character of the value).
    value = ("Authorization: Basic S3cr3tCred " * ((16 << 20) // 32))[: 16 << 20]
    path = crafted(tmp_path, base=PYTHON_OVERHEAD)
    with sqlite3.connect(path) as db:
        db.execute(
            "UPDATE StringIds SET value = ? WHERE id = "
            "(SELECT shortName FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1)",
            (value,),
        )
    out = tmp_path / "shared.sqlite"
    done = run_cli("scrub", str(path), "-o", str(out))
    assert done.code == 0, done.stderr
    assert b"S3cr3tCred" not in out.read_bytes()
    assert done.peak_rss_mib < 400, done.peak_rss_mib


def test_no_output_is_a_file_sqlite_would_read_beside_the_trace(tmp_path):
    # Was: accepted while it did not exist yet; a history written as IN-journal made the
    # trace unreadable ("attempt to write a readonly database").
    path = crafted(tmp_path, base=PYTHON_OVERHEAD)
    done = run_cli("analyze", str(path), "--history", f"{path}-journal")
    assert "would be the trace itself or a file SQLite keeps beside it" in done.stderr
    wal = f"{path}-wal"
    for args in (
        ["analyze", str(path), "--no-history", "--html", wal],
        ["scrub", str(path), "-o", wal],
    ):
        done = run_cli(*args)
        assert done.code == 2 and "is an input of this command" in done.stderr, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]
    assert run_cli("analyze", str(path), "--no-history").code == 0


def test_a_history_database_whose_checks_or_indexes_run_sql_is_refused_unwritten(tmp_path):
    # Was: a CHECK of printf('%.*c', 900000000, ...) took 1.8 GB; another ran for minutes.
    path = crafted(tmp_path, base=PYTHON_OVERHEAD)
    schemas = {
        "check": "CREATE TABLE runs (id INTEGER PRIMARY KEY, command TEXT, "
        "CHECK (length(printf('%.*c', 900000000, 'x')) > 0))",
        "index": "CREATE TABLE runs (id INTEGER PRIMARY KEY, command TEXT); "
        "CREATE INDEX big ON runs (length(printf('%.*c', 900000000, command)))",
    }
    for kind, sql in schemas.items():
        history = tmp_path / f"{kind}.db"
        with sqlite3.connect(history) as db:
            db.executescript(sql)
        size = history.stat().st_size
        done = run_cli("analyze", str(path), "--history", str(history))
        assert done.code == 0 and "not a history database nsysprobe made" in done.stderr
        assert history.stat().st_size == size
        assert done.peak_rss_mib < 250, (kind, done.peak_rss_mib)


def test_ctrl_c_to_the_whole_job_prints_one_line(tmp_path):
    # Was: "nsysprobe: interrupted" and the local cluster's worker processes' tracebacks,
    # which share the terminal (a terminal's Ctrl-C reaches the whole process group).
    ranks = [crafted(tmp_path, name=f"rank{i}.sqlite", base=PYTHON_OVERHEAD) for i in (0, 1)]
    for target in ("distributed.nanny:Nanny.start_unsafe", "distributed:Client.map"):
        marker = tmp_path.parent / f"{tmp_path.name}-{target.rsplit('.', 1)[-1]}"
        done = run_cli(
            "analyze",
            *map(str, ranks),
            "--no-history",
            patch=pause_at(target, marker, seconds=2),
            on_start=lambda proc, m=marker: (wait_for(m), os.killpg(proc.pid, signal.SIGINT)),
            timeout=90,
        )
        assert done.code == 130, (target, done.stderr)
        assert done.stderr.strip() == "nsysprobe: interrupted", (target, done.stderr)
