"""Build small Nsight Systems-shaped SQLite exports for tests.

The tables and columns follow real exports of each schema (see ../shared/NSYS_FACTS.md and
the traces in ../shared/traces/): ``2020.3`` has no metadata and no enum tables and keeps
NVTX text inline; ``2022.4`` has ``EXPORT_META_DATA``; ``2023.4`` and later have
``META_DATA_EXPORT``/``META_DATA_CAPTURE`` and NVTX names in ``textId``. Tables left empty are
not created, as nsys's lazy export does.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

VM = 1 << 48  # real exports set a hardware/VM id above the pid bits
PID = 4242
MAIN_TID = 4242
WORKER_TID = 4250

VERSIONS = {
    "2020.3": None,
    "2022.4": ("EXPORT_META_DATA", "2022.4.2.1", "3.0.0"),
    "2023.4": ("META_DATA_EXPORT", "2023.4.4.54", "3.7.2"),
    "2026.2": ("META_DATA_EXPORT", "2026.2.1.210", "3.25.0"),
}


def gtid(pid: int = PID, tid: int = MAIN_TID) -> int:
    return VM | (pid << 24) | tid


def gpid(pid: int = PID) -> int:
    return VM | (pid << 24)


@dataclass
class Export:
    version: str = "2023.4"
    strings: dict[str, int] = field(default_factory=dict)
    tables: dict[str, list[dict]] = field(default_factory=dict)
    capture: dict[str, str] = field(default_factory=dict)
    _corr: int = 1000

    def sid(self, text: str) -> int:
        return self.strings.setdefault(text, len(self.strings) + 1)

    def row(self, table: str, **values) -> None:
        self.tables.setdefault(table, []).append(values)

    def next_corr(self) -> int:
        self._corr += 1
        return self._corr

    def api(self, start, end, name, corr=None, pid=PID, tid=MAIN_TID) -> int:
        corr = self.next_corr() if corr is None else corr
        self.row(
            "CUPTI_ACTIVITY_KIND_RUNTIME",
            start=start,
            end=end,
            eventClass=1,
            globalTid=gtid(pid, tid),
            correlationId=corr,
            nameId=self.sid(name),
            returnValue=0,
        )
        return corr

    def kernel(
        self,
        start,
        end,
        device=0,
        stream=7,
        name="sgemm",
        corr=None,
        pid=PID,
        launch_at=None,
        tid=MAIN_TID,
    ):
        """A kernel; with ``launch_at`` also the cudaLaunchKernel call (1 us long) issuing it."""
        if launch_at is not None:
            corr = self.api(
                launch_at, launch_at + 1_000, "cudaLaunchKernel_v7000", pid=pid, tid=tid
            )
        cols = {
            "start": start,
            "end": end,
            "deviceId": device,
            "contextId": 1,
            "streamId": stream,
            "correlationId": self.next_corr() if corr is None else corr,
            "globalPid": gpid(pid),
        }
        if self.version == "2020.3":
            cols.update(demangledName=self.sid(name), shortName=self.sid(name))
        else:
            cols.update(
                demangledName=self.sid(name),
                shortName=self.sid(name),
                mangledName=self.sid(name),
                gridX=1,
            )
        self.row("CUPTI_ACTIVITY_KIND_KERNEL", **cols)

    def memcpy(
        self,
        start,
        end,
        nbytes,
        copy_kind=1,
        src=0,
        dst=2,
        device=0,
        stream=7,
        api=None,
        api_span=None,
        pid=PID,
        tid=MAIN_TID,
    ):
        """A copy; with ``api`` also the API call issuing it (over ``api_span``)."""
        corr = self.next_corr()
        if api is not None:
            a0, a1 = api_span or (start, end)
            self.api(a0, a1, api, corr=corr, pid=pid, tid=tid)
        self.row(
            "CUPTI_ACTIVITY_KIND_MEMCPY",
            start=start,
            end=end,
            deviceId=device,
            contextId=1,
            streamId=stream,
            correlationId=corr,
            globalPid=gpid(pid),
            bytes=nbytes,
            copyKind=copy_kind,
            srcKind=src,
            dstKind=dst,
        )

    def memset(self, start, end, nbytes=1024, device=0, pid=PID):
        self.row(
            "CUPTI_ACTIVITY_KIND_MEMSET",
            start=start,
            end=end,
            deviceId=device,
            contextId=1,
            streamId=7,
            correlationId=self.next_corr(),
            globalPid=gpid(pid),
            value=0,
            bytes=nbytes,
            memKind=2,
        )

    def nvtx(
        self, start, end, name, tid=MAIN_TID, color=None, pid=PID, event_type=59, inline_text=None
    ):
        """A range; its name in ``textId`` (2023.4+) or ``text`` (older, or ``inline_text``)."""
        inline = self.version in ("2020.3", "2022.4") if inline_text is None else inline_text
        self.row(
            "NVTX_EVENTS",
            start=start,
            end=end,
            eventType=event_type,
            rangeId=None,
            category=None,
            color=color,
            text=name if inline else None,
            globalTid=gtid(pid, tid),
            endGlobalTid=None,
            textId=None if inline else self.sid(name),
            domainId=0,
        )

    def osrt(self, start, end, name, tid=MAIN_TID, pid=PID):
        self.row(
            "OSRT_API",
            start=start,
            end=end,
            eventClass=27,
            globalTid=gtid(pid, tid),
            nameId=self.sid(name),
            returnValue=0,
            nestingLevel=0,
            callchainId=None,
        )

    def gpu(self, bus_location: str, device: int = 0, name: str = "NVIDIA H200") -> None:
        self.row(
            "TARGET_INFO_GPU",
            vmId=0,
            id=device,
            name=name,
            busLocation=bus_location,
            cuDevice=device,
        )

    def sched(self, start: int, end: int, cpu: int, tid: int = MAIN_TID, pid: int = PID) -> None:
        """The thread ran on ``cpu`` from ``start`` to ``end`` (a sched-in and a sched-out)."""
        for t, is_in in ((start, 1), (end, 0)):
            self.row("SCHED_EVENTS", start=t, cpu=cpu, isSchedIn=is_in, globalTid=gtid(pid, tid))

    def overhead(self, start, end, name="CUPTI Buffer flush", tid=MAIN_TID, pid=PID) -> None:
        """A ``PROFILER_OVERHEAD`` row: nsys's own work on a thread of the process."""
        self.row(
            "PROFILER_OVERHEAD",
            start=start,
            end=end,
            globalTid=gtid(pid, tid),
            nameId=self.sid(name),
            returnValue=0,
        )

    def graph(
        self, start, end, device=0, stream=7, graph_id=1, launch_span=None, pid=PID, tid=MAIN_TID
    ) -> None:
        """A CUDA graph replay recorded whole (``CUPTI_ACTIVITY_KIND_GRAPH_TRACE``); with
        ``launch_span`` also the cudaGraphLaunch call issuing it."""
        corr = self.next_corr()
        if launch_span is not None:
            self.api(*launch_span, "cudaGraphLaunch_v10000", corr=corr, pid=pid, tid=tid)
        self.row(
            "CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
            start=start,
            end=end,
            deviceId=device,
            contextId=1,
            streamId=stream,
            graphId=graph_id,
            graphExecId=graph_id,
            correlationId=corr,
            globalPid=gpid(pid),
        )

    def memcpy_kind_enum(self) -> None:
        """The ``ENUM_CUDA_MEMCPY_OPER`` table real exports (2023.4 and later) carry."""
        kinds = ["UNKNOWN", "HTOD", "DTOH", "HTOA", "ATOH", "ATOA", "ATOD", "DTOA", "DTOD"]
        kinds += ["HTOH", "PTOP", "UVM_HTOD", "UVM_DTOH", "UVM_DTOD"]
        for i, k in enumerate(kinds):
            self.row("ENUM_CUDA_MEMCPY_OPER", id=i, name=f"CUDA_MEMCPY_KIND_{k}", label=k)

    def thread_name(self, name, tid=MAIN_TID, pid=PID):
        self.row("ThreadNames", nameId=self.sid(name), priority=0, globalTid=gtid(pid, tid))

    def save(self, path: Path) -> Path:
        db = sqlite3.connect(path)
        meta = VERSIONS[self.version]
        if meta is not None:
            table, product, schema = meta
            rows = [("EXPORT_PRODUCT_VERSION", product), ("EXPORT_SCHEMA_VERSION", schema)]
            db.execute(f"CREATE TABLE {table} (name TEXT, value TEXT)")
            db.executemany(f"INSERT INTO {table} VALUES (?, ?)", rows)
            db.execute(
                "CREATE TABLE ENUM_CUDA_MEM_KIND (id INTEGER PRIMARY KEY, name TEXT, label TEXT)"
            )
            db.executemany(
                "INSERT INTO ENUM_CUDA_MEM_KIND VALUES (?, ?, ?)",
                [(0, "PAGEABLE", "Pageable"), (1, "PINNED", "Pinned"), (2, "DEVICE", "Device")],
            )
        if self.capture and self.version not in ("2020.3", "2022.4"):
            db.execute("CREATE TABLE META_DATA_CAPTURE (name TEXT, value TEXT)")
            db.executemany("INSERT INTO META_DATA_CAPTURE VALUES (?, ?)", self.capture.items())
        db.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
        db.executemany(
            "INSERT INTO StringIds VALUES (?, ?)", [(i, s) for s, i in self.strings.items()]
        )
        for table, rows in self.tables.items():
            cols = list(dict.fromkeys(k for r in rows for k in r))
            db.execute(f'CREATE TABLE "{table}" ({", ".join(cols)})')
            db.executemany(
                f'INSERT INTO "{table}" VALUES ({", ".join("?" * len(cols))})',
                [tuple(r.get(c) for c in cols) for r in rows],
            )
        db.commit()
        db.close()
        return path


