"""Files and names built to hurt, and unlucky conditions: one test per kind that issue 12 found,
each built from the same shape (crafted exports, names, files, signals), each run through a
real ``nsysprobe`` process with its time and peak memory measured where the kind is about
unbounded work.

The contract is that of ``checks.py``: a report or one line ``nsysprobe: error: ...`` (exit 2),
nothing raw on the terminal, nothing written where it must not be.
"""

from __future__ import annotations

import errno
import json
import os
import resource
import shutil
import signal
import sqlite3
import stat
import subprocess
import time
from pathlib import Path

import pytest

from .checks import check_analyze, check_terminal_safe, folder_state, unsafe_characters
from .hostile import BASE, SAMPLES, crafted, pause_at, run_cli, wait_for

# A name as an attacker writes it: an OSC title, a screen clear, a carriage return, a bidi
# override and a newline that would forge a line of the report.
EVIL = "\x1b]0;owned\x07\x1b[2J\rfake\u202etxt\nVERDICT: gpu_bound"
MEGABYTES = 5_000_000


def _evil_sql(value: str) -> str:
    """``value`` as an SQL expression (char() for every character, quotes never needed)."""
    return "(" + " || ".join(f"char({ord(c)})" for c in value) + ")"


def _one_error_line(done, where: str) -> str:
    check_terminal_safe(done.stdout, done.stderr, where)
    assert done.code == 2, f"{where}: exit {done.code}\n{done.stderr}"
    lines = done.error_lines
    assert len(lines) == 1 and lines[0].startswith("nsysprobe: error: "), f"{where}: {lines}"
    return lines[0]


# -- unbounded work from a small file ---------------------------------------------------------


def test_a_view_that_never_ends_is_not_read(tmp_path):
    # The event tables replaced by views over a recursive CTE with no end: 1.6 MB of file.
    sql = []
    for table in ("NVTX_EVENTS", "CUPTI_ACTIVITY_KIND_KERNEL", "StringIds"):
        sql += [
            f"ALTER TABLE {table} RENAME TO {table}_raw",
            f"CREATE VIEW {table} AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 "
            f"FROM n) SELECT {table}_raw.* FROM n, {table}_raw",
        ]
    path = crafted(tmp_path, *sql)
    done = run_cli("analyze", str(path), "--format", "json", "--no-history", timeout=120)
    assert done.code == 0, done.stderr
    report = json.loads(done.stdout)
    ignored = [f for f in report["findings"] if f["id"] == "not_tables_ignored"]
    assert ignored and "NVTX_EVENTS" in ignored[0]["message"]
    assert done.peak_rss_mib < 400, f"{done.peak_rss_mib:.0f} MiB"


def _disguised_virtual_table(folder: Path, view: str) -> Path:
    """The kernel table replaced by an fts5 table reading ``view``, its schema text written
    ``CREATE  VIRTUAL`` (two spaces: SQLite loads it, a text match for "CREATE VIRTUAL" does
    not see it)."""
    return crafted(
        folder,
        "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL",
        f"CREATE VIEW v AS {view}",
        "CREATE VIRTUAL TABLE CUPTI_ACTIVITY_KIND_KERNEL USING fts5(start, end, deviceId, "
        "streamId, correlationId, globalPid, shortName, content=v, content_rowid=rid)",
        "PRAGMA writable_schema=ON",
        "UPDATE sqlite_master SET sql = replace(sql, 'CREATE VIRTUAL', 'CREATE  VIRTUAL') "
        "WHERE name = 'CUPTI_ACTIVITY_KIND_KERNEL'",
    )


