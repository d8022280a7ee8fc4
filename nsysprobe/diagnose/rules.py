"""The step account -> ranked recommendations, each with its reason, evidence and gain.

Each rule reads buckets of the step account (``nsysprobe/analyses/account.py``) of the
report's main process and GPU, and no two rules read the same bucket, so the gains (each the
time of its buckets, or the part of it the fix would save) never add up to more than the
time measured. The ids are stable, so scripts can rely on them:

    multiprocess_loading   idle while the training thread produced batches itself
                           (``loading``) or waited for loader workers (``loader_wait``)
    pinned_memory          host-to-device copies from pageable memory (their exposed copy
                           time, and the idle while the thread staged them)
    stream_pipelining      pinned host-to-device copies with no kernel running: copy batch
                           N+1 on a side stream while batch N computes
    device_to_host         large device-to-host read-backs that drain the GPU, with the
                           host work after them, and the exposed device-to-host copy time
    host_sync              synchronizations (and small read-backs such as ``.item()``) that
                           drain the GPU, with the host work after them
    allocator_churn        cudaMalloc/cudaFree in the steady state (``empty_cache()``,
                           changing shapes) and the host work after a draining free
    launch_overhead        idle between launches: each launch costs more than its kernel
    cpu_overhead           the training thread's own code while the GPU idles, by NVTX range
    os_runtime_stall       the training thread inside OS calls (munmap, ...) while the GPU idles
    late_rank              (a report holding every rank) this rank's NCCL kernels waited for
                           another rank that arrives last at the collectives: fix that rank
                           (its own cause is named), not the communication
    exposed_communication  NCCL work with no compute kernel running, less the part spent
                           waiting for a late rank
    warmup_in_capture      loading CUDA modules (lazy loading, JIT) inside the captured steps
    profiler_overhead      nsys's own overhead: the measurement, not the workload
    gpu_idle               idle with no canned fix (work queued but started late, other CUDA
                           calls), or idle spread over causes none of which reaches its floor
    numa_binding           training or loader threads ran on a NUMA node other than the GPU's
    gpu_bound              idle under ``GPU_BOUND_IDLE_RATIO`` of the step and no rule above
                           its floor: the next gains are in compute
    capture_incomplete     the trace lacks what a diagnosis needs: fix the capture

A rule is listed only when its gain reaches ``MIN_GAIN_RATIO`` of the measured time, so a few
small copies never lead (their time is a sliver of the step); ``pinned_memory`` also asks to
batch copies that average under ``MIN_COPY_BYTES``, and a read-back under the account's
``READBACK_MIN_BYTES`` is a synchronization (``host_sync``), not a ``device_to_host`` copy.
Recommendations are ordered by the time they save; ``gpu_bound`` comes
first when it applies. ``capture_incomplete`` leads only when there is no GPU data to
diagnose; otherwise it comes last, after the verdict the GPU data supports.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from nsysprobe.analyses.account import Account
from nsysprobe.analyses.arrivals import Arrivals, late_causes, process_label, rank_accounts
from nsysprobe.analyses.health import Finding
from nsysprobe.analyses.intervals import busy_ratio
from nsysprobe.analyses.transfers import TransfersResult

if TYPE_CHECKING:
    from nsysprobe.analyses.cpu_placement import CpuPlacementResult

MIN_GAIN_RATIO = 0.03
GPU_BOUND_IDLE_RATIO = 0.10
# NVIDIA's cuda_memcpy_sync rule leaves out host-to-device copies of 64,000 bytes or less.
MIN_COPY_BYTES = 64_000
# With no pinned copy in the trace to measure, pinned copies are assumed to run at least this
# many times faster than the pageable ones seen (pageable copies stage through a bounce buffer).
PINNED_SPEEDUP_ASSUMED = 2.0
# Binding a fully remote training process and its loaders to the GPU's node took the second
# source article's 8xA100 job from 1.04 to 1.24 steps/s: 16 % less time per step. Without a
# way to measure the remote penalty in one trace, the gain is that figure scaled by the share
# of run time spent off the GPU's node.
NUMA_TIME_SAVED_WHEN_REMOTE = 1 - 1.04 / 1.24


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
    """What the diagnosis reads; each part may be missing (None)."""

    account: Account | None
    transfers: TransfersResult | None
    placement: CpuPlacementResult | None
    health: tuple[Finding, ...]
    # A report holding every rank: all its accounts, and the ranks' arrivals at collectives.
    accounts: tuple[Account, ...] = ()
    arrivals: Arrivals | None = None


def diagnose(ev: Evidence) -> tuple[Recommendation, ...]:
    a = ev.account
    health_ids = {f.id for f in ev.health}
    blocking = bool(health_ids & {"capture_not_started", "no_gpu_activity"})
    incomplete = _capture_incomplete(ev, blocking) if _capture_problems(ev) else None
    if blocking or a is None or a.wall_ns <= 0:
        return (incomplete,) if incomplete else ()
    recs = [
        r
        for rule in RULES
        if (r := rule(ev, a)) is not None and r.expected_gain_ratio >= MIN_GAIN_RATIO
    ]
    recs.sort(key=lambda r: -r.saved_ns)
    if not recs:
        recs = [_gpu_bound(a) if a.idle_ratio < GPU_BOUND_IDLE_RATIO else _spread_idle(a)]
    if incomplete is not None:
        recs.append(incomplete)
    return tuple(recs)


def _ratio(ns: float, base: int) -> float:
    return max(0.0, min(1.0, ns / base)) if base else 0.0


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.1f} ms"


def _top(a: Account, *names: str, n: int = 3) -> str:
    details = sorted(
        (d for name in names if (b := a.bucket(name)) for d in b.details), key=lambda d: -d.ns
    )
    return ", ".join(f"{d.name} {_ms(d.ns)}" for d in details[:n]) or "none recorded"


def _evidence(a: Account, *names: str, **extra) -> dict:
    out: dict[str, float | int | str] = {
        "account": f"process {a.pid}, GPU {a.device_id}",
        "steps": a.step_count,
        "measured_ns": a.wall_ns,
        "buckets": ", ".join(names),
    }
    for name in names:
        out[f"{name}_ns"] = a.ns(name)
        b = a.bucket(name)
        out[f"{name}_median_per_step_ns"] = b.median_ns if b else 0
    out["details"] = _top(a, *names)
    out.update(extra)
    return out


def _rec(
    a: Account,
    id: str,
    title: str,
    names: tuple[str, ...],
    reason: str,
    advice: str,
    saved: float | None = None,
    **extra,
) -> Recommendation | None:
    total = sum(a.ns(n) for n in names)
    saved = total if saved is None else min(saved, total)
    if saved <= 0:
        return None
    return Recommendation(
        id=id,
        title=title,
        reason=reason,
        expected_gain_ratio=_ratio(saved, a.wall_ns),
        saved_ns=int(saved),
        advice=advice,
        evidence=_evidence(a, *names, **extra),
        thresholds={"min_gain_ratio": MIN_GAIN_RATIO},
    )


def _share(a: Account, *names: str) -> str:
    return f"{_ratio(sum(a.ns(n) for n in names), a.wall_ns):.0%}"


def _loading(ev: Evidence, a: Account) -> Recommendation | None:
    own, wait = a.ns("loading"), a.ns("loader_wait")
    names = ("loading", "loader_wait")
    idle = f"the GPU sat idle {_ms(own + wait)} ({_share(a, *names)} of the step time) while"
    if own >= wait:
        title = "Load batches in worker processes"
        reason = f"{idle} the training thread produced batches itself ({_top(a, 'loading')})"
        advice = (
            "load batches in DataLoader worker processes: DataLoader(..., num_workers=N) with N "
            "up to the CPU cores per GPU, persistent_workers=True"
        )
    else:
        title = "Load batches faster: the training thread waits for the loader"
        workers = (
            f"{a.loader_processes} loader worker process(es)"
            if a.loader_processes
            else "the loader"
        )
        reason = (
            f"{idle} the training thread waited for batches from {workers} "
            f"({_top(a, 'loader_wait')})"
        )
        advice = (
            "the workers cannot keep up: raise num_workers (and prefetch_factor), or make "
            "per-sample work cheaper (decode once, cache, move augmentation to the GPU)"
        )
    return _rec(
        a,
        "multiprocess_loading",
        title,
        names,
        reason,
        advice,
        loader_processes=a.loader_processes,
    )


PAGEABLE_HTOD = "memcpy HtoD Pageable"


def _pinned_applies(ev: Evidence, a: Account) -> bool:
    t = ev.transfers
    return bool(t is not None and t.pageable_htod_count and a.ns(PAGEABLE_HTOD))


def _pinned(ev: Evidence, a: Account) -> Recommendation | None:
    t = ev.transfers
    if not _pinned_applies(ev, a):
        return None
    bucket = PAGEABLE_HTOD
    mean_bytes = t.pageable_htod_bytes / t.pageable_htod_count
    pageable_gbps = t.pageable_htod_bytes / t.pageable_htod_ns if t.pageable_htod_ns else 0.0
    if t.pinned_htod_gbps:
        pinned_gbps, source = t.pinned_htod_gbps, "measured on pinned copies in this trace"
    else:
        pinned_gbps = pageable_gbps * PINNED_SPEEDUP_ASSUMED
        source = f"assumed {PINNED_SPEEDUP_ASSUMED:g}x the pageable rate"
    pinned_gbps = max(pinned_gbps, pageable_gbps)
    kept = pageable_gbps / pinned_gbps if pinned_gbps else 1.0
    # The exposed copy time shrinks to the pinned rate's share; the blocking goes.
    saved = a.ns(bucket) * (1 - kept) + a.ns("blocking_copy")
    small = mean_bytes < MIN_COPY_BYTES
    return _rec(
        a,
        "pinned_memory",
        "Pin host memory and copy with non_blocking=True",
        (bucket, "blocking_copy"),
        (
            f"{t.pageable_htod_count} host-to-device copies ({t.pageable_htod_bytes / 1e9:.2f} "
            f"GB, {mean_bytes / 1e6:.2f} MB each on average) came from pageable memory at "
            f"{pageable_gbps:.1f} GB/s; {_ms(a.ns(bucket))} of copy time ran with no kernel "
            f"({_share(a, bucket)} of the step time) and the thread was blocked in them"
        ),
        (
            "DataLoader(..., pin_memory=True) and batch.to(device, non_blocking=True); pinned "
            "copies run faster and no longer block the CPU"
            + (
                "; batch the small copies into one (collate on the host, one .to())"
                if small
                else ""
            )
        ),
        saved=saved,
        pageable_gbps=round(pageable_gbps, 3),
        pinned_gbps=round(pinned_gbps, 3),
        pinned_gbps_source=source,
        mean_copy_bytes=int(mean_bytes),
    )


def _pipelining(ev: Evidence, a: Account) -> Recommendation | None:
    t = ev.transfers
    bucket = "memcpy HtoD Pinned"
    if t is None or not a.ns(bucket):
        return None
    return _rec(
        a,
        "stream_pipelining",
        "Copy the next batch while this one computes",
        (bucket,),
        (
            f"{_ms(a.ns(bucket))} of pinned host-to-device copy time ran with no kernel "
            f"running ({_share(a, bucket)} of the step time): copies and compute take turns"
        ),
        (
            "issue copies on a separate torch.cuda.Stream and make the compute stream "
            "wait_stream() on it, or wrap the loader in a CUDA prefetcher that copies batch N+1 "
            "while batch N computes"
        ),
    )


def _dtoh_buckets(a: Account) -> tuple[str, ...]:
    return tuple(b.name for b in a.buckets if b.name.startswith("memcpy DtoH"))


def _device_to_host(ev: Evidence, a: Account) -> Recommendation | None:
    r = a.readbacks
    if not r.count:
        return None
    names = ("readback", *_dtoh_buckets(a))
    return _rec(
        a,
        "device_to_host",
        "Keep the work on the GPU instead of reading it back",
        names,
        (
            f"{r.count} blocking device-to-host copies ({r.median_bytes / 1e6:.1f} MB each, "
            f"median) drained the GPU, which then sat idle while the host worked on the data: "
            f"{_ms(a.ns('readback'))} idle and {_ms(sum(a.ns(n) for n in names[1:]))} of "
            f"exposed copy time ({_share(a, *names)} of the step time)"
        ),
        (
            "compute the statistic on the GPU (torch ops instead of numpy) and read back only "
            "the result, or copy with .to('cpu', non_blocking=True) into pinned memory and use "
            "it a step later, off the critical path"
        ),
        readbacks=r.count,
        readback_median_bytes=r.median_bytes,
    )


def _host_sync(ev: Evidence, a: Account) -> Recommendation | None:
    # Blocking copies that are not pageable batch copies are synchronizations too.
    names = ("sync",) if _pinned_applies(ev, a) else ("sync", "blocking_copy")
    return _rec(
        a,
        "host_sync",
        "Remove synchronizations from the step",
        names,
        (
            f"the GPU sat idle {_ms(sum(a.ns(n) for n in names))} ({_share(a, *names)} of the "
            f"step time) after synchronizing calls drained it: {_top(a, *names)}"
        ),
        (
            "avoid .item(), .cpu(), print(tensor) and torch.cuda.synchronize() inside the step; "
            "accumulate losses on the GPU and read them every N steps; make small tensors on "
            "the GPU instead of copying them from the host; "
            "torch.cuda.set_sync_debug_mode('warn') finds them"
        ),
    )


def _allocator(ev: Evidence, a: Account) -> Recommendation | None:
    return _rec(
        a,
        "allocator_churn",
        "Stop freeing and reallocating GPU memory every step",
        ("allocator",),
        (
            f"the GPU sat idle {_ms(a.ns('allocator'))} ({_share(a, 'allocator')} of the step "
            f"time) in memory allocation and release: {_top(a, 'allocator')} (cudaFree waits "
            f"for the GPU to finish)"
        ),
        (
            "drop torch.cuda.empty_cache() from the loop, keep tensor shapes static (pad or "
            "bucket variable lengths), and set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
        ),
    )


def _launch(ev: Evidence, a: Account) -> Recommendation | None:
    return _rec(
        a,
        "launch_overhead",
        "Launch fewer, larger kernels",
        ("launch",),
        (
            f"the GPU sat idle {_ms(a.ns('launch'))} ({_share(a, 'launch')} of the step time) "
            f"between kernel launches: each launch takes longer than the kernel it queues"
        ),
        (
            "capture the step in a CUDA graph (torch.cuda.graphs, "
            "torch.compile(mode='reduce-overhead')), fuse small ops (torch.compile), or use "
            "larger batches and layers"
        ),
    )


def _cpu(ev: Evidence, a: Account) -> Recommendation | None:
    b = a.bucket("cpu")
    where = b.details[0].name if b and b.details else "its code"
    return _rec(
        a,
        "cpu_overhead",
        "Move the training thread's own work off the critical path",
        ("cpu",),
        (
            f"the GPU sat idle {_ms(a.ns('cpu'))} ({_share(a, 'cpu')} of the step time) while "
            f"the training thread ran its own code, mostly in '{where}' ({_top(a, 'cpu')})"
        ),
        (
            f"make '{where}' cheaper or run it less often (every N steps, in another thread or "
            "process), or queue the next step's GPU work before it"
        ),
        range=where,
    )


def _os(ev: Evidence, a: Account) -> Recommendation | None:
    names = ("os_call", "os_wait")
    return _rec(
        a,
        "os_runtime_stall",
        "The training thread stalls in OS calls",
        names,
        (
            f"the GPU sat idle {_ms(sum(a.ns(n) for n in names))} ({_share(a, *names)} of the "
            f"step time) while the training thread was inside OS calls: {_top(a, *names)}"
        ),
        (
            "munmap/mmap: large buffers returned to the OS and mapped again each step: reuse "
            "buffers, pin once, or raise MALLOC_MMAP_THRESHOLD_/MALLOC_TRIM_THRESHOLD_; "
            "waits: find what the thread waits for in the calls listed"
        ),
    )


def _waited(ev: Evidence, a: Account) -> tuple[int, list]:
    """The main account's NCCL time spent waiting for a straggler, and the stragglers."""
    arr = ev.arrivals
    me = arr.rank(process_label(a.pid)) if arr else None
    if me is None:
        return 0, []
    late = [r for r in arr.ranks if r.verdict == "straggler" and r.label != me.label]
    return (min(me.waited_ns, a.ns("communication")) if late else 0), late


