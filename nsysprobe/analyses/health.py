"""Capture health: is the trace complete enough to diagnose, and if not, how to fix the capture.

Checks, each with its fix:

- ``nvtx_missing``: NVTX was requested but no range was recorded. The usual cause is the Python
  ``nvtx`` package 0.2.12 or later under nsys 2023.x, which records only domain create/destroy
  rows (eventType 75/76); 0.2.10-0.2.11 record push/pop ranges.
- ``no_gpu_activity``: no kernel, memcpy or memset: CUDA was not traced, or the capture range
  (``--capture-range=cudaProfilerApi``) did not cover the steps.
- ``capture_not_started``: no events at all: the capture range never started.
- ``no_osrt``: OS-runtime calls were not traced (``--trace=osrt``).
- ``rows_skipped``: rows with a missing, reversed or malformed interval (not integers, or
  timestamps out of range) were skipped.
- ``rows_without_owner``: rows whose process, thread or GPU id (``globalPid``, ``globalTid``,
  ``deviceId``) is absent, NULL, not an integer or out of range were left out: no process,
  thread or GPU is made up for them. Each table and column is named, with how many rows.
- ``ids_unusable``: rows whose ``correlationId`` or ``streamId`` is unusable were kept (their
  time counts), but are tied to no CUDA call (GPU work) or no GPU work (API calls).
- ``cuda_records_dropped``: nsys says CUDA was traced in hardware and records were dropped
  (``DIAGNOSTIC_EVENT``, nsys 2026.x on some GPUs): kernels or memsets may be missing, so busy
  time reads low; ``-t cuda-sw`` restores them.
- ``devices_left_out``: GPU work on more device ids than ``events.MAX_DEVICES`` (a damaged or
  crafted export): the busiest were analyzed.
- ``gpu_shared``: more than one process ran work on one GPU: each has its own account.
- ``no_cuda_api``: GPU work but no CUDA API calls (the runtime table is missing or empty):
  idle time cannot be tied to the CPU's calls.
- ``not_tables_ignored``: the export holds views or virtual tables, which nsys never writes;
  they are not read (reading one runs its author's SQL), so a view named like an nsys table
  counts as absent.
- ``cuda_graphs_whole``: CUDA graph replays were recorded whole
  (``CUPTI_ACTIVITY_KIND_GRAPH_TRACE``): each counts as busy, but the kernels inside are not
  in the trace (``--cuda-graph-trace=node`` records them).

Findings inform; only the lack of any GPU data stops the diagnosis.
"""

from __future__ import annotations

from dataclasses import dataclass

from nsysprobe.analyses.events import GPU_TABLES, OWNER_IDS, Events
from nsysprobe.trace.reader import UnusableIds
from nsysprobe.trace.schema import (
    NVTX_DOMAIN_CREATE,
    NVTX_DOMAIN_DESTROY,
    NVTX_RANGE_TYPES,
)

# Items (GPUs, processes) a finding's message names at most.
LISTED = 8


@dataclass(frozen=True)
class Finding:
    id: str
    severity: str  # "warning" or "info"
    message: str
    fix: str


