"""Rules of patterns across steps: the idle a step pattern explains moved into its own bucket
(``patterns_apart``) and its rule (``autotuning``, ``recompilation``), an event every N
steps (``periodic_step``), and the start-up and final steps the account leaves out
(``startup_in_capture``)."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np

from nsysprobe.analyses.account import Account, Bucket, Detail
from nsysprobe.analyses.step_patterns import StepPatterns
from nsysprobe.analyses.windows import PERIODIC_MIN, PERIODIC_RATIO, STARTUP_RATIO
from nsysprobe.common.units import counted
from nsysprobe.diagnose.common import (
    Evidence,
    Outcome,
    ms_text,
    ratio,
    rec,
    share_text,
    top,
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


def patterns_apart(a: Account, sp: StepPatterns | None) -> Account:
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
            Bucket(name, "idle", total, int(np.median(each)), ratio(total, a.wall_ns), details)
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
                share_ratio=ratio(left, a.wall_ns),
                details=tuple(Detail(d.name, int(d.ns * keep)) for d in b.details),
            )
        )
    busy = [b for b in buckets if b.kind == "busy"]
    idle = sorted([b for b in buckets if b.kind != "busy"] + added, key=lambda b: -b.total_ns)
    return replace(a, buckets=tuple(busy + idle))


def step_pattern(verdict: str, ev: Evidence, a: Account) -> Outcome | None:
    """Autotuning or recompilation in the steady steps (where the step patterns' verdict is
    ``verdict``): the idle its steps took beyond the steps that repeat their kernels
    (``patterns_apart``)."""
    sp = ev.step_patterns
    if sp is None or sp.verdict != verdict:
        return None
    name = sp.verdict
    steady = sum(s.steady for s in sp.steps)
    steps = len(sp.pattern_steps)
    kernels = f"{sp.distinct_kernels:,} distinct kernels, a median {sp.median_kernels:,.0f} a step"
    beyond = "in that work" if steps == steady else "beyond what the other steps take"
    idle = (
        f"the GPU sat idle {ms_text(a.ns(name))} ({share_text(a, name)} of the step time) in those "
        f"steps {beyond} ({top(a, name)})"
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
    return rec(
        a,
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


def periodic_step(a: Account) -> Outcome | None:
    """Steps made long by an event every N steps (``Account.periodic``): what the event
    took beyond a typical step. Done off the training thread, its idle time goes; done half
    as often, half of all it adds: the gain is the larger."""
    p = a.periodic
    if p is None or p.excess_ns <= 0:
        return None
    where = p.ranges[0].name if p.ranges else ""
    named = f"'{where}' ({ms_text(p.ranges[0].ns)} in those steps)" if where else "no NVTX range"
    hidden, halved = min(p.excess_idle_ns, p.excess_ns), p.excess_ns / 2
    saved = max(hidden, halved)
    bound = (
        f"off the training thread, the GPU idle it causes ({ms_text(hidden)})"
        if hidden >= halved
        else f"run every {2 * p.period} steps, half of what it adds ({ms_text(halved)})"
    )
    grew = ", ".join(f"{d.name} {ms_text(d.ns)}" for d in p.excess_buckets[:3])
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
    return Outcome(
        title=f"A step every {p.period} steps costs more than the rest",
        reason=(
            f"every {p.period} steps ({len(p.occurrences)} times: {shown}{also}) a step took "
            f"{ms_text(p.median_wall_ns)} against {ms_text(p.typical_wall_ns)} for the others, in "
            f"{named}: {ms_text(p.excess_ns)} beyond them ({ratio(p.excess_ns, a.wall_ns):.0%} "
            f"of the step time), mostly {grew}"
        ),
        expected_gain_ratio=ratio(saved, a.wall_ns),
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
            "ranges": ", ".join(f"{d.name} {ms_text(d.ns)}" for d in p.ranges),
            "typical_step_ns": p.typical_wall_ns,
            "periodic_step_median_ns": p.median_wall_ns,
            "excess_ns": p.excess_ns,
            "excess_busy_ns": p.excess_busy_ns,
            "excess_idle_ns": p.excess_idle_ns,
            "details": ", ".join(f"{d.name} {ms_text(d.ns)}" for d in p.details),
            "bound": bound,
        },
        thresholds={"periodic_ratio": PERIODIC_RATIO, "periodic_min": PERIODIC_MIN},
    )


def startup_in_capture(a: Account) -> Outcome | None:
    """The start-up (and one-time final steps) the account left out: a one-time cost, not a
    steady-state gain."""
    if not a.startup_ns and not a.final_ns:
        return None
    k = a.startup_steps
    once = a.startup_ns + a.final_ns
    share = ratio(once, once + a.wall_ns)
    parts = []
    if a.startup_before_ns:
        where = f" (in '{a.startup_range}', an NVTX range run once)" if a.startup_range else ""
        first = "before the first step" if a.stepped else "at the start, before the windows"
        parts.append(
            f"GPU work {first}{where} spans {ms_text(a.startup_before_ns)}: model "
            "construction, weight upload or compilation"
        )
    if k:
        first = "the first step" if k == 1 else f"the first {k} steps"
        parts.append(
            f"{first} took {ms_text(a.startup_ns - a.startup_before_ns)}, each over "
            f"{STARTUP_RATIO}x the longest of the {a.step_count} steps after (at most "
            f"{ms_text(a.steady_longest_ns)}): compilation, autotuning or lazy initialization"
        )
    if a.final_steps:
        last = "the last step" if a.final_steps == 1 else f"the last {a.final_steps} steps"
        parts.append(
            f"{last} took {ms_text(a.final_ns)}, each over {STARTUP_RATIO}x the longest of the "
            f"{a.step_count} steady steps before: a final checkpoint, evaluation or clean-up"
        )
    what = "; ".join(parts) + f" ({share:.0%} of the captured time)"
    stop = "; stop it (torch.cuda.profiler.stop()) before the last step" if a.final_steps else ""
    return Outcome(
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
