"""The step account -> ranked recommendations, each with its reason, evidence and gain.

Each rule reads buckets of the step account (``nsysprobe/analyses/account.py``) of the
report's main process and GPU, over its steady steps (start-up steps apart), and no two rules
read the same time: where two share a bucket they split it (what compute can hide under it,
and the rest; the idle a pattern across steps explains, ``analyses/step_patterns.py``, moved
out of the buckets that held it into one of its own), so the gains never add up to more than
the time measured. Each gain is what
its fix can remove, bounded by the trace, its assumption in the evidence: overlap hides
copies or communication only under compute (step by step, the lesser of the two), pinned
memory brings pageable copies to the pinned rate, every other fix removes at most its idle
time; no step drops below its GPU work. The ids are stable, so scripts can rely on them; each
has its page in ``pages.py`` (``nsysprobe explain ID``: thresholds, evidence, fix, example):

    multiprocess_loading   idle while the training thread produced batches itself
                           (``loading``) or waited for loader workers (``loader_wait``),
                           where the trace shows an input pipeline (``input_pipeline``); with
                           DataLoader workers born inside the capture (``step_patterns``),
                           persistent_workers=True, with the idle of the steps they were born
                           in beyond the other steps' (forks, host work) and their period
    cpu_optimizer          the same idle where the thread's own code before the upload is an
                           optimizer step on the host (named so): gradients down, a CPU step,
                           weights up
    pinned_memory          host-to-device copies from pageable memory (their exposed copy
                           time, and the idle while the thread staged them)
    stream_pipelining      pinned host-to-device copies with no kernel running, as much of
                           them as the step's compute can hide: copy batch N+1 on a side
                           stream while batch N computes
    copy_bound             the rest of those copies (and of pageable ones once pinned), more
                           than compute can hide: move fewer bytes (data kept on the GPU,
                           compressed or in lower precision; for weights streamed in, larger
                           batches, resident or quantized weights)
    device_to_host         large device-to-host read-backs that drain the GPU, with the
                           host work after them, and the exposed device-to-host copy time
    host_sync              synchronizations (and small read-backs such as ``.item()``) that
                           drain the GPU, with the host work after them
    allocator_churn        cudaMalloc/cudaFree in the steady state (``empty_cache()``,
                           changing shapes) and the host work after a draining free
    launch_overhead        idle between launches: each launch costs more than its kernel
    cpu_overhead           the training thread's own code while the GPU idles, by NVTX range
                           (with no input pipeline in the trace, its code before an upload too)
    os_runtime_stall       the training thread inside OS calls (munmap, ...) while the GPU idles
    late_rank              (a report holding every rank) this rank's NCCL kernels waited for
                           another rank that arrives last at the collectives: fix that rank
                           (its own cause is named), not the communication
    exposed_communication  NCCL work with no compute kernel running, less the part spent
                           waiting for a late rank, as much as the step's compute can hide
    communication_bound    the rest of it: fewer bytes per sample (larger batches, gradient
                           compression or bf16 gradients, no_sync() accumulation)
    autotuning             steady steps that never repeat their kernels, each with a storm of
                           device and event synchronizations (``step_patterns``: cudnn.benchmark
                           timing trial kernels for changing input shapes, with workspace
                           malloc/free): the idle those steps took beyond the other steps';
                           fixed or bucketed shapes, or benchmark off
    recompilation          steady steps, again and again, that load or compile GPU code
                           (torch.compile recompiling for new shapes, new kernels loaded): the
                           same idle; dynamic=True or mark_dynamic, bucketed shapes
    warmup_in_capture      loading CUDA modules (lazy loading, JIT) inside the captured steps
    startup_in_capture     leading steps many times longer than every step after them
                           (compilation, autotuning, lazy initialization), and GPU work before
                           the first step (or a one-time range named like start-up, without
                           steps) that spans more than a step (model construction, weight
                           upload), and trailing steps as long (a final checkpoint): counted
                           apart from the steady state every other rule reads, at their cost,
                           with the capture-range fix
    periodic_step          steps made long by an event every N steps (a checkpoint, an
                           evaluation, logging: ``windows.periodic_steps``), named by the NVTX
                           range run only in them, with its period: what those steps took
                           beyond a typical one; the gain the larger of its idle time (done
                           off the training thread) and half of it all (done half as often).
                           The other rules weigh the steps as if each were a typical one
    profiler_overhead      nsys's own overhead: the measurement, not the workload
    gpu_idle               idle with no canned fix (work queued but started late, other CUDA
                           calls), or idle spread over causes none of which reaches its floor
    numa_binding           training or loader threads ran on a NUMA node other than the GPU's
    gpu_bound              idle under ``GPU_BOUND_IDLE_RATIO`` of the step and no rule above
                           its floor: the next gains are in compute, the largest lever named
                           from the kernels (``analyses/kernels.py``: a GPU shared with
                           another process, TF32 for fp32 GEMMs, fusion, CUDA graphs, bf16,
                           FP8) with the share of kernel time behind it
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

import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from nsysprobe.analyses.account import Account, Bucket, Detail
from nsysprobe.analyses.arrivals import Arrivals, process_label, rank_accounts
from nsysprobe.analyses.health import Finding
from nsysprobe.analyses.intervals import busy_ratio
from nsysprobe.analyses.kernels import (
    FP32_LEVER_RATIO,
    FUSION_LEVER_RATIO,
    TINY_LEVER_RATIO,
    KernelsResult,
)
from nsysprobe.analyses.late_causes import late_causes
from nsysprobe.analyses.step_patterns import StepPatterns
from nsysprobe.analyses.transfers import TransfersResult
from nsysprobe.analyses.windows import PERIODIC_MIN, PERIODIC_RATIO, STARTUP_RATIO
from nsysprobe.common.units import counted

if TYPE_CHECKING:
    from nsysprobe.analyses.cpu_placement import CpuPlacementResult
    from nsysprobe.analyses.python_frames import PythonFrames

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
# What names a training input pipeline (the NVTX ranges the thread's loading ran in), and what
# rules a name out however it reads (model weights, an optimizer, start-up, checkpoints).
INPUT_WORDS = (
    r"(?i)(?<![a-z])(?:batch|data|dataset|loader|input|fetch|samples?|collate|next|read|"
    r"load|preprocess|augment|transform|tokeni[sz]e|decode_(?:image|jpeg|audio))(?![a-z])"
)
NOT_INPUT_WORDS = (
    r"(?i)weight|param|optim|adam|sgd|lamb|grad|model|init|setup|ckpt|checkpoint|save|_w#|\bw#|"
    r"next_token|logit|generat"
)
OPTIMIZER_WORDS = r"(?i)optim|adam|sgd|lamb|lion|shampoo|\bstep\b.*param"
# What names weights streamed to the GPU (the ranges their copies were issued in).
WEIGHT_WORDS = r"(?i)weight|param|offload|layer|_w#|\bw#|shard|quantiz"


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
    # The main account's kernels by class, and the lever a GPU-bound loop has.
    kernels: KernelsResult | None = None
    # Patterns across the main account's steps: kernels never repeated, workers born.
    step_patterns: StepPatterns | None = None
    # The Python function and line behind each idle bucket, from Python sampling.
    python_frames: PythonFrames | None = None


def diagnose(ev: Evidence) -> tuple[Recommendation, ...]:
    a = ev.account
    health_ids = {f.id for f in ev.health}
    blocking = bool(health_ids & {"capture_not_started", "no_gpu_activity"})
    incomplete = _capture_incomplete(ev, blocking) if _capture_problems(ev) else None
    if blocking or a is None or a.wall_ns <= 0:
        return (incomplete,) if incomplete else ()
    # The rules weigh the steps as if each were a typical one; a periodic event's excess
    # is its own rule's (``Account.periodic``).
    view = _patterns_apart(a.normal_view(), ev.step_patterns)
    recs = [
        r
        for rule in RULES
        if (r := rule(ev, view)) is not None and r.expected_gain_ratio >= MIN_GAIN_RATIO
    ]
    periodic = _periodic(a)
    if periodic is not None and periodic.expected_gain_ratio >= MIN_GAIN_RATIO:
        recs.append(periodic)
    recs.sort(key=lambda r: -r.saved_ns)
    if not recs:
        recs = [
            _gpu_bound(view, ev.kernels)
            if a.idle_ratio < GPU_BOUND_IDLE_RATIO
            else _spread_idle(view)
        ]
    startup = _startup(a)
    if startup is not None:
        recs.append(startup)
    if incomplete is not None:
        recs.append(incomplete)
    return tuple(_with_python_frames(r, ev.python_frames) for r in recs)


def _with_python_frames(r: Recommendation, frames: PythonFrames | None) -> Recommendation:
    """``r`` with the Python places behind its buckets in its evidence, and the largest of
    them in its reason (``analyses/python_frames.py``)."""
    found = frames.evidence(str(r.evidence.get("buckets", ""))) if frames else None
    if found is None:
        return r
    text, words = found
    evidence = {**r.evidence, "python_frames": text}
    return replace(r, reason=f"{r.reason}; {words}", evidence=evidence)


def _ratio(ns: float, base: int) -> float:
    return max(0.0, min(1.0, ns / base)) if base else 0.0


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.1f} ms"


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


def _names(a: Account, *buckets: str) -> list[str]:
    return [d.name for b in buckets if (bucket := a.bucket(b)) for d in bucket.details]


def input_pipeline(a: Account) -> bool:
    """Whether the trace shows a training input pipeline behind the thread's ``loading`` and
    ``loader_wait``: not when the loading, longer than the waits, ran mostly in ranges named
    for weights or an optimizer; else DataLoader worker processes; else the ranges it ran in,
    by time, mostly named for input (``INPUT_WORDS``, none of ``NOT_INPUT_WORDS``) and not
    mostly for something else; else, with neither, the step's input copy: every steady step
    uploads, from a range not named for weights or an optimizer."""
    b = a.bucket("loading")
    details = b.details if b else ()
    named = sum(d.ns for d in details)
    inputs = sum(d.ns for d in details if _input_name(d.name))
    other = sum(d.ns for d in details if _other_name(d.name))
    elsewhere = named and 2 * other >= named
    # The thread's own code before its uploads, mostly named for weights or an optimizer and
    # more than its waits for workers: not the input, workers in the report or not.
    if elsewhere and a.ns("loading") >= a.ns("loader_wait"):
        return False
    if a.loader_processes:
        return True
    if named and 2 * inputs >= named:
        return True
    if elsewhere:
        return False
    where = a.copy_ranges[0].name if a.copy_ranges else ""
    return bool(a.step_count and a.htod.steps_with_copy >= a.step_count and not _other_name(where))


def _pipeline_evidence(a: Account) -> str:
    if a.loader_processes:
        return f"{a.loader_processes} DataLoader worker processes"
    b = a.bucket("loading")
    inputs = [d.name for d in (b.details if b else ()) if _input_name(d.name)]
    if inputs:
        return "NVTX ranges named for input: " + ", ".join(inputs[:3])
    return f"an input copy in each of the {a.step_count} steps"


def _other_name(name: str) -> bool:
    """Named for model weights, an optimizer, start-up or checkpoints: not the input."""
    return bool(re.search(NOT_INPUT_WORDS, name) or re.search(WEIGHT_WORDS, name))


def _input_name(name: str) -> bool:
    return bool(re.search(INPUT_WORDS, name)) and not _other_name(name)


def _host_optimizer(a: Account) -> bool:
    """The thread's code before its uploads is an optimizer step on the host (named so)."""
    names = _names(a, "loading", "loader_wait")
    return not input_pipeline(a) and bool(names) and bool(re.search(OPTIMIZER_WORDS, names[0]))