def test_a_virtual_table_in_disguise_is_not_read(tmp_path):
    # One row from the view: a kernel 987,653,321 ns long that the trace does not hold; and a
    # view that never ends, each row a second of CPU (the step budget would not see it).
    one = _disguised_virtual_table(
        tmp_path,
        "SELECT 1 AS rid, 1000 AS start, 987654321 AS end, 0 AS deviceId, 7 AS streamId, "
        "1 AS correlationId, 0 AS globalPid, 1 AS shortName",
    )
    done = run_cli("analyze", str(one), "--format", "json", "--no-history")
    assert done.code == 0, done.stderr
    report = json.loads(done.stdout)
    assert all(d["kernel_busy_ns"] != 987653321 for d in report["devices"])
    (tmp_path / "slow").mkdir()
    slow = _disguised_virtual_table(
        tmp_path / "slow",
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x AS rid, "
        "x * 1000 AS start, x * 1000 + 500 + length(randomblob(100000000)) * 0 AS end, "
        "0 AS deviceId, 7 AS streamId, x AS correlationId, 0 AS globalPid, 1 AS shortName FROM c",
    )
    done = run_cli("analyze", str(slow), "--no-history", timeout=60)
    assert done.code == 0, done.stderr
    assert "CUPTI_ACTIVITY_KIND_KERNEL" in done.stdout  # named as not read


def test_table_kinds_without_pragma_table_list(tmp_path):
    # SQLite before 3.37 has no pragma_table_list: the CREATE statements are read as SQLite
    # reads them.
    from nsysprobe.trace.connection import table_kinds

    path = _disguised_virtual_table(tmp_path, "SELECT 1 AS rid")

    class OldSqlite:
        def __init__(self, db):
            self.db = db

        def execute(self, sql, *args):
            if "pragma_table_list" in sql:
                raise sqlite3.OperationalError("no such table: pragma_table_list")
            return self.db.execute(sql, *args)

    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        new, old = table_kinds(db), table_kinds(OldSqlite(db))
    assert new["CUPTI_ACTIVITY_KIND_KERNEL"] == old["CUPTI_ACTIVITY_KIND_KERNEL"] == "virtual"
    assert new["v"] == old["v"] == "view"
    assert new["StringIds"] == old["StringIds"] == "table"


def test_sqlite_work_past_the_budget_is_one_line_error(tmp_path, monkeypatch):
    # The budget is SQLite's own progress handler, and for the event tables read through
    # ADBC's driver each batch's values (about SQLite's steps of a plain scan: 1.15 per value
    # measured on this export's kernels and runtime calls): a budget far below what this export
    # needs (~170,000 steps since the Arrow reader, several times that before) stops the read
    # with the budget's message.
    from nsysprobe.trace import connection

    monkeypatch.setattr(connection, "_OPS_PER_BYTE", 0)
    monkeypatch.setattr(connection, "_MIN_OPS", 50_000)
    monkeypatch.setattr(connection, "OPS_PER_CHECK", 1_000)
    path = crafted(tmp_path)
    from click.testing import CliRunner

    from nsysprobe.cli import main

    result = CliRunner().invoke(main, ["analyze", str(path), "--no-history"])
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1
    assert "took more than 5e+04 SQLite steps" in result.stderr


@pytest.mark.parametrize("fmt", ["json", "text", "markdown"])
def test_names_of_megabytes_make_a_report_of_kilobytes(tmp_path, fmt):
    # One GPU name, every thread name, every NVTX name and every kernel name 5 MB long.
    big = f"printf('%.*c', {MEGABYTES}, 'n')"
    path = crafted(
        tmp_path,
        f"UPDATE TARGET_INFO_GPU SET name = {big}",
        f"UPDATE StringIds SET value = value || {big} WHERE id IN (SELECT nameId FROM "
        f"ThreadNames) OR id IN (SELECT textId FROM NVTX_EVENTS) OR id IN (SELECT shortName "
        f"FROM CUPTI_ACTIVITY_KIND_KERNEL)",
    )
    done = run_cli("analyze", str(path), "--format", fmt, "--no-history")
    assert done.code == 0, done.stderr[-2000:]
    assert len(done.stdout) < 200_000, f"{len(done.stdout):,} characters of report"
    if fmt == "json":
        json.loads(done.stdout)
    assert done.peak_rss_mib < 600, f"{done.peak_rss_mib:.0f} MiB"