def analyze_health(events: Events) -> tuple[Finding, ...]:
    facts = events.lookups
    requested = facts.requested_traces
    # Every range row was read (or dropped as damaged): the table is counted again only when
    # it holds none, to tell "no ranges" from "no NVTX".
    left_out = events.left_out
    ranges = len(events.nvtx) + events.dropped.get("nvtx", 0) + left_out.get("nvtx", 0)
    domain_rows = 0
    if not ranges:
        counts = facts.nvtx_counts
        ranges = sum(counts.get(t, 0) for t in NVTX_RANGE_TYPES)
        domain_rows = counts.get(NVTX_DOMAIN_CREATE, 0) + counts.get(NVTX_DOMAIN_DESTROY, 0)
    osrt_rows = len(events.osrt) + left_out.get("osrt", 0)
    api_rows = len(events.runtime) + left_out.get("runtime", 0)
    # GPU work left out for want of a process or GPU id is work recorded: the finding on those
    # rows says what happened to it, not the ones on a capture that recorded none.
    gpu_recorded = events.has_gpu_activity or any(left_out.get(t) for t in GPU_TABLES)
    found: list[Finding] = []

    nothing = not gpu_recorded and not ranges and not osrt_rows and not api_rows
    if nothing:
        found.append(
            Finding(
                "capture_not_started",
                "warning",
                "the trace holds no CUDA, NVTX or OS-runtime events: the capture range never "
                "started or the workload exited before its first step",
                "call torch.cuda.profiler.start() before the steps to capture (and stop() "
                "after), or profile without --capture-range",
            )
        )
    elif not gpu_recorded:
        asked = requested is None or "cuda" in requested
        found.append(
            Finding(
                "no_gpu_activity",
                "warning",
                "no GPU work (kernels, copies, memsets) was recorded"
                + (
                    ": the capture range may not have covered the steps"
                    if asked
                    else ": CUDA was not traced"
                ),
                "profile with --trace=cuda,nvtx,osrt on a machine with a CUDA GPU, and make "
                "the capture range cover the training steps",
            )
        )
    nvtx_asked = (requested is not None and "nvtx" in requested) or domain_rows > 0
    if nvtx_asked and not ranges:
        version = facts.nsys_version or "unknown"
        # Domain rows with no range are the signature of nvtx >= 0.2.12 under nsys 2023.x.
        cause = (
            "the Python nvtx package 0.2.12 and later records no ranges under nsys 2023.x"
            if domain_rows
            else "the workload emitted no NVTX ranges"
        )
        found.append(
            Finding(
                "nvtx_missing",
                "warning",
                f"NVTX was requested but no ranges were recorded (nsys {version}, "
                f"{domain_rows} domain rows): {cause}; per-step analysis is not possible",
                "pip install 'nvtx>=0.2.10,<0.2.12' (or profile with nsys 2025.x), then "
                "annotate each step with nvtx.annotate('Batch i')",
            )
        )
    if not osrt_rows and not nothing:
        found.append(
            Finding(
                "no_osrt",
                "info",
                "no OS-runtime calls were traced, so gaps cannot be tied to munmap, poll or "
                "pthread_cond_wait stalls",
                "profile with --trace=cuda,nvtx,osrt",
            )
        )
    dropped = facts.diagnostics
    lost = [t for t in dropped if "dropped" in t.lower()]
    if lost:
        found.append(
            Finding(
                "cuda_records_dropped",
                "warning",
                f"nsys reports dropped CUDA records ({_first_line(lost[0])}): kernels or memsets "
                f"may be missing, so GPU busy time reads low",
                "profile with -t cuda-sw (software CUDA tracing) instead of hardware tracing",
            )
        )
    if events.has_gpu_activity and not api_rows:
        found.append(
            Finding(
                "no_cuda_api",
                "warning",
                "GPU work was recorded but no CUDA API calls: idle time cannot be tied to what "
                "the CPU was doing, so its causes read as the thread's own code",
                "profile with --trace=cuda (and keep CUPTI_ACTIVITY_KIND_RUNTIME in the export)",
            )
        )
    shared = {d: sorted(p) for d, p in sorted(events.device_pids.items()) if len(p) > 1}
    if shared:
        where = "; ".join(
            f"GPU {d}: processes {_listed(p)}" for d, p in list(shared.items())[:LISTED]
        ) + (f"; {len(shared) - LISTED} more GPUs" if len(shared) > LISTED else "")
        found.append(
            Finding(
                "gpu_shared",
                "info",
                f"more than one process ran work on a GPU ({where}): each has its own step "
                f"account, and one's idle time there may be another's busy time",
                "analyze each rank with --ranks; give each process its own GPU for a clean "
                "measurement",
            )
        )
    if len(events.graphs):
        found.append(
            Finding(
                "cuda_graphs_whole",
                "info",
                f"{len(events.graphs):,} CUDA graph replays were recorded whole: each counts as "
                f"GPU busy, but the kernels inside them are not in the trace",
                "profile with --cuda-graph-trace=node to see the kernels inside the graphs",
            )
        )
    if events.devices_left_out:
        found.append(
            Finding(
                "devices_left_out",
                "warning",
                f"GPU work on {events.devices_left_out:,} more device ids was left out: the "
                f"{len(events.device_ids)} with the most operations were analyzed, more than "
                f"any one machine has GPUs",
                "analyze the export nsys wrote: re-export the report with `nsys export "
                "--type sqlite`",
            )
        )
    if facts.ignored:
        shown = ", ".join(facts.ignored[:LISTED]) + (", ..." if len(facts.ignored) > LISTED else "")
        found.append(
            Finding(
                "not_tables_ignored",
                "warning",
                f"views or virtual tables were not read ({shown}): nsys writes tables only, "
                f"and reading a view runs SQL of whoever made the file, so any of them named "
                f"like an nsys table counts as absent",
                "analyze the export as nsys wrote it: re-export the report with `nsys export "
                "--type sqlite`",
            )
        )
    found += _unusable_ids(events.lookups.unusable_ids)
    if events.dropped:
        detail = ", ".join(f"{n} {k}" for k, n in sorted(events.dropped.items()))
        found.append(
            Finding(
                "rows_skipped",
                "info",
                f"skipped rows with a missing, reversed or malformed interval ({detail})",
                "none needed if a process crashed or was killed, which leaves such rows; "
                "otherwise the export is damaged: re-export it with `nsys export --type sqlite`",
            )
        )
    return tuple(found)