def _loading_has_a_rule(a: Account) -> bool:
    """``loading`` and ``loader_wait`` are read by multiprocess_loading or cpu_optimizer;
    else the thread's own code and OS calls take them (cpu_overhead, os_runtime_stall)."""
    return input_pipeline(a) or _host_optimizer(a)


def _loading(ev: Evidence, a: Account) -> Recommendation | None:
    if not input_pipeline(a):
        return None  # host work before an upload that is not the step's input: see _cpu
    if (respawned := _respawned(ev, a)) is not None:
        return respawned
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
            counted(a.loader_processes, "loader worker process", "loader worker processes")
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
        input_pipeline=_pipeline_evidence(a),
        bound="the loading fix removes at most this idle time (a loader that keeps up)",
    )


# The idle causes a step pattern (``analyses/step_patterns.py``) takes in its steps beyond the
# other steps': not the input's (the loading rule reads those whole), nsys's, or work queued.
PATTERN_CAUSES = (
    "sync",
    "readback",
    "blocking_copy",
    "allocator",
    "launch",
    "os_call",
    "os_wait",
    "module_loading",
    "cuda_api",
    "cpu",
)
WORKER_START = "worker_start"  # the idle of the steps DataLoader workers were born in


def _patterns_apart(a: Account, sp: StepPatterns | None) -> Account:
    """``a`` with the idle a step pattern explains moved out of the buckets that held it into
    a bucket of its own (``autotuning``, ``recompilation``; ``worker_start`` for DataLoader
    workers born in the steps), so that no other rule reads it: in each of its steps, each of
    ``PATTERN_CAUSES`` beyond its median over the other steady steps (none: all of it). The
    periodic rule's steps are left to it, and what is moved is scaled as ``a``'s buckets are
    (``Account.normal_view``)."""
    # Steps by their index (names repeat: 'step' every step, numbers restarting each epoch);
    # the step patterns' rows are the account's steps, in order.
    patterns = []
    if sp is not None and sp.verdict:
        patterns.append((sp.verdict, {i for i, s in enumerate(sp.steps) if s.pattern}))
    if sp is not None and sp.births is not None and sp.births.loader:
        patterns.append((WORKER_START, {i for i, s in enumerate(sp.steps) if s.births}))
    if not patterns:
        return a
    periodic = set(a.periodic.indices) if a.periodic is not None else set()
    steady = [s for s in a.steps if not s.startup and not s.final]
    kept = [s for s in steady if s.index not in periodic]
    scale = len(steady) / len(kept) if kept else 0.0
    taken = set().union(*(steps for _, steps in patterns))
    per_step = {s.index: dict(s.buckets) for s in kept}
    base = {
        c: float(np.median([per_step[s.index].get(c, 0) for s in others]))
        if (others := [s for s in kept if s.index not in taken])
        else 0.0
        for c in PATTERN_CAUSES
    }
    moved: dict[str, int] = {}
    added = []
    for name, steps in patterns:
        by_cause: dict[str, float] = {}
        each = []
        for s in kept:
            excess = 0.0
            if s.index in steps:
                for c in PATTERN_CAUSES:
                    x = max(0.0, per_step[s.index].get(c, 0) - base[c])
                    per_step[s.index][c] = per_step[s.index].get(c, 0) - x  # not moved twice
                    by_cause[c] = by_cause.get(c, 0.0) + x * scale
                    excess += x
            each.append(excess)
        # Never more than the bucket holds (rounding, a view's scaling): the total stays.
        by_cause = {c: int(min(ns, a.ns(c) - moved.get(c, 0))) for c, ns in by_cause.items()}
        total = sum(by_cause.values())
        if total <= 0:
            continue
        for c, ns in by_cause.items():
            moved[c] = moved.get(c, 0) + int(ns)
        details = tuple(
            Detail(c, int(ns)) for c, ns in sorted(by_cause.items(), key=lambda x: -x[1]) if ns
        )
        added.append(
            Bucket(name, "idle", total, int(np.median(each)), _ratio(total, a.wall_ns), details)
        )
    buckets = []
    for b in a.buckets:
        if not moved.get(b.name):
            buckets.append(b)
            continue
        left = max(0, b.total_ns - moved[b.name])
        keep = left / b.total_ns if b.total_ns else 0.0
        buckets.append(
            replace(
                b,
                total_ns=left,
                median_ns=int(b.median_ns * keep),
                share_ratio=_ratio(left, a.wall_ns),
                details=tuple(Detail(d.name, int(d.ns * keep)) for d in b.details),
            )
        )
    busy = [b for b in buckets if b.kind == "busy"]
    idle = sorted([b for b in buckets if b.kind != "busy"] + added, key=lambda b: -b.total_ns)
    return replace(a, buckets=tuple(busy + idle))


