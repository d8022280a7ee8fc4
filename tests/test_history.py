"""The history database: where it lives, what analyze records, and ``nsysprobe history``."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import independent
import pytest
from click.testing import CliRunner

import nsysprobe
from nsysprobe.cli import main
from nsysprobe.report.metrics import metrics_of
from nsysprobe.runs import history


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def test_default_location(monkeypatch, tmp_path):
    monkeypatch.delenv("NSYSPROBE_HISTORY")
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert history.default_path() == tmp_path / "home/.local/share/nsysprobe/history.db"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert history.default_path() == tmp_path / "data/nsysprobe/history.db"
    monkeypatch.setenv("NSYSPROBE_HISTORY", str(tmp_path / "mine.db"))
    assert history.default_path() == tmp_path / "mine.db"


def test_tests_never_touch_the_real_home(tmp_path):
    assert history.default_path() == tmp_path / "history.db"


def test_analyze_records_metrics_paths_and_command(rung, tmp_path):
    trace = rung("baseline")
    html = tmp_path / "b.html"
    assert run("analyze", trace, "--html", html).exit_code == 0
    db = sqlite3.connect(tmp_path / "history.db")
    db.row_factory = sqlite3.Row
    (row,) = db.execute("SELECT * FROM runs").fetchall()
    db.close()
    assert row["command"] == f"nsysprobe analyze --html {html} {trace}"
    assert json.loads(row["paths"]) == {
        "trace": str(trace),
        "sqlite": str(trace),
        "html": str(html),
    }
    # ladder baseline: 6 steps of 400 ms, 0.5 ms apart (each after the first from the last
    # one's end: 400.5 ms), 64 MiB pageable copy each
    assert row["step_count"] == 6
    assert row["steps_per_s"] == pytest.approx(6 / 2.4025, rel=1e-12)
    assert json.loads(row["step_wall_ns"]) == [400_000_000] + [400_500_000] * 5
    assert row["step_timing"] == "completion"
    assert row["pageable_htod_bytes"] == 6 * (64 << 20)
    assert row["top_recommendation"] == "multiprocess_loading"


def test_no_history_and_explicit_path(rung, tmp_path):
    trace = rung("pinned")
    assert run("analyze", trace, "--no-history").exit_code == 0
    assert not (tmp_path / "history.db").exists()
    other = tmp_path / "sub" / "other.db"
    assert run("analyze", trace, "--history", other).exit_code == 0
    assert [e.metrics.trace for e in history.entries(other)] == ["pinned.sqlite"]
    assert not (tmp_path / "history.db").exists()


def test_library_hook_and_listing(rung, tmp_path):
    traces = {name: rung(name) for name in ("baseline", "pipelined")}
    for name, trace in traces.items():
        report = nsysprobe.analyze(trace)
        history.record(report, f"nsysprobe run workloads/{name}.py", {"folder": tmp_path})
    out = run("history").output.splitlines()
    assert out[0].split() == [
        "id",
        "recorded",
        "(UTC)",
        "trace",
        "steps/s",
        "GPU",
        "busy",
        "top",
        "recommendation",
        "command",
    ]
    assert out[1].split()[:2] == ["2", out[1].split()[1]]
    windows = independent.step_windows(traces["pipelined"], "Batch %")
    rate = len(windows) * 1e9 / (windows[-1][1] - windows[0][0])
    assert f"pipelined.sqlite  {rate:.2f}" in out[1] and "gpu_bound" in out[1]
    assert out[2].endswith("nsysprobe run workloads/baseline.py")
    assert out[-1] == f"(2 newest in {tmp_path / 'history.db'})"
    data = json.loads(run("history", "--format", "json", "--limit", "1").output)
    (entry,) = data["entries"]
    assert entry["id"] == 2 and entry["paths"] == {"folder": str(tmp_path)}
    assert entry["top_recommendation"] == "gpu_bound"


def test_empty_history(tmp_path):
    assert run("history").output == f"no runs recorded yet in {tmp_path / 'history.db'}\n"


def test_unusable_history_warns_and_still_reports(rung, tmp_path):
    bad = tmp_path / "not-a-db"
    bad.write_text("this is not sqlite " * 100)
    result = CliRunner().invoke(main, ["analyze", str(rung("pinned")), "--history", str(bad)])
    assert result.exit_code == 0
    assert "VERDICT: stream_pipelining" in result.output
    warning = f"nsysprobe: warning: not recorded in the history: {bad}: cannot use it"
    assert warning in result.output
    assert Path(bad).read_text().startswith("this is not sqlite")


def test_a_history_an_older_nsysprobe_made_gains_the_new_columns(rung, tmp_path):
    """A ``runs`` table as an older nsysprobe left it (made by sqlite-utils, without the
    figures added since): its entry stays, the new entry is recorded whole."""
    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.execute(
        'CREATE TABLE "runs" ("recorded_utc" TEXT, "command" TEXT, "paths" TEXT, '
        '"trace" TEXT, "step_count" INTEGER, "steps_per_s" REAL, "gap_ns" INTEGER, '
        '"id" INTEGER PRIMARY KEY)'
    )
    db.execute(
        "INSERT INTO runs (recorded_utc, command, paths, trace, step_count, steps_per_s, gap_ns) "
        "VALUES ('2026-11-30T10:00:00+00:00', 'nsysprobe analyze old.sqlite', '{}', "
        "'old.sqlite', 7, 2.5, 5000000)"
    )
    db.commit()
    db.close()
    report = nsysprobe.analyze(rung("pipelined"))
    assert history.record(report, "nsysprobe analyze new.sqlite", {}, path) == 2
    new, old = history.entries(path)
    assert (old.id, old.metrics.trace, old.metrics.step_count, old.metrics.steps_per_s) == (
        1,
        "old.sqlite",
        7,
        2.5,
    )
    assert old.metrics.exposed_copy_ns is None and old.metrics.step_wall_ns == ()
    # An older nsysprobe timed the steps by their CPU ranges; this one to their completion.
    assert (old.metrics.step_timing, new.metrics.step_timing) == ("cpu range", "completion")
    # Its gaps were the devices' idle over the capture, not the accounts': not compared.
    assert old.metrics.gap_ns is None and new.metrics.gap_ns == report.gaps.gap_ns
    expected = metrics_of(report)
    assert new.metrics == expected and len(new.metrics.step_wall_ns) == expected.step_count
    assert history.get(2, path).metrics == expected
    columns = [r[1] for r in sqlite3.connect(path).execute("PRAGMA table_info(runs)")]
    assert columns[:8] == ["recorded_utc", "command", "paths", "trace", "step_count"] + [
        "steps_per_s",
        "gap_ns",
        "id",
    ]
    assert set(columns) == {"id", *history._COLUMNS}
