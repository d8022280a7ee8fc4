"""The step account -> ranked recommendations, each with its reason, evidence and gain.

Each rule reads buckets of the step account (``nsysprobe/analyses/account/``) of the
report's main process and GPU, over its steady steps (start-up steps apart), and no two rules
read the same time: where two share a bucket they split it (what compute can hide under it,
and the rest; the idle a pattern across steps explains, ``analyses/step_patterns.py``, moved
out of the buckets that held it into one of its own), so the gains never add up to more than
the time measured. Each gain is what
its fix can remove, bounded by the trace, its assumption in the evidence: overlap hides
copies or communication only under compute (step by step, the lesser of the two), pinned
memory brings pageable copies to the pinned rate, every other fix removes at most its idle
time; no step drops below its GPU work.

Each rule is one row of ``RULES`` (``common.Rule``): its id, stable so that scripts can rely
on it; what it means, the line ``nsysprobe explain`` and the README's table show; and its
check, in the module of its kind (``inputs``, ``copies``, ``host``, ``communication``,
``patterns``, ``verdicts``; what they share in ``common``). Each id has its page in
``pages.py`` (``nsysprobe explain ID``: thresholds, evidence, fix, example). Adding a rule is
a row here, its check, its page, and its tests.

A rule is listed only when its gain reaches ``MIN_GAIN_RATIO`` of the measured time, so a few
small copies never lead (their time is a sliver of the step); ``pinned_memory`` also asks to
batch copies that average under ``MIN_COPY_BYTES``, and a read-back under the account's
``READBACK_MIN_BYTES`` is a synchronization (``host_sync``), not a ``device_to_host`` copy.
Recommendations are ordered by the time they save; ``gpu_bound`` comes
first when it applies. ``capture_incomplete`` leads only when there is no GPU data to
diagnose; otherwise it comes last, after the verdict the GPU data supports.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING

from nsysprobe.diagnose.common import (
    GPU_BOUND_IDLE_RATIO,
    MIN_GAIN_RATIO,
    Evidence,
    Recommendation,
    Rule,
)
from nsysprobe.diagnose.communication import communication, communication_bound, late_rank
from nsysprobe.diagnose.copies import copy_bound, device_to_host, pinned_memory, pipelining
from nsysprobe.diagnose.host import (
    allocator,
    cpu,
    host_sync,
    kernel_gaps,
    launch,
    os_runtime_stall,
    other_idle,
    overhead,
    shared_gpu,
    warmup,
)
from nsysprobe.diagnose.inputs import cpu_optimizer, loading
from nsysprobe.diagnose.patterns import (
    patterns_apart,
    periodic_step,
    startup_in_capture,
    step_pattern,
)
from nsysprobe.diagnose.verdicts import (
    capture_incomplete,
    capture_problems,
    gpu_bound,
    numa,
    spread_idle,
)

if TYPE_CHECKING:
    from nsysprobe.analyses.python_frames import PythonFrames

# The rows ``diagnose`` makes itself, beside running their checks: what the steps the account
# leaves out cost, the verdicts when no rule leads, the capture.
STARTUP_IN_CAPTURE = Rule(
    "startup_in_capture",
    "leading steps many times longer than every step after them (compilation, autotuning, lazy "
    "initialization), and GPU work before the first step (or a one-time range named like start-up, "
    "without steps) that spans more than a step (model construction, weight upload), and trailing "
    "steps as long (a final checkpoint): counted apart from the steady state "
    "every other rule reads, at their cost, with the capture-range fix",
)
PERIODIC_STEP = Rule(
    "periodic_step",
    "steps made long by an event every N steps (a checkpoint, an evaluation, logging: "
    "``windows.periodic_steps``), named by the NVTX range run only in them, with its period: what "
    "those steps took beyond a typical one; the gain the larger of its idle time (done off the "
    "training thread) and half of it all (done half as often). The other rules weigh "
    "the steps as if each were a typical one",
)
GPU_IDLE = Rule(
    "gpu_idle",
    "idle with no canned fix (work queued but started late, other CUDA calls), or idle spread "
    "over causes none of which reaches its floor",
    other_idle,
)
GPU_BOUND = Rule(
    "gpu_bound",
    "idle under ``GPU_BOUND_IDLE_RATIO`` of the step and no rule above its floor: the next gains "
    "are in compute, the largest lever named from the kernels (``analyses/kernels.py``: a GPU "
    "shared with another process, TF32 for fp32 GEMMs, fusion, CUDA graphs, bf16, FP8) "
    "with the share of kernel time behind it",
)
CAPTURE_INCOMPLETE = Rule(
    "capture_incomplete",
    "the trace lacks what a diagnosis needs: fix the capture",
)
# Every recommendation, in the order ``nsysprobe explain`` lists them; ``diagnose`` runs the
# checks in this order.
RULES = (
    Rule(
        "multiprocess_loading",
        "idle while the training thread produced batches itself (``loading``) or waited for loader "
        "workers (``loader_wait``), where the trace shows an input pipeline (``input_pipeline``); "
        "with DataLoader workers born inside the capture (``step_patterns``), "
        "persistent_workers=True, with the idle of the steps they were "
        "born in beyond the other steps' (forks, host work) and their period",
        loading,
    ),
    Rule(
        "cpu_optimizer",
        "the same idle where the thread's own code before the upload is an optimizer step on "
        "the host (named so): gradients down, a CPU step, weights up",
        cpu_optimizer,
    ),
    Rule(
        "pinned_memory",
        "host-to-device copies from pageable memory (their exposed copy time, and the idle "
        "while the thread staged them)",
        pinned_memory,
    ),
    Rule(
        "stream_pipelining",
        "pinned host-to-device copies with no kernel running, as much of them as the step's "
        "compute can hide: copy batch N+1 on a side stream while batch N computes",
        pipelining,
    ),
    Rule(
        "copy_bound",
        "the rest of those copies (and of pageable ones once pinned), more than compute can hide: "
        "move fewer bytes (data kept on the GPU, compressed or in lower precision; for "
        "weights streamed in, larger batches, resident or quantized weights)",
        copy_bound,
    ),
    Rule(
        "device_to_host",
        "large device-to-host read-backs that drain the GPU, with the host work after them, "
        "and the exposed device-to-host copy time",
        device_to_host,
    ),
    Rule(
        "host_sync",
        "synchronizations (and small read-backs such as ``.item()``) that drain the GPU, with "
        "the host work after them",
        host_sync,
    ),
    Rule(
        "allocator_churn",
        "cudaMalloc/cudaFree in the steady state (``empty_cache()``, changing shapes) and the "
        "host work after a draining free",
        allocator,
    ),
    Rule(
        "launch_overhead",
        "idle between launches: each launch costs more than its kernel",
        launch,
    ),
    Rule(
        "kernel_gaps",
        "idle between kernels the GPU already had queued, in stretches of at most "
        "``QUEUED_START_NS``, where at least ``KERNEL_GAPS_TINY_TIME_RATIO`` of the kernel "
        "time is in tiny kernels: the GPU's own cost of starting each (longer stalls, and that "
        "idle elsewhere, are gpu_idle's)",
        kernel_gaps,
    ),
    Rule(
        "cpu_overhead",
        "the training thread's own code while the GPU idles, by NVTX range (with no input "
        "pipeline in the trace, its code before an upload too)",
        cpu,
    ),
    Rule(
        "os_runtime_stall",
        "the training thread inside OS calls (munmap, ...) while the GPU idles",
        os_runtime_stall,
    ),
    Rule(
        "late_rank",
        "(a report holding every rank) this rank's NCCL kernels waited for another rank that "
        "arrives last at the collectives: fix that rank (its own cause is named), not the "
        "communication",
        late_rank,
    ),
    Rule(
        "exposed_communication",
        "NCCL work with no compute kernel running, less the part spent waiting for a late "
        "rank, as much as the step's compute can hide",
        communication,
    ),
    Rule(
        "communication_bound",
        "the rest of it: fewer bytes per sample (larger batches, gradient compression or bf16 "
        "gradients, no_sync() accumulation)",
        communication_bound,
    ),
    Rule(
        "autotuning",
        "steady steps that never repeat their kernels, each with a storm of device and event "
        "synchronizations (``step_patterns``: cudnn.benchmark timing trial kernels for changing "
        "input shapes, with workspace malloc/free): the idle those steps took beyond "
        "the other steps'; fixed or bucketed shapes, or benchmark off",
        partial(step_pattern, "autotuning"),
    ),
    Rule(
        "recompilation",
        "steady steps, again and again, that load or compile GPU code (torch.compile recompiling "
        "for new shapes, new kernels loaded): the same idle; dynamic=True or "
        "mark_dynamic, bucketed shapes",
        partial(step_pattern, "recompilation"),
    ),
    Rule(
        "warmup_in_capture",
        "loading CUDA modules (lazy loading, JIT) inside the captured steps",
        warmup,
    ),
    STARTUP_IN_CAPTURE,
    PERIODIC_STEP,
    Rule(
        "shared_gpu",
        "this process's issued GPU work waited while another process's work held the GPU (a "
        "GPU shared with another job): time it gets back alone on its GPU",
        shared_gpu,
    ),
    Rule(
        "profiler_overhead",
        "nsys's own overhead: the measurement, not the workload",
        overhead,
    ),
    GPU_IDLE,
    Rule(
        "numa_binding",
        "training or loader threads ran on a NUMA node other than the GPU's",
        numa,
    ),
    GPU_BOUND,
    CAPTURE_INCOMPLETE,
)


def diagnose(ev: Evidence) -> tuple[Recommendation, ...]:
    a = ev.account
    health_ids = {f.id for f in ev.health}
    blocking = bool(health_ids & {"capture_not_started", "no_gpu_activity"})
    incomplete = (
        CAPTURE_INCOMPLETE.made(capture_incomplete(ev, blocking)) if capture_problems(ev) else None
    )
    if blocking or a is None or a.wall_ns <= 0:
        return (incomplete,) if incomplete else ()
    # The rules weigh the steps as if each were a typical one; a periodic event's excess
    # is its own rule's (``Account.periodic``).
    view = patterns_apart(a.normal_view(), ev.step_patterns)
    recs = [
        r
        for rule in RULES
        if (r := rule.run(ev, view)) is not None and r.expected_gain_ratio >= MIN_GAIN_RATIO
    ]
    periodic = periodic_step(a)
    if periodic is not None and periodic.expected_gain_ratio >= MIN_GAIN_RATIO:
        recs.append(PERIODIC_STEP.made(periodic))
    recs.sort(key=lambda r: -r.saved_ns)
    if not recs:
        recs = [
            GPU_BOUND.made(gpu_bound(view, ev.kernels))
            if a.idle_ratio < GPU_BOUND_IDLE_RATIO
            else GPU_IDLE.made(spread_idle(view))
        ]
    startup = startup_in_capture(a)
    if startup is not None:
        recs.append(STARTUP_IN_CAPTURE.made(startup))
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