def _step_pattern(ev: Evidence, a: Account) -> Recommendation | None:
    """Autotuning or recompilation in the steady steps: the idle its steps took beyond the
    steps that repeat their kernels (``_patterns_apart``)."""
    sp = ev.step_patterns
    if sp is None or not sp.verdict:
        return None
    name = sp.verdict
    steady = sum(s.steady for s in sp.steps)
    steps = len(sp.pattern_steps)
    kernels = f"{sp.distinct_kernels:,} distinct kernels, a median {sp.median_kernels:,.0f} a step"
    beyond = "in that work" if steps == steady else "beyond what the other steps take"
    idle = (
        f"the GPU sat idle {_ms(a.ns(name))} ({_share(a, name)} of the step time) in those "
        f"steps {beyond} ({_top(a, name)})"
    )
    if name == "autotuning":
        cudnn = sp.library == "cuDNN"
        who = (
            "cuDNN timed candidate convolution algorithms (torch.backends.cudnn.benchmark)"
            if cudnn
            else "a library timed candidate kernels (cudnn.benchmark, max-autotune)"
        )
        title = (
            "cuDNN autotunes every step: the input shapes keep changing"
            if cudnn
            else "Autotuning every step: the input shapes keep changing"
        )
        usual = (
            f"; {sp.repeating_timing_syncs_per_step:,.0f} device and event syncs in a step "
            "that repeats its kernels"
            if sp.new_set_steps < sp.compared_steps
            else ""
        )
        reason = (
            f"{steps} of {steady} steady steps ran a set of kernels no earlier step ran "
            f"({kernels}), each with a median {sp.syncs_per_step:,.0f} synchronizing calls (in "
            f"all: {sp.sync_calls}{usual}) and {sp.allocations_per_step:,.0f} "
            f"cudaMalloc/cudaFree: {who} for input shapes it had not seen; {idle}"
        )
        advice = (
            "fixed input shapes (resize or pad to one size), or a few buckets of sizes so each "
            "is tuned once; where shapes must keep changing, torch.backends.cudnn.benchmark = "
            "False" + ("" if cudnn else " and torch.compile without mode='max-autotune'")
        )
    else:
        triton = sp.library == "Triton"
        title = (
            "torch.compile recompiles in the steady state"
            if triton
            else "GPU code loaded again in the steady state: new shapes, new kernels"
        )
        new = sum(s.new_set for s in sp.steps if s.pattern)
        reason = (
            f"{steps} of {steady} steady steps loaded or compiled GPU code (a median "
            f"{sp.module_loads_per_step:,.0f} module loads a step"
            + ("; Triton kernels among theirs: torch.compile" if triton else "")
            + f"), {new} of them running a set of kernels no earlier step ran ({kernels}): "
            f"new shapes compile or load new kernels; {idle}"
        )
        advice = (
            "torch.compile(model, dynamic=True) or torch._dynamo.mark_dynamic(tensor, dim) for "
            "the dimensions that change (TORCH_LOGS=recompiles names what triggers each), "
            if triton
            else ""
        ) + "pad or bucket the input shapes to a few sizes, each compiled and loaded once"
    return _rec(
        a,
        name,
        title,
        (name,),
        reason,
        advice,
        pattern_steps=", ".join(sp.pattern_steps),
        new_set_steps=sp.new_set_steps,
        compared_steps=sp.compared_steps,
        distinct_kernels=sp.distinct_kernels,
        syncs_per_step=sp.syncs_per_step,
        timing_syncs_per_step=sp.timing_syncs_per_step,
        allocations_per_step=sp.allocations_per_step,
        module_loads_per_step=sp.module_loads_per_step,
        sync_calls=sp.sync_calls,
        library=sp.library,
        bound="the fix removes at most the idle these steps took beyond the other steady "
        "steps' median (their syncs, allocations and host work); the GPU work stays",
    )


