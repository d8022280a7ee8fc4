"""The step account: where every nanosecond of every step went, per process and GPU.

One account per process and GPU it drives (a second process or GPU is never unioned into
it). Its windows are the steps of that process (the repeating NVTX range of the steps
analysis) or, without one, ``FIXED_WINDOWS`` equal windows over the process's GPU work on that
device. Each window's wall time is split, with nothing left over and nothing counted twice,
into GPU-busy time by kind and GPU-idle time by cause.

Busy time goes to the first kind running, in this order (so copies and communication under a
compute kernel are compute, and what they add is their *exposed* time):

    compute          kernels, and CUDA graph replays recorded whole
    communication    NCCL's work (``communication.py``: its kernels, and whatever is issued
                     inside its NVTX ranges) with no compute kernel running: the exposed part
    memcpy K M       copies by copy kind K (HtoD, DtoH, DtoD, ...) and host memory kind M
                     (Pageable, Pinned, ...), with no kernel running
    memset           memsets alone

Idle time is charged to what the thread that issued the work ending the idle was doing
until it issued it (the API call joined on process and correlation id). Split by time, not
by majority:

    profiler_overhead  nsys's own overhead (``PROFILER_OVERHEAD``) in the process
    queued             the work was issued before the idle began: the GPU started it late
                       (dependencies between streams, scheduling latency), no CPU cause
    sync               inside a stream/device/event synchronize, and the idle after one that
                       drained the GPU (see below); small read-backs (.item()) too
    readback           a device-to-host copy of ``READBACK_MIN_BYTES`` or more that the
                       thread waited for (.cpu(), .numpy()), and the idle after it
    blocking_copy      inside a copy call that blocks (pageable or synchronous copies)
    allocator          inside cudaMalloc/cudaFree/host allocations, and the idle after an
                       allocator call that drained the GPU (cudaFree synchronizes)
    launch             inside kernel-launch calls, and idle stretches shorter than
                       ``LAUNCH_GAP_NS`` between launches (each launch costs more than the
                       kernel it queues: launch-bound)
    loading            the thread's own code before a host-to-device copy it then issued: it
                       produced the batch itself (with DataLoader worker processes in the
                       report, only before the step's first copy)
    loader_wait        blocking OS calls (poll, futex, ...) before such a copy: waiting for
                       DataLoader workers or I/O
    os_call, os_wait   other OS-runtime calls (munmap, mmap, ...; and waits) of the thread
    module_loading     loading, linking or compiling GPU code (``calls.MODULE_PREFIXES``)
                       and launches over ``SLOW_LAUNCH_NS`` (lazy loading, JIT): start-up
                       work in the capture
    cuda_api           other CUDA API calls (event records, stream waits, ...)
    cpu                the thread's own code, named by its innermost NVTX range
    other_process      the work ending the idle was issued (before it, or its call had begun)
                       and waited while another process's work held the GPU (a shared GPU);
                       before the issuing call the thread had no work ready: its cause stands

A call (a synchronize, a copy, an allocator call) "drained" the GPU when the thread was inside
it, begun earlier, as the GPU went idle; the time from the call's start to that moment is how
long the thread *waited* for the GPU. A drain right after a device-to-host copy is a read-back:
``readback`` when the copy is at least ``READBACK_MIN_BYTES``, else (``.item()``) ``sync``.
Inside the draining call, the idle is the drain's. After it the queue is empty, and the GPU
idles while the thread works until it gets ahead again (issues work while the GPU is still
busy), across step boundaries too: the drain's *episode*; drains that come before the thread
gets ahead form one chain. In time order, the chain's host-side idle (every cause but those in
``KEPT_AFTER_DRAINS``: the input's, the GPU's and nsys's) is the drain's up to the time the
thread waited in the chain's calls (without the drains, that much host work would have
overlapped the GPU's queued work, and no more); the rest keeps its own cause. Each
bucket keeps the names behind it (API calls, OS calls, NVTX ranges) as details.
Medians are over steps; shares are of the summed wall time of the steps.

**Periodic steps.** Steady steps made long by an event every N steps (a checkpoint, an
evaluation, logging: ``windows.periodic_steps``) are counted twice over, once each way, so
that every cause is weighed once: ``Account.buckets`` hold every steady step's time as it
was; ``Account.periodic`` splits the same time into the other steps' buckets as if every step
were one of them (``normal_buckets``: their totals scaled to all the steady steps) and what
the periodic steps took beyond that (``excess``), with the NVTX ranges run only in them. The
rules read the first split, and the periodic event's own rule the second. A rhythm of the
input pipeline (a new epoch's workers, a loader's burst: the excess mostly ``loading`` and
``loader_wait`` and starting worker processes, in no NVTX range of the periodic steps' own)
is the input's, not a periodic event.
"""

# The public API, and the constants other modules and ``explain`` (the names its texts quote,
# looked up in this package) read.
from nsysprobe.analyses.account.causes import COMMUNICATION, COMPUTE, IDLE_CAUSES, MEMSET
from nsysprobe.analyses.account.drains import KEPT_AFTER_DRAINS
from nsysprobe.analyses.account.gap_sums import DEFAULT_MIN_GAP_NS, QUEUED_START_NS
from nsysprobe.analyses.account.idle import LAUNCH_GAP_NS, READBACK_MIN_BYTES
from nsysprobe.analyses.account.model import (
    LIKE_SIZE,
    LINK_BOUND_BYTES,
    Account,
    AccountResult,
    AccountStep,
    Bucket,
    CommunicationOps,
    Detail,
    HtodCopies,
    IdleGaps,
    IdleSpans,
    PeriodicSteps,
    Readbacks,
)
from nsysprobe.analyses.account.process import STEP_ROWS_LISTED, analyze_account
from nsysprobe.analyses.account.scope import FIXED_WINDOWS, STARTUP_LEAVES

__all__ = [
    "COMMUNICATION",
    "COMPUTE",
    "DEFAULT_MIN_GAP_NS",
    "QUEUED_START_NS",
    "FIXED_WINDOWS",
    "IDLE_CAUSES",
    "KEPT_AFTER_DRAINS",
    "LAUNCH_GAP_NS",
    "LIKE_SIZE",
    "LINK_BOUND_BYTES",
    "MEMSET",
    "READBACK_MIN_BYTES",
    "STARTUP_LEAVES",
    "STEP_ROWS_LISTED",
    "Account",
    "AccountResult",
    "AccountStep",
    "Bucket",
    "CommunicationOps",
    "Detail",
    "HtodCopies",
    "IdleGaps",
    "IdleSpans",
    "PeriodicSteps",
    "Readbacks",
    "analyze_account",
]
