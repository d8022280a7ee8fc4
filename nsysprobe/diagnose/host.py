"""Rules of the training thread's host side while the GPU idles: synchronizations
(``host_sync``), the allocator (``allocator_churn``), launches (``launch_overhead``), its own
code (``cpu_overhead``), OS calls (``os_runtime_stall``), CUDA modules loaded
(``warmup_in_capture``), nsys's own overhead (``profiler_overhead``) and the idle with no
canned fix (``gpu_idle``), and between tiny kernels queued (``kernel_gaps``); and the time
another process's work held the GPU (``shared_gpu``)."""

from __future__ import annotations

from nsysprobe.analyses.account import QUEUED_START_NS, Account
from nsysprobe.analyses.kernels import TINY_NS
from nsysprobe.diagnose.common import (
    Evidence,
    Outcome,
    ms_text,
    ratio,
    rec,
    share_text,
    top,
)
from nsysprobe.diagnose.copies import pinned_applies
from nsysprobe.diagnose.inputs import loading_has_a_rule

# Where at least this share of the kernel time is in tiny kernels (``kernels.TINY_NS``), the
# idle between kernels already queued is the GPU's own cost per kernel (kernel_gaps), not a
# dependency between streams (gpu_idle): fewer, larger kernels or a CUDA graph remove it.
KERNEL_GAPS_TINY_TIME_RATIO = 0.5


def host_sync(ev: Evidence, a: Account) -> Outcome | None:
    # Blocking copies that are not pageable batch copies are synchronizations too.
    names = ("sync",) if pinned_applies(ev, a) else ("sync", "blocking_copy")
    return rec(
        a,
        "Remove synchronizations from the step",
        names,
        (
            f"the GPU sat idle {ms_text(sum(a.ns(n) for n in names))} "
            f"({share_text(a, *names)} of the step time) after synchronizing calls drained it: "
            f"{top(a, *names)}"
        ),
        (
            "avoid .item(), .cpu(), print(tensor) and torch.cuda.synchronize() inside the step; "
            "accumulate losses on the GPU and read them every N steps; make small tensors on "
            "the GPU instead of copying them from the host; "
            "torch.cuda.set_sync_debug_mode('warn') finds them"
        ),
    )


def allocator(ev: Evidence, a: Account) -> Outcome | None:
    return rec(
        a,
        "Stop freeing and reallocating GPU memory every step",
        ("allocator",),
        (
            f"the GPU sat idle {ms_text(a.ns('allocator'))} ({share_text(a, 'allocator')} of "
            f"the step time) in memory allocation and release: {top(a, 'allocator')} "
            f"(cudaFree waits for the GPU to finish)"
        ),
        (
            "drop torch.cuda.empty_cache() from the loop, keep tensor shapes static (pad or "
            "bucket variable lengths), and set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
        ),
    )


def launch(ev: Evidence, a: Account) -> Outcome | None:
    return rec(
        a,
        "Launch fewer, larger kernels",
        ("launch",),
        (
            f"the GPU sat idle {ms_text(a.ns('launch'))} ({share_text(a, 'launch')} of the step "
            f"time) between kernel launches: each launch takes longer than the kernel it queues"
        ),
        (
            "capture the step in a CUDA graph (torch.cuda.graphs, "
            "torch.compile(mode='reduce-overhead')), fuse small ops (torch.compile), or use "
            "larger batches and layers"
        ),
    )


def cpu(ev: Evidence, a: Account) -> Outcome | None:
    # With no input pipeline in the trace, the code before an upload is the thread's own work.
    names = ("cpu",) if loading_has_a_rule(a) else ("cpu", "loading")
    details = sorted(
        (d for n in names if (b := a.bucket(n)) for d in b.details), key=lambda d: -d.ns
    )
    where = details[0].name if details else "its code"
    idle = sum(a.ns(n) for n in names)
    return rec(
        a,
        "Move the training thread's own work off the critical path",
        names,
        (
            f"the GPU sat idle {ms_text(idle)} ({share_text(a, *names)} of the step time) while "
            f"the training thread ran its own code, mostly in '{where}' ({top(a, *names)})"
        ),
        (
            f"make '{where}' cheaper or run it less often (every N steps, in another thread or "
            "process), or queue the next step's GPU work before it"
        ),
        range=where,
    )


def os_runtime_stall(ev: Evidence, a: Account) -> Outcome | None:
    # Blocking calls before an upload wait for a loader only where there is one.
    names = (
        ("os_call", "os_wait") if loading_has_a_rule(a) else ("os_call", "os_wait", "loader_wait")
    )
    return rec(
        a,
        "The training thread stalls in OS calls",
        names,
        (
            f"the GPU sat idle {ms_text(sum(a.ns(n) for n in names))} "
            f"({share_text(a, *names)} of the step time) while the training thread was inside "
            f"OS calls: {top(a, *names)}"
        ),
        (
            "munmap/mmap: large buffers returned to the OS and mapped again each step: reuse "
            "buffers, pin once, or raise MALLOC_MMAP_THRESHOLD_/MALLOC_TRIM_THRESHOLD_; "
            "waits: find what the thread waits for in the calls listed"
        ),
    )