def _late_rank(ev: Evidence, a: Account) -> Recommendation | None:
    waited, late = _waited(ev, a)
    if not waited:
        return None
    worst = max(late, key=lambda r: r.held_up_ns)
    ranked = rank_accounts(ev.accounts)
    theirs = next((o for o in ranked.values() if process_label(o.pid) == worst.label), None)
    others = [o for o in ranked.values() if o is not theirs]
    causes = ()
    if theirs is not None and theirs.step_count:
        per_step = {b.name: b.total_ns / theirs.step_count for b in theirs.buckets}
        held = worst.held_up_ratio * theirs.wall_ns / theirs.step_count
        causes = late_causes(
            per_step,
            [
                {b.name: b.total_ns / o.step_count for b in o.buckets}
                for o in others
                if o.step_count
            ],
            held,
        )
    why = (
        f"{worst.label} is late: {causes[0].what} ({_ms(causes[0].ns_per_step)} per step vs the "
        f"others' {_ms(causes[0].others_ns_per_step)})"
        if causes
        else f"{worst.label}'s own account shows no bucket above the other ranks'"
    )
    return _rec(
        a,
        "late_rank",
        f"Fix the rank the others wait for: {worst.label}",
        ("communication",),
        (
            f"this rank's NCCL kernels waited {_ms(waited)} ({_ratio(waited, a.wall_ns):.0%} of "
            f"the step time) for {worst.label}, the latest at the collectives in "
            f"{worst.last_rounds} of {worst.rounds} rounds; {why}"
        ),
        (
            (f"on {worst.label}: see {causes[0].recommendation}; " if causes else "")
            + "nsysprobe analyze --ranks shows every rank's account side by side; tuning "
            "communication does not remove a wait for a late rank"
        ),
        saved=waited,
        late_rank=worst.label,
        late_cause=causes[0].recommendation if causes else "",
    )


