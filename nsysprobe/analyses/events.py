"""The events every analysis reads, loaded once from a Trace, and the figures they share.

Loading reads only the integer columns the analyses use; names stay as string ids until an
analysis needs the text of a few of them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd

from nsysprobe.analyses import intervals as iv
from nsysprobe.trace.reader import Trace, pid_of, range_pattern  # noqa: F401 (re-exported)

# ``cudaLaunchKernel_v7000``, ``cudaMemcpyAsync_ptsz_v7000`` (per-thread default stream).
_API_VERSION = re.compile(r"(?:_pt(?:sz|ds))?(?:_v\d+)?$")


def api_name(raw: str) -> str:
    """``cudaMemcpyAsync_v3020`` and ``cudaMemcpyAsync_ptsz_v7000`` -> ``cudaMemcpyAsync``."""
    return _API_VERSION.sub("", raw)


def label_at(column: pd.Series, idx: np.ndarray) -> np.ndarray:
    """The labels of a categorical column at the rows ``idx``."""
    cats = np.asarray(column.cat.categories, dtype=object)
    return cats[column.cat.codes.to_numpy()[idx]] if len(column) else np.empty(0, dtype=object)


def per_category(column: pd.Series, label, dtype=object) -> np.ndarray:
    """``label(category)`` for each row of a categorical column, called once per category
    (millions of NVTX rows, a few hundred patterns)."""
    cats = column.cat.categories
    out = np.array([label(str(c)) for c in cats], dtype=dtype)
    return out[column.cat.codes.to_numpy()] if out.size else np.empty(len(column), dtype=dtype)


def per_distinct(values: np.ndarray, label, dtype=object) -> np.ndarray:
    """``label(value)`` for each of ``values`` (string ids, kind codes), called once per
    distinct value."""
    distinct, which = np.unique(np.asarray(values), return_inverse=True)
    out = np.array([label(v) for v in distinct.tolist()], dtype=dtype)
    return out[which.ravel()] if out.size else np.empty(0, dtype=dtype)


@dataclass
class Events:
    trace: Trace
    kernels: pd.DataFrame
    memcpy: pd.DataFrame
    memset: pd.DataFrame
    runtime: pd.DataFrame
    osrt: pd.DataFrame
    nvtx: pd.DataFrame
    graphs: pd.DataFrame  # CUDA graph replays recorded whole: busy time with no kernel rows
    overhead: pd.DataFrame  # nsys's own overhead on the profiled threads
    dropped: dict[str, int] = field(default_factory=dict)

    @classmethod
    def load(cls, trace: Trace) -> Events:
        frames = {
            "kernels": trace.kernels(),
            "memcpy": trace.memcpy(),
            "memset": trace.memset(),
            "runtime": trace.runtime(),
            "osrt": trace.osrt(),
            "nvtx": trace.nvtx_ranges(),
            "graphs": trace.graph_launches(),
            "overhead": trace.profiler_overhead(),
        }
        dropped = {k: int(v.attrs.get("dropped", 0)) for k, v in frames.items()}
        return cls(trace=trace, dropped={k: v for k, v in dropped.items() if v}, **frames)

    def for_process(self, pid: int) -> Events:
        """The events of process ``pid``: its GPU work (``globalPid``), its CUDA API calls,
        OS-runtime calls and NVTX ranges (``globalTid``). Calls made by other processes (a
        rank's DataLoader workers included: the export records no parent process) are left
        out."""

        def own(df: pd.DataFrame, column: str) -> pd.DataFrame:
            return df[pid_of(df[column].to_numpy()) == pid].reset_index(drop=True)

        return Events(
            trace=self.trace,
            kernels=own(self.kernels, "globalPid"),
            memcpy=own(self.memcpy, "globalPid"),
            memset=own(self.memset, "globalPid"),
            runtime=own(self.runtime, "globalTid"),
            osrt=own(self.osrt, "globalTid"),
            nvtx=own(self.nvtx, "globalTid"),
            graphs=own(self.graphs, "globalPid"),
            overhead=own(self.overhead, "globalTid"),
            dropped=self.dropped,
        )

    @property
    def has_gpu_activity(self) -> bool:
        return bool(len(self.kernels) or len(self.memcpy) or len(self.memset) or len(self.graphs))

    @cached_property
    def device_ids(self) -> list[int]:
        ids = set()
        for df in (self.kernels, self.memcpy, self.memset, self.graphs):
            ids.update(pd.unique(df["deviceId"].to_numpy()).tolist())
        return sorted(int(d) for d in ids)

    @cached_property
    def _device_unions(self) -> dict[int, dict[str, iv.Intervals]]:
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
            # Busy is the union of the three unions: the same time, far fewer intervals.
            memset_u = iv.union(s["start"], s["end"])
            out[dev] = {
                "kernel": kernel_u,
                "memcpy": copy_u,
                "htod": iv.union(c["start"][htod], c["end"][htod]),
                "busy": iv.union(
                    np.concatenate([kernel_u[0], copy_u[0], memset_u[0]]),
                    np.concatenate([kernel_u[1], copy_u[1], memset_u[1]]),
                ),
            }
        return out

    def device_union(self, device_id: int, what: str) -> iv.Intervals:
        """Union of one device's ``kernel``, ``memcpy``, ``htod`` copies or all ``busy`` work."""
        return self._device_unions[device_id][what]

    @cached_property
    def busy_all(self) -> iv.Intervals:
        """Union of GPU work over every device (for per-step figures in one process)."""
        parts = [self.device_union(d, "busy") for d in self.device_ids]
        if not parts:
            return iv.union([], [])
        return iv.union(
            np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
        )

    @cached_property
    def device_pids(self) -> dict[int, set[int]]:
        """device -> the processes that ran work on it."""
        out: dict[int, set[int]] = {}
        for df in (self.kernels, self.memcpy, self.memset, self.graphs):
            if len(df):
                # One integer per (device, process) pair: pid_of takes bits 24-47.
                pairs = (df["deviceId"].to_numpy() << 24) | pid_of(df["globalPid"])
                for key in pd.unique(pairs).tolist():
                    out.setdefault(key >> 24, set()).add(key & 0xFFFFFF)
        return out

    @cached_property
    def launch_threads(self) -> dict[int, int]:
        """pid -> the thread that made the most CUDA API calls (the training thread)."""
        if not len(self.runtime):
            return {}
        tids = self.runtime["globalTid"]
        counts = tids.value_counts()
        out: dict[int, int] = {}
        for tid in counts.index:  # most calls first
            out.setdefault(int(pid_of(np.array([tid]))[0]), int(tid))
        return out

    def issuing_calls(self, pids: np.ndarray, corrs: np.ndarray) -> pd.DataFrame:
        """The CUDA API call behind each (process, correlation id): columns ``tid`` and
        ``nameId``, NaN where the call is not in the trace. Correlation ids are per process,
        so the join uses both; the runtime table is cut to the wanted ids before joining."""
        rt = self.runtime
        sub = rt[np.isin(rt["correlationId"].to_numpy(), np.unique(corrs))]
        calls = pd.DataFrame(
            {
                "pid": pid_of(sub["globalTid"]),
                "corr": sub["correlationId"].to_numpy(),
                "tid": sub["globalTid"].to_numpy(),
                "nameId": sub["nameId"].to_numpy(),
            }
        ).drop_duplicates(["pid", "corr"])
        wanted = pd.DataFrame({"pid": np.asarray(pids), "corr": np.asarray(corrs)})
        return wanted.merge(calls, on=["pid", "corr"], how="left")[["tid", "nameId"]]

    def nvtx_names(self, rows) -> list[str]:
        """The names of NVTX ranges by their ``row`` (the frame holds only their patterns)."""
        return self.trace.nvtx_names(rows)

    def nvtx_details(self, rows) -> list[tuple[str, int]]:
        """(name, ARGB color or -1) of NVTX ranges by their ``row``."""
        return self.trace.nvtx_details(rows)

    def name_of(self, string_id: int) -> str:
        return self.trace.strings.get(int(string_id), "<unknown>")

    @cached_property
    def thread_names(self) -> dict[int, str]:
        return self.trace.thread_names()

    def thread_label(self, global_tid: int) -> str:
        if global_tid < 0:
            return "no thread known (no CUDA API calls traced)"
        tid = int(global_tid) & 0xFFFFFF
        pid = (int(global_tid) >> 24) & 0xFFFFFF
        name = self.thread_names.get(int(global_tid))
        return f"{name} ({pid}/{tid})" if name else f"thread {pid}/{tid}"


def _on_device(df: pd.DataFrame, device_id: int) -> dict[str, np.ndarray]:
    """The ``start``, ``end`` and ``copyKind`` arrays of one device's rows (no copy when every
    row is on that device, as in a one-GPU trace)."""
    on = df["deviceId"].to_numpy() == device_id
    cols = [c for c in ("start", "end", "copyKind") if c in df]
    if on.all():
        return {c: df[c].to_numpy() for c in cols}
    return {c: df[c].to_numpy()[on] for c in cols}
