"""``nsysprobe compare`` and the history, fed what nsysprobe never writes: a run folder's
``analysis.json`` of the wrong shape, size or numbers, file names that forge lines, history
databases somebody else made and rows edited by hand. Each runs through a real process.

The contract is that of ``checks.py``: a report or one line ``nsysprobe: error: ...`` (exit 2),
nothing raw on the terminal, output of a bounded size, JSON that is JSON.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import sqlite3
from pathlib import Path

import pytest

from .checks import check_outcome, check_terminal_safe
from .hostile import BASE, run_cli

EVIL = "\x1b]0;owned\x07\x1b[2J\rfake\u202etxt\nnsysprobe: error: FORGED LINE"
MiB = 1 << 20


@pytest.fixture(scope="module")
def analysis(tmp_path_factory) -> dict:
    """The JSON form of a real report, as a run folder's analysis.json holds it."""
    done = run_cli("analyze", str(BASE), "--format", "json", "--no-history")
    assert done.code == 0, done.stderr
    return json.loads(done.stdout)


def _folder(parent: Path, text: str, name: str = "run") -> Path:
    folder = parent / name
    folder.mkdir()
    (folder / "analysis.json").write_text(text)
    return folder


def _one_error(done, fmt: str, where: str) -> str:
    assert check_outcome(done.code, done.stdout, done.stderr, fmt, where) == "error", done.stdout
    [line] = [line for line in done.error_lines if line.startswith("nsysprobe: error: ")]
    return line


def _database(path: Path, statements: list[str]) -> Path:
    db = sqlite3.connect(path)
    for statement in statements:
        db.execute(statement)
    db.commit()
    db.close()
    return path


# -- analysis.json: one validating loader --------------------------------------------------


def _set(data: dict, path: str, value) -> dict:
    """A deep copy of ``data`` with the figure at ``path`` (``steps.rows.0.wall_ns``) set."""
    data = json.loads(json.dumps(data))
    *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
    node = data
    for key in parents:
        node = node[key]
    node[last] = value
    return data


# (what the file holds, built from the real analysis, the field the error must name)
BAD_ANALYSES = {
    "an array": (lambda a: "[]", "the top level"),
    "trace a string": (lambda a: '{"trace": "x"}', "trace"),
    "1e400": (
        lambda a: json.dumps(_set(a, "steps.rows.3.wall_ns", "HUGE")).replace('"HUGE"', "1e400"),
        "steps.rows[3].wall_ns",
    ),
    "Infinity": (
        lambda a: json.dumps(_set(a, "steps.gpu_busy_ratio", float("inf"))),
        "Infinity",
    ),
    "NaN": (lambda a: json.dumps(_set(a, "steps.steps_per_s", float("nan"))), "NaN"),
    "past int64": (lambda a: json.dumps(_set(a, "gaps.gap_ns", 2**70)), "gaps.gap_ns"),
    "negative": (lambda a: json.dumps(_set(a, "steps.rows.0.wall_ns", -5)), "wall_ns"),
    "a ratio of 7": (lambda a: json.dumps(_set(a, "steps.gpu_busy_ratio", 7)), "gpu_busy_ratio"),
    "a string figure": (
        lambda a: json.dumps(_set(a, "transfers.pageable_htod_bytes", "64 MiB")),
        "transfers.pageable_htod_bytes",
    ),
    "200k deep": (lambda a: "[" * 200_000 + "]" * 200_000, "nested more than"),
}


@pytest.mark.parametrize("case", list(BAD_ANALYSES))
def test_an_analysis_json_nsysprobe_never_writes_is_one_line_naming_file_and_field(
    case, analysis, tmp_path
):
    make, field = BAD_ANALYSES[case]
    good = _folder(tmp_path, json.dumps(analysis), "good")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "analysis.json").write_text(make(analysis))
    done = run_cli("compare", str(good), str(bad), "--format", "json", timeout=60)
    line = _one_error(done, "json", case)
    assert f"{bad / 'analysis.json'}: not an nsysprobe analysis (" in line, line
    assert field in line, line


def test_a_real_analysis_json_still_compares(analysis, tmp_path):
    a = _folder(tmp_path, json.dumps(analysis), "a")
    b = _folder(tmp_path, json.dumps(analysis, indent=1), "b")
    done = run_cli("compare", str(a), str(b), "--format", "json", timeout=60)
    assert check_outcome(done.code, done.stdout, done.stderr, "json", "real") == "report"
    runs = json.loads(done.stdout)["runs"]
    assert runs[1]["vs_first"]["verdict"] == "within noise"
    assert runs[0]["step_wall_ns"] == [r["wall_ns"] for r in analysis["steps"]["rows"]]