def _communication(ev: Evidence, a: Account) -> Recommendation | None:
    waited, late = _waited(ev, a)
    each = "; ".join(
        f"{c.name} x{c.count}: {_ms(c.exposed_ns)} exposed of {_ms(c.total_ns)}"
        for c in a.collectives[:3]
    )
    wait_note = (
        f"; {_ms(waited)} of it waiting for {late[0].label} (see late_rank)" if waited else ""
    )
    return _rec(
        a,
        "exposed_communication",
        "Hide communication behind compute",
        ("communication",),
        (
            f"NCCL work ran {_ms(a.ns('communication'))} with no compute kernel running "
            f"({_share(a, 'communication')} of the step time; "
            f"{_ms(a.communication_overlapped_ns)} of {_ms(a.communication_ns)} overlapped)"
            + (f": {each}" if each else "")
            + wait_note
        ),
        (
            "DDP: overlap the all-reduce with backward (the default; keep find_unused_parameters "
            "off), tune bucket_cap_mb (larger buckets, fewer collectives), "
            "gradient_as_bucket_view=True, no_sync() for gradient-accumulation steps; FSDP: "
            "forward_prefetch/backward_prefetch=BACKWARD_PRE, limit_all_gathers; "
            "fewer, larger collectives. Part of the exposed time can be waiting for a slower "
            "rank: nsysprobe analyze on every rank's report names the rank that arrives last"
        ),
        saved=a.ns("communication") - waited,
        communication_ns=a.communication_ns,
        communication_overlapped_ns=a.communication_overlapped_ns,
        collectives=each,
        waiting_for_late_rank_ns=waited,
    )