def test_steps_that_overlap_each_other_cost_no_product_of_memory(tmp_path):
    # 20,000 "steps" on one thread, each over half the capture: every step spans half of the
    # busy intervals. Before: 3.24 GB (steps x busy intervals, at once).
    n = 20_000
    path = crafted(
        tmp_path,
        "DELETE FROM NVTX_EVENTS",
        "INSERT INTO NVTX_EVENTS (start, end, eventType, globalTid, text) "
        f"WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i < {n - 1}) "
        f"SELECT lo + i * ((hi - lo) / {n}), lo + i * ((hi - lo) / {n}) + (hi - lo) / 2, 59, "
        "tid, 'load ' || i FROM k, (SELECT min(start) AS lo, max(end) AS hi FROM "
        "CUPTI_ACTIVITY_KIND_KERNEL), (SELECT globalTid AS tid FROM CUPTI_ACTIVITY_KIND_RUNTIME "
        "GROUP BY globalTid ORDER BY count(*) DESC LIMIT 1)",
    )
    done = run_cli("analyze", str(path), "--format", "json", "--no-history")
    assert done.code == 0, done.stderr
    assert json.loads(done.stdout)["steps"]["count"] == n
    assert done.peak_rss_mib < 400, f"{done.peak_rss_mib:.0f} MiB"


@pytest.mark.parametrize(
    "spread",
    [
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET deviceId = rowid % 1000",
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET globalPid = ((rowid % 2000) << 24) | (1 << 48)",
    ],
    ids=["1000-devices", "2000-processes"],
)
def test_work_spread_over_thousands_of_gpus_or_processes_stays_bounded(tmp_path, spread):
    # The export describes one GPU; its 7,780 kernels claim 1,000 device ids or 2,000
    # processes. Before: 54 s and 18.8 MB of JSON for 1,000 devices (an account and 20
    # described gaps each).
    done = run_cli("analyze", str(crafted(tmp_path, spread)), "--format", "json", "--no-history")
    assert done.code == 0, done.stderr
    report = json.loads(done.stdout)
    assert len(done.stdout) < 2_000_000, f"{len(done.stdout):,} characters"
    assert done.wall_s < 60 and done.peak_rss_mib < 400, (done.wall_s, done.peak_rss_mib)
    assert len(report["devices"]) <= 64 and len(report["account"]["accounts"]) <= 64
    assert len(report["gaps"]["longest"]) <= 20
    if "deviceId" in spread:
        assert any(f["id"] == "devices_left_out" for f in report["findings"])
    else:
        assert report["account"]["left_out"] == 2000 - 64


@pytest.mark.parametrize("name", ["trace.sqlite", "trace.nsys-rep", "trace.qdrep"])
def test_a_fifo_named_like_a_trace_is_refused_at_once(tmp_path, name):
    fifo = tmp_path / name
    os.mkfifo(fifo)
    done = run_cli("analyze", str(fifo), "--no-history", timeout=30)
    line = _one_error_line(done, name)
    assert "is a FIFO, not a regular file" in line
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_a_wal_database_with_a_pending_log_is_read_and_left_alone(tmp_path):
    path = tmp_path / "trace.sqlite"
    shutil.copyfile(BASE, path)
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("PRAGMA wal_autocheckpoint=0")
    # A kernel that exists only in the -wal file: a snapshot read must see it.
    writer.execute(
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1"
    )
    try:
        assert Path(f"{path}-wal").stat().st_size > 0
        before = folder_state(path)
        done = run_cli("analyze", str(path), "--format", "json", "--no-history")
        assert done.code == 0, done.stderr
        assert folder_state(path) == before, "analyze wrote beside the trace"
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as check:
            kernels = check.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
        assert kernels[0] == 7781
        report = json.loads(done.stdout)
        assert report["devices"][0]["kernel_count"] == 7781
    finally:
        writer.close()


