"""Many ranks: every report analyzed on its own on a Dask worker, then a cross-rank view.

Inputs are files, folders (their ``*.sqlite``, ``*.nsys-rep`` and ``*.qdrep``) and globs. A
report and its own export side by side count once (the report; its export is reused). A report
holding several processes with GPU work gives one rank per process (``Events.for_process``;
the OS-runtime calls of processes without GPU work, such as DataLoader workers, belong to no
rank there, because the export records no parent process).

Each task reads one report and returns a ``RankSummary`` per rank: a few figures plus the
per-step wall and start times. A worker holds one report's events at a time and the client
none. A ``.nsys-rep`` is exported by the one task that analyzes it (``ensure_sqlite`` writes
to a temporary file and renames it), so no report is exported twice.

One report cannot take the others down. On Linux each is analyzed in a process forked from
its worker for it (``summarize_bounded``), stopped after ``--rank-timeout-s`` (by default
60 s plus 1 s per MB of the report) or once its resident memory passes ``--rank-memory-gb``
(by default the worker's share of memory: the worker's limit over its threads); that, a kill
by the OOM killer, or its worker dying (Dask's ``KilledWorker``) is that rank's error, and
the other ranks are compared as usual. A local cluster has at most one worker per CPU this
process may use. A ``--scheduler`` must accept the connection within 10 s, and finish
Dask's handshake within 10 s more.

Step starts are aligned across reports on the UTC clock: the report's session start
(``TARGET_INFO_SESSION_START_TIME``) plus the step's start on the report's own clock. A rank's
**start lag** is the median over step indexes of how much later its step began (its NVTX
range on the CPU) than the earliest rank's step of the same index (only among ranks whose
session start is known).

A rank is a **straggler** when it arrives later than the others at the collectives,
consistently and by enough to matter (``nsysprobe.analyses.arrivals``): in synchronous
training the fast ranks wait inside the collective for it, so every rank's step takes the same
wall time and a wall-time test cannot see it. Why it is late comes from its own step account
against the other ranks' (``straggler_causes``): the buckets where it spends more time per step
than the other ranks' median (its input, pageable copies, host syncs, slower GPU work, ...),
and its threads' NUMA placement where the capture has it.

Without collectives (ranks that do not communicate), a rank is **slower** when its per-step
wall times are slower than those of every other rank pooled. Steps are matched by index across
ranks and each divided by the median across ranks of the same step (``relative_steps``), so
what every rank shares cancels out. The test is Mann-Whitney U
(``nsysprobe.analyses.stats``), one-sided, with p < ``ALPHA`` / ranks tested
(Bonferroni), and the effect size must reach ``MIN_SLOWDOWN_RATIO``: the rank's median relative
step over the others' (a significant 1 % is not slower). The stragglers and the slowest ranks
slower than the others' median (``SLOWEST_LISTED``) are listed with what distinguishes each:
the figures where it exceeds the median of the other ranks by ``DISTINCT_RATIO`` and by at
least the metric's floor (GPU idle, pageable copies, OS-runtime call time, start lag).
"""

from __future__ import annotations

import gc
import importlib
import os
import pickle
import re
import select
import signal
import stat
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from nsysprobe.analyses.arrivals import (
    ROUND_UNITS,
    Arrivals,
    Cause,
    RankCollectives,
    analyze_arrivals,
    late_causes,
    rank_accounts,
)
from nsysprobe.analyses.stats import one_sided
from nsysprobe.capture.reportfile import REPORT_SUFFIXES, TRACE_SUFFIXES
from nsysprobe.errors import InputError, NsysprobeError
from nsysprobe.report.analyze import Report, analyze_processes
from nsysprobe.runs.compare import ALPHA, MIN_STEPS