def _warmup(ev: Evidence, a: Account) -> Recommendation | None:
    return _rec(
        a,
        "warmup_in_capture",
        "Capture steady-state steps, after warm-up",
        ("module_loading",),
        (
            f"the GPU sat idle {_ms(a.ns('module_loading'))} ({_share(a, 'module_loading')} of "
            f"the time) while CUDA loaded modules ({_top(a, 'module_loading')}): start-up work, "
            f"not the steady state"
        ),
        (
            "start the capture after a few warm-up steps (torch.cuda.profiler.start() with "
            "nsys profile --capture-range=cudaProfilerApi); CUDA_MODULE_LOADING=EAGER moves "
            "module loading to start-up"
        ),
    )


def _overhead(ev: Evidence, a: Account) -> Recommendation | None:
    return _rec(
        a,
        "profiler_overhead",
        "Much of the idle is nsys's own overhead: capture with less instrumentation",
        ("profiler_overhead",),
        (
            f"nsys's own overhead (buffer flushes, instrumentation) covers "
            f"{_ms(a.ns('profiler_overhead'))} of idle ({_share(a, 'profiler_overhead')} of the "
            f"step time): the measurement, not the workload"
        ),
        (
            "capture fewer event kinds or a shorter range (e.g. --trace=cuda,nvtx), or "
            "--flush-on-cudaprofilerstop=false; compare with unprofiled steps/s"
        ),
    )


