"""The analyses a report holds, each declared once: its name, the module that defines it, what
it needs, how to capture what it needs when the trace lacks it, and how it runs.

``analyze`` runs them (``run_all``), ``nsysprobe explain`` lists them (each one's module
docstring is its definition) and the renderers show them, all in this order. An analysis reads
the loaded events and the results of the analyses it names (``Run.get``: each is run once, on
first use) and returns its result; None when it has nothing to say (one rank has no arrivals);
``Missing(reason)`` when the trace lacks what it needs: the report then lists it as skipped,
with the reason and ``fix``. That is the one way a missing input travels; what is wrong with
the capture itself (records dropped, a range never closed) is the ``health`` analysis's
findings, which the ``capture_incomplete`` verdict reads. Adding an analysis is a module in
``nsysprobe/analyses/`` and a row here (and its sections in ``render/step_sections.py`` or
``render/gpu_sections.py``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from nsysprobe.analyses.account import analyze_account
from nsysprobe.analyses.arrivals import within_report
from nsysprobe.analyses.events import Events
from nsysprobe.analyses.gaps import analyze_gaps, gap_intervals
from nsysprobe.analyses.health import analyze_health
from nsysprobe.analyses.kernels import analyze_kernels
from nsysprobe.analyses.osrt import analyze_osrt
from nsysprobe.analyses.overlap import analyze_overlap
from nsysprobe.analyses.python_frames import NoFrames, analyze_python_frames, sampled
from nsysprobe.analyses.step_patterns import analyze_step_patterns
from nsysprobe.analyses.steps import find_steps, step_breakdown
from nsysprobe.analyses.transfers import analyze_transfers
from nsysprobe.common.ahead import waited

if TYPE_CHECKING:
    from nsysprobe.numa.topology import Topology

CUDA_FIX = "profile with --trace=cuda,nvtx,osrt on a machine with a CUDA GPU"
NO_GPU = "no GPU activity in the trace"


@dataclass(frozen=True)
class Missing:
    """What an analysis returns when the trace lacks what it needs; ``fix`` when it knows a
    more precise fix than its declaration's."""

    reason: str
    fix: str | None = None


# Run first, alone but for each other (``run_all``): the account makes its idle pieces on a
# second core (``account.process``), and the steps share its step windows.
FIRST = ("account", "steps")


@dataclass
class Run:
    """One report's analyses under way: the events, the options, and each analysis's result
    once it has run (``get``)."""

    events: Events
    min_gap_ns: int
    step_range: str | None = None
    topology: Topology | None = None
    timeline: bool = False
    results: dict[str, Any] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _started: dict[str, threading.Event] = field(default_factory=dict, repr=False)
    _failed: dict[str, BaseException] = field(default_factory=dict, repr=False)

    def get(self, name: str) -> Any:
        """The result of the analysis ``name`` (a ``Missing`` when it has none), run now when
        it has not run yet."""
        return self.once(name, BY_NAME[name].run)

    def once(self, name: str, make: Callable[[Run], Any]) -> Any:
        """``results[name]``, made by ``make(self)`` the first time it is asked for. Asked
        for by two threads at once, it is made once: the second waits for it (and for the
        error that stopped it)."""
        with self._lock:
            if name in self.results:
                return self.results[name]
            done = self._started.get(name)
            mine = done is None
            if mine:
                done = self._started[name] = threading.Event()
        if not mine:
            done.wait()
            if name in self._failed:
                raise self._failed[name]
            return self.results[name]
        try:
            self.results[name] = make(self)
        except BaseException as exc:
            self._failed[name] = exc
            raise
        finally:
            done.set()
        return self.results[name]

    def found(self, name: str) -> Any:
        """The result of ``name``, None when it is ``Missing`` (or holds nothing)."""
        result = self.get(name)
        return None if isinstance(result, Missing) else result


@dataclass(frozen=True)
class Analysis:
    name: str  # as the report, ``explain`` and the skipped table name it
    module: str  # its module in ``nsysprobe/analyses/``: the docstring that defines it
    needs: str  # what it reads, in words
    fix: str  # how to capture what it needs
    run: Callable[[Run], Any]  # its result, or ``Missing``
    shown: bool = True  # a field of the report (else a part of another analysis's)


def _gpu(run: Run) -> bool:
    return run.events.has_gpu_activity


def _steps_found(run: Run):
    """The step ranges and their windows (None when no range repeats)."""

    def make(run: Run):
        found = find_steps(run.events, run.step_range)
        return found, None if found is None else found.windows(run.events)

    return run.once("_windows", make)