def _respawned(ev: Evidence, a: Account) -> Recommendation | None:
    """multiprocess_loading when DataLoader workers are born inside the capture: the loading
    fix with ``persistent_workers=True`` first, and the idle of starting them too."""
    sp = ev.step_patterns
    b = sp.births if sp is not None else None
    if b is None or not b.loader:
        return None
    names = ("loading", "loader_wait", WORKER_START)
    gens = len(b.generations)
    every = f"every {b.period_steps} steps" if gens > 1 else "once"
    steps = [g.step for g in b.generations]
    shown = ", ".join(steps[:5]) + (", ..." if gens > 5 else "")
    idle = sum(a.ns(n) for n in names)
    reason = (
        f"{b.births:,} DataLoader worker processes were born inside the capture, "
        f"{b.per_generation} at a time {every} ({counted(gens, 'generation')}: {shown}; "
        f"{b.calls}): those steps sat idle {_ms(b.cost_ns)} beyond the other steps' median, "
        f"{_ms(b.input_wait_ns)} of it waiting for the new workers' batches; the GPU sat idle "
        f"{_ms(idle)} ({_share(a, *names)} of the step time) while the training thread "
        f"started workers ({_ms(a.ns(WORKER_START))}: {_top(a, WORKER_START)}) or made or "
        f"waited for batches ({_top(a, 'loading', 'loader_wait')})"
    )
    advice = (
        f"DataLoader(..., persistent_workers=True): every new iterator (each epoch or "
        f"evaluation pass) starts "
        f"{b.per_generation} worker processes and waits for their first batches; kept alive, "
        "they start once (and a prefetch_factor covering an epoch's first batches hides the "
        "rest); if the thread still waits, raise num_workers"
    )
    return _rec(
        a,
        "multiprocess_loading",
        "Keep the DataLoader's workers alive: persistent_workers=True",
        names,
        reason,
        advice,
        loader_processes=a.loader_processes,
        input_pipeline=_pipeline_evidence(a),
        births=b.births,
        generations=gens,
        workers_per_generation=b.per_generation,
        period_steps=b.period_steps,
        birth_steps=", ".join(steps),
        recreation_cost_ns=b.cost_ns,
        bound="persistent workers remove at most the idle of the steps they were born in "
        "beyond the other steps' (worker_start: forks and host work) and, with a loader that "
        "keeps up, the loading and loader wait",
    )