MS = 1_000_000


def ladder_rung(rung: str, steps: int = 6, version: str = "2023.4") -> Export:
    """A synthetic trace shaped like one rung of the data-loading ladder.

    Each step is an NVTX ``Batch i`` range with ``get batch``, ``copy batch`` and ``Compute``
    children on the main thread; 64 MB are copied host-to-device each step; compute is three
    20 ms kernels. What differs is what the articles change:

    - ``baseline``: the main thread builds the batch itself (300 ms of its own code), pageable
      copy (40 ms, blocking);
    - ``multiworker``: the main thread waits 5 ms in ``poll`` for a worker's batch, pageable
      copy 40 ms;
    - ``pinned``: pinned copy of 10 ms on the compute stream, serialized before the kernels;
    - ``pipelined``: the pinned copy of the next batch runs on stream 9 under this batch's
      kernels.
    """
    ex = Export(version=version)
    ex.capture = {"CAPTURE_EVENT_TYPE": "Cuda", "PROCESS_0:COLLECT_NVTX_TRACE": "true"}
    ex.thread_name("python")
    t = 1_000 * MS
    load = {"baseline": 300, "multiworker": 5, "pinned": 2, "pipelined": 2}[rung] * MS
    copy = {"baseline": 40, "multiworker": 40, "pinned": 10, "pipelined": 10}[rung] * MS
    api = "cudaMemcpyAsync_v3020"
    gpu_free = 0
    for i in range(steps):
        step0 = t
        ex.nvtx(t, t + load, "get batch", color=0xFF0000)
        if rung == "multiworker":
            ex.osrt(t, t + load, "poll")
        t += load
        if rung in ("baseline", "multiworker"):
            # pageable: the API call blocks until the copy is done
            ex.memcpy(t, t + copy, 64 << 20, src=0, api=api, api_span=(t, t + copy))
            ex.nvtx(t, t + copy, "copy batch", color=0xFFFF00)
            launch0, gpu0 = t + copy, t + copy
        elif rung == "pinned":
            # pinned, same stream: the call returns at once, kernels queue behind the copy
            ex.memcpy(t, t + copy, 64 << 20, src=1, api=api, api_span=(t, t + 50_000))
            ex.nvtx(t, t + 50_000, "copy batch", color=0xFFFF00)
            launch0, gpu0 = t + 50_000, t + copy
        else:
            # pipelined: the next batch copies on stream 9 under this batch's kernels, and
            # the CPU does not wait for the kernels: it loads the next batch meanwhile
            ex.nvtx(t, t + 50_000, "copy batch", color=0xFFFF00)
            launch0, gpu0 = t + 50_000, max(t + 100_000, gpu_free)
            ex.memcpy(
                gpu0 + MS,
                gpu0 + MS + copy,
                64 << 20,
                src=1,
                stream=9,
                api=api,
                api_span=(t, t + 50_000),
            )
        for k in range(3):
            ex.kernel(gpu0 + k * 20 * MS, gpu0 + (k + 1) * 20 * MS, launch_at=launch0 + k * 2_000)
        gpu_free = gpu0 + 60 * MS
        if rung == "pipelined":
            # the CPU runs one step ahead: it blocks in Compute until this step's kernels start
            end = gpu0 + MS
        else:
            end = gpu_free
            ex.api(launch0 + 10_000, end, "cudaStreamSynchronize_v3020")
        ex.nvtx(launch0, end, "Compute", color=0x008000)
        ex.nvtx(step0, end, f"Batch {i}", color=0x0000FF)
        t = end + MS // 2
    return ex