def _steps(run: Run):
    found, windows = _steps_found(run)
    if found is None:
        if not len(run.events.nvtx):
            return Missing("no NVTX ranges in the trace")
        return Missing("no top-level NVTX range repeats")
    return step_breakdown(run.events, found, windows)


def _waiting_rank_first(account, arrivals):
    """With a straggler among the report's ranks, the verdict is read from the rank that
    waited for it longest: the job's time goes to that wait (the straggler's own account sees
    its cause, not what it costs the others; ``late_rank`` names both)."""
    from dataclasses import replace

    from nsysprobe.analyses.arrivals import process_label

    waited = {r.label: r.waited_ns for r in arrivals.ranks if r.label not in arrivals.stragglers}
    best = max(
        range(len(account.accounts)),
        key=lambda i: (
            waited.get(process_label(account.accounts[i].pid), -1),
            account.accounts[i].communication_ns,
            -i,
        ),
    )
    if waited.get(process_label(account.accounts[best].pid), -1) < 0:
        return account
    return replace(account, primary=best)


def _account(run: Run):
    if not _gpu(run):
        return Missing(NO_GPU)
    ev = run.events
    # A report of one process has its steps found once, for the account and the steps (the
    # account asks for them once its operations are made: the other core finds them); one
    # of several, each process's own (``analyze_account``), the report's found beside them.
    found = {"steps": lambda: _steps_found(run)[1]} if len(ev.gpu_pids) == 1 else {}
    account = analyze_account(
        ev, run.step_range, idle_spans=sampled(ev), min_gap_ns=run.min_gap_ns, **found
    )
    if not account.accounts:
        return Missing("no process's GPU work in the trace")
    arrivals = within_report(account.accounts)
    run.results["arrivals"] = arrivals  # None: one rank
    if arrivals is not None and arrivals.stragglers:
        account = _waiting_rank_first(account, arrivals)
    return account


def _main(run: Run):
    account = run.found("account")
    return account.main if account else None


def _arrivals(run: Run):
    """The ranks' arrivals at the collectives, made with the accounts (None: one rank)."""
    run.get("account")
    return run.results.get("arrivals")


def _gaps(run: Run):
    if not _gpu(run):
        return Missing(NO_GPU)
    return analyze_gaps(run.events, run.found("account"), run.min_gap_ns)


def _osrt(run: Run):
    if not len(run.events.osrt):
        return Missing("no OS-runtime calls in the trace")
    return analyze_osrt(run.events, gap_intervals(run.found("account")))


def _placement(run: Run):
    if run.topology is None:
        return Missing("no machine topology given")
    from nsysprobe.analyses.cpu_placement import analyze_cpu_placement

    placement = analyze_cpu_placement(run.events, run.topology)
    return Missing("no CPU scheduling data in the trace") if placement is None else placement


def _python_frames(run: Run):
    frames = analyze_python_frames(run.events, _main(run))
    return Missing(frames.reason, frames.fix) if isinstance(frames, NoFrames) else frames


def _kernels(run: Run):
    """The main account's kernels by class, set against themselves over its steady steps
    (of the steps it lists, ``STEP_ROWS_LISTED``; steps of the loop only: equal windows do
    not repeat a loop's kernels)."""
    main = _main(run)
    if main is None:
        return None
    if not main.stepped:
        return analyze_kernels(run.events, main.pid, main.device_id)
    steady = [s for s in main.steps if not s.startup and not s.final]
    starts = np.array([s.start_ns for s in steady], dtype=np.int64)
    ends = starts + np.array([s.wall_ns for s in steady], dtype=np.int64)
    return analyze_kernels(run.events, main.pid, main.device_id, (starts, ends))


def _step_patterns(run: Run):
    main = _main(run)
    return analyze_step_patterns(run.events, main) if main else None


def _timeline(run: Run):
    if not run.timeline:
        return None
    from nsysprobe.analyses.timeline import build_timeline

    gaps = run.found("gaps")
    return build_timeline(run.events, run.found("steps"), gaps, gap_intervals(run.found("account")))


def _part(run: Run) -> None:
    """A part of another analysis, with no result of its own."""
    return None


