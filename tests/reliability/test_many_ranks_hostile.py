"""Many ranks against hostile and unlucky input: one report, one path or one worker must not
take the others down, and a bad ``--scheduler`` is a one-line error, promptly.

The slow, memory-hungry report is real: ``h200_pinned`` with its event tables replicated
(each copy shifted past the previous one in time, its correlation ids offset, as
``benchmarks/scale.py`` does), which takes seconds and hundreds of MB to analyze. The worker
killed midway is a real Dask worker process, sent SIGKILL while it analyzes that report. The
commands run as the user runs them, in a process of their own, in a session of their own so
that a hang is ended with every process it started.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sqlite3
import struct
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from nsysprobe.cli import main

from .checks import check_outcome
from .hostile import run_cli
from conftest import SAMPLE_TRACES

distributed = pytest.importorskip("distributed")
psutil = pytest.importorskip("psutil")

PINNED = SAMPLE_TRACES / "h200_pinned.sqlite"
# ~3 M GPU operations, ~0.44 GiB: 8.5 s and 820 MiB in a fresh process on this project's 2-core
# machine (benchmarks/scale.py --sizes 3e6, 2026-12-02 07:52 UTC); 120 copies took 3.3 s
# that morning, too close to TIMEOUT_S once the reader got faster.
COPIES = 360
TIMEOUT_S = 3
MEMORY_GB = 0.3  # a normal rank's analysis process peaks near 0.1 GB, the slow one's near 0.8
HANG_S = 120  # a command still running after this long is hung


def replicate(source: Path, target: Path, copies: int) -> None:
    """``source`` with its event tables ``copies`` times over, each copy after the last."""
    shutil.copyfile(source, target)
    db = sqlite3.connect(target)
    tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    columns = {t: [r[1] for r in db.execute(f'PRAGMA table_info("{t}")')] for t in tables}
    events = [
        t
        for t in tables
        if (t.startswith("CUPTI_ACTIVITY_KIND_") or t in ("NVTX_EVENTS", "OSRT_API"))
        and {"start", "end"} <= set(columns[t])
    ]
    spans = [db.execute(f'SELECT min(start), max("end") FROM "{t}"').fetchone() for t in events]
    span = max(e for _, e in spans if e) - min(s for s, _ in spans if s) + 1
    stride = 1 + max(
        db.execute(f'SELECT max(correlationId) FROM "{t}"').fetchone()[0] or 0
        for t in events
        if "correlationId" in columns[t]
    )
    shift = {"start": span, "end": span, "correlationId": stride}
    for t in events:
        names = ", ".join(f'"{c}"' for c in columns[t])
        values = ", ".join(
            f'"{c}" + k * {shift[c]}' if c in shift else f'"{c}"' for c in columns[t]
        )
        db.execute(f'CREATE TEMP TABLE one AS SELECT * FROM "{t}"')
        db.execute(
            "WITH RECURSIVE n(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM n WHERE k < ?) "
            f'INSERT INTO "{t}" ({names}) SELECT {values} FROM temp.one, n',
            (copies - 1,),
        )
        db.execute("DROP TABLE temp.one")
    db.commit()
    db.close()


@pytest.fixture(scope="module")
def slow_export(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("slow") / "slow.sqlite"
    replicate(PINNED, path, COPIES)
    return path


@pytest.fixture
def slow_report(tmp_path, slow_export) -> Path:
    """rank2.sqlite beside the others (a hard link to the slow export, else a copy)."""
    path = tmp_path / "rank2.sqlite"
    try:
        os.link(slow_export, path)
    except OSError:
        shutil.copyfile(slow_export, path)
    return path


def ranks(folder: Path, n: int = 2) -> list[Path]:
    folder.mkdir(exist_ok=True)
    paths = [folder / f"rank{i}.sqlite" for i in range(n)]
    for path in paths:
        shutil.copyfile(PINNED, path)
    return paths


def nsysprobe(*args, patch: str = "", env=None, timeout=HANG_S):
    """Run the command in a session of its own (``run_cli``); a hang fails the test, and its
    processes (a local cluster's workers included) are ended."""
    done = run_cli(*map(str, args), patch=patch, env=env, timeout=timeout)
    return done.code, done.stdout, done.stderr, done.wall_s


def one_error(code: int, out: str, err: str) -> str:
    """The contract's one ``nsysprobe: error:`` line, exit 2."""
    assert check_outcome(code, out, err, "text", "analyze") == "error"
    return next(line for line in err.splitlines() if line.startswith("nsysprobe: error: "))


def rank_errors(code: int, out: str, err: str) -> dict[str, str | None]:
    """label -> error of each rank in a JSON report (exit 0)."""
    assert check_outcome(code, out, err, "json", "analyze") == "report", err
    return {r["label"]: r["error"] for r in json.loads(out)["ranks"]}


# -- one report over its limits ---------------------------------------------------------------


def test_a_slow_report_is_stopped_at_the_rank_timeout(tmp_path, slow_report):
    paths = [*ranks(tmp_path), slow_report]
    code, out, err, took = nsysprobe(
        "analyze", *paths, "--rank-timeout-s", TIMEOUT_S, "--format", "json"
    )
    errors = rank_errors(code, out, err)
    assert errors["rank0"] is None and errors["rank1"] is None
    assert errors["rank2"].startswith(
        f"{slow_report}: analysis stopped after {TIMEOUT_S} s (--rank-timeout-s); "
    )
    assert took < HANG_S / 2


def test_a_hungry_report_is_stopped_at_the_rank_memory_limit(tmp_path, slow_report):
    paths = [*ranks(tmp_path), slow_report]
    code, out, err, _ = nsysprobe(
        "analyze", *paths, "--rank-memory-gb", MEMORY_GB, "--format", "json"
    )
    errors = rank_errors(code, out, err)
    assert errors["rank0"] is None and errors["rank1"] is None
    assert errors["rank2"].startswith(
        f"{slow_report}: analysis stopped at {MEMORY_GB} GB resident (--rank-memory-gb); "
    )


# -- a worker lost ----------------------------------------------------------------------------


def holders(path: Path) -> list[psutil.Process]:
    """This test's descendants that have ``path`` open."""
    target = str(path.resolve())
    found = []
    for proc in psutil.Process().children(recursive=True):
        try:
            if any(f.path == target for f in proc.open_files()):
                found.append(proc)
        except psutil.Error:  # gone meanwhile
            pass
    return found


def worker_of(proc: psutil.Process) -> psutil.Process:
    """The Dask worker ``proc`` is or runs under: this test's child (the nanny runs here)."""
    while proc.ppid() != os.getpid():
        proc = proc.parent()
    return proc


def test_a_worker_killed_midway_is_that_ranks_error(tmp_path, slow_report):
    import dask
    from distributed import Client, LocalCluster

    from nsysprobe.ranks.many import analyze_many

    killed: list[int] = []
    stop = threading.Event()

    def oom_killer():
        """SIGKILL the worker analyzing the slow report, as the OOM killer would."""
        while not stop.wait(0.02):
            for proc in holders(slow_report):
                try:
                    worker = worker_of(proc)
                except psutil.Error:
                    continue
                if worker.pid not in killed:
                    killed.append(worker.pid)
                    os.kill(worker.pid, signal.SIGKILL)

    # One death is enough for the scheduler to give up on the task (its default retries it
    # on three more workers, which the killer would end the same way, only slower).
    with (
        dask.config.set({"distributed.scheduler.allowed-failures": 0}),
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            host="127.0.0.1",
        ) as cluster,
        Client(cluster) as client,
    ):
        killer = threading.Thread(target=oom_killer)
        killer.start()
        try:
            many = analyze_many([*ranks(tmp_path), slow_report], client=client)
        finally:
            stop.set()
            killer.join()
        assert len(killed) == 1
        errors = {r.label: r.error for r in many.ranks}
        assert errors["rank0"] is None and errors["rank1"] is None
        assert errors["rank2"].startswith(
            f"{slow_report}: the Dask worker analyzing it died (KilledWorker), "
        )
        deadline = time.monotonic() + 10
        while holders(slow_report) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert holders(slow_report) == []  # nothing goes on analyzing it


