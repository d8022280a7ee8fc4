"""``analyze(path) -> Report``: the one call behind ``nsysprobe analyze``.

capture (export a report when needed) -> trace (read-only reader) -> analyses -> diagnosis.
The Report is plain frozen dataclasses; ``nsysprobe.render`` turns it into text, JSON or
Markdown. Nothing in it comes from the environment nsys stores in a report.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from nsysprobe.analyses.account import DEFAULT_MIN_GAP_NS, AccountResult
from nsysprobe.analyses.arrivals import Arrivals
from nsysprobe.analyses.events import Events
from nsysprobe.analyses.gaps import GapsResult
from nsysprobe.analyses.health import Finding
from nsysprobe.analyses.kernels import KernelsResult
from nsysprobe.analyses.osrt import OsrtResult
from nsysprobe.analyses.overlap import OverlapResult
from nsysprobe.analyses.python_frames import PythonFrames
from nsysprobe.analyses.step_patterns import StepPatterns
from nsysprobe.analyses.steps import StepsResult
from nsysprobe.analyses.transfers import TransfersResult
from nsysprobe.capture.reportfile import REPORT_SUFFIXES
from nsysprobe.common.frames import Tables
from nsysprobe.common.safetext import name as safe_name
from nsysprobe.diagnose.common import Evidence, Recommendation
from nsysprobe.diagnose.rules import diagnose
from nsysprobe.errors import InputError, TraceError
from nsysprobe.report.declared import ANALYSES, Run, run_all
from nsysprobe.trace.reader import Trace

if TYPE_CHECKING:  # imported where used: a CPU placement or an HTML timeline is asked for
    from nsysprobe.analyses.cpu_placement import CpuPlacementResult
    from nsysprobe.analyses.timeline import Timeline
    from nsysprobe.numa.topology import Topology

# 3: gaps are the step account's idle stretches, by its causes (``gaps.py``); 2: steps timed
# to their completion on the GPU (``windows.py``); 1 timed their CPU ranges.
SCHEMA_VERSION = 3
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


def analyze_events(
    events: Events,
    *,
    min_gap_ns: int = DEFAULT_MIN_GAP_NS,
    step_range: str | None = None,
    topology: Topology | None = None,
    timeline: bool = False,
) -> Report:
    """The Report of loaded events (all of a report's, or one process's: ``for_process``):
    every analysis of ``declared.ANALYSES``, then the diagnosis."""
    run = Run(events, min_gap_ns, step_range, topology, timeline)
    skipped = tuple(Skipped(a.name, m.reason, m.fix or a.fix) for a, m in run_all(run))
    got = {a.name: run.found(a.name) for a in ANALYSES}
    account = got["account"]
    main = account.main if account else None
    evidence = Evidence(
        account=main,
        transfers=got["transfers"],
        placement=got["placement"],
        health=got["health"],
        accounts=account.accounts if account else (),
        arrivals=got["arrivals"],
        kernels=got["kernels"],
        python_frames=got["python_frames"],
        step_patterns=got["step_patterns"],
    )
    facts = events.lookups
    gpu = events.has_gpu_activity
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
        gaps=got["gaps"],
        transfers=got["transfers"],
        osrt=got["osrt"],
        overlap=got["overlap"],
        steps=got["steps"],
        account=account,
        arrivals=got["arrivals"],
        placement=got["placement"],
        findings=got["health"],
        recommendations=diagnose(evidence),
        skipped=skipped,
        timeline=got["timeline"],
        python_frames=got["python_frames"],
        step_patterns=got["step_patterns"],
        kernels=got["kernels"],
    )