_STEPS_FIX = (
    "wrap each step in an NVTX range such as 'Batch i' (nvtx.annotate), or name it with "
    "--step-range"
)
ANALYSES = (
    Analysis("account", "account", "GPU work, CUDA API calls", CUDA_FIX, _account),
    Analysis(
        "python_frames",
        "python_frames",
        "Python sampling",
        "profile with `nsysprobe run --python` (nsys profile --python-sampling=true), and "
        "export with `nsys export --type sqlite --include-json=true`",
        _python_frames,
    ),
    Analysis("step_patterns", "step_patterns", "the account's steps", CUDA_FIX, _step_patterns),
    Analysis(
        "arrivals",
        "arrivals",
        "NCCL work of several ranks",
        "profile every rank into one report",
        _arrivals,
    ),
    Analysis("steps", "steps", "a repeating NVTX range", _STEPS_FIX, _steps),
    Analysis("gaps", "gaps", "GPU work, CUDA API calls", CUDA_FIX, _gaps),
    Analysis(
        "transfers",
        "transfers",
        "GPU copies",
        CUDA_FIX,
        lambda run: analyze_transfers(run.events) if _gpu(run) else Missing(NO_GPU),
    ),
    Analysis(
        "overlap",
        "overlap",
        "GPU work",
        CUDA_FIX,
        lambda run: analyze_overlap(run.events) if _gpu(run) else Missing(NO_GPU),
    ),
    Analysis("osrt", "osrt", "OS-runtime calls", "profile with --trace=osrt", _osrt),
    Analysis(
        "placement",
        "cpu_placement",
        "CPU scheduling data and the machine's topology",
        "profile with --cpuctxsw=process-tree and analyze with --topology live (or a folder "
        "of recorded lscpu/numactl/nvidia-smi outputs)",
        _placement,
    ),
    Analysis("kernels", "kernels", "the account's kernels", CUDA_FIX, _kernels),
    Analysis("windows", "windows", "the steps", _STEPS_FIX, _part, shown=False),
    Analysis("communication", "communication", "NCCL work", CUDA_FIX, _part, shown=False),
    # Across reports: ``nsysprobe analyze`` of several (``ranks/many.py``) runs it on the
    # ranks' summaries; why a late rank is late, for ``late_rank`` and that view.
    Analysis(
        "cross_rank",
        "cross_rank",
        "one report per rank",
        "profile every rank (nsys profile per rank, or one report with --ranks)",
        _part,
        shown=False,
    ),
    Analysis(
        "late_causes", "late_causes", "the ranks' step accounts", CUDA_FIX, _part, shown=False
    ),
    Analysis(
        "health",
        "health",
        "the capture's own diagnostics",
        "-",
        lambda run: analyze_health(run.events),
        shown=False,
    ),
    Analysis("timeline", "timeline", "any events", "-", _timeline, shown=False),
)
BY_NAME = {a.name: a for a in ANALYSES}


def run_all(run: Run) -> list[tuple[Analysis, Missing]]:
    """Every analysis run (the timeline when asked for); what each lacked, in order.

    ``FIRST`` first, then the others, each set from both ends (``_from_both_ends``). The
    first error in ``ANALYSES``' order is raised (a signal at once)."""
    order = [a.name for a in ANALYSES]
    for names in (FIRST, [n for n in order if n not in FIRST]):
        failed = [n for n in order if n in run._failed]
        if failed:  # only those declared before the first failed may still fail before it
            names = [n for n in names if order.index(n) < order.index(failed[0])]
        try:
            _from_both_ends(run, names)
        except Exception:  # noqa: BLE001 -- raised below, in the declared order
            pass
    for name in order:
        if name in run._failed:
            raise run._failed[name]
    return [(a, r) for a in ANALYSES if isinstance(r := run.results[a.name], Missing)]


def _from_both_ends(run: Run, names) -> None:
    """Run the analyses ``names`` on two cores: this thread from the first, a helper thread
    from the last, each once (``Run.once``: a thread that wants an analysis the other has
    under way waits for it). Signals reach this thread, so Ctrl-C stops the analyses here;
    the helper stops before its next one, and is waited for."""
    stop, done = threading.Event(), threading.Event()

    def helper() -> None:
        try:
            for name in reversed(names):
                if stop.is_set():
                    return
                run.get(name)
        except BaseException:  # noqa: BLE001 -- raised again here when this thread asks
            return
        finally:
            done.set()

    thread = threading.Thread(target=helper, name="nsysprobe-analysis", daemon=True)
    thread.start()
    try:
        for name in names:
            run.get(name)
    finally:
        stop.set()
        # Waited for even after an error or a signal: the export it reads is closed after.
        waited(done.wait)
        thread.join()  # (done: it returns)