def _cpu_optimizer(ev: Evidence, a: Account) -> Recommendation | None:
    if not _host_optimizer(a):
        return None
    names = ("loading", "loader_wait")
    where = _names(a, *names)[0]
    return _rec(
        a,
        "cpu_optimizer",
        "Keep the optimizer on the GPU, or overlap its offloaded step",
        names,
        (
            f"the GPU sat idle {_ms(a.ns('loading') + a.ns('loader_wait'))} "
            f"({_share(a, *names)} of the step time) while the training thread ran an optimizer "
            f"step on the host before uploading the weights ({_top(a, *names)})"
        ),
        (
            f"run '{where}' on the GPU (torch.optim.AdamW(..., fused=True) on the model's own "
            "parameters); where memory forces an offloaded optimizer, overlap it: the CPU step "
            "of one bucket of parameters while the GPU computes the next (ZeRO-Offload), with "
            "pinned buffers and non_blocking copies"
        ),
        range=where,
        bound="at most this idle time: the step's GPU work stays",
    )


PAGEABLE_HTOD = "memcpy HtoD Pageable"


def _pinned_applies(ev: Evidence, a: Account) -> bool:
    return bool(a.htod.pageable_count and a.ns(PAGEABLE_HTOD))


def _pinned_rates(a: Account) -> tuple[float, float, str]:
    """The pageable copies' rate, the rate pinning would give them (GB/s), and its source."""
    c = a.htod
    pageable_gbps = c.pageable_bytes / c.pageable_ns if c.pageable_ns else 0.0
    if c.pinned_like_ns:
        pinned_gbps = c.pinned_like_bytes / c.pinned_like_ns
        source = (
            f"measured on {c.pinned_like_count} pinned copies of a like size in the steady steps"
        )
    else:
        pinned_gbps = pageable_gbps * PINNED_SPEEDUP_ASSUMED
        source = (
            f"assumed {PINNED_SPEEDUP_ASSUMED:g}x the pageable rate (no pinned copy of a like "
            "size in the steady steps)"
        )
    return pageable_gbps, max(pinned_gbps, pageable_gbps), source


def _pinned_kept(a: Account) -> float:
    """The share of the pageable copies' time that stays once they are pinned."""
    pageable_gbps, pinned_gbps, _ = _pinned_rates(a)
    return pageable_gbps / pinned_gbps if pinned_gbps else 1.0