def test_an_oversized_analysis_json_is_refused_unread(analysis, tmp_path):
    """A sparse 3 GB analysis.json (no disk used) was read whole (6.2 GB resident): now at
    most the bound is read. The largest file read, of the shape that costs Python the most
    memory per byte, is refused before it is parsed."""
    good = _folder(tmp_path, json.dumps(analysis), "good")
    sparse = tmp_path / "sparse"
    sparse.mkdir()
    with open(sparse / "analysis.json", "wb") as file:
        file.truncate(3 << 30)
    limits = {resource.RLIMIT_AS: (4 << 30, 4 << 30)}  # the old code dies here, not the box
    done = run_cli("compare", str(good), str(sparse), limits=limits, timeout=120)
    line = _one_error(done, "text", "sparse 3 GB")
    assert f"{sparse / 'analysis.json'}: larger than 16 MB" in line, line
    assert done.peak_rss_mib < 500, f"{done.peak_rss_mib:.0f} MiB"

    full = tmp_path / "full"
    full.mkdir()
    items = (16 * MiB - 2) // 3
    (full / "analysis.json").write_text("[" + ",".join(["{}"] * items) + "]")
    assert (full / "analysis.json").stat().st_size <= 16 * MiB
    done = run_cli("compare", str(good), str(full), limits=limits, timeout=120)
    line = _one_error(done, "text", "16 MB of {}")
    # Refused on its count of objects before the parser builds them (was: parsed, ~1 GiB).
    assert f"{items + 1:,} objects and arrays, more than the 262,144" in line, line
    assert done.peak_rss_mib < 250, f"{done.peak_rss_mib:.0f} MiB"


@pytest.mark.parametrize("spec", [str(2**70), "9" * 5000, "\u00b2"])
def test_a_history_id_sqlite_cannot_hold_is_one_line(spec, analysis, tmp_path):
    good = _folder(tmp_path, json.dumps(analysis))
    db = _database(tmp_path / "h.db", ["CREATE TABLE runs (id INTEGER PRIMARY KEY, command TEXT)"])
    done = run_cli("compare", str(good), spec, "--history", str(db), timeout=60)
    line = _one_error(done, "text", spec[:20])
    assert len(line) < 400, line
    if spec.isascii():
        assert "ids are whole numbers from 1 to 9223372036854775807" in line, line


# -- names compare shows --------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["text", "markdown", "json"])
def test_file_and_folder_names_cannot_forge_lines(fmt, analysis, tmp_path):
    """A folder named with a newline forged a line ``nsysprobe: error: FORGED LINE`` inside
    the report; every label is now cut and escaped as a name is."""
    evil = _folder(tmp_path, json.dumps(analysis), EVIL.replace("/", "_"))
    long = _folder(tmp_path, json.dumps(analysis), "n" * 250)
    trace = tmp_path / f"{EVIL.replace('/', '_')}.sqlite"
    shutil.copyfile(BASE, trace)
    done = run_cli("compare", str(trace), str(evil), str(long), "--format", fmt, timeout=120)
    assert check_outcome(done.code, done.stdout, done.stderr, fmt, fmt) == "report"
    forged = [line for line in done.stdout.splitlines() if "FORGED" in line]
    assert forged and all("\\u000a" in line for line in forged), forged
    if fmt == "json":
        labels = [r["label"] for r in json.loads(done.stdout)["runs"]]
        assert "\\u000a" in labels[0] and "\\u000a" in labels[1], labels
        assert len(labels[2]) == 200 and labels[2].endswith("…"), labels
    else:  # the table: its labels are cut as names are (the text's source lines are paths)
        table = done.stdout.split("\n\n")[0]
        assert "n" * 200 not in table and "n" * 199 + "…" in table


# -- the history database -------------------------------------------------------------------

FOREIGN = {
    "runs a view": ["CREATE VIEW runs AS SELECT 1 AS id"],
    "a trigger": [
        "CREATE TABLE runs (id INTEGER PRIMARY KEY, command TEXT)",
        "CREATE TABLE junk (x)",
        "CREATE TRIGGER t AFTER INSERT ON runs BEGIN INSERT INTO junk WITH RECURSIVE "
        "c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT randomblob(1000) FROM c; END",
    ],
    "runs virtual": ["CREATE VIRTUAL TABLE runs USING fts5(command)"],
    "runs keyed by text": ["CREATE TABLE runs (id TEXT PRIMARY KEY, command TEXT)"],
}


