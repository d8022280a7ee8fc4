"""Evidence -> ranked recommendations, each with its reason, evidence and expected gain.

The ids are stable, so scripts can rely on them:

    multiprocess_loading  batches are produced in (or awaited by) the training thread while the
                          GPU idles: DataLoader worker processes (num_workers > 0)
    pinned_memory         host-to-device copies from pageable memory: pin_memory=True and
                          .to(device, non_blocking=True)
    stream_pipelining     pinned copies serialized with compute: a separate copy stream or a
                          CUDA prefetcher so batch N+1 copies while batch N computes
    numa_binding          training or loader threads ran on a NUMA node other than the GPU's
    host_sync             explicit or implicit synchronizations leave the GPU idle after them
    launch_overhead       the GPU waits on the CPU's kernel launches: CUDA graphs, torch.compile
    gpu_bound             no input bottleneck left: the next gains are in compute
    capture_incomplete    the trace lacks what a diagnosis needs: fix the capture first

Each gain is the time the fix would save as a share of the measured time (the steps' wall
time when there is a step range, else the GPU span), with the assumptions written into its
evidence. Recommendations are ordered by that gain; ``gpu_bound`` is given, first, only when
no input-side fix would save at least ``MIN_GAIN_RATIO``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from nsysprobe.analyses.cpu_placement import CpuPlacementResult
from nsysprobe.analyses.gaps import GapsResult
from nsysprobe.analyses.health import Finding
from nsysprobe.analyses.overlap import OverlapResult
from nsysprobe.analyses.steps import StepsResult
from nsysprobe.analyses.transfers import TransfersResult

MIN_GAIN_RATIO = 0.03
# With no pinned copy in the trace to measure, pinned copies are assumed to run at least this
# many times faster than the pageable ones seen (pageable copies stage through a bounce buffer).
PINNED_SPEEDUP_ASSUMED = 2.0
# Binding a fully remote training process and its loaders to the GPU's node took the second
# source article's 8xA100 job from 1.04 to 1.24 steps/s: 16 % less time per step. Without a
# way to measure the remote penalty in one trace, the gain is that figure scaled by the share
# of run time spent off the GPU's node.
NUMA_TIME_SAVED_WHEN_REMOTE = 1 - 1.04 / 1.24

_LOADING = re.compile(r"get|load|fetch|next|data|batch|input|read|decode|augment|sample", re.I)
_COPYING = re.compile(r"copy|h2d|htod|transfer|to_device|to device|upload", re.I)


@dataclass(frozen=True)
class Recommendation:
    id: str
    title: str
    reason: str
    expected_gain_ratio: float  # share of the measured time the fix would save, in [0, 1]
    saved_ns: int
    advice: str
    evidence: dict[str, float | int | str] = field(default_factory=dict)
    thresholds: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Evidence:
    """What the diagnosis reads; each analysis may be missing (None)."""

    gaps: GapsResult | None
    transfers: TransfersResult | None
    overlap: OverlapResult | None
    steps: StepsResult | None
    placement: CpuPlacementResult | None
    health: tuple[Finding, ...]
    loader_processes: int  # processes other than the GPU processes that ran traced work


def measured_ns(ev: Evidence) -> int:
    if ev.steps is not None and ev.steps.count:
        return sum(r.wall_ns for r in ev.steps.rows)
    if ev.gaps is not None and ev.gaps.devices:
        return max(d.span_ns for d in ev.gaps.devices)
    return 0


def is_loading_range(name: str | None) -> bool:
    return bool(name) and bool(_LOADING.search(name)) and not _COPYING.search(name)


def diagnose(ev: Evidence) -> tuple[Recommendation, ...]:
    base = measured_ns(ev)
    recs: list[Recommendation] = []
    health_ids = {f.id for f in ev.health}
    blocking = health_ids & {"capture_not_started", "no_gpu_activity"}
    if blocking or "nvtx_missing" in health_ids:
        recs.append(_capture_incomplete(ev, bool(blocking)))
    if blocking or base <= 0:
        return tuple(recs)

    for rule in (_loading, _pinned, _pipelining, _numa, _host_sync, _launch):
        rec = rule(ev, base)
        if rec is not None and rec.saved_ns > 0:
            recs.append(rec)
    recs.sort(key=lambda r: -r.saved_ns)
    top_gain = max((r.expected_gain_ratio for r in recs if r.id != "capture_incomplete"), default=0)
    if top_gain < MIN_GAIN_RATIO:
        first = [r for r in recs if r.id == "capture_incomplete"]
        rest = [r for r in recs if r.id != "capture_incomplete"]
        recs = [*first, _gpu_bound(ev, top_gain), *rest]
    return tuple(recs)


def _ratio(ns: float, base: int) -> float:
    return max(0.0, min(1.0, ns / base)) if base else 0.0


def _capture_incomplete(ev: Evidence, blocking: bool) -> Recommendation:
    problems = [f for f in ev.health if f.severity == "warning"]
    return Recommendation(
        id="capture_incomplete",
        title="Fix the capture first" if blocking else "Complete the capture",
        reason="; ".join(f.message for f in problems),
        expected_gain_ratio=0.0,
        saved_ns=0,
        advice="; ".join(f.fix for f in problems),
        evidence={"findings": ", ".join(f.id for f in problems)},
    )


def _loading(ev: Evidence, base: int) -> Recommendation | None:
    if ev.gaps is None:
        return None
    in_process = waiting = 0
    for c in ev.gaps.by_cause:
        if not is_loading_range(c.range):
            continue
        if c.state in ("cpu", "os_call"):
            in_process += c.idle_ns
        elif c.state == "os_wait":
            waiting += c.idle_ns
    saved = in_process + waiting
    if not saved:
        return None
    if in_process >= waiting:
        reason = (
            f"the GPU sat idle {saved / 1e6:.1f} ms ({_ratio(saved, base):.0%} of the time) "
            f"while the training thread produced batches itself"
        )
        advice = (
            "load batches in DataLoader worker processes: DataLoader(..., num_workers=N) with N "
            "up to the CPU cores per GPU, persistent_workers=True"
        )
    else:
        reason = (
            f"the GPU sat idle {saved / 1e6:.1f} ms ({_ratio(saved, base):.0%} of the time) "
            f"while the training thread waited for batches from {ev.loader_processes} loader "
            f"process(es)"
        )
        advice = (
            "the workers cannot keep up: raise num_workers, prefetch_factor, or make "
            "per-sample work cheaper (decode once, move augmentation to the GPU)"
        )
    return Recommendation(
        id="multiprocess_loading",
        title="Load batches in worker processes",
        reason=reason,
        expected_gain_ratio=_ratio(saved, base),
        saved_ns=int(saved),
        advice=advice,
        evidence={
            "idle_while_loading_in_process_ns": int(in_process),
            "idle_while_waiting_for_loader_ns": int(waiting),
            "loader_processes": ev.loader_processes,
            "measured_ns": base,
        },
        thresholds={"min_gap_ns": ev.gaps.min_gap_ns},
    )


def _pinned(ev: Evidence, base: int) -> Recommendation | None:
    t = ev.transfers
    if t is None or not t.pageable_htod_count:
        return None
    pageable_gbps = t.pageable_htod_bytes / t.pageable_htod_ns if t.pageable_htod_ns else 0.0
    if t.pinned_htod_gbps:
        pinned_gbps, source = t.pinned_htod_gbps, "measured on pinned copies in this trace"
    else:
        pinned_gbps = pageable_gbps * PINNED_SPEEDUP_ASSUMED
        source = f"assumed {PINNED_SPEEDUP_ASSUMED:g}x the pageable rate"
    pinned_gbps = max(pinned_gbps, pageable_gbps)
    pinned_ns = t.pageable_htod_bytes / pinned_gbps if pinned_gbps else t.pageable_htod_ns
    # Pinned copies are also asynchronous: the copy that remains can overlap with compute
    # once it is issued with non_blocking=True, so the copy time left is an upper bound.
    saved = t.pageable_htod_ns - pinned_ns
    return Recommendation(
        id="pinned_memory",
        title="Pin host memory and copy with non_blocking=True",
        reason=(
            f"{t.pageable_htod_count} host-to-device copies ({t.pageable_htod_bytes / 1e9:.2f} "
            f"GB) came from pageable memory at {pageable_gbps:.1f} GB/s, taking "
            f"{t.pageable_htod_ns / 1e6:.1f} ms and blocking the training thread"
        ),
        expected_gain_ratio=_ratio(saved, base),
        saved_ns=int(saved),
        advice=(
            "DataLoader(..., pin_memory=True) and batch.to(device, non_blocking=True); pinned "
            "copies run faster and no longer block the CPU"
        ),
        evidence={
            "pageable_htod_count": t.pageable_htod_count,
            "pageable_htod_bytes": t.pageable_htod_bytes,
            "pageable_htod_ns": t.pageable_htod_ns,
            "pageable_gbps": round(pageable_gbps, 3),
            "pinned_gbps": round(pinned_gbps, 3),
            "pinned_gbps_source": source,
            "measured_ns": base,
        },
    )


def _pipelining(ev: Evidence, base: int) -> Recommendation | None:
    o, t = ev.overlap, ev.transfers
    if o is None or not o.htod_ns:
        return None
    if t is not None and t.pageable_htod_count and t.pageable_htod_ns >= 0.5 * o.htod_ns:
        return None  # pageable copies cannot overlap: pinning comes first
    saved = o.exposed_ns
    return Recommendation(
        id="stream_pipelining",
        title="Copy the next batch while this one computes",
        reason=(
            f"{o.exposed_ns / 1e6:.1f} ms of host-to-device copy time ran with no kernel "
            f"running ({1 - o.overlap_ratio:.0%} of copy time exposed)"
        ),
        expected_gain_ratio=_ratio(saved, base),
        saved_ns=int(saved),
        advice=(
            "issue copies on a separate torch.cuda.Stream and make the compute stream "
            "wait_stream() on it, or wrap the loader in a CUDA prefetcher that copies batch N+1 "
            "while batch N computes"
        ),
        evidence={
            "htod_ns": o.htod_ns,
            "overlapped_ns": o.overlapped_ns,
            "exposed_ns": o.exposed_ns,
            "overlap_ratio": round(o.overlap_ratio, 4),
            "measured_ns": base,
        },
    )


def _numa(ev: Evidence, base: int) -> Recommendation | None:
    p = ev.placement
    if p is None or p.numa_nodes <= 1 or p.gpu_node is None:
        return None
    off = [
        r
        for r in p.roles
        if r.role in ("training thread", "loader processes") and r.verdict in ("remote", "split")
    ]
    if not off:
        return None
    run = sum(r.run_ns for r in off)
    remote = sum(r.run_ns * (1 - (r.gpu_node_ratio or 0.0)) for r in off)
    remote_ratio = remote / run if run else 0.0
    saved = base * NUMA_TIME_SAVED_WHEN_REMOTE * remote_ratio
    where = "; ".join(
        f"{r.role} {1 - (r.gpu_node_ratio or 0):.0%} off node {p.gpu_node} "
        f"(ran on nodes {', '.join(str(n.node) for n in r.nodes)})"
        for r in off
    )
    return Recommendation(
        id="numa_binding",
        title="Bind the training process and its loaders to the GPU's NUMA node",
        reason=f"GPU {p.gpu_bus_id} is on NUMA node {p.gpu_node}, but the {where}",
        expected_gain_ratio=_ratio(saved, base),
        saved_ns=int(saved),
        advice=(
            f"nsysprobe launch --nproc-per-node N --numa node -- python train.py, and "
            f"DataLoader(worker_init_fn=nsysprobe.numa.NumaWorkerInit(binding)) so workers "
            f"stay on node {p.gpu_node}"
        ),
        evidence={
            "gpu_node": p.gpu_node,
            "off_node_ratio": round(remote_ratio, 4),
            "assumed_time_saved_when_fully_remote": round(NUMA_TIME_SAVED_WHEN_REMOTE, 4),
            "measured_ns": base,
        },
    )


def _state_ns(ev: Evidence, state: str) -> int:
    if ev.gaps is None:
        return 0
    return sum(c.idle_ns for c in ev.gaps.by_cause if c.state == state)


def _host_sync(ev: Evidence, base: int) -> Recommendation | None:
    saved = _state_ns(ev, "cuda_sync")
    if not saved:
        return None
    return Recommendation(
        id="host_sync",
        title="Remove synchronizations from the step",
        reason=(
            f"the GPU sat idle {saved / 1e6:.1f} ms while the training thread was inside "
            f"synchronizing CUDA calls"
        ),
        expected_gain_ratio=_ratio(saved, base),
        saved_ns=int(saved),
        advice=(
            "avoid .item(), .cpu(), print(tensor) and torch.cuda.synchronize() inside the step; "
            "log losses every N steps; torch.cuda.set_sync_debug_mode('warn') finds them"
        ),
        evidence={"idle_in_sync_ns": int(saved), "measured_ns": base},
        thresholds={"min_gap_ns": ev.gaps.min_gap_ns} if ev.gaps else {},
    )


def _launch(ev: Evidence, base: int) -> Recommendation | None:
    saved = _state_ns(ev, "cuda_launch")
    if not saved:
        return None
    return Recommendation(
        id="launch_overhead",
        title="Launch fewer, larger kernels",
        reason=(
            f"the GPU sat idle {saved / 1e6:.1f} ms while the training thread was launching "
            f"kernels: the GPU outruns the CPU's launches"
        ),
        expected_gain_ratio=_ratio(saved, base),
        saved_ns=int(saved),
        advice="capture the step in a CUDA graph or use torch.compile(mode='reduce-overhead')",
        evidence={"idle_in_launch_ns": int(saved), "measured_ns": base},
        thresholds={"min_gap_ns": ev.gaps.min_gap_ns} if ev.gaps else {},
    )


def _gpu_bound(ev: Evidence, top_gain: float) -> Recommendation:
    busy = ev.steps.gpu_busy_ratio if ev.steps is not None else None
    if busy is None and ev.gaps is not None and ev.gaps.devices:
        busy = max(d.busy_ratio for d in ev.gaps.devices)
    busy = busy or 0.0
    return Recommendation(
        id="gpu_bound",
        title="The GPU is fed: optimize compute next",
        reason=(
            f"the GPU was busy {busy:.0%} of the measured time and no input-side fix would "
            f"save {MIN_GAIN_RATIO:.0%} or more (largest: {top_gain:.1%})"
        ),
        expected_gain_ratio=0.0,
        saved_ns=0,
        advice=(
            "profile the kernels (Nsight Compute), use mixed precision (torch.autocast), "
            "channels_last, torch.compile, or a larger batch"
        ),
        evidence={"gpu_busy_ratio": round(busy, 4), "largest_input_gain_ratio": round(top_gain, 4)},
        thresholds={"min_gain_ratio": MIN_GAIN_RATIO},
    )
