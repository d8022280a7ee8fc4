"""One report analyzed in a process of its own, with a time and a memory limit.

One report cannot take the others down. On Linux each is analyzed in a process forked from
its worker for it (``summarize_bounded``), stopped after ``--rank-timeout-s`` (by default
60 s plus 1 s per MB of the report) or once its resident memory passes ``--rank-memory-gb``
(by default the worker's share of memory: the worker's limit over its threads); that, a kill
by the OOM killer, or its worker dying (Dask's ``KilledWorker``) is that rank's error, and
the other ranks are compared as usual.
"""

from __future__ import annotations

import gc
import importlib
import os
import pickle
import select
import signal
import sys
import threading
import time
import traceback
from dataclasses import replace
from pathlib import Path

from nsysprobe.analyses.cross_rank import RankSummary
from nsysprobe.ranks.summary import error_summary, summarize_report, worker_name

# A report's analysis is stopped after RANK_TIMEOUT_BASE_S + RANK_TIMEOUT_S_PER_MB per MB of
# the file unless --rank-timeout-s says otherwise: 30x the time a 2-core machine takes.
RANK_TIMEOUT_BASE_S = 60.0
RANK_TIMEOUT_S_PER_MB = 1.0
MEMORY_POLL_S = 0.1  # how often the analysis process's resident memory is checked
PR_SET_PDEATHSIG = 1  # linux/prctl.h
# Held from a pipe's making to the fork and the parent's closing of its end, so that no
# report's process holds a copy of another's write end (which would keep its reader waiting).
_FORK_LOCK = threading.Lock()
# What a report's analysis imports on first use: imported by the worker once, before its first
# fork, so that each report's process starts with them (measured: 0.1-0.2 s a report less).
_CHILD_IMPORTS = (
    "nsysprobe.capture.runfolder",
    "nsysprobe.report.metrics",
    "nsysprobe.trace.reader",
)


def default_rank_timeout_s(path: str | os.PathLike) -> float:
    """A report's time limit unless one is given: RANK_TIMEOUT_BASE_S plus RANK_TIMEOUT_S_PER_MB
    for each MB of the file (a .nsys-rep's export is part of its analysis)."""
    try:
        size = os.stat(path).st_size
    except OSError:
        size = 0
    return RANK_TIMEOUT_BASE_S + RANK_TIMEOUT_S_PER_MB * size / 1e6


def default_rank_memory_bytes() -> int:
    """A report's memory limit unless one is given: the Dask worker's memory limit (a local
    cluster's worker has the machine's memory over the workers), else the machine's memory,
    over the reports the worker analyzes at once (its threads)."""
    limit, slots = None, 1
    try:
        from distributed import get_worker

        worker = get_worker()
        limit, slots = worker.memory_manager.memory_limit, worker.state.nthreads
    except (ImportError, ValueError):  # not on a Dask worker
        pass
    machine = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return int(limit or machine) // max(1, slots)


def summarize_bounded(
    path: str,
    label: str,
    options: dict,
    timeout_s: float | None = None,
    memory_bytes: int | None = None,
) -> list[RankSummary]:
    """``summarize_report`` in a process forked for this report, stopped (with whatever it
    started, such as ``nsys export``) after ``timeout_s`` seconds or once its resident memory
    passes ``memory_bytes`` (by default ``default_rank_timeout_s`` and
    ``default_rank_memory_bytes``). Being stopped, or killed (by the OOM killer), is this
    report's error; the worker lives on. Off Linux the report is analyzed here, unbounded."""
    if not sys.platform.startswith("linux"):
        return summarize_report(path, label, options)
    timeout_s = default_rank_timeout_s(path) if timeout_s is None else timeout_s
    memory_bytes = default_rank_memory_bytes() if memory_bytes is None else memory_bytes
    for name in _CHILD_IMPORTS:
        importlib.import_module(name)
    started = time.perf_counter()
    with _FORK_LOCK:
        read_fd, write_fd = os.pipe()
        gc.freeze()  # the child's collector leaves the worker's objects (and their pages) alone
        pid = os.fork()
        if pid == 0:
            _analyze_in_child(path, label, options, read_fd, write_fd)
        gc.unfreeze()
        os.close(write_fd)
    why = "failed"
    try:
        _own_group(pid)
        payload, why = _collect(pid, read_fd, timeout_s, memory_bytes)
    finally:
        os.close(read_fd)
        if why is not None:
            _kill_group(pid)
        status = os.waitpid(pid, 0)[1]
    if why is None and payload:
        return pickle.loads(payload)
    if why == "time":
        error = (
            f"{path}: analysis stopped after {number(timeout_s)} s (--rank-timeout-s); give it "
            f"more time with --rank-timeout-s, or analyze it alone: nsysprobe analyze {path}"
        )
    elif why == "memory":
        error = (
            f"{path}: analysis stopped at {number(memory_bytes / 1e9)} GB resident "
            f"(--rank-memory-gb); give it more with --rank-memory-gb, on workers with that much "
            f"memory each, or analyze it alone: nsysprobe analyze {path}"
        )
    elif os.WIFSIGNALED(status):
        error = (
            f"{path}: the process analyzing it was killed by "
            f"{signal.Signals(os.WTERMSIG(status)).name}, as the OOM killer does when the "
            f"machine runs out of memory; run fewer --workers, or a --rank-memory-gb below each "
            f"one's share of the machine"
        )
    else:
        error = (
            f"{path}: the process analyzing it ended (exit code "
            f"{os.waitstatus_to_exitcode(status)}) without a result; see the Dask worker's log"
        )
    summary = error_summary(label, Path(path).name, error)
    return [replace(summary, worker=worker_name(), analyze_s=time.perf_counter() - started)]


def _analyze_in_child(path: str, label: str, options: dict, read_fd: int, write_fd: int):
    """The forked process: analyze, send the pickled summaries, exit. Never returns into the
    worker's code."""
    code = 1
    try:
        os.close(read_fd)
        _own_group(0)
        _die_with_parent()
        data = pickle.dumps(summarize_report(path, label, options))
        with open(write_fd, "wb") as out:
            out.write(data)
        code = 0
    except BaseException:  # noqa: BLE001 -- said in the worker's log; the parent reports it
        traceback.print_exc()
    finally:
        os._exit(code)


def _own_group(pid: int) -> None:
    """Make ``pid`` (0: this process) lead a process group of its own, so that stopping it
    stops what it started. Both parent and child call it: whichever runs first wins."""
    try:
        os.setpgid(pid, 0)
    except OSError:  # the other one did it first, or the child is gone
        pass


def _die_with_parent() -> None:
    """Ask Linux to kill this process when the thread that forked it ends: a worker that dies
    leaves no analysis running."""
    import ctypes

    parent = os.getppid()
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # died before the request
        os._exit(1)


def _collect(pid: int, fd: int, timeout_s: float, memory_bytes: int) -> tuple[bytes, str | None]:
    """What the child sends until it closes the pipe, or why it was stopped ("time",
    "memory"; "failed" when it closed the pipe without sending anything)."""
    deadline = time.monotonic() + timeout_s
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    chunks = []
    while (left := deadline - time.monotonic()) > 0:
        if _resident_bytes(pid) > memory_bytes:
            return b"", "memory"
        if poller.poll(min(MEMORY_POLL_S, left) * 1000):
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return (b"".join(chunks), None) if chunks else (b"", "failed")
            chunks.append(chunk)
    return b"", "time"


def _resident_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):  # gone
        return 0


def _kill_group(pid: int) -> None:
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
            return
        except OSError:  # no group yet: the process alone
            pass


def number(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")