SCHEMA_VERSION = 1
MIN_SLOWDOWN_RATIO = 1.05
SLOWEST_LISTED = 3
DISTINCT_RATIO = 1.2
# What a distinction must exceed the others' median by, besides DISTINCT_RATIO.
DISTINCT_FLOORS = {"ns": 100_000, "bytes": 1 << 20}
DISTINCT_METRICS = (
    ("idle_per_step_ns", "GPU idle per step", "ns"),
    ("gap_ns", "GPU idle in gaps", "ns"),
    ("pageable_htod_bytes", "pageable HtoD copies", "bytes"),
    ("osrt_ns", "OS-runtime call time", "ns"),
    ("osrt_in_gap_ns", "OS-runtime calls during GPU gaps", "ns"),
    ("start_lag_ns", "step start lag", "ns"),
)
_GLOB_CHARS = re.compile(r"[*?\[]")
# A report's analysis is stopped after RANK_TIMEOUT_BASE_S + RANK_TIMEOUT_S_PER_MB per MB of
# the file unless --rank-timeout-s says otherwise: 30x the time a 2-core machine takes.
RANK_TIMEOUT_BASE_S = 60.0
RANK_TIMEOUT_S_PER_MB = 1.0
MEMORY_POLL_S = 0.1  # how often the analysis process's resident memory is checked
SCHEDULER_CONNECT_S = 10.0  # at most, to connect to a --scheduler; as long again to shake hands
# Dask's connect timeout and the longest nsysprobe accepts: far past any wait for a connection,
# far below where Dask's deadlines overflow the clock (~1e10 s).
CONNECT_TIMEOUT = "distributed.comm.timeouts.connect"
MAX_CONNECT_TIMEOUT_S = 86_400.0
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
# NUMA: the rank's threads ran this much less of their time on the GPU's node than the others'.
NUMA_CAUSE_DROP_RATIO = 0.25


@dataclass(frozen=True)
class RankSummary:
    """What a worker sends back for one rank: figures, never events."""

    label: str  # the report's path relative to the inputs' common folder, + ":pid" per process
    source: str  # the report's file name
    pid: int | None  # the process, when the report holds several
    error: str | None  # why this report could not be analyzed (the other figures are empty)
    session_start_utc_ns: int | None
    step_count: int | None
    steps_per_s: float | None  # steps over time (``windows.py``)
    median_step_ns: int | None
    gpu_busy_ratio: float | None  # as in compare: over the steps, else over the devices' span
    busy_basis: str  # "steps", "span" or "none"
    idle_per_step_ns: int | None  # median over steps
    gap_ns: int | None  # GPU idle in gaps over the threshold, all devices
    pageable_htod_bytes: int | None
    osrt_ns: int | None  # sum of OS-runtime call durations
    osrt_in_gap_ns: int | None  # their overlap with GPU gaps
    top_recommendation: str | None
    top_title: str | None
    top_gain_ratio: float | None
    step_wall_ns: tuple[int, ...] = ()
    step_start_ns: tuple[int, ...] = ()  # UTC ns when the session start is known
    worker: str = ""  # the Dask worker that analyzed it
    analyze_s: float = 0.0  # the task's time for the whole report
    peak_rss_bytes: int | None = None  # the worker process's peak resident memory so far
    # The step account of its main process and GPU: the mean per step of each bucket, and its
    # NCCL work (all of it, and the part with no compute kernel running).
    bucket_ns_per_step: tuple[tuple[str, int], ...] = ()
    account_step_ns: int = 0  # the account's mean step (or window) wall time
    communication_ns: int = 0
    communication_exposed_ns: int = 0
    gpu_node_ratio: float | None = None  # its threads' share of run time on the GPU's node
    # Its NCCL operations for the arrivals (not in the JSON).
    collectives: RankCollectives | None = None


@dataclass(frozen=True)
class RankVerdict:
    label: str
    verdict: str  # "straggler", "slower" (below the effect size), "not slower", "unknown"
    slowdown_ratio: float | None  # median relative step / the other ranks' pooled median
    p_value: float | None  # one-sided: this rank's steps are longer
    slower_share_ratio: float | None  # P(a step of this rank is longer than one of the others)
    start_lag_ns: int | None
    why: str


@dataclass(frozen=True)
class Distinction:
    metric: str  # a RankSummary/RankVerdict field, e.g. "pageable_htod_bytes"
    title: str
    unit: str  # "ns" or "bytes"
    value: float
    others_median: float


@dataclass(frozen=True)
class SlowRank:
    label: str
    median_step_ns: int | None  # None without NVTX steps
    slowdown_ratio: float | None
    distinctions: tuple[Distinction, ...]
    causes: tuple[Cause, ...] = ()  # for a straggler: why it arrives late, largest first


@dataclass(frozen=True)
class ManyReport:
    schema_version: int
    ranks: tuple[RankSummary, ...]
    verdicts: tuple[RankVerdict, ...]  # one per rank, in the same order
    stragglers: tuple[str, ...]  # labels
    slowest: tuple[SlowRank, ...]
    alignment: str  # "utc" (every rank's session start known), "partial" or "none"
    thresholds: dict[str, float] = field(default_factory=dict)
    arrivals: Arrivals | None = None  # None when fewer than two ranks have collectives

    @property
    def errors(self) -> tuple[RankSummary, ...]:
        return tuple(r for r in self.ranks if r.error is not None)


# -- inputs ----------------------------------------------------------------------------------