def test_a_pending_wal_is_read_from_a_copy_settled_into_one_file(tmp_path):
    # Read in WAL mode, the copy's -shm was mapped by two SQLite libraries whose locks do not
    # see each other (Python's and the ADBC driver's): a bus error, now and then. Its pending
    # pages written into it, the copy is read as a plain file: no -wal, no -shm, the pending
    # kernel there.
    from nsysprobe.trace.connection import settle_copy
    from nsysprobe.trace.reader import Trace

    path, writer = _pending_wal(tmp_path)
    writer.execute(
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1"
    )
    try:
        with Trace(path) as trace:
            assert trace._uri.endswith("?mode=ro&immutable=1")
            got = trace.read_together({"kernels": trace.kernels, "runtime": trace.runtime})
            assert len(got["kernels"]) == 7781
            assert [p.name for p in trace._copy.iterdir()] == [path.name]
    finally:
        writer.close()
    # A file SQLite cannot take is left in WAL mode, read as before.
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4096)
    assert settle_copy(garbage) is False


# -- the terminal trusts the trace ------------------------------------------------------------


def _evil_trace(folder: Path, name: str = "trace.sqlite") -> Path:
    evil = _evil_sql(EVIL)
    return crafted(
        folder,
        f"UPDATE TARGET_INFO_GPU SET name = {evil}",
        f"UPDATE StringIds SET value = value || {evil} WHERE id IN (SELECT nameId FROM "
        f"ThreadNames) OR id IN (SELECT textId FROM NVTX_EVENTS) OR id IN (SELECT shortName "
        f"FROM CUPTI_ACTIVITY_KIND_KERNEL) OR id IN (SELECT nameId FROM OSRT_API)",
        name=name,
    )


@pytest.mark.parametrize("fmt", ["text", "markdown", "json"])
def test_names_from_the_trace_never_reach_the_terminal_raw(tmp_path, fmt):
    path = _evil_trace(tmp_path, name=f"run{EVIL.replace('/', '_')}.sqlite")
    done = run_cli("analyze", str(path), "--format", fmt, "--no-history")
    assert done.code == 0, done.stderr
    check_terminal_safe(done.stdout, done.stderr, fmt)
    assert "\nVERDICT: gpu_bound" not in done.stdout.replace("VERDICT: gpu_bound -", "")
    if fmt == "json":  # the escapes are JSON's own: still valid JSON
        json.loads(done.stdout)


def test_many_ranks_view_and_history_escape_names(tmp_path):
    one = _evil_trace(tmp_path, name="rank0.sqlite")
    shutil.copyfile(one, tmp_path / f"rank1{EVIL.replace('/', '_')}.sqlite")
    history = tmp_path / "history.db"
    env = {"NSYSPROBE_HISTORY": str(history)}
    for args in (["analyze", str(tmp_path), "--workers", "1"], ["analyze", str(one)]):
        done = run_cli(*args, env=env, timeout=300)
        assert done.code == 0, done.stderr
        check_terminal_safe(done.stdout, done.stderr, " ".join(args))
    done = run_cli("history", env=env)
    assert done.code == 0, done.stderr
    check_terminal_safe(done.stdout, done.stderr, "history")


def test_step_range_error_lists_names_on_one_line(tmp_path):
    path = _evil_trace(tmp_path)
    done = run_cli("analyze", str(path), "--step-range", f"no such{EVIL}", "--no-history")
    line = _one_error_line(done, "--step-range")
    assert "--step-range" in line and "no top-level NVTX range has that name" in line


def test_a_missing_file_with_escapes_in_its_name_is_one_safe_line(tmp_path):
    done = run_cli("analyze", str(tmp_path / f"gone{EVIL.replace('/', '_')}.sqlite"))
    # ("[" makes the name a glob, which matches nothing)
    assert "gone\\u001b]0;owned" in _one_error_line(done, "missing")


def test_progress_lines_escape_the_names_they_show():
    import io

    from nsysprobe.common.progress import Progress

    stream = io.StringIO()
    progress = Progress(stream, enabled=True)
    with progress.task(f"analyzing {EVIL}"):
        progress(f"writing {EVIL}.html")
    # The display's own clearing sequence aside, nothing raw.
    shown = stream.getvalue().replace("\r\x1b[2K", "")
    assert shown and not unsafe_characters(shown, keep=""), repr(shown)


