"""Synthetic data-parallel jobs shaped like real DDP captures, for the communication tests.

Each rank runs the same steps, synchronously, the way DDP does:

    CPU   |load (own code)|copy|launch fwd/bwd ... |      ... optimizer launches
    GPU   |    idle       |HtoD|fwd|bwd b0|bwd b1|...      |opt|
    NCCL  |                          |AllReduce b0|AllReduce b1| ...

Bucket b's gradients are ready when its part of the backward pass ends; its all-reduce starts
on a rank at max(ready, the previous all-reduce's end) (one NCCL stream) and *ends on every
rank at once*: the latest start over the ranks plus the transfer time. The optimizer then
runs and the step ends at the same time on every rank, so every rank's step wall time is the
same whatever one rank does: a slow rank shows as longer NCCL kernels on the others.

What makes a rank slow is what makes real ranks slow: ``load`` (its input phase: fewer loader
workers), ``pageable`` (its host-to-device copy from pageable memory: slower and blocking), or
``gpu`` (its kernels take longer: a throttled GPU). ``truth`` keeps the generator's own
arrival times, so tests compute the expected lateness from the model, not from nsysprobe.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from exports import Export, gtid

US = 1_000
MS = 1_000_000
BASE_PID = 5000
NCCL_STREAM = 20
UTC_BASE = 1_780_000_000_000_000_000


@dataclass
class Job:
    ranks: int = 2
    steps: int = 12
    buckets: int = 4
    load_ns: int = 4 * MS
    copy_ns: int = 1 * MS
    forward_ns: int = 6 * MS
    backward_ns: int = 12 * MS
    allreduce_ns: int = 1_500 * US
    optimizer_ns: int = 1 * MS
    jitter: float = 0.03  # each phase varies by up to this share, per rank and step
    slow_rank: int | tuple[int, ...] | None = None  # one rank, or several
    slow: str = "load"  # "load", "pageable" or "gpu"
    slow_by: float = 0.5  # the slow phase takes (1 + slow_by) times as long
    slow_every: int = 1  # slow in every n-th step only (a periodic evaluation, a checkpoint)
    seed: int = 1


@dataclass
class Truth:
    """What the generator did, on one global clock (ns from the job's start)."""

    allreduce_start: list[list[list[int]]] = field(default_factory=list)  # [step][bucket][rank]
    allreduce_end: list[list[int]] = field(default_factory=list)  # [step][bucket]
    step_start: list[int] = field(default_factory=list)
    step_end: list[int] = field(default_factory=list)


def pid(rank: int) -> int:
    return BASE_PID + rank


def build(job: Job) -> tuple[list[Export], Truth]:
    """One Export per rank (all on the job's clock; ``save_*`` places them), and the truth."""
    rnd = random.Random(job.seed)
    exs = [Export(version="2026.2") for _ in range(job.ranks)]
    truth = Truth()
    for r, ex in enumerate(exs):
        ex.capture = {"CAPTURE_EVENT_TYPE": "Cuda", f"PROCESS_{r}:COLLECT_NVTX_TRACE": "true"}
        ex.memcpy_kind_enum()
        ex.thread_name("python3", tid=pid(r), pid=pid(r))
        # NCCL creates its NVTX domain once per process.
        ex.row(
            "NVTX_EVENTS",
            start=0,
            end=None,
            eventType=75,
            text="NCCL",
            globalTid=gtid(pid(r), pid(r)),
            domainId=1,
        )
    t = 10 * MS
    for step in range(job.steps):
        truth.step_start.append(t)
        ready = []  # [rank][bucket]
        for r, ex in enumerate(exs):
            ready.append(_forward_backward(job, ex, r, step, t, rnd))
        starts, ends = [], []
        prev_end = [0] * job.ranks
        for b in range(job.buckets):
            start = [max(ready[r][b], prev_end[r]) for r in range(job.ranks)]
            end = max(start) + _vary(job.allreduce_ns, job, rnd)
            for r, ex in enumerate(exs):
                # Ends agree to a few microseconds, as on real NVLink.
                e = end + rnd.randint(0, 5 * US)
                _allreduce(ex, r, start[r], e)
                prev_end[r] = e
            starts.append(start)
            ends.append(end)
        truth.allreduce_start.append(starts)
        truth.allreduce_end.append(ends)
        done = max(prev_end)
        step_end = done + job.optimizer_ns + 100 * US
        for r, ex in enumerate(exs):
            p = pid(r)
            # The optimizer is launched once backward returns; it runs after the all-reduces.
            launch = ready[r][-1] + 100 * US
            ex.kernel(
                prev_end[r] + 20 * US,
                prev_end[r] + 20 * US + job.optimizer_ns,
                device=r,
                name="multi_tensor_apply_kernel",
                pid=p,
                tid=p,
                launch_at=launch,
            )
            ex.api(launch + 10 * US, step_end, "cudaStreamSynchronize", pid=p, tid=p)
            ex.nvtx(truth.step_start[-1], step_end, f"step {step}", pid=p, tid=p)
        truth.step_end.append(step_end)
        t = step_end + 200 * US
    return exs, truth


def _vary(ns: int, job: Job, rnd: random.Random) -> int:
    return int(ns * (1 + rnd.uniform(-job.jitter, job.jitter)))


def _forward_backward(job: Job, ex: Export, r: int, step: int, t: int, rnd) -> list[int]:
    """The rank's input and compute from ``t``; returns when each bucket's gradients are ready."""
    p = pid(r)
    slow_ranks = job.slow_rank if isinstance(job.slow_rank, tuple) else (job.slow_rank,)
    slow = r in slow_ranks and step % job.slow_every == job.slow_every - 1
    factor = 1 + job.slow_by
    load = _vary(job.load_ns, job, rnd) * (factor if slow and job.slow == "load" else 1)
    load = int(load)
    ex.nvtx(t, t + load, "data", pid=p, tid=p)
    t += load
    pageable = slow and job.slow == "pageable"
    copy = int(_vary(job.copy_ns, job, rnd) * (factor * 3 if pageable else 1))
    if pageable:
        ex.memcpy(t, t + copy, 48 << 20, src=0, device=r, api="cudaMemcpy", pid=p, tid=p)
        t_launch, gpu = t + copy, t + copy
    else:
        ex.memcpy(
            t + 20 * US,
            t + 20 * US + copy,
            48 << 20,
            src=1,
            device=r,
            api="cudaMemcpyAsync",
            api_span=(t, t + 15 * US),
            pid=p,
            tid=p,
        )
        t_launch, gpu = t + 15 * US, t + 20 * US + copy
    gpu_factor = factor if slow and job.slow == "gpu" else 1
    # Forward: one kernel; backward: one kernel per bucket, each launched ahead of the GPU.
    fwd = int(_vary(job.forward_ns, job, rnd) * gpu_factor)
    ex.kernel(gpu, gpu + fwd, device=r, name="sm90_xmma_gemm_fwd", pid=p, tid=p, launch_at=t_launch)
    gpu += fwd
    ready = []
    for b in range(job.buckets):
        part = int(_vary(job.backward_ns / job.buckets, job, rnd) * gpu_factor)
        ex.kernel(
            gpu,
            gpu + part,
            device=r,
            name="sm90_xmma_gemm_bwd",
            pid=p,
            tid=p,
            launch_at=t_launch + (b + 1) * 30 * US,
        )
        gpu += part
        ready.append(gpu)
    return ready


def _allreduce(ex: Export, r: int, start: int, end: int) -> None:
    """An NCCL all-reduce kernel on the NCCL stream, launched inside an ``ncclAllReduce``
    range of the NCCL domain (NCCL's own NVTX) just before it can start."""
    p = pid(r)
    launch = start - 40 * US
    ex.row(
        "NVTX_EVENTS",
        start=launch - 5 * US,
        end=launch + 5 * US,
        eventType=59,
        text="ncclAllReduce",
        globalTid=gtid(p, p),
        domainId=1,
    )
    ex.kernel(
        start,
        end,
        device=r,
        stream=NCCL_STREAM,
        name="ncclDevKernel_AllReduce_Sum_f32_RING_LL",
        pid=p,
        tid=p,
        launch_at=launch,
    )


def session_start(ex: Export, utc_ns: int) -> None:
    ex.row(
        "TARGET_INFO_SESSION_START_TIME",
        utcEpochNs=utc_ns,
        utcTime="2026-05-26T07:58:50",
        localTime="2026-05-26T07:58:50",
        systemClockNs=0,
    )


def retime(ex: Export, clock) -> None:
    """Every timestamp t of the export becomes ``clock(t)`` (another host's clock)."""
    for rows in ex.tables.values():
        for row in rows:
            for col in ("start", "end"):
                if isinstance(row.get(col), int):
                    row[col] = clock(row[col])


def shift(ex: Export, by: int) -> None:
    """Every timestamp of the export minus ``by`` (another report's own clock)."""
    retime(ex, lambda t: t - by)


def save_per_rank(
    exs: list[Export], folder: Path, *, utc: bool = True, skew_ns: dict[int, int] | None = None
) -> list[Path]:
    """One report per rank, as ``nsys profile -o rank%q{RANK}`` writes them: each on its own
    clock (its session started at a different moment), with the session start in UTC when
    ``utc``; ``skew_ns`` makes a rank's recorded session start wrong by that much (hosts whose
    clocks disagree)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for r, ex in enumerate(exs):
        origin = 3 * MS + r * 1_234_567  # the job's clock time at which its session started
        shift(ex, origin)
        if utc:
            session_start(ex, UTC_BASE + origin + (skew_ns or {}).get(r, 0))
        paths.append(ex.save(folder / f"rank{r}.sqlite"))
    return paths


def save_one_report(exs: list[Export], path: Path) -> Path:
    """Every rank as a process of one report (``nsys profile torchrun ...``)."""
    whole = Export(version="2026.2")
    for ex in exs:
        for text in ex.strings:
            whole.sid(text)
    for ex in exs:
        remap = {i: whole.sid(text) for text, i in ex.strings.items()}
        for table, rows in ex.tables.items():
            for row in rows:
                row = dict(row)
                for col in ("nameId", "shortName", "demangledName", "mangledName", "textId"):
                    if isinstance(row.get(col), int):
                        row[col] = remap[row[col]]
                whole.row(table, **row)
        whole.capture.update(ex.capture)
    session_start(whole, UTC_BASE)
    # ENUM rows come once per export.
    whole.tables["ENUM_CUDA_MEMCPY_OPER"] = exs[0].tables["ENUM_CUDA_MEMCPY_OPER"]
    return whole.save(path)