# What becomes of the rows with an unusable id, by column (kept rows) or by owner id.
_LEFT_OUT_FOR = {
    "deviceId": "no GPU to put them on",
    "globalPid": "no process to give them to",
    "globalTid": "no thread or process to give them to",
}
_KEPT_AS = {
    "correlationId": "counted as GPU busy time, not tied to the CUDA call that launched them",
    "streamId": "counted as GPU busy time; the timeline draws them on one lane, 'stream -1'",
}
_API_CORRELATION = "kept as CPU time, no GPU work tied to them"
_API_TABLES = ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER")


def _unusable_ids(ids: tuple[UnusableIds, ...]) -> list[Finding]:
    """A finding for the rows left out for want of an owner id, one for the rows kept with an
    unusable correlation or stream id: each table and column, and how many rows."""
    left = [(u, _LEFT_OUT_FOR[u.column]) for u in ids if u.column in OWNER_IDS]
    kept = [
        (u, _API_CORRELATION if u.table in _API_TABLES else _KEPT_AS[u.column])
        for u in ids
        if u.column not in OWNER_IDS
    ]
    fix = (
        "analyze the export as nsys wrote it: re-export the report with `nsys export --type "
        "sqlite` (a column renamed, emptied or edited reads as unusable)"
    )
    out = []
    if left:
        out.append(
            Finding(
                "rows_without_owner",
                "warning",
                f"rows with no usable process, thread or GPU id were left out, so no figure "
                f"counts them ({_described(left)})",
                fix,
            )
        )
    if kept:
        out.append(
            Finding(
                "ids_unusable",
                "warning",
                f"rows with no usable correlation or stream id were kept ({_described(kept)})",
                fix,
            )
        )
    return out


def _described(items: list[tuple[UnusableIds, str]]) -> str:
    """``TABLE.column`` of each, how many of its rows and what became of them."""
    parts = []
    for u, what in items[:LISTED]:
        if u.absent:
            parts.append(f"{u.table} has no {u.column} column: all {u.rows:,} rows, {what}")
        else:
            parts.append(
                f"{u.table}.{u.column} is NULL, not an integer or out of range in "
                f"{u.unusable:,} of {u.rows:,} rows, {what}"
            )
    more = f"; {len(items) - LISTED} more columns" if len(items) > LISTED else ""
    return "; ".join(parts) + more


def _listed(items: list[int]) -> str:
    """The first ``LISTED`` of ``items``, and how many more."""
    shown = ", ".join(map(str, items[:LISTED]))
    return shown + (f" and {len(items) - LISTED:,} more" if len(items) > LISTED else "")


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line[:120]