# -- outputs that overwrite the wrong thing ---------------------------------------------------


def _device(path: Path) -> Path:
    os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # the numbers of /dev/null
    return path


TARGETS = {
    "fifo": lambda p: (os.mkfifo(p), p)[1],
    "char-device": _device,
    "symlink": lambda p: (p.symlink_to(p.with_name("elsewhere.html")), p)[1],
    "folder": lambda p: (p.mkdir(), p)[1],
}


@pytest.mark.parametrize("kind", sorted(TARGETS))
def test_html_never_replaces_what_is_not_a_regular_file(tmp_path, kind):
    if kind == "char-device" and os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    path = crafted(tmp_path)
    target = TARGETS[kind](tmp_path / "out.html")
    before = target.lstat()
    done = run_cli("analyze", str(path), "--html", str(target), "--force", "--no-history")
    assert "--html" in _one_error_line(done, kind)
    after = target.lstat()
    assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.html", "trace.sqlite"]


@pytest.mark.parametrize("output", ["--html", "--html-hardlink"])
def test_outputs_never_replace_the_trace_analyzed(tmp_path, output):
    path = crafted(tmp_path)
    target = path
    if output == "--html-hardlink":
        target = tmp_path / "alias.html"
        os.link(path, target)
    before = folder_state(path)
    done = run_cli("analyze", str(path), "--html", str(target), "--force", "--no-history")
    assert "is an input of this command" in _one_error_line(done, output)
    assert folder_state(path) == before


def _pending_wal(folder: Path) -> tuple[Path, sqlite3.Connection]:
    """A copy of the base trace in WAL mode with a pending -wal file (the writer left open)."""
    path = crafted(folder)
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("UPDATE StringIds SET value = value WHERE id = 1")
    return path, writer


def test_the_pending_wal_of_the_trace_is_an_input_too(tmp_path):
    path, writer = _pending_wal(tmp_path)
    try:
        wal = Path(f"{path}-wal")
        before = wal.read_bytes()
        done = run_cli("analyze", str(path), "--html", str(wal), "--force", "--no-history")
        assert "is an input of this command" in _one_error_line(done, "-wal")
        assert wal.read_bytes() == before
    finally:
        writer.close()


@pytest.mark.parametrize("kind", ["dev-zero", "sparse-20GB"])
def test_a_pending_wal_that_no_writer_made_is_refused_not_copied(tmp_path, kind):
    path, writer = _pending_wal(tmp_path)
    writer.close()  # (closing checkpoints and removes the -wal: make one again)
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    wal = Path(f"{path}-wal")
    wal.unlink(missing_ok=True)
    if kind == "dev-zero":
        wal.symlink_to("/dev/zero")
    else:
        with open(wal, "wb") as out:
            out.truncate(20 << 30)  # 20 GB of nothing, no disk used
    done = run_cli(
        "analyze",
        str(path),
        "--no-history",
        timeout=60,
        env={"TMPDIR": str(tmp_path)},
        limits={resource.RLIMIT_FSIZE: (1 << 30, 1 << 30)},
    )
    line = _one_error_line(done, kind)
    assert "-wal" in line and "checkpoint it first" in line
    # Said for what it is, before a byte is copied (a copy would stop at ulimit -f's 1 GiB).
    assert {
        "dev-zero": "is a character device, not a regular file",
        "sparse-20GB": "21.5 GB of pending writes for a",
    }[kind] in line
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("nsysprobe-wal")] == []


def test_many_ranks_refuse_an_html_that_is_a_report_before_analyzing(tmp_path):
    # The slowest rank would take minutes: the refusal must come first.
    one, two = crafted(tmp_path, name="rank0.sqlite"), crafted(tmp_path, name="rank1.sqlite")
    marker = tmp_path.parent / f"{tmp_path.name}-analyzing"
    done = run_cli(
        "analyze",
        str(one),
        str(two),
        "--html",
        str(two),
        "--force",
        patch=pause_at("nsysprobe.ranks.many:analyze_many", marker),
        timeout=30,
    )
    assert "is an input of this command" in _one_error_line(done, "many --html")
    assert not marker.exists()