def _other_idle(ev: Evidence, a: Account) -> Recommendation | None:
    names = ("queued", "cuda_api")
    return _rec(
        a,
        "gpu_idle",
        "The GPU idles with no canned fix",
        names,
        (
            f"the GPU sat idle {_ms(sum(a.ns(n) for n in names))} ({_share(a, *names)} of the "
            f"step time) with work already queued but started late (dependencies between "
            f"streams, cudaStreamWaitEvent, scheduling) or in other CUDA calls: "
            f"{_top(a, *names)}"
        ),
        "no canned fix: look at the streams and events around these gaps in the timeline",
    )


def _spread_idle(a: Account) -> Recommendation:
    idle = [b for b in a.buckets if b.kind == "idle"]
    return Recommendation(
        id="gpu_idle",
        title="The GPU idles, for many small reasons",
        reason=(
            f"the GPU sat idle {a.idle_ratio:.0%} of the step time, spread over several "
            f"causes, no fix for one of them saving {MIN_GAIN_RATIO:.0%}: "
            + ", ".join(f"{b.name} {b.share_ratio:.1%}" for b in idle[:4])
        ),
        expected_gain_ratio=0.0,
        saved_ns=0,
        advice="no single fix: see the step account for where the idle time goes",
        evidence=_evidence(a, *(b.name for b in idle)),
        thresholds={"min_gain_ratio": MIN_GAIN_RATIO, "gpu_bound_idle_ratio": GPU_BOUND_IDLE_RATIO},
    )


