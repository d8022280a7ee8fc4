"""``analyze(path) -> Report``: the one call behind ``nsysprobe analyze``.

capture (export a report when needed) -> trace (read-only reader) -> analyses -> diagnosis.
The Report is plain frozen dataclasses; ``nsysprobe.render`` turns it into text, JSON or
Markdown. Nothing in it comes from the environment nsys stores in a report.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from nsysprobe.analyses.account import AccountResult, analyze_account
from nsysprobe.analyses.arrivals import Arrivals, within_report
from nsysprobe.analyses.events import Events
from nsysprobe.analyses.gaps import DEFAULT_MIN_GAP_NS, GapsResult, analyze_gaps
from nsysprobe.analyses.health import Finding, analyze_health
from nsysprobe.analyses.kernels import KernelsResult, analyze_kernels
from nsysprobe.analyses.osrt import OsrtResult, analyze_osrt
from nsysprobe.analyses.overlap import OverlapResult, analyze_overlap
from nsysprobe.analyses.python_frames import (
    NoFrames,
    PythonFrames,
    analyze_python_frames,
    sampled,
)
from nsysprobe.analyses.step_patterns import StepPatterns, analyze_step_patterns
from nsysprobe.analyses.steps import StepsResult, find_steps, step_breakdown
from nsysprobe.analyses.transfers import TransfersResult, analyze_transfers
from nsysprobe.capture.reportfile import REPORT_SUFFIXES
from nsysprobe.common.frames import Tables
from nsysprobe.common.safetext import name as safe_name
from nsysprobe.diagnose.common import Evidence, Recommendation
from nsysprobe.diagnose.rules import diagnose
from nsysprobe.errors import InputError, TraceError
from nsysprobe.trace.reader import Trace

if TYPE_CHECKING:  # imported where used: a CPU placement or an HTML timeline is asked for
    from nsysprobe.analyses.cpu_placement import CpuPlacementResult
    from nsysprobe.analyses.timeline import Timeline
    from nsysprobe.numa.topology import Topology

# 2: steps timed to their completion on the GPU (``windows.py``); 1 timed their CPU ranges.
SCHEMA_VERSION = 2
# Ranks one report is split into at most (``analyze_processes``): one per GPU process of a
# node; each costs a full analysis.
MAX_RANKS = 64


@dataclass(frozen=True)
class TraceInfo:
    path: str
    nsys_version: str | None
    schema_version: str | None
    gpus: tuple[str, ...]
    session_start_utc_ns: int | None
    processes: int  # processes with GPU work
    # The devices that ran its GPU work (the kernel, copy and memset tables' deviceId): which
    # GPUs the trace used, also when it describes none (an export without TARGET_INFO_GPU).
    gpu_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class Skipped:
    analysis: str
    reason: str
    fix: str


@dataclass(frozen=True)
class Report(Tables):
    """What ``analyze`` found. Each table is a DataFrame on request (pandas installed): the
    report's own by ``report.to_pandas("recommendations")`` (or ``"findings"``,
    ``"skipped"``), the analyses' by theirs (``report.steps.to_pandas()``, see
    ``nsysprobe.common.frames``). In a notebook the report shows itself as the verdict, the
    recommendations and the step account (``_repr_html_``)."""

    TABLES = {"recommendations": Recommendation, "findings": Finding, "skipped": Skipped}

    schema_version: int
    trace: TraceInfo
    gaps: GapsResult | None
    transfers: TransfersResult | None
    osrt: OsrtResult | None
    overlap: OverlapResult | None
    steps: StepsResult | None
    account: AccountResult | None
    arrivals: Arrivals | None  # a report holding several ranks: their arrivals at collectives
    placement: CpuPlacementResult | None
    findings: tuple[Finding, ...]
    recommendations: tuple[Recommendation, ...]
    skipped: tuple[Skipped, ...]
    # The raw events of a few steps, for the HTML page (``analyze(..., timeline=True)``); not
    # part of the saved JSON.
    timeline: Timeline | None = None
    # Patterns across the main account's steps (``analyses/step_patterns.py``).
    step_patterns: StepPatterns | None = None
    # The Python function and line behind each idle bucket (``analyses/python_frames.py``).
    python_frames: PythonFrames | None = None
    # The main account's kernels by class, and the lever a GPU-bound loop has.
    kernels: KernelsResult | None = None

    @property
    def verdict(self) -> Recommendation | None:
        return self.recommendations[0] if self.recommendations else None

    def _repr_html_(self) -> str:
        from nsysprobe.report.notebook import report_html

        return report_html(self)


# The longest gap threshold: a week, far beyond any capture, and within int64 nanoseconds.
MAX_MIN_GAP_MS = 7 * 24 * 3600 * 1e3


def check_min_gap_ms(value: float) -> float:
    """InputError unless ``value`` (--min-gap-ms) is a number from 0 to ``MAX_MIN_GAP_MS``."""
    if not (isinstance(value, (int, float)) and 0 <= value <= MAX_MIN_GAP_MS):
        raise InputError(
            f"--min-gap-ms {value}: give a number of milliseconds from 0 to "
            f"{MAX_MIN_GAP_MS:.0f}, e.g. 1"
        )
    return value


def _kernels(events, main) -> KernelsResult:
    """The main account's kernels by class, set against themselves over its steady steps
    (of the steps it lists, ``STEP_ROWS_LISTED``; steps of the loop only: equal windows do
    not repeat a loop's kernels)."""
    if not main.stepped:
        return analyze_kernels(events, main.pid, main.device_id)
    steady = [s for s in main.steps if not s.startup and not s.final]
    starts = np.array([s.start_ns for s in steady], dtype=np.int64)
    ends = starts + np.array([s.wall_ns for s in steady], dtype=np.int64)
    return analyze_kernels(events, main.pid, main.device_id, (starts, ends))


def _export(path: str | Path, min_gap_ms: float, nsys: str | None) -> Path:
    """The ``.sqlite`` export to read for ``path``, made first when ``path`` is a report or a
    run folder; the options checked before that work."""
    path = Path(path)
    check_min_gap_ms(min_gap_ms)
    if path.suffix in REPORT_SUFFIXES or path.is_dir():
        from nsysprobe.capture.runfolder import export_of

        path = export_of(path, nsys=nsys)
    return path


def analyze(
    path: str | Path,
    *,
    min_gap_ms: float = DEFAULT_MIN_GAP_NS / 1e6,
    step_range: str | None = None,
    nsys: str | None = None,
    topology: Topology | None = None,
    pid: int | None = None,
    timeline: bool = False,
) -> Report:
    """Analyze a ``.sqlite`` export, a ``.nsys-rep``/``.qdrep`` report (exported first) or
    a run folder of ``nsysprobe run`` (its capture finished first where it stopped short).

    ``topology`` (``nsysprobe.numa.discover()`` for this machine, ``load_recorded(dir)`` for
    another) places the threads on NUMA nodes when the capture has ``--cpuctxsw`` data.
    ``pid`` analyzes one process of a report that holds several (one rank of a multi-GPU
    run); see ``Events.for_process``. ``timeline`` adds the raw events of a few steps for
    the HTML page (``Report.timeline``), from the same loaded events.
    """
    path = _export(path, min_gap_ms, nsys)
    with Trace(path) as trace:
        events = Events.load(trace, sched=topology is not None)
        if pid is not None:
            events = events.for_process(pid)
        return analyze_events(
            events,
            min_gap_ns=int(round(min_gap_ms * 1e6)),
            step_range=step_range,
            topology=topology,
            timeline=timeline,
        )


def analyze_processes(
    path: str | Path,
    *,
    min_gap_ms: float = DEFAULT_MIN_GAP_NS / 1e6,
    step_range: str | None = None,
    nsys: str | None = None,
    topology: Topology | None = None,
) -> list[tuple[int | None, Report]]:
    """``[(None, report)]`` for a report whose GPU work is one process's; for one holding
    several (every rank of a job), ``(pid, its Report)`` for each of them. The export is
    opened and loaded once, then split (``Events.for_process``)."""
    path = _export(path, min_gap_ms, nsys)
    options = dict(min_gap_ns=int(round(min_gap_ms * 1e6)), step_range=step_range)
    with Trace(path) as trace:
        events = Events.load(trace, sched=topology is not None)
        pids = events.gpu_pids
        if len(pids) > MAX_RANKS:
            raise TraceError(
                f"{path}: {len(pids)} processes ran GPU work, more than the {MAX_RANKS} ranks "
                f"one report holds (one node's GPUs); analyze it as one report, without --ranks"
            )
        if len(pids) <= 1:
            return [(None, analyze_events(events, topology=topology, **options))]
        return [
            (pid, analyze_events(events.for_process(pid), topology=topology, **options))
            for pid in pids
        ]


def _waiting_rank_first(account: AccountResult, arrivals: Arrivals) -> AccountResult:
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


def analyze_events(
    events: Events,
    *,
    min_gap_ns: int = DEFAULT_MIN_GAP_NS,
    step_range: str | None = None,
    topology: Topology | None = None,
    timeline: bool = False,
) -> Report:
    """The Report of loaded events (all of a report's, or one process's: ``for_process``)."""
    skipped: list[Skipped] = []
    gpu = events.has_gpu_activity
    cuda_fix = "profile with --trace=cuda,nvtx,osrt on a machine with a CUDA GPU"
    gaps = transfers = overlap = osrt = None
    if gpu:
        gaps = analyze_gaps(events, min_gap_ns)
        transfers = analyze_transfers(events)
        overlap = analyze_overlap(events)
    else:
        for name in ("gaps", "transfers", "overlap"):
            skipped.append(Skipped(name, "no GPU activity in the trace", cuda_fix))
    if len(events.osrt):
        osrt = analyze_osrt(events, events.device_gaps(min_gap_ns) if gpu else {})
    else:
        skipped.append(
            Skipped("osrt", "no OS-runtime calls in the trace", "profile with --trace=osrt")
        )
    found_steps = find_steps(events, step_range)
    windows = None if found_steps is None else found_steps.windows(events)
    steps = None if found_steps is None else step_breakdown(events, found_steps, windows)
    if steps is None:
        reason = (
            "no NVTX ranges in the trace"
            if not len(events.nvtx)
            else "no top-level NVTX range repeats"
        )
        skipped.append(
            Skipped(
                "steps",
                reason,
                "wrap each step in an NVTX range such as 'Batch i' "
                "(nvtx.annotate), or name it with --step-range",
            )
        )
    placement = None
    if topology is not None:
        from nsysprobe.analyses.cpu_placement import analyze_cpu_placement

        placement = analyze_cpu_placement(events, topology)
    if placement is None:
        skipped.append(
            Skipped(
                "placement",
                "no CPU scheduling data in the trace"
                if topology is not None
                else "no machine topology given",
                "profile with --cpuctxsw=process-tree and analyze with --topology live (or a "
                "folder of recorded lscpu/numactl/nvidia-smi outputs)",
            )
        )
    account = (
        analyze_account(events, step_range, steps=windows, idle_spans=sampled(events))
        if gpu
        else None
    )
    if account is not None and not account.accounts:
        account = None
    arrivals = within_report(account.accounts) if account else None
    if arrivals is not None and arrivals.stragglers:
        account = _waiting_rank_first(account, arrivals)
    health = analyze_health(events)
    main = account.main if account else None
    frames = analyze_python_frames(events, main)
    if isinstance(frames, NoFrames):
        skipped.append(Skipped("python_frames", frames.reason, frames.fix))
        frames = None
    patterns = analyze_step_patterns(events, main) if main else None
    kernels = _kernels(events, main) if main else None
    evidence = Evidence(
        account=main,
        transfers=transfers,
        placement=placement,
        health=health,
        accounts=account.accounts if account else (),
        arrivals=arrivals,
        kernels=kernels,
        python_frames=frames,
        step_patterns=patterns,
    )
    shown = None  # the HTML page's events
    if timeline:
        from nsysprobe.analyses.timeline import build_timeline

        shown = build_timeline(events, steps, gaps)
    facts = events.lookups
    info = TraceInfo(
        path=safe_name(facts.path.name),
        nsys_version=facts.nsys_version,
        schema_version=facts.schema_version,
        gpus=tuple(f"{g.name} ({g.bus_id})" if g.bus_id else g.name for g in facts.gpus),
        session_start_utc_ns=facts.session_start_utc_ns,
        processes=len(events.gpu_pids),
        gpu_ids=tuple(events.device_ids) if gpu else (),
    )
    return Report(
        schema_version=SCHEMA_VERSION,
        trace=info,
        gaps=gaps,
        transfers=transfers,
        osrt=osrt,
        overlap=overlap,
        steps=steps,
        account=account,
        arrivals=arrivals,
        placement=placement,
        findings=health,
        recommendations=diagnose(evidence),
        skipped=tuple(skipped),
        timeline=shown,
        python_frames=frames,
        step_patterns=patterns,
        kernels=kernels,
    )