def test_an_output_name_as_long_as_the_file_system_allows(tmp_path):
    out = tmp_path / ("r" * 250 + ".html")  # 255 bytes: the longest name ext4 takes
    done = run_cli("analyze", str(crafted(tmp_path)), "--html", str(out), "--no-history")
    assert done.code == 0, done.stderr
    assert out.read_text().startswith("<!DOCTYPE html>")


def test_a_closed_pipe_ends_quietly_as_sigpipe_would(tmp_path):
    path, history = crafted(tmp_path), tmp_path / "history.db"
    for args in (["analyze", str(path), "--format", "json", "--no-history"], ["history"]):
        with subprocess.Popen(["true"], stdin=subprocess.PIPE) as reader:
            reader.wait()  # gone before anything is written
            done = run_cli(*args, stdout=reader.stdin, env={"NSYSPROBE_HISTORY": str(history)})
        assert done.code == 128 + signal.SIGPIPE and done.stderr == "", (args, done.stderr)


def test_an_error_quoting_a_huge_value_stays_a_short_line(tmp_path):
    done = run_cli("analyze", str(crafted(tmp_path)), "--step-range", "x" * 100_000)
    line = _one_error_line(done, "long --step-range")
    assert len(line) <= 2_100


def test_a_bad_output_is_refused_before_the_analysis(tmp_path):
    # The trace would fail the analysis; the --html error comes first, so it came first.
    trace = tmp_path / "not-a-trace.sqlite"
    trace.write_text("junk")
    done = run_cli("analyze", str(trace), "--html", str(tmp_path / "no" / "such" / "r.html"))
    assert "--html" in _one_error_line(done, "early") and "does not exist" in done.stderr


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_kill_while_writing_html_leaves_nothing(tmp_path, signum):
    path = crafted(tmp_path)
    marker = tmp_path.parent / f"{tmp_path.name}-linking"
    out = tmp_path / "report.html"
    # The final link of the written file is made slow: the signal lands with the file written
    # and not yet in place.
    done = run_cli(
        "analyze",
        str(path),
        "--html",
        str(out),
        "--no-history",
        patch=pause_at("os:link", marker),
        on_start=lambda proc: (wait_for(marker), os.kill(proc.pid, signum)),
    )
    assert done.code == 128 + signum, done.stderr
    assert "Traceback" not in done.stderr and len(done.error_lines) <= 2, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace.sqlite"]


# -- tracebacks instead of errors on ordinary conditions --------------------------------------