def expand_paths(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """Files as given, folders' traces, globs' matches: deduplicated, in natural order."""
    found: list[Path] = []
    for spec in paths:
        path = Path(spec)
        if path.is_dir():
            inside = [p for p in path.iterdir() if p.is_file() and p.suffix in TRACE_SUFFIXES]
            if not inside:
                raise InputError(
                    f"{path}: no .sqlite, .nsys-rep or .qdrep files in this folder; give the "
                    f"folder that holds the reports, or a glob such as '{path}/**/*.nsys-rep'"
                )
            found += inside
        elif path.exists():
            if not path.is_file():
                raise InputError(
                    f"{path}: {_file_kind(path)}, not a report file (reading it could wait "
                    f"forever); give .sqlite exports or .nsys-rep reports"
                )
            found.append(path)
        elif _GLOB_CHARS.search(str(spec)):
            matches = _glob(str(spec))
            if not matches:
                raise InputError(f"{spec}: the glob matches no .sqlite or .nsys-rep file")
            found += matches
        else:
            raise InputError(f"{spec}: no such file, folder or glob; give reports or exports")
    unique = {p.resolve(): p for p in found}
    reports = {p.with_suffix("") for p in unique if p.suffix in REPORT_SUFFIXES}
    kept = [
        p
        for resolved, p in unique.items()
        if not (resolved.suffix == ".sqlite" and resolved.with_suffix("") in reports)
    ]
    return sorted(kept, key=_natural_key)


def _glob(spec: str) -> list[Path]:
    """The trace files ``spec`` matches. ``**`` does not descend into links to folders (as
    pathlib's glob), so links back up the tree cannot make the walk endless."""
    parts = Path(spec).parts
    fixed = next(i for i, part in enumerate(parts) if _GLOB_CHARS.search(part))
    try:
        matches = Path(*parts[:fixed]).glob(str(Path(*parts[fixed:])))
        return [m for m in matches if m.is_file() and m.suffix in TRACE_SUFFIXES]
    except ValueError as exc:  # '**' inside a name
        raise InputError(
            f"{spec}: not a glob ({exc}); use '**' alone between slashes, e.g. 'runs/**/*.sqlite'"
        ) from None


def _file_kind(path: Path) -> str:
    mode = path.stat().st_mode
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a socket" if stat.S_ISSOCK(mode) else "not a regular file"


def rank_labels(files: Sequence[Path]) -> list[str]:
    """Each file's path below the files' common folder, without its suffix."""
    resolved = [p.resolve() for p in files]
    if len(resolved) == 1:
        return [resolved[0].with_suffix("").name]
    common = Path(os.path.commonpath([p.parent for p in resolved]))
    return [p.relative_to(common).with_suffix("").as_posix() for p in resolved]


def _natural_key(path: Path) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(path))]


# -- one report, on a worker ------------------------------------------------------------------


def summarize_report(path: str, label: str, options: dict) -> list[RankSummary]:
    """The RankSummary of each rank in one report; an error becomes one summary saying so."""
    started = time.perf_counter()
    source = Path(path)
    try:
        results = _analyze_ranks(source, options)
    except NsysprobeError as exc:
        results = [(None, str(exc))]
    except Exception as exc:  # errors are data: one bad report must not stop a thousand
        results = [(None, f"{source}: {type(exc).__name__}: {exc}")]
    elapsed = time.perf_counter() - started
    worker, rss = _worker_name(), _peak_rss_bytes()
    multi = len(results) > 1
    out = []
    for pid, report in results:
        rank_label = f"{label}:{pid}" if multi else label
        if isinstance(report, str):
            out.append(_error_summary(rank_label, source.name, report))
        else:
            out.append(
                summary_of(
                    report, rank_label, source.name, pid if multi else None, str(source.resolve())
                )
            )
    return [replace(s, worker=worker, analyze_s=elapsed, peak_rss_bytes=rss) for s in out]


def _analyze_ranks(source: Path, options: dict) -> list[tuple[int | None, Report]]:
    from nsysprobe.capture.runfolder import export_of

    return analyze_processes(export_of(source, nsys=options.get("nsys")), **options)