def _gpu_bound(a: Account) -> Recommendation:
    return Recommendation(
        id="gpu_bound",
        title="The GPU is fed: optimize compute next",
        reason=(
            f"the GPU was busy {busy_ratio(a.busy_ns, a.wall_ns):.0%} of the step time (idle "
            f"{a.idle_ratio:.1%}, under {GPU_BOUND_IDLE_RATIO:.0%}) and no other fix would save "
            f"{MIN_GAIN_RATIO:.0%} or more"
        ),
        expected_gain_ratio=0.0,
        saved_ns=0,
        advice=(
            "profile the kernels (Nsight Compute), use mixed precision (torch.autocast), "
            "channels_last, torch.compile, or a larger batch"
        ),
        evidence={
            "account": f"process {a.pid}, GPU {a.device_id}",
            "gpu_busy_ratio": round(busy_ratio(a.busy_ns, a.wall_ns), 4),
            "idle_ratio": round(a.idle_ratio, 4),
            "measured_ns": a.wall_ns,
        },
        thresholds={"gpu_bound_idle_ratio": GPU_BOUND_IDLE_RATIO, "min_gain_ratio": MIN_GAIN_RATIO},
    )


def _capture_problems(ev: Evidence) -> list[Finding]:
    return [f for f in ev.health if f.severity == "warning"]


def _capture_incomplete(ev: Evidence, blocking: bool) -> Recommendation:
    problems = _capture_problems(ev)
    return Recommendation(
        id="capture_incomplete",
        title="Fix the capture first" if blocking else "Complete the capture",
        reason="; ".join(f.message for f in problems),
        expected_gain_ratio=0.0,
        saved_ns=0,
        advice="; ".join(f.fix for f in problems),
        evidence={"findings": ", ".join(f.id for f in problems)},
    )


def _numa(ev: Evidence, a: Account) -> Recommendation | None:
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
    base = a.wall_ns
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


RULES = (
    _loading,
    _pinned,
    _pipelining,
    _device_to_host,
    _host_sync,
    _allocator,
    _launch,
    _cpu,
    _os,
    _late_rank,
    _communication,
    _warmup,
    _overhead,
    _other_idle,
    _numa,
)