@pytest.fixture
def small_disk(tmp_path):
    """A folder on a 64 kB file system (tmpfs, root) that fills up at once."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    folder = tmp_path / "disk"
    folder.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)]).returncode:
        pytest.skip("this machine refuses a tmpfs mount")
    yield folder
    subprocess.run(["umount", str(folder)], check=True)


@pytest.fixture
def read_only_folder(tmp_path):
    """A folder nobody can write in: a read-only tmpfs as root, a mode as anyone else."""
    folder = tmp_path / "ro"
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)
        return
    if subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(folder)]
    ).returncode:
        pytest.skip("this machine refuses a tmpfs mount")
    yield folder
    subprocess.run(["umount", str(folder)], check=True)


def test_a_read_only_output_folder_is_refused_before_the_analysis(tmp_path, read_only_folder):
    trace = tmp_path / "not-a-trace.sqlite"
    trace.write_text("junk")
    done = run_cli("analyze", str(trace), "--html", str(read_only_folder / "r.html"))
    assert "cannot write in" in _one_error_line(done, "read-only")


def test_a_full_disk_is_one_line_and_leaves_nothing(tmp_path, small_disk):
    done = run_cli("analyze", str(crafted(tmp_path)), "--html", str(small_disk / "r.html"))
    line = _one_error_line(done, "full disk")
    assert "No space left on device" in line
    assert list(small_disk.iterdir()) == []


def test_a_file_size_limit_is_one_line_and_leaves_nothing(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    done = run_cli(
        "analyze",
        str(crafted(tmp_path)),
        "--html",
        str(out / "r.html"),
        "--no-history",
        limits={resource.RLIMIT_FSIZE: (16_384, 16_384)},
    )
    line = _one_error_line(done, "ulimit -f")
    assert os.strerror(errno.EFBIG) in line and "ulimit -f" in line
    assert list(out.iterdir()) == []


def test_a_report_to_a_full_stdout_is_one_line(tmp_path):
    with open("/dev/full", "w") as full:
        done = run_cli("analyze", str(crafted(tmp_path)), "--no-history", stdout=full)
    line = _one_error_line(done, "/dev/full")
    assert "standard output" in line and os.strerror(errno.ENOSPC) in line


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e400", "-1", "1e300"])
def test_gap_thresholds_that_are_not_numbers_of_ms_are_one_line(tmp_path, value):
    path = crafted(tmp_path)
    for command in ("analyze", "compare"):
        done = run_cli(command, str(path), str(path), f"--min-gap-ms={value}")
        assert "--min-gap-ms" in _one_error_line(done, f"{command} {value}")


@pytest.mark.parametrize(
    "args",
    [
        ["analyze", "--no-such-option"],
        ["analyze"],
        ["analyze", "x.sqlite", "--format", "yaml"],
        ["analyze", "x.sqlite", "--workers", "zero"],
        ["no-such-command"],
        ["history", "--limit", "-3"],
    ],
)
def test_usage_errors_are_one_line(args):
    done = run_cli(*args)
    line = _one_error_line(done, " ".join(args))
    assert line.endswith("--help`"), line


def test_ctrl_c_during_the_analysis_exits_130(tmp_path):
    marker = tmp_path.parent / f"{tmp_path.name}-analyzing"
    done = run_cli(
        "analyze",
        str(crafted(tmp_path)),
        "--no-history",
        patch=pause_at("nsysprobe.report.analyze:analyze_events", marker),
        on_start=lambda proc: (wait_for(marker), os.kill(proc.pid, signal.SIGINT)),
    )
    assert done.code == 130, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "nsysprobe: interrupted"
    assert "Traceback" not in done.stderr and "Aborted" not in done.stderr


@pytest.fixture(scope="module")
def long_sched_read(tmp_path_factory) -> Path:
    """A valid export whose context-switch table takes SQLite seconds to sort: 1.7 M
    SCHED_EVENTS rows out of time order."""
    folder = tmp_path_factory.mktemp("sched")
    return crafted(
        folder,
        *["INSERT INTO SCHED_EVENTS SELECT * FROM SCHED_EVENTS"] * 10,
        "UPDATE SCHED_EVENTS SET start = (start * 7919 + rowid * 104729) % 1000000007",
        base=SAMPLES / "h200_multiworker-cpuctxsw.sqlite",
    )


def test_a_signal_while_sqlite_works_is_that_signal_not_damage(long_sched_read):
    # A real SIGALRM whose handler raises KeyboardInterrupt, as Ctrl-C's does, lands inside
    # SQLite's sort: the reader raises it again, instead of a TraceError calling the export
    # damaged.
    from nsysprobe.trace.reader import Trace

    def ring(*_):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    try:
        with Trace(long_sched_read) as trace, pytest.raises(KeyboardInterrupt):
            trace.sched_events()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_while_sqlite_works_exits_as_the_signal_says(tmp_path, long_sched_read, signum):
    marker = tmp_path / "reading"
    done = run_cli(
        "analyze",
        str(long_sched_read),
        "--topology",
        str(SAMPLES / "h200_topology"),
        "--no-history",
        patch=pause_at("nsysprobe.trace.reader:Trace.sched_events", marker, seconds=0),
        on_start=lambda proc: (wait_for(marker), time.sleep(0.5), os.kill(proc.pid, signum)),
    )
    assert done.code == 128 + signum, done.stderr
    assert "damaged" not in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_a_file_name_that_is_not_utf8_with_history_on(tmp_path):
    name = os.fsdecode(b"run-\xff\xfe.sqlite")
    path = crafted(tmp_path, name=name)
    env = {"NSYSPROBE_HISTORY": str(tmp_path / "history.db"), "PYTHONIOENCODING": "utf-8:strict"}
    done = run_cli("analyze", str(path), env=env)
    assert done.code == 0, done.stderr
    check_terminal_safe(done.stdout, done.stderr, "analyze")
    assert "warning" not in done.stderr
    listed = run_cli("history", env=env)
    assert listed.code == 0, listed.stderr
    check_terminal_safe(listed.stdout, listed.stderr, "history")
    assert "run-" in listed.stdout


def test_a_history_row_edited_by_hand(tmp_path):
    history = tmp_path / "history.db"
    env = {"NSYSPROBE_HISTORY": str(history)}
    path = crafted(tmp_path)
    assert run_cli("analyze", str(path), env=env).code == 0
    with sqlite3.connect(history) as db:
        db.execute(
            "UPDATE runs SET step_wall_ns = '[1, \"x\"', steps_per_s = 'fast', "
            "gpu_busy_ratio = x'00', median_step_ns = 1.5, paths = '{', "
            f"command = {_evil_sql(EVIL)}"
        )
    # Each field is read on its own: the bad ones read as not measured, the row still lists.
    outputs = {}
    for args in (["history"], ["history", "--format", "json"], ["compare", "1", str(path)]):
        done = run_cli(*args, env=env)
        check_terminal_safe(done.stdout, done.stderr, " ".join(args))
        assert (done.code, done.stderr) == (0, ""), done.stderr
        outputs[args[-1]] = done.stdout
    (entry,) = json.loads(outputs["json"])["entries"]
    assert entry["paths"] == {}
    assert (entry["steps_per_s"], entry["median_step_ns"], entry["gpu_busy_ratio"]) == (
        None,
        None,
        None,
    )
    assert entry["step_count"] == 20  # untouched, as recorded
    # Without step times the first run cannot be tested against the second.
    assert "needs 3+ steps in each run to test (has 0 and 20)" in outputs[str(path)]


# -- sizes no copy has --------------------------------------------------------------------------


def test_a_copy_of_2_63_bytes_neither_overflows_nor_hides_the_pinned_memory_advice(tmp_path):
    base = SAMPLES / "h200_multiworker.sqlite"
    original = run_cli("analyze", str(base), "--format", "json", "--no-history")
    path = crafted(
        tmp_path,
        "UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET bytes = 9223372036854775807 WHERE rowid = "
        "(SELECT min(rowid) FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = 1)",
        base=base,
    )
    done = run_cli("analyze", str(path), "--format", "json", "--no-history")
    mine, theirs = json.loads(done.stdout), json.loads(original.stdout)
    assert mine["recommendations"][0]["id"] == theirs["recommendations"][0]["id"] == "pinned_memory"
    assert all(row["bytes"] >= 0 for row in mine["transfers"]["rows"])
    with sqlite3.connect(f"file:{base}?mode=ro", uri=True) as db:
        (first,) = db.execute(
            "SELECT bytes FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = 1 ORDER BY rowid LIMIT 1"
        ).fetchone()
    # The impossible size reads as unknown: the total is the original's less that one copy.
    assert mine["transfers"]["memcpy_bytes"] == theirs["transfers"]["memcpy_bytes"] - first


def test_the_hostile_names_through_the_in_process_contract(tmp_path):
    # The same hostile trace through CliRunner (what the fuzz suite uses) for each format.
    (tmp_path / "trace").mkdir()  # apart from the history the tests keep in tmp_path
    path = _evil_trace(tmp_path / "trace")
    for fmt in ("text", "json", "markdown"):
        assert check_analyze(path, fmt=fmt) == "report"