def summary_of(
    report: Report, label: str, source: str, pid: int | None = None, clock: str | None = None
) -> RankSummary:
    """The compact figures of one rank's Report (those of ``compare`` plus OS-runtime time and
    the step start times). ``clock``: what tells its report apart from the others' (the
    report's path; ranks of one report share its clock), by default ``source``."""
    from nsysprobe.report.metrics import metrics_of

    m = metrics_of(report)
    start = report.trace.session_start_utc_ns
    rows = report.steps.rows if report.steps else ()
    functions = report.osrt.functions if report.osrt else None
    verdict = report.verdict
    account = report.account.main if report.account else None
    if account is not None:
        # The rank is the GPU of its NCCL work, not a stray context on another GPU.
        account = rank_accounts(report.account.accounts).get(account.pid, account)
    buckets, collectives = (), None
    if account is not None and account.step_count:
        buckets = tuple((b.name, b.total_ns // account.step_count) for b in account.buckets)
    ops = account.communication_ops if account is not None else None
    if ops is not None and len(ops):
        shift = start or 0
        collectives = RankCollectives(
            label=label,
            source=clock or source,
            utc=start is not None,
            start_ns=ops.start_ns + shift,
            end_ns=ops.end_ns + shift,
            collective=ops.collective,
            round_start_ns=ops.window_start_ns + shift if ops.stepped else np.empty(0, np.int64),
            round_end_ns=ops.window_end_ns + shift if ops.stepped else np.empty(0, np.int64),
            round_names=tuple(ops.window_names.tolist()) if ops.stepped else (),
        )
    return RankSummary(
        label=label,
        source=source,
        pid=pid,
        error=None,
        session_start_utc_ns=start,
        step_count=m.step_count,
        steps_per_s=m.steps_per_s,
        median_step_ns=m.median_step_ns,
        gpu_busy_ratio=m.gpu_busy_ratio,
        busy_basis=m.busy_basis,
        idle_per_step_ns=m.idle_per_step_ns,
        gap_ns=m.gap_ns,
        pageable_htod_bytes=m.pageable_htod_bytes,
        osrt_ns=sum(f.total_ns for f in functions) if functions is not None else None,
        osrt_in_gap_ns=sum(f.in_gap_ns for f in functions) if functions is not None else None,
        top_recommendation=verdict.id if verdict else None,
        top_title=verdict.title if verdict else None,
        top_gain_ratio=verdict.expected_gain_ratio if verdict else None,
        step_wall_ns=tuple(r.wall_ns for r in rows),
        step_start_ns=tuple(r.cpu_start_ns + (start or 0) for r in rows),
        bucket_ns_per_step=buckets,
        account_step_ns=account.wall_ns // account.step_count if buckets else 0,
        communication_ns=account.communication_ns if account else 0,
        communication_exposed_ns=account.ns("communication") if account else 0,
        gpu_node_ratio=_gpu_node_ratio(report),
        collectives=collectives,
    )


def _gpu_node_ratio(report: Report) -> float | None:
    """The share of its threads' run time on the GPU's NUMA node, when the capture has it."""
    p = report.placement
    roles = [r for r in p.roles if r.gpu_node_ratio is not None] if p else []
    run = sum(r.run_ns for r in roles)
    return sum(r.gpu_node_ratio * r.run_ns for r in roles) / run if run else None


def _error_summary(label: str, source: str, error: str) -> RankSummary:
    return RankSummary(
        label=label,
        source=source,
        pid=None,
        error=error,
        session_start_utc_ns=None,
        step_count=None,
        steps_per_s=None,
        median_step_ns=None,
        gpu_busy_ratio=None,
        busy_basis="none",
        idle_per_step_ns=None,
        gap_ns=None,
        pageable_htod_bytes=None,
        osrt_ns=None,
        osrt_in_gap_ns=None,
        top_recommendation=None,
        top_title=None,
        top_gain_ratio=None,
    )


def _worker_name() -> str:
    try:
        from distributed import get_worker

        return get_worker().address
    except (ImportError, ValueError):
        return "local"


def _peak_rss_bytes() -> int | None:
    try:
        import resource
    except ImportError:  # Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)  # Linux counts KiB


# -- one report's limits ----------------------------------------------------------------------


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
            f"{path}: analysis stopped after {_number(timeout_s)} s (--rank-timeout-s); give it "
            f"more time with --rank-timeout-s, or analyze it alone: nsysprobe analyze {path}"
        )
    elif why == "memory":
        error = (
            f"{path}: analysis stopped at {_number(memory_bytes / 1e9)} GB resident "
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
    summary = _error_summary(label, Path(path).name, error)
    return [replace(summary, worker=_worker_name(), analyze_s=time.perf_counter() - started)]


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


def _number(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


# -- fan-out on Dask --------------------------------------------------------------------------


def analyze_many(
    paths: Iterable[str | os.PathLike] | str | os.PathLike,
    client=None,
    *,
    scheduler: str | None = None,
    workers: int | None = None,
    rank_timeout_s: float | None = None,
    rank_memory_bytes: int | None = None,
    progress: Callable[[str], None] | None = None,
    **analyze_options,
) -> ManyReport:
    """Analyze many reports (or one holding several processes) and compare the ranks.

    ``client``: a ``dask.distributed.Client`` to run on. Else ``scheduler`` (an address such
    as ``tcp://HOST:8786``), else Dask's ``scheduler-address`` configuration, else a
    ``LocalCluster`` of ``workers`` processes (default and most: one per CPU this process may
    use, at most one per report), one thread each, the machine's memory divided among them.
    Each report is analyzed in a process of its own (``summarize_bounded``), stopped after
    ``rank_timeout_s`` seconds or at ``rank_memory_bytes`` resident; that, or its worker dying,
    is that rank's error and the other ranks are compared. ``analyze_options`` are those of
    ``nsysprobe.analyze`` (``min_gap_ms``, ``step_range``, ``nsys``, ``topology``).
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    files = expand_paths(paths)
    labels = rank_labels(files)
    if "pid" in analyze_options:
        raise InputError("analyze_many: pid is chosen per report; leave it out")
    workers = min(workers or usable_cpus(), len(files))
    with dask_client(client, scheduler=scheduler, workers=workers) as c:
        from distributed import as_completed

        futures = c.map(
            summarize_bounded,
            [str(f) for f in files],
            labels,
            options=analyze_options,
            timeout_s=rank_timeout_s,
            memory_bytes=rank_memory_bytes,
            pure=False,
        )
        index = {future.key: i for i, future in enumerate(futures)}
        per_report: list[list[RankSummary]] = [[] for _ in files]
        for done, future in enumerate(as_completed(futures), 1):
            i = index[future.key]
            if future.status == "finished":
                per_report[i] = future.result()
            else:
                per_report[i] = [_lost(files[i], labels[i], future)]
            if progress is not None:
                progress(f"analyzed {done}/{len(files)} reports")
    return cross_rank([s for summaries in per_report for s in summaries])


def _lost(path: Path, label: str, future) -> RankSummary:
    """The error of a report whose task ended without a result: its worker died, or the task
    failed or was cancelled on the cluster."""
    from distributed import KilledWorker

    exc = future.exception() if future.status == "error" else None
    if isinstance(exc, KilledWorker):
        error = (
            f"{path}: the Dask worker analyzing it died (KilledWorker), as when the OOM killer "
            f"ends a worker process; see the workers' logs, and run fewer --workers or a lower "
            f"--rank-memory-gb"
        )
    else:
        why = f"{type(exc).__name__}: {exc}" if exc is not None else f"it was {future.status}"
        error = f"{path}: its task on the Dask cluster failed ({why}); see the workers' logs"
    return _error_summary(label, path.name, error)


@contextmanager
def dask_client(client=None, *, scheduler: str | None = None, workers: int | None = None):
    """The given client, one connected to ``scheduler`` (or Dask's configured address), or a
    LocalCluster of ``workers`` processes (at most, and by default, one per CPU this process
    may use), closed on exit when made here."""
    if client is not None:
        yield client
        return
    import dask
    from distributed import Client, LocalCluster

    connect_s = _dask_connect_timeout_s()  # Dask's own, for every connection it makes
    address = scheduler or dask.config.get("scheduler-address", None)
    if address:
        timeout_s = min(SCHEDULER_CONNECT_S, connect_s)
        check_scheduler(str(address), timeout_s)
        try:
            made = Client(address, timeout=timeout_s)
        except (OSError, TimeoutError) as exc:
            raise InputError(
                f"--scheduler {address}: cannot connect ({exc}); start one with `dask "
                f"scheduler` and `dask worker {address}`, or leave --scheduler out for a "
                f"local cluster"
            ) from exc
        with made:
            yield made
        return
    import logging

    from distributed.core import Status
    from distributed.deploy.spec import SpecCluster

    n = max(1, min(workers or usable_cpus(), usable_cpus()))
    known = set(SpecCluster._instances)
    try:
        with _QuietStderr() as quiet:
            # The worker processes inherit standard error, and a Ctrl-C at the terminal
            # reaches them too: their tracebacks would follow this process's one line.
            quiet.silence()
            try:
                cluster = LocalCluster(
                    n_workers=n,
                    threads_per_worker=1,
                    processes=True,
                    memory_limit="auto",  # the machine's memory / n_workers
                    dashboard_address=None,
                    silence_logs=logging.ERROR,
                )
            except RuntimeError as exc:
                if "Timed out trying to connect" not in str(exc):
                    raise
                raise InputError(
                    f"{_connect_timeout_setting()}: a local Dask cluster did not start, its "
                    f"processes did not connect to each other within {connect_s:g} s; "
                    f"raise it (Dask's default is 30s) or unset it"
                ) from None
        with _QuietStderr() as quiet, cluster, Client(cluster) as made:
            try:
                yield made
            except BaseException:
                quiet.silence()  # the teardown of a stopped job: its line comes after
                raise
    except BaseException:
        # A cluster stopped (Ctrl-C) while its workers started cannot be closed: Dask asserts
        # on a worker still starting, at exit too, in a traceback after our one line. Its
        # worker processes are daemons and end with this one; Dask's exit hook leaves it.
        for cluster in set(SpecCluster._instances) - known:
            if cluster.status != Status.closed:
                cluster.shutdown_on_close = False
        raise


class _QuietStderr:
    """Standard error as it was on entering, given back on leaving; ``silence()`` points it
    at /dev/null until then (a local cluster's start and a stopped job's teardown, whose
    complaints would bury nsysprobe's one line: what a rank says comes back as its summary,
    not on standard error)."""

    def __enter__(self) -> _QuietStderr:
        sys.stderr.flush()
        self._saved = os.dup(2)
        return self

    def silence(self) -> None:
        sys.stderr.flush()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(devnull)

    def __exit__(self, *exc) -> None:
        os.dup2(self._saved, 2)
        os.close(self._saved)


def check_scheduler(address: str, timeout_s: float = SCHEDULER_CONNECT_S) -> None:
    """Raise InputError unless ``address`` is a scheduler address, a connection opens within
    ``timeout_s`` and what answers completes Dask's handshake within as long again. Dask's own
    client waits for the handshake without a limit: a server that answers anything else (a
    2 GiB frame header) holds it forever."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from distributed.comm import connect
    from distributed.comm.addressing import parse_address, parse_host_port
    from distributed.comm.registry import get_backend

    fix = (
        "give the address `dask scheduler` prints (tcp://HOST:PORT), or leave --scheduler out "
        "for a local cluster"
    )
    try:
        scheme, location = parse_address(address)
        if scheme == "inproc":
            raise ValueError("inproc:// reaches only a scheduler inside the same Python process")
        get_backend(scheme)
        if not 0 < parse_host_port(location)[1] < 1 << 16:
            raise ValueError("the port is not in 1-65535")
    except ValueError as exc:
        raise InputError(f"--scheduler {address}: not a scheduler address ({exc}); {fix}") from None

    async def handshake() -> None:
        # Dask gives up connecting after timeout_s; the handshake then gets as long again.
        comm = await asyncio.wait_for(connect(address, timeout=timeout_s), 2 * timeout_s)
        comm.abort()

    with ThreadPoolExecutor(1) as pool:  # a thread of its own: the caller may run a loop
        try:
            pool.submit(asyncio.run, handshake()).result()
        except asyncio.TimeoutError:
            raise InputError(
                f"--scheduler {address}: no Dask scheduler answered (something accepted the "
                f"connection but did not finish Dask's handshake within {_number(2 * timeout_s)} "
                f"s); {fix}"
            ) from None
        except OSError as exc:
            raise InputError(
                f"--scheduler {address}: cannot connect ({exc}); start one with `dask "
                f"scheduler` and `dask worker {address}`, or leave --scheduler out for a "
                f"local cluster"
            ) from None
        except Exception as exc:  # noqa: BLE001 -- whatever answered is not a scheduler
            raise InputError(
                f"--scheduler {address}: what answered is not a Dask scheduler "
                f"({type(exc).__name__}: {exc}); {fix}"
            ) from None


def _dask_connect_timeout_s() -> float:
    """Dask's connect timeout (``CONNECT_TIMEOUT``) in seconds. It bounds every connection
    Dask makes, a local cluster's too, and Dask fails deep inside on a value it cannot use:
    InputError, naming the variable or setting, unless it is a duration over 0 s and at most
    ``MAX_CONNECT_TIMEOUT_S``. Call with ``distributed`` imported (it sets the default)."""
    import dask
    from dask.utils import parse_timedelta

    value = dask.config.get(CONNECT_TIMEOUT, None)
    try:
        seconds = None if isinstance(value, bool) else parse_timedelta(value, "s")
    except Exception:  # noqa: BLE001 -- Dask's parser raises ValueError, KeyError, IndexError...
        seconds = None
    if not isinstance(seconds, (int, float)) or not 0 < seconds <= MAX_CONNECT_TIMEOUT_S:
        raise InputError(
            f"{_connect_timeout_setting()}: not a connect timeout Dask can use (a duration over "
            f"0 s and at most {MAX_CONNECT_TIMEOUT_S / 3600:g} h, such as 30s); set one, or "
            f"unset it for Dask's default (30s)"
        )
    return float(seconds)


def _connect_timeout_setting() -> str:
    """Where Dask's connect timeout was set: the environment variable, else the setting."""
    import shlex

    import dask

    for variable, value in os.environ.items():
        # Dask's reading of DASK_* variables (dask.config.collect_env), '_' and '-' alike.
        key = variable[len("DASK_") :].lower().replace("__", ".").replace("_", "-")
        if variable.startswith("DASK_") and key == CONNECT_TIMEOUT:
            return f"{variable}={shlex.quote(value)}"
    value = dask.config.get(CONNECT_TIMEOUT, None)
    return f"Dask's setting {CONNECT_TIMEOUT} ({value!r}, in ~/.config/dask or $DASK_CONFIG)"


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity), else the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


# -- the cross-rank view ----------------------------------------------------------------------


def cross_rank(summaries: Sequence[RankSummary]) -> ManyReport:
    """Verdicts, stragglers and the slowest ranks from the ranks' summaries (pure)."""
    ok = [s for s in summaries if s.error is None]
    lags = start_lags(ok)
    relative = relative_steps([s for s in ok if len(s.step_wall_ns) >= MIN_STEPS])
    alpha = ALPHA / max(1, len(relative))
    arrivals = analyze_arrivals([s.collectives for s in ok if s.collectives is not None])
    stragglers = arrivals.stragglers if arrivals else ()
    verdicts = [
        _verdict(s, relative, alpha, lags.get(s.label), arrivals, stragglers) for s in summaries
    ]
    starts = [s.session_start_utc_ns for s in ok]
    alignment = (
        "utc"
        if starts and all(t is not None for t in starts)
        else ("partial" if any(t is not None for t in starts) else "none")
    )
    return ManyReport(
        schema_version=SCHEMA_VERSION,
        ranks=tuple(summaries),
        verdicts=tuple(verdicts),
        stragglers=stragglers,
        slowest=_slowest(ok, {v.label: v for v in verdicts}, arrivals),
        alignment=alignment,
        thresholds={
            "alpha": ALPHA,
            "alpha_per_rank": alpha,
            "min_slowdown_ratio": MIN_SLOWDOWN_RATIO,
            "distinct_ratio": DISTINCT_RATIO,
            "min_steps": MIN_STEPS,
        },
        arrivals=arrivals,
    )


def relative_steps(ranks: Sequence[RankSummary]) -> dict[str, np.ndarray]:
    """label -> each step's wall time over the median across ranks of the same step.

    Steps are matched by index over the steps every rank has (synchronous training runs step
    *k* on every rank at once). Dividing by the cross-rank median removes what all ranks share
    (a slow data batch, a checkpoint), so the test sees how each rank compares step by step.
    """
    if len(ranks) < 2:
        return {}
    n = min(len(r.step_wall_ns) for r in ranks)
    walls = np.array([r.step_wall_ns[:n] for r in ranks], dtype=np.float64)
    ratio = walls / np.maximum(np.median(walls, axis=0), 1.0)
    return {r.label: ratio[i] for i, r in enumerate(ranks)}


def start_lags(ranks: Sequence[RankSummary]) -> dict[str, int]:
    """label -> median over step indexes of (its step start - the earliest rank's, same index),
    among ranks with a UTC session start and steps."""
    timed = [r for r in ranks if r.session_start_utc_ns is not None and r.step_start_ns]
    if len(timed) < 2:
        return {}
    n = min(len(r.step_start_ns) for r in timed)
    starts = np.array([r.step_start_ns[:n] for r in timed], dtype=np.int64)
    lag = starts - starts.min(axis=0)
    return {r.label: int(np.median(lag[i])) for i, r in enumerate(timed)}


def _verdict(
    s: RankSummary,
    relative: dict[str, np.ndarray],
    alpha: float,
    lag: int | None,
    arrivals: Arrivals | None,
    stragglers: tuple[str, ...],
) -> RankVerdict:
    def unknown(why: str) -> RankVerdict:
        return RankVerdict(s.label, "unknown", None, None, None, lag, why)

    if s.error is not None:
        return unknown("not analyzed")
    mine = arrivals.rank(s.label) if arrivals else None
    if mine is not None:
        # Ranks that communicate: arrivals decide; step walls are the same on every rank.
        unit = ROUND_UNITS[arrivals.rounds_basis]
        why = (
            f"the latest at the collectives in {mine.last_rounds} of {mine.rounds} {unit}; "
            f"later than another rank's in {mine.late_share_ratio:.0%} of comparisons "
            f"(Mann-Whitney U of its lateness per round, one-sided p={mine.p_value:.3g}); held "
            f"the others up {mine.held_up_ns / 1e6:,.1f} ms ({mine.held_up_ratio:.1%} of the "
            f"time); waited {mine.waited_ns / 1e6:,.1f} ms for later ranks"
        )
        verdict = "straggler" if s.label in stragglers else mine.verdict
        return RankVerdict(s.label, verdict, None, mine.p_value, None, lag, why)
    if len(s.step_wall_ns) < MIN_STEPS:
        return unknown(f"needs {MIN_STEPS}+ steps to test (has {len(s.step_wall_ns)})")
    if s.label not in relative:
        return unknown(f"needs another rank with {MIN_STEPS}+ steps to compare with")
    mine = relative[s.label]
    pooled = np.concatenate([v for k, v in relative.items() if k != s.label])
    # One-sided: the question is only whether this rank is slower.
    slower_share, p = one_sided(mine, pooled)
    slowdown = float(np.median(mine) / np.median(pooled))
    why = (
        f"Mann-Whitney U on {mine.size} step times (each over the ranks' median of that step) "
        f"vs {pooled.size} of {len(relative) - 1} other ranks, one-sided p={p:.3g}, "
        f"median x{slowdown:.3f}"
    )
    # Without collectives the ranks do not wait for each other: a rank with slower steps is
    # slower, never a straggler (a straggler is late at the collectives).
    verdict = "slower" if p < alpha and slowdown >= MIN_SLOWDOWN_RATIO else "not slower"
    return RankVerdict(s.label, verdict, slowdown, p, slower_share, lag, why)


def _slowest(
    ok: list[RankSummary], verdicts: dict[str, RankVerdict], arrivals: Arrivals | None
) -> tuple[SlowRank, ...]:
    timed = [s for s in ok if s.median_step_ns is not None]
    listed = [s for s in ok if verdicts[s.label].verdict == "straggler"]
    if len(timed) >= 2:
        timed.sort(key=lambda s: (-s.median_step_ns, s.label))
        listed += [
            s
            for s in timed[:SLOWEST_LISTED]
            if s not in listed and (verdicts[s.label].slowdown_ratio or 0.0) > 1.0
        ]
    if len(ok) < 2:
        return ()
    return tuple(
        SlowRank(
            label=s.label,
            median_step_ns=s.median_step_ns,
            slowdown_ratio=verdicts[s.label].slowdown_ratio,
            distinctions=_distinctions(s, [o for o in ok if o is not s], verdicts),
            causes=straggler_causes(s, [o for o in ok if o is not s], arrivals)
            if verdicts[s.label].verdict == "straggler"
            else (),
        )
        for s in listed
    )


def straggler_causes(
    s: RankSummary, others: list[RankSummary], arrivals: Arrivals | None
) -> tuple[Cause, ...]:
    """Why the straggler is late (``late_causes`` on the ranks' step accounts), and its NUMA
    placement when the others ran on their GPU's node and it did not."""
    mine_arrival = arrivals.rank(s.label) if arrivals else None
    held = mine_arrival.held_up_ratio * s.account_step_ns if mine_arrival else 0.0
    out = list(
        late_causes(
            dict(s.bucket_ns_per_step),
            [dict(o.bucket_ns_per_step) for o in others if o.bucket_ns_per_step],
            held,
        )
    )
    theirs = [o.gpu_node_ratio for o in others if o.gpu_node_ratio is not None]
    if s.gpu_node_ratio is not None and theirs:
        median = float(np.median(theirs))
        if median - s.gpu_node_ratio >= NUMA_CAUSE_DROP_RATIO:
            out.insert(
                0,
                Cause(
                    f"NUMA: its threads ran {s.gpu_node_ratio:.0%} of their time on the GPU's "
                    f"node, the other ranks' {median:.0%}",
                    "numa_binding",
                    (),
                    s.gpu_node_ratio,
                    median,
                ),
            )
    return tuple(out)


def _metric(s: RankSummary, verdicts: dict[str, RankVerdict], name: str) -> float | None:
    value = verdicts[s.label].start_lag_ns if name == "start_lag_ns" else getattr(s, name)
    return None if value is None else float(value)


def _distinctions(
    s: RankSummary, others: list[RankSummary], verdicts: dict[str, RankVerdict]
) -> tuple[Distinction, ...]:
    out = []
    for name, title, unit in DISTINCT_METRICS:
        value = _metric(s, verdicts, name)
        theirs = [v for o in others if (v := _metric(o, verdicts, name)) is not None]
        if value is None or not theirs:
            continue
        median = float(np.median(theirs))
        if value >= median * DISTINCT_RATIO and value - median >= DISTINCT_FLOORS[unit]:
            out.append(Distinction(name, title, unit, value, median))
    return tuple(out)
