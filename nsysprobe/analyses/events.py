"""The events every analysis reads, loaded once from a Trace, and the figures they share.

Loading reads only the integer columns the analyses use, and with them the trace's small
tables and facts (``Lookups``: labels, thread and process names, GPUs, what was captured), so
no analysis runs SQL. Names of NVTX ranges and kernels stay as string ids until an analysis
needs the text of a few of them (``nvtx_names``, ``name_of``): the one open Trace gives them.
A report holding several processes is loaded once; ``for_process`` splits it.

A row whose process, thread or GPU id is unusable (``values.ID_BOUNDS``: absent, NULL, not an
integer, out of range) belongs to no process, thread or GPU: it is left out (``left_out``)
rather than given to a made-up one. A row with no usable correlation or stream id is kept;
its correlation joins no other row (``NO_CALL``). The capture-health analysis names each
table and column and how many rows.

The helpers the analyses share over these tables' rows (a thread's calls, top-level ranges,
labels per category, grouping in blocks) are in ``nsysprobe.analyses.rows``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from nsysprobe.analyses import intervals as iv
from nsysprobe.analyses.rows import columns_where, top_level
from nsysprobe.common.heap import keep_freed_arrays
from nsysprobe.common.table import Table, by_count, distinct
from nsysprobe.trace.metadata import GpuInfo
from nsysprobe.trace.reader import Trace, UnusableIds
from nsysprobe.trace.sampling import PythonSamples
from nsysprobe.trace.schema import DIAGNOSTIC_PATTERNS
from nsysprobe.trace.values import NO_ID, pid_of

# Devices analyzed at most (the busiest): one machine's report holds a few to 16 GPUs, and
# every per-device figure, account and table grows with them.
MAX_DEVICES = 64
# The ids each table's rows are given to a GPU, process or thread by: a row with ``NO_ID`` in
# one of them is left out.
GPU_TABLES = ("kernels", "memcpy", "memset", "graphs")
_OWNER_IDS = {
    **{t: ("deviceId", "globalPid") for t in GPU_TABLES},
    **{t: ("globalTid",) for t in ("runtime", "osrt", "nvtx", "overhead")},
}
OWNER_IDS = frozenset(c for ids in _OWNER_IDS.values() for c in ids)
# A CUDA API call's correlation id when it has no usable one: not ``NO_ID``, which a GPU
# operation with no usable id holds, so that the two never join.
NO_CALL = NO_ID - 1


@dataclass(frozen=True)
class Lookups:
    """What the analyses read of a trace besides its event tables, read once with them."""

    path: Path
    nsys_version: str | None
    schema_version: str | None
    session_start_utc_ns: int | None
    requested_traces: frozenset[str] | None  # what the capture asked for, when recorded
    ignored: tuple[str, ...]  # views and virtual tables: never read
    gpus: tuple[GpuInfo, ...]
    thread_names: dict[int, str]  # globalTid -> name
    process_names: dict[int, str]  # pid -> name
    mem_kind_labels: dict[int, str]
    copy_kind_labels: dict[int, str]
    nvtx_domains: dict[tuple[int, int], str]  # (pid, domainId) -> name
    nvtx_counts: dict[int, int]  # eventType -> rows; read only when no range was
    diagnostics: tuple[str, ...]  # DIAGNOSTIC_EVENT texts of dropped events
    sched: Table | None  # --cpuctxsw scheduling events, when asked for
    unusable_ids: tuple[UnusableIds, ...]  # id columns with NO_ID in some rows, by table

    @classmethod
    def read(cls, trace: Trace, *, ranges: bool, sched: bool) -> Lookups:
        """Read after the event tables: ``unusable_ids`` counts what they held."""
        runs = None
        if sched:
            runs = trace.sched_events()
            if runs["globalTid"].size and runs["globalTid"].min() < 0:
                runs = runs.take(runs["globalTid"] >= 0)
        return cls(
            path=trace.path,
            nsys_version=trace.nsys_version,
            schema_version=trace.schema_version,
            session_start_utc_ns=trace.session_start_utc_ns,
            requested_traces=trace.requested_traces,
            ignored=tuple(trace.ignored),
            gpus=tuple(trace.gpus()),
            thread_names=trace.thread_names(),
            process_names=trace.process_names(),
            mem_kind_labels=trace.mem_kind_labels(),
            copy_kind_labels=trace.copy_kind_labels(),
            nvtx_domains=trace.nvtx_domains,
            nvtx_counts={} if ranges else trace.nvtx_counts(),
            diagnostics=tuple(trace.diagnostics(DIAGNOSTIC_PATTERNS)),
            sched=runs,
            unusable_ids=trace.unusable_ids,
        )


@dataclass
class Events:
    trace: Trace  # open while the analyses run: the text of a few names (``nvtx_names``)
    lookups: Lookups
    kernels: Table
    memcpy: Table
    memset: Table
    runtime: Table
    osrt: Table
    nvtx: Table
    graphs: Table  # CUDA graph replays recorded whole: busy time with no kernel rows
    overhead: Table  # nsys's own overhead on the profiled threads
    dropped: dict[str, int] = field(default_factory=dict)
    left_out: dict[str, int] = field(default_factory=dict)  # rows with NO_ID in an owner id
    # A view of one process (``for_process``): its report's ``shared_devices``.
    report_shared: dict[int, iv.Intervals] | None = None

    @classmethod
    def load(cls, trace: Trace, *, sched: bool = False) -> Events:
        """Every event table, then the lookups; ``sched``: the CPU scheduling events too (the
        CPU placement analysis reads them)."""
        keep_freed_arrays()  # freed arrays reused, not touched anew (``common.heap``)
        readers = {
            "kernels": trace.kernels,
            "memcpy": trace.memcpy,
            "memset": trace.memset,
            "runtime": trace.runtime,
            "osrt": trace.osrt,
            "nvtx": trace.nvtx_ranges,
            "graphs": trace.graph_launches,
            "overhead": trace.profiler_overhead,
        }
        # Read two at a time, the NVTX ranges first (their names make them the longest read
        # of a PyTorch trace's), then the largest tables: the two readers end near together.
        first = ["nvtx", "runtime", "osrt", "kernels"]
        order = [*first, *(k for k in readers if k not in first)]
        # Last, the NVTX domains' names (``Lookups``), a scan of the NVTX table: on the core
        # the other tables leave while the NVTX ranges are still read.
        got = trace.read_together(
            {**{k: readers[k] for k in order}, "domains": lambda: trace.nvtx_domains}
        )
        frames = {k: got[k] for k in readers}
        dropped = {k: int(v.dropped) for k, v in frames.items()}
        left_out = _leave_out_unowned(frames)
        ranges = bool(len(frames["nvtx"]) or dropped["nvtx"] or left_out.get("nvtx"))
        lookups = Lookups.read(trace, ranges=ranges, sched=sched)
        return cls(
            trace=trace,
            lookups=lookups,
            dropped={k: v for k, v in dropped.items() if v},
            left_out=left_out,
            **frames,
        )

    def for_process(self, pid: int) -> Events:
        """The events of process ``pid``: its GPU work (``globalPid``), its CUDA API calls,
        OS-runtime calls and NVTX ranges (``globalTid``). Calls made by other processes (a
        rank's DataLoader workers included: the export records no parent process) are left
        out."""

        def own(df: Table, column: str) -> Table:
            return df.take(pid_of(df[column]) == pid)

        return Events(
            trace=self.trace,
            lookups=self.lookups,
            kernels=own(self.kernels, "globalPid"),
            memcpy=own(self.memcpy, "globalPid"),
            memset=own(self.memset, "globalPid"),
            runtime=own(self.runtime, "globalTid"),
            osrt=own(self.osrt, "globalTid"),
            nvtx=own(self.nvtx, "globalTid"),
            graphs=own(self.graphs, "globalPid"),
            overhead=own(self.overhead, "globalTid"),
            dropped=self.dropped,
            left_out=self.left_out,
            report_shared=self.shared_devices,
        )

    @cached_property
    def shared_devices(self) -> dict[int, iv.Intervals]:
        """Per GPU that more than one process of the report ran work on, the union of all
        their work: where it was not idle, whichever process waited. A view of one process
        (``for_process``) keeps its report's: the other processes' work still held the GPU."""
        if self.report_shared is not None:
            return self.report_shared
        return {d: self.device_busy(d) for d, pids in self.device_pids.items() if len(pids) > 1}

    @property
    def has_gpu_activity(self) -> bool:
        return bool(len(self.kernels) or len(self.memcpy) or len(self.memset) or len(self.graphs))

    @cached_property
    def work_per_pair(self) -> dict[tuple[int, int], int]:
        """(device, process) -> its GPU operations (kernels, copies, memsets, graph replays)."""
        counts: dict[tuple[int, int], int] = {}
        for df in (self.kernels, self.memcpy, self.memset, self.graphs):
            if len(df):
                # One integer per (device, process) pair: pid_of takes bits 24-47.
                pairs = (df["deviceId"].astype(np.int64) << 24) | pid_of(df["globalPid"])
                keys, n = np.unique(pairs, return_counts=True)
                for key, count in zip(keys.tolist(), n.tolist()):
                    pair = (key >> 24, key & 0xFFFFFF)
                    counts[pair] = counts.get(pair, 0) + count
        return counts

    @cached_property
    def device_ids(self) -> list[int]:
        """The devices analyzed: every one with GPU work, or the ``MAX_DEVICES`` with the most
        operations (more device ids than any machine has GPUs is a damaged or crafted export;
        ``devices_left_out`` counts the others)."""
        per_device: dict[int, int] = {}
        for (dev, _), n in self.work_per_pair.items():
            per_device[dev] = per_device.get(dev, 0) + n
        busiest = sorted(per_device, key=lambda d: (-per_device[d], d))[:MAX_DEVICES]
        return sorted(int(d) for d in busiest)

    @cached_property
    def devices_left_out(self) -> int:
        return len({dev for dev, _ in self.work_per_pair}) - len(self.device_ids)

    @cached_property
    def _device_work(self) -> dict[int, dict]:
        """device -> the union of its busy time (``busy``) and the time of its kernels,
        copies and HtoD copies (``kernel``, ``memcpy``, ``htod``: ns) and of HtoD copies
        under kernels (``htod_under_kernels``). Only the busy union is kept: the kernels'
        union of a kernel-heavy capture holds nearly as many intervals as it has kernels."""
        out = {}
        for dev in self.device_ids:
            k, c, s, g = (
                _on_device(f, dev) for f in (self.kernels, self.memcpy, self.memset, self.graphs)
            )
            # A graph replay recorded whole runs kernels that have no rows of their own.
            kernel_u = iv.union(
                np.concatenate([k["start"], g["start"]]), np.concatenate([k["end"], g["end"]])
            )
            copy_u = iv.union(c["start"], c["end"])
            htod = c["copyKind"] == 1
            htod_u = iv.union(c["start"][htod], c["end"][htod])
            # Busy is the union of the three unions: the same time, far fewer intervals.
            memset_u = iv.union(s["start"], s["end"])
            out[dev] = {
                "busy": iv.union_of([kernel_u, copy_u, memset_u]),
                "kernel": iv.total(kernel_u),
                "memcpy": iv.total(copy_u),
                "htod": iv.total(htod_u),
                "htod_under_kernels": iv.intersection_total(htod_u, kernel_u),
            }
        return out

    def device_busy(self, device_id: int) -> iv.Intervals:
        """Union of one device's GPU work."""
        return self._device_work[device_id]["busy"]

    def device_time(self, device_id: int, what: str) -> int:
        """ns of one device's ``kernel`` work, ``memcpy`` copies, ``htod`` copies, or HtoD
        copies under kernels (``htod_under_kernels``), each a union."""
        return self._device_work[device_id][what]

    @cached_property
    def busy_all(self) -> iv.Intervals:
        """Union of GPU work over every device (for per-step figures in one process)."""
        return iv.union_of([self.device_busy(d) for d in self.device_ids])

    @cached_property
    def nvtx_top_level(self) -> np.ndarray:
        """Mask of the NVTX ranges that no other range on their thread encloses."""
        return top_level(self.nvtx, "globalTid")

    @cached_property
    def device_pids(self) -> dict[int, set[int]]:
        """device -> the processes that ran work on it (devices of ``device_ids``)."""
        kept = set(self.device_ids)
        out: dict[int, set[int]] = {}
        for dev, pid in self.work_per_pair:
            if dev in kept:
                out.setdefault(dev, set()).add(pid)
        return out

    @cached_property
    def gpu_pids(self) -> list[int]:
        """The processes that ran work on the devices analyzed, in order."""
        return sorted(set().union(*self.device_pids.values()))

    @cached_property
    def launch_threads(self) -> dict[int, int]:
        """pid -> the thread that made the most CUDA API calls (the training thread)."""
        if not len(self.runtime):
            return {}
        out: dict[int, int] = {}
        for tid in by_count(self.runtime["globalTid"]).tolist():  # most calls first
            out.setdefault(int(pid_of(np.array([tid]))[0]), int(tid))
        return out

    def issuing_calls(self, pids: np.ndarray, corrs: np.ndarray) -> Table:
        """The CUDA API call behind each (process, correlation id): columns ``tid`` and
        ``nameId``, NaN where the call is not in the trace (the first call of an id that
        occurs twice; see ``issuing_rows``)."""
        row = self.issuing_rows(pids, corrs)
        found = row >= 0
        out = {}
        for col in ("globalTid", "nameId"):
            values = self.runtime[col]
            if found.all():
                out[col] = values[row]
            else:  # as a left join gives them: floats, NaN where no call matched
                out[col] = np.full(row.size, np.nan)
                out[col][found] = values[row[found]]
        return Table({"tid": out["globalTid"], "nameId": out["nameId"]})

    def issuing_rows(self, pids: np.ndarray, corrs: np.ndarray) -> np.ndarray:
        """The row of ``runtime`` holding the CUDA API call behind each (process, correlation
        id), -1 where the call is not in the trace (the first call of an id that occurs
        twice). Correlation ids are per process, so the join uses both; each process's calls
        are put in order of their ids once (``_calls_by_id``), for every analysis that joins
        them."""
        pids, corrs = np.asarray(pids, dtype=np.int64), np.asarray(corrs, dtype=np.int64)
        row = np.full(pids.size, -1, dtype=np.int64)
        for pid in distinct(pids).tolist():
            sel = np.flatnonzero(pids == pid)
            row[sel] = self.issuing_rows_of(pid, corrs[sel])
        return row

    def issuing_rows_of(self, pid: int, corrs: np.ndarray) -> np.ndarray:
        """``issuing_rows`` of one process's correlation ids: no array of its pid per row
        (10 M kernels of one process: 0.3 s and 80 MB a table)."""
        if pid not in self._calls_by_id:
            return np.full(corrs.size, -1, dtype=np.int64)
        ids, rows = self._calls_by_id[pid]
        usable = corrs >= 0  # NO_ID joins nothing
        if ids.dtype != corrs.dtype:  # search in the ids' own type, not a copy of them
            info = np.iinfo(ids.dtype)
            usable &= (corrs >= info.min) & (corrs <= info.max)
        sel = None if usable.all() else np.flatnonzero(usable)
        del usable
        want = (corrs if sel is None else corrs[sel]).astype(ids.dtype, copy=False)
        at = np.minimum(np.searchsorted(ids, want), ids.size - 1)
        hit = ids[at] == want
        del want
        found = np.where(hit, at if rows is None else rows[at], -1).astype(np.int64, copy=False)
        if sel is None:
            return found
        row = np.full(corrs.size, -1, dtype=np.int64)
        row[sel] = found
        return row

    @cached_property
    def _calls_by_id(self) -> dict[int, tuple[np.ndarray, np.ndarray | None]]:
        """pid -> its CUDA API calls' correlation ids in rising order and the runtime row of
        each (stable: the first row of an id repeated first), or None for the rows when they
        are the table's own in order: one process whose ids never fall, as nsys writes them,
        is its own index and nothing is copied."""
        rt = self.runtime
        corr = rt["correlationId"]
        pids = pid_of(rt["globalTid"])
        if not pids.size:
            return {}
        if (pids == pids[0]).all():
            groups: dict[int, np.ndarray | None] = {int(pids[0]): None}
        else:
            order = np.argsort(pids, kind="stable")  # each process's rows, in table order
            cuts = np.flatnonzero(np.diff(pids[order])) + 1
            groups = {int(pids[g[0]]): g for g in np.split(order, cuts)}
            del order
        del pids
        out = {}
        for pid, rows in groups.items():
            ids = corr if rows is None else corr[rows]
            if not iv.ascending(ids):
                by = np.argsort(ids, kind="stable")
                ids, rows = ids[by], by if rows is None else rows[by]
            if rows is not None and rows.size < 1 << 31:
                rows = rows.astype(np.int32)
            out[pid] = (ids, rows)
        return out

    def nvtx_names(self, rows) -> list[str]:
        """The names of NVTX ranges by their ``row`` (the table holds only their patterns)."""
        return self.trace.nvtx_names(rows)

    def nvtx_details(self, rows) -> list[tuple[str, int]]:
        """(name, ARGB color or -1) of NVTX ranges by their ``row``."""
        return self.trace.nvtx_details(rows)

    def name_of(self, string_id: int) -> str:
        return self.trace.strings.get(int(string_id), "<unknown>")

    def python_samples(self, thread: int) -> PythonSamples:
        """The Python sampling marks of one thread (a ``globalTid``) with their stacks, read
        from the open Trace once, when an analysis asks."""
        return self.trace.python_samples(thread)

    @property
    def thread_names(self) -> dict[int, str]:
        return self.lookups.thread_names

    def thread_label(self, global_tid: int) -> str:
        if global_tid < 0:
            return "no thread known (no CUDA API calls traced)"
        tid = int(global_tid) & 0xFFFFFF
        pid = (int(global_tid) >> 24) & 0xFFFFFF
        name = self.thread_names.get(int(global_tid))
        return f"{name} ({pid}/{tid})" if name else f"thread {pid}/{tid}"


def _leave_out_unowned(frames: dict[str, Table]) -> dict[str, int]:
    """Take out of ``frames`` (in place) the rows with ``NO_ID`` in an id of ``_OWNER_IDS``,
    and give the API calls' unusable correlation ids ``NO_CALL``; the rows left out, by
    table."""
    left_out = {}
    for name, df in frames.items():
        keep = None
        for col in _OWNER_IDS[name]:
            if df[col].size and df[col].min() < 0:
                owned = df[col] >= 0
                keep = owned if keep is None else keep & owned
        if keep is not None:
            frames[name] = df.take(keep)
            left_out[name] = int(keep.size - np.count_nonzero(keep))
    corr = frames["runtime"]["correlationId"]
    if corr.size and corr.min() < 0:
        frames["runtime"]["correlationId"] = np.where(corr < 0, NO_CALL, corr).astype(corr.dtype)
    return left_out


def _on_device(df: Table, device_id: int) -> dict[str, np.ndarray]:
    """The ``start``, ``end`` and ``copyKind`` arrays of one device's rows."""
    cols = [c for c in ("start", "end", "copyKind") if c in df]
    return columns_where(df, df["deviceId"] == device_id, cols)
