"""One report's ranks as ``RankSummary``s: the figures the cross-rank view compares.

A report holding several processes with GPU work gives one rank per process
(``Events.for_process``; the OS-runtime calls of processes without GPU work, such as DataLoader
workers, belong to no rank there, because the export records no parent process).

Each task reads one report and returns a ``RankSummary`` per rank: a few figures plus the
per-step wall and start times. A worker holds one report's events at a time and the client
none. A ``.nsys-rep`` is exported by the one task that analyzes it (``ensure_sqlite`` writes
to a temporary file and renames it), so no report is exported twice.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from nsysprobe.analyses.arrivals import RankCollectives, rank_accounts
from nsysprobe.analyses.cross_rank import RankSummary
from nsysprobe.errors import NsysprobeError
from nsysprobe.report.analyze import Report, analyze_processes


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
    worker, rss = worker_name(), _peak_rss_bytes()
    multi = len(results) > 1
    out = []
    for pid, report in results:
        rank_label = f"{label}:{pid}" if multi else label
        if isinstance(report, str):
            out.append(error_summary(rank_label, source.name, report))
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


def error_summary(label: str, source: str, error: str) -> RankSummary:
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


def worker_name() -> str:
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
