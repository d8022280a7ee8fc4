"""The event tables: what ran on the GPU (kernels, copies, memsets, graph replays), the CUDA
runtime and driver calls, the OS-runtime calls, nsys's own overhead, thread scheduling and
nsys's diagnostics, each as a ``Table`` with the documented columns (empty where the export
lacks the table). Each is a function of the open ``Trace``, which offers it as a method
(``trace.kernels()``); the rows are read by ``intervals``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

import numpy as np

from nsysprobe.common.table import Table, concat
from nsysprobe.errors import TraceError
from nsysprobe.trace.intervals import intervals
from nsysprobe.trace.values import NO_ID, as_text, int_expr

# The tables whose presence tells an Nsight Systems export (``Trace`` refuses a file with none
# of them and no ``StringIds``).
EVENT_TABLES = frozenset(
    {
        "CUPTI_ACTIVITY_KIND_KERNEL",
        "CUPTI_ACTIVITY_KIND_MEMCPY",
        "CUPTI_ACTIVITY_KIND_RUNTIME",
        "NVTX_EVENTS",
        "OSRT_API",
    }
)


# The event tables read beside the NVTX ranges (``analyses.events.Events.load``).
READ_BESIDE_NVTX = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_DRIVER",
    "OSRT_API",
    "PROFILER_OVERHEAD",
)


def kernels(trace) -> Table:
    """Columns: start, end, deviceId, streamId, correlationId, globalPid, nameId."""
    return _gpu_ops(
        trace,
        "CUPTI_ACTIVITY_KIND_KERNEL",
        ["nameId"],
        aliases={"nameId": ("shortName", "demangledName")},
    )


def memcpy(trace) -> Table:
    """Columns: start, end, deviceId, streamId, correlationId, globalPid, bytes, copyKind,
    srcKind, dstKind."""
    return _gpu_ops(
        trace, "CUPTI_ACTIVITY_KIND_MEMCPY", ["bytes", "copyKind", "srcKind", "dstKind"]
    )


def memset(trace) -> Table:
    """Columns: start, end, deviceId, streamId, correlationId, globalPid, bytes, memKind."""
    return _gpu_ops(trace, "CUPTI_ACTIVITY_KIND_MEMSET", ["bytes", "memKind"])


def _gpu_ops(
    trace, table: str, extra: list[str], aliases: dict[str, Iterable[str]] | None = None
) -> Table:
    cols = ["deviceId", "streamId", "correlationId", "globalPid", *extra]
    return intervals(
        trace, table, cols, aliases={"globalPid": ("globalPid", "processId"), **(aliases or {})}
    )


def runtime(trace) -> Table:
    """CUDA runtime and driver API calls. Columns: start, end, globalTid, correlationId,
    nameId."""
    frames = [
        intervals(trace, t, ["globalTid", "correlationId", "nameId"])
        for t in ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER")
        if t in trace.tables
    ]
    if len(frames) == 1:
        return frames[0]
    if not frames:
        return intervals(
            trace, "CUPTI_ACTIVITY_KIND_RUNTIME", ["globalTid", "correlationId", "nameId"]
        )
    return concat(frames)


def osrt(trace) -> Table:
    """OS-runtime calls. Columns: start, end, globalTid, nameId."""
    return intervals(trace, "OSRT_API", ["globalTid", "nameId"])


def profiler_overhead(trace) -> Table:
    """nsys's own overhead on the profiled threads (buffer flushes, CUPTI
    instrumentation). Columns: start, end, globalTid."""
    cols = ["globalTid"]
    return _optional(cols, lambda: intervals(trace, "PROFILER_OVERHEAD", cols))


def graph_launches(trace) -> Table:
    """CUDA graph replays recorded whole (``--cuda-graph-trace=graph``, nsys's default):
    one row per replay and no kernel rows for its nodes. Columns: start, end, deviceId,
    streamId, correlationId, globalPid."""
    cols = ["deviceId", "streamId", "correlationId", "globalPid"]
    return _optional(cols, lambda: _gpu_ops(trace, "CUPTI_ACTIVITY_KIND_GRAPH_TRACE", []))


def _optional(cols: list[str], read) -> Table:
    """A table the analyses can do without: one that cannot be read is left out (empty)
    instead of failing the report."""
    try:
        return read()
    except TraceError:
        return Table.empty(["start", "end", *cols])


def diagnostics(trace, like: Iterable[str]) -> list[str]:
    """Texts of ``DIAGNOSTIC_EVENT`` rows matching any of the SQL ``LIKE`` patterns
    (bound as parameters), at most 100."""
    table = "DIAGNOSTIC_EVENT"
    patterns = list(like)
    if table not in trace.tables or "text" not in trace.columns(table) or not patterns:
        return []
    cond = " OR ".join("text LIKE ?" for _ in patterns)
    rows = trace._fetch(table, f"SELECT text FROM {table} WHERE {cond} LIMIT 100", patterns)
    return [as_text(t) for (t,) in rows if t is not None]


def sched_events(trace) -> Table:
    """Thread scheduling events from ``--cpuctxsw``. Columns: start, cpu, isSchedIn,
    globalTid (all int64)."""
    cols = ["start", "cpu", "isSchedIn", "globalTid"]
    if "SCHED_EVENTS" not in trace.tables:
        return Table.empty(cols)
    exprs = ", ".join(int_expr(c) for c in cols)
    present = set(trace.columns("SCHED_EVENTS"))
    if not set(cols) <= present:
        return Table.empty(cols)
    try:
        cur = trace._db.execute(
            f'SELECT {exprs} FROM SCHED_EVENTS WHERE typeof("start") = \'integer\' ORDER BY "start"'
        )
        records = np.fromiter(cur, dtype=np.dtype([(c, np.int64) for c in cols]))
    except (sqlite3.DatabaseError, OverflowError, ValueError) as exc:
        raise TraceError(trace._read_failed("SCHED_EVENTS", exc)) from exc
    out = Table({c: records[c] for c in cols})
    tids = out["globalTid"]
    tids[tids < 0] = NO_ID
    trace._note_ids("SCHED_EVENTS", "globalTid", tids, absent=False)
    return out