def warmup(ev: Evidence, a: Account) -> Outcome | None:
    return rec(
        a,
        "Capture steady-state steps, after warm-up",
        ("module_loading",),
        (
            f"the GPU sat idle {ms_text(a.ns('module_loading'))} "
            f"({share_text(a, 'module_loading')} of the time) while CUDA loaded modules "
            f"({top(a, 'module_loading')}): start-up work, "
            f"not the steady state"
        ),
        (
            "start the capture after a few warm-up steps (torch.cuda.profiler.start() with "
            "nsys profile --capture-range=cudaProfilerApi); CUDA_MODULE_LOADING=EAGER moves "
            "module loading to start-up"
        ),
    )


def overhead(ev: Evidence, a: Account) -> Outcome | None:
    return rec(
        a,
        "Much of the idle is nsys's own overhead: capture with less instrumentation",
        ("profiler_overhead",),
        (
            f"nsys's own overhead (buffer flushes, instrumentation) covers "
            f"{ms_text(a.ns('profiler_overhead'))} of idle "
            f"({share_text(a, 'profiler_overhead')} of the step time): the measurement, not the "
            f"workload"
        ),
        (
            "capture fewer event kinds or a shorter range (e.g. --trace=cuda,nvtx), or "
            "--flush-on-cudaprofilerstop=false; compare with unprofiled steps/s"
        ),
    )


def other_idle(ev: Evidence, a: Account) -> Outcome | None:
    # The GPU's own start of queued tiny kernels is kernel_gaps'; the rest of queued is here.
    starts = _queued_starts(a) if _tiny_kernels(ev) else 0
    names = ("queued", "cuda_api")
    left = sum(a.ns(n) for n in names) - starts
    return rec(
        a,
        "The GPU idles with no canned fix",
        names,
        (
            f"the GPU sat idle {ms_text(left)} ({ratio(left, a.wall_ns):.0%} of the step time) "
            "with work already queued but started late (dependencies between streams, "
            f"cudaStreamWaitEvent, scheduling) or in other CUDA calls: {top(a, *names)}"
        ),
        "no canned fix: look at the streams and events around these gaps in the timeline",
        saved=left,
    )


def shared_gpu(ev: Evidence, a: Account) -> Outcome | None:
    """Another process's work held the GPU while this one's waited (``other_process``)."""
    return rec(
        a,
        "Run the job alone on its GPU: another process's work held it",
        ("other_process",),
        (
            f"another process's GPU work held the GPU {ms_text(a.ns('other_process'))} "
            f"({share_text(a, 'other_process')} of the step time) while this process's own "
            "work, already issued, waited for it"
        ),
        (
            "give each job a GPU of its own (nvidia-smi lists the processes on it; "
            "CUDA_VISIBLE_DEVICES), or partition it (MIG) when sharing is meant"
        ),
        bound="alone, the process gets back at most the time its issued work waited",
    )


def _queued_starts(a: Account) -> int:
    """The ``queued`` idle in stretches of at most ``QUEUED_START_NS`` while no other
    process held the device: the GPU starting kernels it already had."""
    gaps = a.idle_gaps
    return min(gaps.queued_start_ns if gaps is not None else 0, a.ns("queued"))


def _tiny_kernels(ev: Evidence) -> bool:
    """Most of the main account's kernel time is in kernels under ``kernels.TINY_NS``."""
    k = ev.kernels
    return k is not None and k.tiny_time_ratio >= KERNEL_GAPS_TINY_TIME_RATIO


def kernel_gaps(ev: Evidence, a: Account) -> Outcome | None:
    """The idle between kernels the GPU already had queued (``queued``), in stretches no
    longer than the GPU's start of one (``QUEUED_START_NS``: longer ones wait on other work),
    where most kernel time is in tiny kernels: the GPU's own cost of starting each one."""
    if not _tiny_kernels(ev):
        return None
    k = ev.kernels
    starts = _queued_starts(a)
    return rec(
        a,
        "Fewer, larger kernels: the GPU idles between its tiny queued ones",
        ("queued",),
        (
            f"the GPU sat idle {ms_text(starts)} ({ratio(starts, a.wall_ns):.0%} of the step time) "
            f"between kernels it already had queued, in stretches of at most "
            f"{QUEUED_START_NS / 1000:g} us: {k.tiny_time_ratio:.0%} of the time of its "
            f"{k.count:,} kernels is in kernels under {TINY_NS / 1000:g} us, and each costs the "
            "GPU its own start"
        ),
        (
            "capture the step in a CUDA graph (torch.cuda.graphs, "
            "torch.compile(mode='reduce-overhead')): its kernels start back to back; fuse "
            "small ops (torch.compile), or use larger batches and layers"
        ),
        saved=starts,
        tiny_time_ratio=round(k.tiny_time_ratio, 4),
        kernels=k.count,
        bound=(
            "fewer or graphed kernels remove at most the queued idle in stretches of at most "
            f"{QUEUED_START_NS / 1000:g} us"
        ),
    )