def _pinned(ev: Evidence, a: Account) -> Recommendation | None:
    if not _pinned_applies(ev, a):
        return None
    bucket, c = PAGEABLE_HTOD, a.htod
    mean_bytes = c.pageable_bytes / c.pageable_count
    pageable_gbps, pinned_gbps, source = _pinned_rates(a)
    kept = _pinned_kept(a)
    # The exposed copy time shrinks to the pinned rate's share; the blocking goes.
    saved = a.ns(bucket) * (1 - kept) + a.ns("blocking_copy")
    small = mean_bytes < MIN_COPY_BYTES
    return _rec(
        a,
        "pinned_memory",
        "Pin host memory and copy with non_blocking=True",
        (bucket, "blocking_copy"),
        (
            f"{c.pageable_count} host-to-device copies ({c.pageable_bytes / 1e9:.2f} GB, "
            f"{mean_bytes / 1e6:.2f} MB each on average) came from pageable memory at "
            f"{pageable_gbps:.1f} GB/s against {pinned_gbps:.1f} GB/s pinned ({source}); "
            f"{_ms(a.ns(bucket))} of copy time ran with no kernel ({_share(a, bucket)} of the "
            f"step time) and the thread was blocked {_ms(a.ns('blocking_copy'))} in them"
            + (f" ({_top(a, 'blocking_copy')})" if a.ns("blocking_copy") else "")
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
        bound="the exposed pageable copies shrink to the pinned rate; the blocking goes",
        saved=saved,
        pageable_gbps=round(pageable_gbps, 3),
        pinned_gbps=round(pinned_gbps, 3),
        pinned_gbps_source=source,
        mean_copy_bytes=int(mean_bytes),
    )


PINNED_HTOD = "memcpy HtoD Pinned"


def _pipelining(ev: Evidence, a: Account) -> Recommendation | None:
    t = ev.transfers
    bucket = PINNED_HTOD
    if t is None or not a.ns(bucket):
        return None
    hideable = a.hideable_ns.get(bucket, 0)
    return _rec(
        a,
        "stream_pipelining",
        "Copy the next batch while this one computes",
        (bucket,),
        (
            f"{_ms(a.ns(bucket))} of pinned host-to-device copy time ran with no kernel "
            f"running ({_share(a, bucket)} of the step time): copies and compute take turns; "
            f"overlap can hide {_ms(hideable)} of it, the compute each step has that does "
            "not already run under copies"
        ),
        (
            "issue copies on a separate torch.cuda.Stream and make the compute stream "
            "wait_stream() on it, or wrap the loader in a CUDA prefetcher that copies batch N+1 "
            "while batch N computes"
        ),
        saved=hideable,
        bound="overlap hides a copy only under compute: per step, the lesser of the exposed "
        "copies and the compute not already under copies",
    )


def _copy_bound(ev: Evidence, a: Account) -> Recommendation | None:
    # Pinned copies beyond what compute can hide; pageable ones, once pinned (the rest of
    # their time: pinned_memory takes the part pinning saves), beyond the same.
    pinned = a.ns(PINNED_HTOD) - a.hideable_ns.get(PINNED_HTOD, 0)
    pageable = 0.0
    if _pinned_applies(ev, a):
        pageable = a.ns(PAGEABLE_HTOD) * _pinned_kept(a) - a.hideable_ns.get(PAGEABLE_HTOD, 0)
    rest = max(0.0, pinned) + max(0.0, pageable)
    if rest <= 0:
        return None
    buckets = (PINNED_HTOD, PAGEABLE_HTOD)
    exposed = sum(a.ns(b) for b in buckets)
    where = a.copy_ranges[0].name if a.copy_ranges else "(no NVTX range)"
    weights = bool(re.search(WEIGHT_WORDS, where))
    compute = a.ns("compute")
    reason = (
        f"{_ms(exposed)} of host-to-device copies ran with no kernel running "
        f"({_share(a, *buckets)} of the step time) against {_ms(compute)} of compute: overlap "
        f"can hide no more than the compute not already under copies, so {_ms(rest)} is the "
        f"copies' own (pageable ones at the pinned rate); most issued in '{where}'"
    )
    if weights:
        title = "Streaming weights in is copy-bound: move fewer bytes per pass"
        advice = (
            "more work per byte moved: larger batches per forward pass, the most used layers kept "
            "resident on the GPU, weights in int8/fp8 (quantized) or bf16; no input-pipeline fix "
            "applies"
        )
    else:
        title = "The job is copy-bound: move fewer bytes"
        advice = (
            "keep the data on the GPU (it fits: cache it there once), send it compressed or in "
            "lower precision (uint8 images, bf16 features) and convert on the GPU, or do the "
            "preprocessing on the GPU from the raw data"
        )
    return _rec(
        a,
        "copy_bound",
        title,
        buckets,
        reason,
        advice,
        saved=rest,
        copy_range=where,
        bound="copies removed (data resident on the GPU) save their exposed time beyond what "
        "compute can hide; half the bytes save half of it",
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
    # With no input pipeline in the trace, the code before an upload is the thread's own work.
    names = ("cpu",) if _loading_has_a_rule(a) else ("cpu", "loading")
    details = sorted(
        (d for n in names if (b := a.bucket(n)) for d in b.details), key=lambda d: -d.ns
    )
    where = details[0].name if details else "its code"
    idle = sum(a.ns(n) for n in names)
    return _rec(
        a,
        "cpu_overhead",
        "Move the training thread's own work off the critical path",
        names,
        (
            f"the GPU sat idle {_ms(idle)} ({_share(a, *names)} of the step time) while "
            f"the training thread ran its own code, mostly in '{where}' ({_top(a, *names)})"
        ),
        (
            f"make '{where}' cheaper or run it less often (every N steps, in another thread or "
            "process), or queue the next step's GPU work before it"
        ),
        range=where,
    )


def _os(ev: Evidence, a: Account) -> Recommendation | None:
    # Blocking calls before an upload wait for a loader only where there is one.
    names = (
        ("os_call", "os_wait") if _loading_has_a_rule(a) else ("os_call", "os_wait", "loader_wait")
    )
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
    hideable = min(a.ns("communication") - waited, a.hideable_ns.get("communication", 0))
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
        saved=hideable,
        bound="overlap hides communication only under compute: per step, the lesser of the "
        "exposed communication and the compute not already under it",
        communication_ns=a.communication_ns,
        communication_overlapped_ns=a.communication_overlapped_ns,
        collectives=each,
        waiting_for_late_rank_ns=waited,
    )


def _communication_bound(ev: Evidence, a: Account) -> Recommendation | None:
    waited, _ = _waited(ev, a)
    exposed = a.ns("communication") - waited
    rest = exposed - min(exposed, a.hideable_ns.get("communication", 0))
    if rest <= 0:
        return None
    return _rec(
        a,
        "communication_bound",
        "The job is communication-bound: move fewer bytes per sample",
        ("communication",),
        (
            f"NCCL work ran {_ms(exposed)} with no compute kernel running "
            f"({_share(a, 'communication')} of the step time) against {_ms(a.ns('compute'))} "
            f"of compute: overlap can hide no more than the compute, so {_ms(rest)} is the "
            "communication's own"
        ),
        (
            "fewer bytes per sample: a larger batch per step (or gradient accumulation with "
            "no_sync()), bf16 or compressed gradients (DDP comm hooks: bf16_compress_hook, "
            "PowerSGD), fewer all-gathers (FSDP SHARD_GRAD_OP or HYBRID_SHARD), a faster "
            "interconnect"
        ),
        saved=rest,
        bound="communication removed saves its exposed time beyond what compute can hide",
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


# What a periodic event's NVTX range names: its advice.
PERIODIC_ADVICE = (
    (
        r"(?i)save|checkpoint|ckpt|state.?dict|serializ|snapshot",
        "save asynchronously: copy the state to pinned host memory with non_blocking=True and "
        "write it from a background thread or process (torch.distributed.checkpoint.async_save"
        "), or save less often",
    ),
    (
        r"(?i)log|print|report|wandb|tensorboard|summar|histogram|metric|stat",
        "log scalars accumulated on the GPU, read back once per log line; copy tensors for "
        "histograms rarely, with non_blocking copies into pinned memory, and build them in "
        "another thread; or log less often",
    ),
    (
        r"(?i)eval|valid|test|accura|score",
        "evaluate less often or on fewer batches, keep its metrics on the GPU and read them "
        "back once per evaluation, or evaluate in another process on a copy of the weights",
    ),
)
# What the periodic event's advice begins with when it mostly waits for its input.
PERIODIC_INPUT_ADVICE = (
    "its DataLoader makes it wait: build it once with persistent_workers=True (its worker "
    "processes then live between passes) and enough workers and prefetch_factor; "
)


def _periodic(a: Account) -> Recommendation | None:
    """Steps made long by an event every N steps (``Account.periodic``): what the event
    took beyond a typical step. Done off the training thread, its idle time goes; done half
    as often, half of all it adds: the gain is the larger."""
    p = a.periodic
    if p is None or p.excess_ns <= 0:
        return None
    where = p.ranges[0].name if p.ranges else ""
    named = f"'{where}' ({_ms(p.ranges[0].ns)} in those steps)" if where else "no NVTX range"
    hidden, halved = min(p.excess_idle_ns, p.excess_ns), p.excess_ns / 2
    saved = max(hidden, halved)
    bound = (
        f"off the training thread, the GPU idle it causes ({_ms(hidden)})"
        if hidden >= halved
        else f"run every {2 * p.period} steps, half of what it adds ({_ms(halved)})"
    )
    grew = ", ".join(f"{d.name} {_ms(d.ns)}" for d in p.excess_buckets[:3])
    shown = ", ".join(p.occurrences[:3]) + (", ..." if len(p.occurrences) > 3 else "")
    spilled = len(p.steps) - len(p.occurrences)
    also = f", {counted(spilled, 'step')} after them too" if spilled else ""
    advice = next((text for words, text in PERIODIC_ADVICE if re.search(words, where)), None)
    advice = advice or (
        f"run {'the work in ' + repr(where) if where else 'it'} less often, or off the "
        "training thread (in another thread or process)"
    )
    waits = sum(d.ns for d in p.excess_buckets if d.name in ("loading", "loader_wait"))
    if waits > p.excess_ns / 2:
        advice = PERIODIC_INPUT_ADVICE + advice
    return Recommendation(
        id="periodic_step",
        title=f"A step every {p.period} steps costs more than the rest",
        reason=(
            f"every {p.period} steps ({len(p.occurrences)} times: {shown}{also}) a step took "
            f"{_ms(p.median_wall_ns)} against {_ms(p.typical_wall_ns)} for the others, in "
            f"{named}: {_ms(p.excess_ns)} beyond them ({_ratio(p.excess_ns, a.wall_ns):.0%} "
            f"of the step time), mostly {grew}"
        ),
        expected_gain_ratio=_ratio(saved, a.wall_ns),
        saved_ns=int(saved),
        advice=advice,
        evidence={
            "account": f"process {a.pid}, GPU {a.device_id}",
            "steps": a.step_count,
            "measured_ns": a.wall_ns,
            "buckets": ", ".join(d.name for d in p.excess_buckets),
            "period_steps": p.period,
            "periodic_steps": ", ".join(p.steps),
            "occurrences": ", ".join(p.occurrences),
            "range": where,
            "ranges": ", ".join(f"{d.name} {_ms(d.ns)}" for d in p.ranges),
            "typical_step_ns": p.typical_wall_ns,
            "periodic_step_median_ns": p.median_wall_ns,
            "excess_ns": p.excess_ns,
            "excess_busy_ns": p.excess_busy_ns,
            "excess_idle_ns": p.excess_idle_ns,
            "details": ", ".join(f"{d.name} {_ms(d.ns)}" for d in p.details),
            "bound": bound,
        },
        thresholds={"periodic_ratio": PERIODIC_RATIO, "periodic_min": PERIODIC_MIN},
    )


def _startup(a: Account) -> Recommendation | None:
    """The start-up (and one-time final steps) the account left out: a one-time cost, not a
    steady-state gain."""
    if not a.startup_ns and not a.final_ns:
        return None
    k = a.startup_steps
    once = a.startup_ns + a.final_ns
    share = _ratio(once, once + a.wall_ns)
    parts = []
    if a.startup_before_ns:
        where = f" (in '{a.startup_range}', an NVTX range run once)" if a.startup_range else ""
        first = "before the first step" if a.stepped else "at the start, before the windows"
        parts.append(
            f"GPU work {first}{where} spans {_ms(a.startup_before_ns)}: model "
            "construction, weight upload or compilation"
        )
    if k:
        first = "the first step" if k == 1 else f"the first {k} steps"
        parts.append(
            f"{first} took {_ms(a.startup_ns - a.startup_before_ns)}, each over "
            f"{STARTUP_RATIO}x the longest of the {a.step_count} steps after (at most "
            f"{_ms(a.steady_longest_ns)}): compilation, autotuning or lazy initialization"
        )
    if a.final_steps:
        last = "the last step" if a.final_steps == 1 else f"the last {a.final_steps} steps"
        parts.append(
            f"{last} took {_ms(a.final_ns)}, each over {STARTUP_RATIO}x the longest of the "
            f"{a.step_count} steady steps before: a final checkpoint, evaluation or clean-up"
        )
    what = "; ".join(parts) + f" ({share:.0%} of the captured time)"
    stop = "; stop it (torch.cuda.profiler.stop()) before the last step" if a.final_steps else ""
    return Recommendation(
        id="startup_in_capture",
        title="Start-up inside the capture: judged apart from the steady state",
        reason=(f"{what}: not the steady state, which the rest of this report is about"),
        expected_gain_ratio=0.0,
        saved_ns=0,
        advice=(
            "start the capture after a few warm-up steps: torch.cuda.profiler.start() after "
            "them with nsys profile --capture-range=cudaProfilerApi (what nsysprobe run uses)"
            + stop
        ),
        evidence={
            "account": f"process {a.pid}, GPU {a.device_id}",
            "startup_steps": k,
            "startup_range": a.startup_range,
            "startup_ns": a.startup_ns,
            "startup_before_steps_ns": a.startup_before_ns,
            "final_steps": a.final_steps,
            "final_ns": a.final_ns,
            "steady_steps": a.step_count,
            "steady_longest_ns": a.steady_longest_ns,
        },
        thresholds={"startup_ratio": STARTUP_RATIO},
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


def _gpu_bound(a: Account, k: KernelsResult | None) -> Recommendation:
    lever = k.lever if k else None
    if lever is not None:
        why = f"; the largest lever: {lever.what}"
        advice = lever.advice
    else:
        why = "; no kernel rows to read the lever from (CUDA graphs recorded whole)"
        advice = (
            "capture with --cuda-graph-trace=node to see the graphs' kernels; profile them "
            "(Nsight Compute), use mixed precision (torch.autocast), torch.compile, or a larger "
            "batch"
        )
    classes = ", ".join(f"{c.name} {c.share_ratio:.0%}" for c in k.classes[:5]) if k else ""
    return Recommendation(
        id="gpu_bound",
        title="The GPU is fed: optimize compute next",
        reason=(
            f"the GPU was busy {busy_ratio(a.busy_ns, a.wall_ns):.0%} of the step time (idle "
            f"{a.idle_ratio:.1%}, under {GPU_BOUND_IDLE_RATIO:.0%}) and no other fix would save "
            f"{MIN_GAIN_RATIO:.0%} or more{why}"
        ),
        expected_gain_ratio=0.0,
        saved_ns=0,
        advice=advice,
        evidence={
            "account": f"process {a.pid}, GPU {a.device_id}",
            "gpu_busy_ratio": round(busy_ratio(a.busy_ns, a.wall_ns), 4),
            "idle_ratio": round(a.idle_ratio, 4),
            "measured_ns": a.wall_ns,
            "lever": lever.id if lever else "",
            "kernel_classes": classes,
            "tiny_kernel_ratio": round(k.tiny_count_ratio, 4) if k else 0.0,
        },
        thresholds={
            "gpu_bound_idle_ratio": GPU_BOUND_IDLE_RATIO,
            "min_gain_ratio": MIN_GAIN_RATIO,
            "fp32_lever_ratio": FP32_LEVER_RATIO,
            "fusion_lever_ratio": FUSION_LEVER_RATIO,
            "tiny_lever_ratio": TINY_LEVER_RATIO,
        },
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
    _cpu_optimizer,
    _pinned,
    _pipelining,
    _copy_bound,
    _device_to_host,
    _host_sync,
    _allocator,
    _launch,
    _cpu,
    _os,
    _late_rank,
    _communication,
    _communication_bound,
    _warmup,
    _overhead,
    _other_idle,
    _numa,
    _step_pattern,
)