@pytest.mark.parametrize("case", list(FOREIGN))
def test_a_history_database_nsysprobe_did_not_make_is_refused(case, analysis, tmp_path):
    """A ``runs`` view ended in an internal error; an AFTER INSERT trigger ran in SQLite,
    deaf to SIGINT and SIGTERM, writing gigabytes. Recording now warns and reports; reading
    is one line naming the file and the fix; the file is left as it was."""
    db = _database(tmp_path / "h.db", FOREIGN[case])
    before = db.read_bytes()
    # A runaway write stops at 200 MB on the old code (SQLite sees EFBIG) instead of the disk.
    limits = {resource.RLIMIT_FSIZE: (200 * MiB, 200 * MiB)}
    done = run_cli("analyze", str(BASE), "--history", str(db), limits=limits, timeout=60)
    check_terminal_safe(done.stdout, done.stderr, case)
    assert done.code == 0, done.stderr
    assert "VERDICT:" in done.stdout
    [warning] = done.error_lines
    assert warning.startswith(f"nsysprobe: warning: not recorded in the history: {db}: ")
    assert "not a history database nsysprobe made" in warning and "--no-history" in warning
    assert db.read_bytes() == before

    good = _folder(tmp_path, json.dumps(analysis))
    for args in (["history"], ["history", "--format", "json"], ["compare", str(good), "1"]):
        done = run_cli(*args, "--history", str(db), timeout=60)
        line = _one_error(done, "text", " ".join(args))
        assert f"{db}: not a history database nsysprobe made" in line, line
    assert db.read_bytes() == before


def _edited_history(tmp_path: Path) -> Path:
    """A real history entry, then edited by hand: 20 MB of command, escapes in every name,
    figures out of range, step times nested 100,000 deep."""
    db = tmp_path / "h.db"
    done = run_cli("analyze", str(BASE), "--history", str(db))
    assert done.code == 0, done.stderr
    con = sqlite3.connect(db)
    con.execute(
        "UPDATE runs SET command = ?, trace = ?, top_recommendation = ?, nsys_version = ?, "
        "paths = ?, recorded_utc = ?, busy_basis = ?, gpu_busy_ratio = 50, "
        "steps_per_s = -1, gap_ns = -7",
        (
            EVIL + "x" * 20_000_000,
            EVIL * 1000,
            EVIL * 1000,
            EVIL * 1000,
            json.dumps({"trace": EVIL * 1000, EVIL: "y"}),
            EVIL,
            EVIL,
        ),
    )
    con.execute("INSERT INTO runs (command, step_wall_ns) VALUES ('x', ?)", ("[" * 100_000,))
    con.commit()
    con.close()
    return db


def test_history_rows_edited_by_hand_are_shown_cut_and_escaped(analysis, tmp_path):
    db = _edited_history(tmp_path)
    for fmt in ("text", "json"):
        done = run_cli("history", "--format", fmt, "--history", str(db), timeout=60)
        assert check_outcome(done.code, done.stdout, done.stderr, fmt, fmt) == "report"
        assert len(done.stdout) < 50_000, f"{fmt}: {len(done.stdout):,} characters"
        assert not any(line.startswith("nsysprobe:") for line in done.stdout.splitlines())
    entries = json.loads(done.stdout)["entries"]
    edited = entries[-1]
    # cut to 1,000 and 200 characters, then escaped (a control character becomes six)
    assert len(edited["command"]) < 1_500 and edited["command"].endswith("x…")
    assert edited["gpu_busy_ratio"] is None and edited["steps_per_s"] is None
    assert edited["gap_ns"] is None and edited["busy_basis"] == "none"
    assert all(len(edited[k]) < 500 for k in ("trace", "top_recommendation", "nsys_version"))
    good = _folder(tmp_path, json.dumps(analysis))
    for spec in ("1", "2"):
        done = run_cli(
            "compare", str(good), spec, "--history", str(db), "--format", "json", timeout=60
        )
        assert check_outcome(done.code, done.stdout, done.stderr, "json", spec) == "report"
        assert len(done.stdout) < 50_000, f"{len(done.stdout):,} characters"


def test_history_limit_past_sqlite_integers_is_a_usage_error(tmp_path):
    """``history -n 2**70`` blamed a healthy database ("datatype mismatch")."""
    db = tmp_path / "h.db"
    assert run_cli("analyze", str(BASE), "--history", str(db)).code == 0
    done = run_cli("history", "-n", str(2**70), "--history", str(db), timeout=60)
    line = _one_error(done, "text", "-n 2**70")
    assert "--limit" in line and "cannot use it" not in line, line
    assert os.path.getsize(db) > 0