# -- paths that never end ---------------------------------------------------------------------


def test_a_fifo_among_the_paths_is_a_one_line_error(tmp_path):
    fifo = tmp_path / "rank2.sqlite"
    os.mkfifo(fifo)
    code, out, err, took = nsysprobe("analyze", *ranks(tmp_path), fifo, timeout=60)
    assert one_error(code, out, err) == (
        f"nsysprobe: error: {fifo}: a FIFO, not a report file (reading it could wait "
        f"forever); give .sqlite exports or .nsys-rep reports"
    )
    assert took < 30


def test_a_symlink_loop_under_a_recursive_glob_is_walked_once(tmp_path):
    folder = tmp_path / "ranks"
    ranks(folder)
    (folder / "up").symlink_to(".")  # two links back to the folder: 2^40 paths to glob's **
    (folder / "again").symlink_to(".")
    code, out, err, _ = nsysprobe("analyze", f"{folder}/**/*.sqlite", "--format", "json")
    assert rank_errors(code, out, err) == {"rank0": None, "rank1": None}


# -- schedulers -------------------------------------------------------------------------------


@pytest.mark.parametrize("address", ["garbage", "tcp://[::1", "inproc://x"])
def test_a_bad_scheduler_address_is_a_one_line_error(tmp_path, address):
    started = time.monotonic()
    args = ["analyze", *map(str, ranks(tmp_path)), "--scheduler", address]
    result = CliRunner().invoke(main, args)
    assert one_error(result.exit_code, result.stdout, result.stderr).startswith(
        f"nsysprobe: error: --scheduler {address}: not a scheduler address ("
    )
    assert time.monotonic() - started < 10


@contextmanager
def huge_frame_server():
    """A TCP server that answers every connection with the length of a 2 GiB frame, then
    nothing: Dask's comm reads the first 8 bytes of a message as its length."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.05)
    stop = threading.Event()
    held = []

    def serve():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            conn.sendall(struct.pack("<Q", 2**31))
            held.append(conn)

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        yield f"tcp://127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        server.close()


def test_a_scheduler_answering_a_2_gib_frame_is_a_one_line_error(tmp_path):
    connect = {"DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "2s"}
    with huge_frame_server() as address:
        code, out, err, took = nsysprobe(
            "analyze", *ranks(tmp_path), "--scheduler", address, env=connect, timeout=60
        )
    assert one_error(code, out, err).startswith(
        f"nsysprobe: error: --scheduler {address}: no Dask scheduler answered (something "
        "accepted the connection but did not finish Dask's handshake within 4 s); "
    )
    assert took < 30


# -- the local cluster ------------------------------------------------------------------------


def test_workers_are_capped_at_the_cpus_this_process_may_use(tmp_path):
    cpu = min(os.sched_getaffinity(0))
    one_cpu = f"import os; os.sched_setaffinity(0, {{{cpu}}})"
    code, out, err, _ = nsysprobe(
        "analyze", *ranks(tmp_path, 3), "--workers", 4, "--format", "json", patch=one_cpu
    )
    assert rank_errors(code, out, err) == {"rank0": None, "rank1": None, "rank2": None}
    assert "nsysprobe: warning: --workers 4: this process may use 1 CPU" in err
    assert len({r["worker"] for r in json.loads(out)["ranks"]}) == 1
