# Over 500 lines: a catalogue of text, one page per recommendation id read top to bottom, and
# nothing else.
"""Each recommendation id's page (nsysprobe explain ID): when its rule fires, what it reads
and writes, the fix, an example from a real trace, and how to confirm that the fix worked.

One ``Page`` per row of ``rules.RULES`` (whose meaning is the page's first line); the rule
checks it names are what each page describes. Thresholds are never written here as numbers: a
page names the constant between double backquotes, bare for the diagnosis's own (in its rule
modules) and as module.NAME for those of ``nsysprobe/analyses/`` (windows.PERIODIC_RATIO), and
``nsysprobe.report.explain`` fills in its value when the page is shown. An example's
``reason`` is the line ``nsysprobe analyze`` printed for that id on that trace, kept for where
the trace is absent (an installed wheel holds no ``sample_traces/``); where it is present the
page analyzes it instead, and ``tests/report/test_explain_pages.py`` holds every kept line,
evidence key and threshold to a fresh analysis.
"""

from __future__ import annotations

from dataclasses import dataclass

# The keys ``common.bucket_evidence`` writes for every rule made by ``common.rec``; and for each
# bucket it reads, ``BUCKET_ns`` and ``BUCKET_median_per_step_ns``.
ACCOUNT_KEYS = ("account", "steps", "measured_ns", "buckets", "details")
PER_BUCKET = ("{}_ns", "{}_median_per_step_ns")
# What ``patterns.step_pattern`` writes, for autotuning and recompilation alike.
STEP_PATTERN_EVIDENCE = (
    "pattern_steps",
    "new_set_steps",
    "compared_steps",
    "distinct_kernels",
    "syncs_per_step",
    "timing_syncs_per_step",
    "allocations_per_step",
    "module_loads_per_step",
    "sync_calls",
    "library",
    "bound",
)


@dataclass(frozen=True)
class Example:
    """A real trace whose analysis gives the id, and the reason it printed for it."""

    trace: str  # its file name
    what: str  # what the workload did
    reason: str  # ``Recommendation.reason`` for the id, as the analysis printed it
    # Empty: the trace is in ``sample_traces/`` (analyzed when the page is shown, where it is
    # present). Else where the published trace comes from: not shipped with nsysprobe, only
    # the tests read it (``../shared/traces/``).
    published: str = ""


@dataclass(frozen=True)
class Page:
    fires: str  # when the rule fires, its thresholds as ``NAME`` references
    buckets: tuple[str, ...]  # the step account's buckets it reads (``<...>``: any of a kind)
    reads: str  # what else it reads, and how
    evidence: tuple[str, ...]  # its ``Recommendation.evidence`` keys beyond ``ACCOUNT_KEYS``
    fix: str
    code: str  # the fix in PyTorch (or the command line, where the fix is the capture)
    confirm: str  # what shows the fix worked, beyond the comparison (``compared``)
    example: Example | None = None
    no_example: str = ""  # without an example: why none
    account_keys: bool = True  # its evidence begins with ``ACCOUNT_KEYS`` and the buckets'
    thresholds: tuple[str, ...] = ("min_gain_ratio",)  # its ``Recommendation.thresholds``
    gate: str = ""  # a ``nsysprobe compare --fail-if`` condition the fixed run must not meet
    # Shipped traces before and after the fix: ``nsysprobe compare`` of the two passes the
    # page's gate.
    pair: tuple[str, str] | None = None
    # Confirmed by ``nsysprobe compare`` of the runs before and after (else by ``confirm``).
    compared: bool = True

    def evidence_keys(self) -> tuple[str, ...]:
        """Every key its evidence may hold (``<...>`` in a bucket's name: any of that kind),
        besides ``python_frames``, which Python sampling adds to any rule that reads buckets."""
        if not self.account_keys:
            return self.evidence
        per_bucket = tuple(form.format(b) for b in self.buckets for form in PER_BUCKET)
        return ACCOUNT_KEYS + per_bucket + self.evidence


_CS336 = (
    "Stanford CS336's assignment 2 (Hoponga/assignment2-systems, MIT-style licence), exported "
    "with nsys 2023.4.4"
)

PAGES: dict[str, Page] = {
    "multiprocess_loading": Page(
        fires=(
            "The trace shows an input pipeline: DataLoader worker processes in the report; else "
            "NVTX ranges the thread's loading ran in, mostly (by time) named for input and not "
            "for weights, an optimizer, start-up or checkpoints; else an upload in every steady "
            "step from a range not named so. Its gain is the GPU idle in ``loading`` and "
            "``loader_wait`` (with DataLoader workers born inside the capture, "
            "``step_patterns``, also ``worker_start``: the idle of the steps they were born in "
            "beyond the other steps' median), listed when it reaches ``MIN_GAIN_RATIO`` of the "
            "measured time. More ``loading`` than ``loader_wait``: the thread made the batches "
            "itself; less: its workers could not keep up."
        ),
        buckets=("loading", "loader_wait", "worker_start"),
        reads=(
            "``worker_start`` only where workers were born inside the capture. It reads the "
            "report's DataLoader worker processes and, for ``worker_start``, the births of "
            "``step_patterns`` (nsysprobe explain step_patterns)."
        ),
        evidence=(
            "loader_processes",
            "input_pipeline",
            "bound",
            "births",
            "generations",
            "workers_per_generation",
            "period_steps",
            "birth_steps",
            "recreation_cost_ns",
        ),
        fix=(
            "Make the batches in DataLoader worker processes, as many as keep up (up to the CPU "
            "cores per GPU), kept alive between epochs so that no iterator starts them again. "
            "When the thread still waits for the workers, their per-sample work is too slow: "
            "decode once and cache, or move augmentation to the GPU."
        ),
        code="""\
from torch.utils.data import DataLoader

loader = DataLoader(
    dataset,
    batch_size=64,
    shuffle=True,
    num_workers=8,            # up to the CPU cores per GPU
    persistent_workers=True,  # workers live across epochs: none born per iterator
    prefetch_factor=4,        # batches each worker keeps ready
    pin_memory=True,
)""",
        confirm=(
            "The new run's steps no longer wait on the input: ``loading`` and ``loader_wait`` "
            "shrink, and a verdict further down the ladder (``pinned_memory`` on the ladder's "
            "next rung) takes the lead."
        ),
        example=Example(
            "h200_baseline.sqlite",
            "ResNet-18 training whose DataLoader makes every batch in the training process "
            "(num_workers=0): the optimization ladder's first rung",
            "the GPU sat idle 6,741.8 ms (79% of the step time) while the training thread "
            "produced batches itself (get batch 6,492.4 ms, Batch # 243.6 ms, copy batch 5.8 ms)",
        ),
        pair=("h200_baseline.sqlite", "h200_multiworker.sqlite"),
    ),
    "cpu_optimizer": Page(
        fires=(
            "No input pipeline in the trace (see ``multiprocess_loading``), and the first NVTX "
            "range of the thread's code before its uploads is named for an optimizer (adam, "
            "sgd, optim, ...): gradients copied down, an optimizer step on the host, weights "
            "copied up. Its gain is that idle, ``loading`` and ``loader_wait``, listed when it "
            "reaches ``MIN_GAIN_RATIO`` of the measured time."
        ),
        buckets=("loading", "loader_wait"),
        reads="the NVTX ranges the idle ran in (the buckets' details).",
        evidence=("range", "bound"),
        fix=(
            "Keep the optimizer on the GPU, with the model's own parameters and a fused step. "
            "Where memory forces the optimizer onto the host, overlap it: the CPU step of one "
            "bucket of parameters while the GPU computes the next (ZeRO-Offload), with pinned "
            "buffers and non_blocking copies."
        ),
        code="""\
model = model.to("cuda")
# The state lives on the GPU; fused=True runs the step as a few kernels.
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
for x, y in loader:
    loss = loss_fn(model(x.to("cuda", non_blocking=True)), y.to("cuda", non_blocking=True))
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)""",
        confirm=(
            "The range the reason named (evidence ``range``) leaves the idle buckets: "
            "``loading`` and ``loader_wait`` shrink, and so do the device-to-host and "
            "host-to-device copies of gradients and weights (``device_to_host``, "
            "``pinned_memory`` beside it on the example)."
        ),
        example=Example(
            "h200_cpu_optimizer.sqlite",
            "an MLP whose Adam step runs on the host: gradients copied down, the step on the "
            "CPU, weights copied up every step",
            "the GPU sat idle 562.1 ms (38% of the step time) while the training thread ran an "
            "optimizer step on the host before uploading the weights (cpu optimizer 550.6 ms, "
            "weights to device 9.1 ms, step # 1.0 ms)",
        ),
    ),
    "pinned_memory": Page(
        fires=(
            "Host-to-device copies from pageable memory ran in the steady steps with no kernel "
            "running (``memcpy HtoD Pageable``). Its gain is that exposed copy time brought to "
            "the pinned rate, plus the time the thread was blocked in copies "
            "(``blocking_copy``), listed when it reaches ``MIN_GAIN_RATIO`` of the measured "
            "time. The pinned rate is measured on pinned copies in the same steps within a "
            "factor ``account.LIKE_SIZE`` of the pageable copies' median size (of any size "
            "where both are ``account.LINK_BOUND_BYTES`` or more); with none, it is assumed "
            "``PINNED_SPEEDUP_ASSUMED`` times the pageable rate. Copies averaging under "
            "``MIN_COPY_BYTES`` are also told to be batched into one."
        ),
        buckets=("memcpy HtoD Pageable", "blocking_copy"),
        reads="the account's host-to-device copies (their count, bytes and time, by memory kind).",
        evidence=("bound", "pageable_gbps", "pinned_gbps", "pinned_gbps_source", "mean_copy_bytes"),
        fix=(
            "Let the DataLoader pin its batches and copy them with non_blocking=True: a pinned "
            "copy needs no staging through a bounce buffer and does not block the thread. A "
            "buffer made outside a DataLoader is pinned once and reused; many small copies are "
            "collated into one tensor and copied once."
        ),
        code="""\
loader = DataLoader(dataset, batch_size=64, num_workers=8, pin_memory=True)
for x, y in loader:
    x = x.to("cuda", non_blocking=True)  # from pinned memory: no staging, no blocking
    y = y.to("cuda", non_blocking=True)
    ...

# A host buffer filled outside a DataLoader: pin it once and reuse it.
staging = torch.empty(batch_shape, dtype=torch.float32, pin_memory=True)
staging.copy_(torch.from_numpy(host_array))
x = staging.to("cuda", non_blocking=True)""",
        confirm=(
            "No pageable copy is left: compare's pageable HtoD column reads 0 B, "
            "``memcpy HtoD Pageable`` and ``blocking_copy`` empty, and what copy time stays "
            "exposed moves to ``memcpy HtoD Pinned`` (``stream_pipelining`` next)."
        ),
        example=Example(
            "h200_multiworker.sqlite",
            "the ladder's second rung: 8 DataLoader workers, batches copied from pageable memory",
            "40 host-to-device copies (4.03 GB, 100.66 MB each on average) came from pageable "
            "memory at 5.1 GB/s against 10.2 GB/s pinned (assumed 2x the pageable rate (no "
            "pinned copy of a like size in the steady steps)); 791.1 ms of copy time ran with no "
            "kernel (38% of the step time) and the thread was blocked 41.5 ms in them (munmap "
            "(before a pageable copy) 39.6 ms, cudaMemcpyAsync (memcpy HtoD Pageable) 1.3 ms, "
            "after cudaMemcpyAsync in 'copy batch' 0.4 ms)",
        ),
        gate="pageable_htod_bytes>0",
        pair=("h200_multiworker.sqlite", "h200_pinned.sqlite"),
    ),
    "stream_pipelining": Page(
        fires=(
            "Pinned host-to-device copies ran with no kernel running (``memcpy HtoD Pinned``). "
            "Its gain is the part of them the step's compute can hide: step by step, the lesser "
            "of the exposed copies and the compute not already running under copies "
            "(``Account.hideable_ns``); listed when it reaches ``MIN_GAIN_RATIO`` of the "
            "measured time. The rest is ``copy_bound``'s."
        ),
        buckets=("memcpy HtoD Pinned",),
        reads="the compute of each step that does not already run under copies.",
        evidence=("bound",),
        fix=(
            "Copy batch N+1 on a side stream while batch N computes: the compute stream waits "
            "for its own batch only (wait_stream), and record_stream keeps the caching "
            "allocator from reusing a batch the other stream still reads. The shipped "
            "workloads/ladder.py holds both forms (its streams and prefetch rungs)."
        ),
        code="""\
class CUDAPrefetcher:
    \"\"\"While the caller computes on batch N, batch N+1 copies on a side stream.\"\"\"

    def __init__(self, loader):  # a DataLoader with pin_memory=True
        self.batches = iter(loader)
        self.stream = torch.cuda.Stream()
        self.preload()

    def preload(self):
        batch = next(self.batches, None)
        with torch.cuda.stream(self.stream):
            self.ready = None if batch is None else [
                t.to("cuda", non_blocking=True) for t in batch
            ]

    def __iter__(self):
        return self

    def __next__(self):
        if self.ready is None:
            raise StopIteration
        compute = torch.cuda.current_stream()
        compute.wait_stream(self.stream)
        batch = self.ready
        for t in batch:
            t.record_stream(compute)
        self.preload()
        return batch

for x, y in CUDAPrefetcher(loader):
    ...""",
        confirm=(
            "Compare's exposed copy column drops and ``memcpy HtoD Pinned`` shrinks to what "
            "compute cannot hide (``copy_bound``'s part, if any)."
        ),
        example=Example(
            "h200_pinned.sqlite",
            "the ladder's third rung: pinned batches copied with non_blocking=True, on the "
            "compute stream",
            "73.3 ms of pinned host-to-device copy time ran with no kernel running (6% of the "
            "step time): copies and compute take turns; overlap can hide 73.3 ms of it, the "
            "compute each step has that does not already run under copies",
        ),
        pair=("h200_pinned.sqlite", "h200_streams.sqlite"),
    ),
    "copy_bound": Page(
        fires=(
            "Host-to-device copies with no kernel running beyond what the step's compute can "
            "hide: the pinned ones less ``stream_pipelining``'s part, and the pageable ones as "
            "long as they would take pinned (``pinned_memory`` takes the rest) less what compute "
            "can hide of them. Listed when that reaches ``MIN_GAIN_RATIO`` of the measured time. "
            "Copies issued in an NVTX range named for weights (weight, param, offload, layer, "
            "shard, ...) are weights streamed in, and get advice for them."
        ),
        buckets=("memcpy HtoD Pinned", "memcpy HtoD Pageable"),
        reads=(
            "the compute of each step not already under copies, and the NVTX range most of the "
            "copies were issued in (``copy_range``)."
        ),
        evidence=("copy_range", "bound"),
        fix=(
            "Move fewer bytes. Data that fits on the GPU is copied there once and indexed "
            "there; otherwise it travels compressed or in lower precision (uint8 images, bf16 "
            "features) and is converted on the GPU, or the preprocessing moves to the GPU. "
            "Weights streamed in (offloading) need more work per byte: larger batches per "
            "pass, the most used layers resident, weights quantized (int8/fp8) or in bf16."
        ),
        code="""\
# The data fits on the GPU: copy it once, make every batch there.
images = torch.from_numpy(all_images_uint8).to("cuda")  # once, 1 byte per pixel
labels = torch.from_numpy(all_labels).to("cuda")
for step in range(steps):
    idx = torch.randint(len(images), (batch_size,), device="cuda")
    x = images[idx].float().div_(255)  # converted on the GPU
    y = labels[idx]
    ...

# Or a quarter of the bytes per batch: uint8 across the link, float on the GPU.
x = x_uint8.to("cuda", non_blocking=True).float().div_(255)""",
        confirm=(
            "Compare's exposed copy (and pageable HtoD) columns drop: fewer bytes cross the link "
            "per step, and the HtoD buckets shrink with them."
        ),
        example=Example(
            "h200_copy_bound.sqlite",
            "1 GiB of features uploaded each step for a 10-class head: kernels busy a few per "
            "cent of the time",
            "369.2 ms of host-to-device copies ran with no kernel running (94% of the step "
            "time) against 21.3 ms of compute: overlap can hide no more than the compute not "
            "already under copies, so 369.2 ms is the copies' own (pageable ones at the pinned "
            "rate); most issued in 'copy batch'",
        ),
    ),
    "device_to_host": Page(
        fires=(
            "Device-to-host copies of ``account.READBACK_MIN_BYTES`` or more that the thread "
            "waited for drained the GPU (``readback``: .cpu(), .numpy(); a smaller one is a "
            "synchronization, ``host_sync``). Its gain is the idle after them while the host "
            "worked on the data, plus the exposed device-to-host copy time, listed when it "
            "reaches ``MIN_GAIN_RATIO`` of the measured time."
        ),
        buckets=("readback", "memcpy DtoH <memory kind>"),
        reads="the account's read-backs (their count and median size).",
        evidence=("readbacks", "readback_median_bytes"),
        fix=(
            "Compute the statistic on the GPU with torch ops and read back only the result, and "
            "only as often as it is used. What the host must have is copied with "
            "non_blocking=True into pinned memory and used a step later, off the critical path."
        ),
        code="""\
# Before: probs = logits.softmax(1).cpu().numpy(); top = probs.argmax(1) ... every step.
# After: the statistic on the GPU, one small result read back every N steps.
correct = torch.zeros((), device="cuda")
for step, (x, y) in enumerate(loader):
    logits = model(x)
    ...
    correct += (logits.argmax(dim=1) == y).sum()  # stays on the GPU: no drain
    if step % 100 == 99:
        print(f"accuracy {correct.item() / (100 * len(y)):.3f}")  # one read-back
        correct.zero_()

# A tensor the host must have: a non-blocking copy into pinned memory, read a step later.
host = logits.to("cpu", non_blocking=True)  # pinned when non_blocking from CUDA
copied = torch.cuda.Event()
copied.record()
...  # queue the next step's work
copied.synchronize()  # done long ago: no drain
use(host.numpy())""",
        confirm=(
            "``readback`` and the ``memcpy DtoH`` buckets shrink; the step's host work after "
            "them (``cpu_overhead`` beside it on the example) leaves the critical path too."
        ),
        example=Example(
            "h200_dtoh_numpy.sqlite",
            "64 MB of logits copied to pageable host memory and reduced in numpy every step",
            "20 blocking device-to-host copies (67.1 MB each, median) drained the GPU, which "
            "then sat idle while the host worked on the data: 1,504.2 ms idle and 982.4 ms of "
            "exposed copy time (64% of the step time)",
        ),
    ),
    "host_sync": Page(
        fires=(
            "Synchronizing calls drained the GPU: stream, device or event synchronizes, and "
            "read-backs such as .item() and print(tensor), under "
            "``account.READBACK_MIN_BYTES``, with the idle after them until the thread got "
            "ahead again; without pageable host-to-device copies (``pinned_memory``'s), "
            "blocking copies too. Listed when that idle reaches ``MIN_GAIN_RATIO`` of the "
            "measured time."
        ),
        buckets=("sync", "blocking_copy"),
        reads=(
            "``blocking_copy`` only where there are no pageable host-to-device copies; the "
            "calls and NVTX ranges of the drains (the buckets' details)."
        ),
        evidence=(),
        fix=(
            "Take .item(), .cpu(), print(tensor) and torch.cuda.synchronize() out of the step: "
            "accumulate on the GPU and read back every N steps; make small tensors on the GPU "
            "instead of copying them from the host. torch.cuda.set_sync_debug_mode('warn') "
            "names every synchronizing call."
        ),
        code="""\
torch.cuda.set_sync_debug_mode("warn")  # warns at every synchronizing call: find them
running = torch.zeros((), device="cuda")
for step, (x, y) in enumerate(loader):
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    running += loss.detach()  # not loss.item(): no sync
    if step % 100 == 99:
        print(f"loss {running.item() / 100:.4f}")  # one sync per 100 steps
        running.zero_()""",
        confirm="``sync`` (and ``blocking_copy``) shrink.",
        example=Example(
            "h200_readback.sqlite",
            "loss.item() and an accuracy .cpu() every step",
            "the GPU sat idle 22.7 ms (6% of the step time) after synchronizing calls drained "
            "it: read back 4 B in 'forward/backward' 9.5 ms, read back 4 B 7.1 ms, read back 4 "
            "B in 'log' 5.3 ms",
        ),
    ),
    "allocator_churn": Page(
        fires=(
            "The GPU idled inside cudaMalloc/cudaFree (and host allocations) in the steady "
            "steps, and after an allocator call that drained it (cudaFree waits for the GPU): "
            "``allocator``, listed when it reaches ``MIN_GAIN_RATIO`` of the measured time."
        ),
        buckets=("allocator",),
        reads="the allocator calls behind the idle (the bucket's details).",
        evidence=(),
        fix=(
            "Let PyTorch's caching allocator keep its memory: no torch.cuda.empty_cache() in "
            "the loop, shapes that repeat (pad or bucket variable lengths), and expandable "
            "segments so that changing sizes reuse memory instead of fragmenting it."
        ),
        code="""\
# 1. No torch.cuda.empty_cache() inside the loop.
# 2. A few shapes, each allocated once:
def pad_to_bucket(tokens, buckets=(128, 256, 512, 1024)):
    n = next(b for b in buckets if b >= tokens.shape[-1])
    return torch.nn.functional.pad(tokens, (0, n - tokens.shape[-1]))

# 3. Segments that grow (set before the first CUDA call):
#    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python train.py""",
        confirm="``allocator`` shrinks; the cudaMalloc/cudaFree calls leave the steady steps.",
        example=Example(
            "h200_empty_cache.sqlite",
            "torch.cuda.empty_cache() every step with changing sequence lengths",
            "the GPU sat idle 65.9 ms (7% of the step time) in memory allocation and release: "
            "after cudaFree 63.9 ms, after cudaMalloc 1.2 ms, cudaMalloc 0.8 ms (cudaFree waits "
            "for the GPU to finish)",
        ),
    ),
    "launch_overhead": Page(
        fires=(
            "The GPU idled inside kernel-launch calls, and in stretches shorter than "
            "``account.LAUNCH_GAP_NS`` between back-to-back launches: each launch costs more "
            "than the kernel it queues (``launch``). Listed when that reaches "
            "``MIN_GAIN_RATIO`` of the measured time."
        ),
        buckets=("launch",),
        reads="the launch calls and NVTX ranges behind the idle (the bucket's details).",
        evidence=(),
        fix=(
            "Launch fewer, larger kernels: capture the step in a CUDA graph (one launch replays "
            "every kernel), let torch.compile fuse small ops, or make batches and layers "
            "larger. The shipped workload tiny_layers.py --cuda-graph captures its step by hand."
        ),
        code="""\
# Let PyTorch capture and replay the step: CUDA graphs and fused kernels.
model = torch.compile(model, mode="reduce-overhead")

# Or by hand (PyTorch's whole-network capture): static tensors, warm-up, capture, replay.
static_x, static_y = (t.to("cuda") for t in next(iter(loader)))
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    for _ in range(3):
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model(static_x), static_y).backward()
        optimizer.step()
torch.cuda.current_stream().wait_stream(side)
graph = torch.cuda.CUDAGraph()
optimizer.zero_grad(set_to_none=True)
with torch.cuda.graph(graph):
    static_loss = loss_fn(model(static_x), static_y)
    static_loss.backward()
    optimizer.step()
for x, y in loader:
    static_x.copy_(x)
    static_y.copy_(y)
    graph.replay()  # one launch for every kernel of the step""",
        confirm="``launch`` shrinks; the kernels run back to back.",
        example=Example(
            "h200_tiny_layers.sqlite",
            "150 tiny Linear+ReLU blocks: each launch costs more than its kernel",
            "the GPU sat idle 526.4 ms (61% of the step time) between kernel launches: each "
            "launch takes longer than the kernel it queues",
        ),
        pair=("h200_tiny_layers.sqlite", "h200_tiny_layers_graph.sqlite"),
    ),
    "kernel_gaps": Page(
        fires=(
            "The GPU idled between kernels it already had queued (``queued``: the work was "
            "issued before the idle began) and at least ``KERNEL_GAPS_TINY_TIME_RATIO`` of the "
            "kernel time is in kernels under ``kernels.TINY_NS``: each kernel's start costs the "
            "GPU a gap of its own, longer than such a kernel takes to run. Its gain is that "
            "idle in the stretches of at most ``QUEUED_START_NS`` where no other process's "
            "work held the GPU (a longer one waits on other work: fewer kernels would not "
            "remove it), listed when it reaches ``MIN_GAIN_RATIO`` of the measured time. The "
            "rest of ``queued``, and all of it with fewer tiny kernels, is ``gpu_idle``'s."
        ),
        buckets=("queued",),
        reads=(
            "the main account's kernels (nsysprobe explain kernels): the share of their time "
            "in tiny kernels, and how many there are."
        ),
        evidence=("tiny_time_ratio", "kernels", "bound"),
        fix=(
            "Give the GPU fewer, larger kernels, or kernels it starts back to back: capture the "
            "step in a CUDA graph (its replay starts each kernel as the last ends), let "
            "torch.compile fuse small ops, or make batches and layers larger. The shipped "
            "workload tiny_layers.py --cuda-graph captures its step by hand."
        ),
        code="""\
# Fused kernels, replayed from a CUDA graph: one launch, and no gap between the kernels.
model = torch.compile(model, mode="reduce-overhead")

# Or larger kernels: fewer, wider layers and a larger batch for the same work.
loader = DataLoader(dataset, batch_size=4 * batch_size, num_workers=8, pin_memory=True)""",
        confirm="``queued`` shrinks; the kernels run back to back.",
        example=Example(
            "h200_tiny_layers.sqlite",
            "150 tiny Linear+ReLU blocks: every kernel runs under 10 us",
            "the GPU sat idle 58.4 ms (7% of the step time) between kernels it already had "
            "queued, in stretches of at most 20 us: 100% of the time of its 27,320 kernels is "
            "in kernels under 10 us, and each costs the GPU its own start",
        ),
        pair=("h200_tiny_layers.sqlite", "h200_tiny_layers_graph.sqlite"),
    ),
    "cpu_overhead": Page(
        fires=(
            "The GPU idled while the training thread ran its own code (``cpu``, named by its "
            "innermost NVTX range); with no input pipeline and no host optimizer in the trace, "
            "its code before an upload too (``loading``). Listed when that reaches "
            "``MIN_GAIN_RATIO`` of the measured time."
        ),
        buckets=("cpu", "loading"),
        reads=(
            "``loading`` only where neither ``multiprocess_loading`` nor ``cpu_optimizer`` "
            "reads it; the NVTX range that held most of it (``range``) and, with Python "
            "sampling (``nsysprobe run --python``), the function and line."
        ),
        evidence=("range",),
        fix=(
            "Make the named range cheaper, run it every N steps instead of every step, or move "
            "it off the training thread; or queue the next step's GPU work before it, so that "
            "the GPU has work while it runs."
        ),
        code="""\
for step, (x, y) in enumerate(loader):
    loss = train_step(x, y)  # queues the step's GPU work and returns
    if step % 50 == 0:  # host-side bookkeeping every N steps, not every step
        log_metrics(step, loss)

# Python work that must run every step: a worker thread, so that the training thread
# queues the next step meanwhile.
from concurrent.futures import ThreadPoolExecutor

pool = ThreadPoolExecutor(max_workers=1)
pool.submit(bookkeeping, step, host_values)""",
        confirm="``cpu`` (and ``loading``) shrink, and the range it named leaves the bucket's top.",
        example=Example(
            "h200_python_overhead.sqlite",
            "pure-Python metric bookkeeping in 'log metrics' between steps, no sync",
            "the GPU sat idle 597.1 ms (76% of the step time) while the training thread ran its "
            "own code, mostly in 'log metrics' (log metrics 584.2 ms, forward_backward 10.3 ms, "
            "(no NVTX range) 2.5 ms)",
        ),
    ),
    "os_runtime_stall": Page(
        fires=(
            "The GPU idled while the training thread was inside OS calls: munmap, mmap, ioctl "
            "(``os_call``) and waits (``os_wait``); with no input pipeline in the trace, the "
            "blocking calls before an upload too (``loader_wait``). Listed when that reaches "
            "``MIN_GAIN_RATIO`` of the measured time."
        ),
        buckets=("os_call", "os_wait", "loader_wait"),
        reads=(
            "``loader_wait`` only where neither ``multiprocess_loading`` nor ``cpu_optimizer`` "
            "reads it; the OS calls behind the idle (needs --trace=osrt)."
        ),
        evidence=(),
        fix=(
            "munmap/mmap every step are large buffers returned to the OS and mapped again: "
            "reuse them (one pinned buffer, filled in place), or raise glibc's thresholds so "
            "that it keeps them. For waits, the calls listed name what the thread waits for."
        ),
        code="""\
# One host buffer, allocated (and pinned) once, filled in place every step.
staging = torch.empty(batch_bytes, dtype=torch.uint8, pin_memory=True)
for step in range(steps):
    staging.copy_(torch.frombuffer(read_chunk(), dtype=torch.uint8))
    x = staging.to("cuda", non_blocking=True)
    ...

# Or keep glibc from unmapping large blocks (set before Python starts):
#   MALLOC_MMAP_THRESHOLD_=1073741824 MALLOC_TRIM_THRESHOLD_=1073741824 python train.py""",
        confirm="``os_call`` and ``os_wait`` shrink; the calls the reason named leave them.",
        example=Example(
            "cs336_h100_train_nsys2023.4.sqlite",
            "an H100 Transformer LM training capture",
            "the GPU sat idle 71.8 ms (8% of the step time) while the training thread was "
            "inside OS calls: ioctl 69.0 ms, pthread_cond_wait 2.6 ms, pthread_mutex_lock 0.1 ms",
            published=_CS336,
        ),
    ),
    "late_rank": Page(
        fires=(
            "A report holding every rank: another rank is the straggler at the collectives "
            "(``arrivals``: later per round than the other ranks, one-sided Mann-Whitney U at "
            "p < ``arrivals.ALPHA`` over the ranks, and holding them up "
            "``arrivals.MIN_HELD_UP_RATIO`` of the measured time or more), and this rank's NCCL "
            "kernels waited for it. Its gain is that wait (at most the ``communication`` "
            "bucket), listed when it reaches ``MIN_GAIN_RATIO`` of the measured time."
        ),
        buckets=("communication",),
        reads=(
            "the ranks' arrivals (nsysprobe explain arrivals) and the late rank's own step "
            "account against the others' (``late_cause``: the recommendation its largest "
            "excess bucket would get)."
        ),
        evidence=("late_rank", "late_cause"),
        fix=(
            "Fix the late rank, not the communication: its own cause is named (``late_cause``) "
            "and nsysprobe analyze over every rank's report shows the accounts side by side. "
            "A common cause is work one rank does alone inside the step (rank 0 logging, "
            "evaluating or saving)."
        ),
        code="""\
# Every rank's account side by side, the straggler and why:
#   nsysprobe analyze 'ranks/rank*.nsys-rep'
# Work only rank 0 did in the step makes every other rank wait at the next collective:
if step % log_every == 0:
    stats = torch.stack([loss.detach(), grad_norm])
    torch.distributed.all_reduce(stats)  # every rank takes part: nobody waits alone
    if rank == 0:
        print(stats.tolist())""",
        confirm=(
            "The other ranks' wait for it shrinks: ``late_rank`` leaves the recommendations and "
            "nsysprobe analyze over the ranks names no straggler."
        ),
        example=Example(
            "nsysai_mfu_2gpu_before_nsys2026.2.sqlite",
            "a 300 ms window of two-GPU torchrun training, both ranks in one report",
            "this rank's NCCL kernels waited 10.9 ms (4% of the step time) for process 145, the "
            "latest at the collectives in 16 of 33 rounds; process 145 is late: its training "
            "thread's own CPU work (1.7 ms per step vs the others' 1.2 ms)",
            published=(
                "GindaChen/nsys-ai's test fixture mfu_2gpu_before.sqlite (MIT), nsys 2026.2.1"
            ),
        ),
    ),
    "exposed_communication": Page(
        fires=(
            "NCCL work ran with no compute kernel running (``communication``). Its gain is "
            "the part of it, less any wait for a late rank (``late_rank``'s), that the step's "
            "compute can hide: step by step, the lesser of the exposed communication and the "
            "compute not already under it; listed when it reaches ``MIN_GAIN_RATIO`` of the "
            "measured time. The rest is ``communication_bound``'s."
        ),
        buckets=("communication",),
        reads=(
            "the collectives (nsysprobe explain communication): each one's exposed and "
            "total time, and what overlapped compute."
        ),
        evidence=(
            "bound",
            "communication_ns",
            "communication_overlapped_ns",
            "collectives",
            "waiting_for_late_rank_ns",
        ),
        fix=(
            "Overlap the collectives with compute: DDP's all-reduce runs under backward by "
            "default (keep find_unused_parameters off), larger buckets make fewer collectives, "
            "no_sync() skips them for accumulation micro-batches; FSDP prefetches its "
            "all-gathers (forward_prefetch, backward_prefetch=BACKWARD_PRE)."
        ),
        code="""\
import contextlib

model = torch.nn.parallel.DistributedDataParallel(
    model,
    device_ids=[local_rank],
    bucket_cap_mb=100,  # fewer, larger all-reduces (25 by default)
    gradient_as_bucket_view=True,  # no copy of the gradients into the buckets
)
# Gradient accumulation: one all-reduce per optimizer step, not per micro-batch.
for i, (x, y) in enumerate(micro_batches):
    last = i == len(micro_batches) - 1
    with contextlib.nullcontext() if last else model.no_sync():
        loss_fn(model(x), y).backward()
optimizer.step()""",
        confirm="``communication`` shrinks and more of the NCCL time runs under compute.",
        no_example=(
            "no trace the project holds gives it: the two-rank published trace's NCCL wait is "
            "all ``late_rank``'s, and the one-rank NCCL capture (h200_nccl_one_rank.sqlite) "
            "launches no NCCL kernel"
        ),
    ),
    "communication_bound": Page(
        fires=(
            "NCCL work with no compute kernel running beyond what the step's compute can hide "
            "(what ``exposed_communication`` leaves, less any wait for a late rank); listed "
            "when it reaches ``MIN_GAIN_RATIO`` of the measured time."
        ),
        buckets=("communication",),
        reads="the compute of each step not already under communication.",
        evidence=("bound",),
        fix=(
            "Move fewer bytes per sample: a larger batch per step (or gradient accumulation "
            "with no_sync()), bf16 or compressed gradients (DDP comm hooks), fewer all-gathers "
            "(FSDP SHARD_GRAD_OP or HYBRID_SHARD), or a faster interconnect."
        ),
        code="""\
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook

# Half the bytes: gradients all-reduced in bf16.
model.register_comm_hook(None, default_hooks.bf16_compress_hook)

# Or low-rank gradients (PowerSGD):
state = powerSGD_hook.PowerSGDState(
    process_group=None, matrix_approximation_rank=1, start_powerSGD_iter=1_000
)
model.register_comm_hook(state, powerSGD_hook.powerSGD_hook)""",
        confirm="``communication`` shrinks with the bytes per step.",
        no_example=(
            "no trace the project holds gives it (no multi-GPU capture of the project's own "
            "yet: the two-GPU machine was not lent)"
        ),
    ),
    "autotuning": Page(
        fires=(
            "``step_patterns``' verdict: at least ``step_patterns.MIN_PATTERN_STEPS`` steady "
            "steps after the capture's first run a set of kernels no earlier step ran, each "
            "with ``step_patterns.SYNC_STORM_CALLS`` device and event synchronizations or more "
            "and ``step_patterns.STORM_RATIO`` times the median of the steps that repeat their "
            "kernels. Its gain is the idle of those steps beyond the other steady steps' median "
            "(their syncs, allocations and host work), moved out of the buckets that held it "
            "into its own (``autotuning``); listed when it reaches ``MIN_GAIN_RATIO`` of the "
            "measured time."
        ),
        buckets=("autotuning",),
        reads=(
            "``step_patterns`` (nsysprobe explain step_patterns): the kernels and syncs of each "
            "step."
        ),
        evidence=STEP_PATTERN_EVIDENCE,
        fix=(
            "Give the library shapes it has seen: fixed input shapes (resize or pad to one "
            "size), or a few buckets of sizes, each tuned once. Where shapes must keep "
            "changing, turn the autotuning off (cudnn.benchmark, torch.compile's max-autotune)."
        ),
        code="""\
import torch.nn.functional as F

def pad_to_bucket(images, sides=(224, 256, 320)):
    h, w = images.shape[-2:]
    side = next(s for s in sides if s >= max(h, w))
    return F.pad(images, (0, side - w, 0, side - h))  # a few shapes, each tuned once

# Shapes that must keep changing: no autotuning at all.
torch.backends.cudnn.benchmark = False""",
        confirm=(
            "The steps repeat their kernels again: ``autotuning`` leaves the recommendations "
            "and step_patterns gives no verdict."
        ),
        example=Example(
            "h200_cudnn_autotune.sqlite",
            "cudnn.benchmark on, with a new input size every step",
            "20 of 20 steady steps ran a set of kernels no earlier step ran (93 distinct "
            "kernels, a median 86 a step), each with a median 514 synchronizing calls (in all: "
            "cudaDeviceSynchronize 5,555, cudaEventSynchronize 5,050) and 117 "
            "cudaMalloc/cudaFree: cuDNN timed candidate convolution algorithms "
            "(torch.backends.cudnn.benchmark) for input shapes it had not seen; the GPU sat "
            "idle 40,279.6 ms (94% of the step time) in those steps in that work (cpu 39,241.7 "
            "ms, allocator 378.3 ms, sync 274.3 ms)",
        ),
    ),
    "recompilation": Page(
        fires=(
            "``step_patterns``' verdict where ``autotuning``'s does not hold: at least "
            "``step_patterns.MIN_PATTERN_STEPS`` steady steps after the capture's first load or "
            "compile GPU code (``cuModuleLoad*``, ``cuLibraryLoad*``, ``cuLink*``, ``nvrtc*``, "
            "``nvJitLink*``). "
            "Its gain is the idle of those steps beyond the other steady steps' median, in a "
            "bucket of its own (``recompilation``); listed when it reaches ``MIN_GAIN_RATIO`` "
            "of the measured time."
        ),
        buckets=("recompilation",),
        reads="``step_patterns`` (nsysprobe explain step_patterns): the module loads of each step.",
        evidence=STEP_PATTERN_EVIDENCE,
        fix=(
            "Compile once for the shapes that change: dynamic shapes in torch.compile, or "
            "inputs padded or bucketed to a few sizes, each compiled and loaded once. "
            "TORCH_LOGS=recompiles names what triggers each recompilation."
        ),
        code="""\
model = torch.compile(model, dynamic=True)  # one graph for every size
# or only the dimension that changes, marked before the first call:
torch._dynamo.mark_dynamic(tokens, 1)  # dim 1 (the sequence length) varies
# What triggers each recompilation:
#   TORCH_LOGS=recompiles python train.py""",
        confirm=(
            "No module loads in the steady steps: ``recompilation`` leaves the recommendations "
            "and step_patterns gives no verdict."
        ),
        no_example=(
            "no trace the project holds gives it yet (its torch.compile capture, "
            "h200_init_in_capture.sqlite, compiles only in its first step: start-up)"
        ),
    ),
    "warmup_in_capture": Page(
        fires=(
            "The GPU idled while CUDA loaded modules inside the captured steps: calls that "
            "load, link or compile GPU code (``cuModuleLoad*``, ``cuLibraryLoad*``, "
            "``cuLink*``, ``nvrtc*``, ``nvJitLink*``) and launches over "
            "``calls.SLOW_LAUNCH_NS`` (lazy loading, JIT): "
            "``module_loading``, listed when it reaches ``MIN_GAIN_RATIO`` of the measured time."
        ),
        buckets=("module_loading",),
        reads="the loading calls and slow launches behind the idle (the bucket's details).",
        evidence=(),
        fix=(
            "Start the capture after a few warm-up steps, so that what the steps load is "
            "loaded before it; CUDA_MODULE_LOADING=EAGER moves module loading to start-up."
        ),
        code="""\
for step, batch in enumerate(loader):
    if step == 10:  # warm: compiled, tuned, every module loaded
        torch.cuda.profiler.start()  # nsys profile --capture-range=cudaProfilerApi
    train_step(batch)
    if step == 30:
        torch.cuda.profiler.stop()
        break
# Or load every module at start-up:
#   CUDA_MODULE_LOADING=EAGER python train.py""",
        confirm="``module_loading`` is gone from the steady steps.",
        example=Example(
            "cs336_h100_train_nsys2023.4.sqlite",
            "an H100 Transformer LM training capture",
            "the GPU sat idle 31.6 ms (4% of the time) while CUDA loaded modules "
            "(cudaLaunchKernel 19.2 ms, cuLibraryLoadData 12.4 ms): start-up work, not the "
            "steady state",
            published=_CS336,
        ),
    ),
    "startup_in_capture": Page(
        fires=(
            "Leading steps over ``windows.STARTUP_RATIO`` times the longest step after them "
            "(compilation, autotuning, lazy initialization); GPU work before the first step "
            "that spans more than a step (model construction, weight upload), or, without "
            "steps, a top-level NVTX range run once, named like start-up, that leaves at least "
            "``account.STARTUP_LEAVES`` of the GPU work's span after it; and trailing steps "
            "over ``windows.STARTUP_RATIO`` times the longest before them (a final checkpoint). "
            "Always listed when present, after the verdict, with no gain: a one-time cost, "
            "left out of the steady state every other rule reads."
        ),
        buckets=(),
        reads="the step windows (nsysprobe explain windows) and the GPU work before them.",
        evidence=(
            "account",
            "startup_steps",
            "startup_range",
            "startup_ns",
            "startup_before_steps_ns",
            "final_steps",
            "final_ns",
            "steady_steps",
            "steady_longest_ns",
        ),
        account_keys=False,
        thresholds=("startup_ratio",),
        fix=(
            "Capture the steady state: start the capture after warm-up "
            "(torch.cuda.profiler.start() with nsys profile --capture-range=cudaProfilerApi, "
            "what nsysprobe run uses) and stop it before a final checkpoint or evaluation."
        ),
        code="""\
model = build_model().to("cuda")  # start-up: outside the capture
for step, batch in enumerate(loader):
    if step == 5:  # compiled, tuned, warm
        torch.cuda.profiler.start()
    train_step(batch)
    if step == 25:
        torch.cuda.profiler.stop()  # before the final checkpoint
        break
save_checkpoint(model)""",
        confirm=(
            "The new capture holds no start-up: ``startup_in_capture`` is gone and the step "
            "count and steps/s are the steady state's."
        ),
        example=Example(
            "h200_init_in_capture.sqlite",
            "model construction and the first compiled step inside the capture",
            "GPU work before the first step (in 'init_model', an NVTX range run once) spans "
            "8,873.4 ms: model construction, weight upload or compilation; the first step took "
            "6,696.5 ms, each over 3x the longest of the 19 steps after (at most 191.7 ms): "
            "compilation, autotuning or lazy initialization (81% of the captured time): not "
            "the steady state, which the rest of this report is about",
        ),
    ),
    "periodic_step": Page(
        fires=(
            "Steady steps over ``windows.PERIODIC_RATIO`` times a typical one (the lower "
            "quartile) recur a fixed number of steps apart (two or more), none missing, at "
            "least ``windows.PERIODIC_MIN`` times out of at least twice that many steady "
            "steps: an event every "
            "N steps (a checkpoint, an evaluation, logging). Its gain is the larger of the GPU "
            "idle those steps took beyond a typical step (the event done off the training "
            "thread) and half of all they took beyond it (done half as often), listed when it "
            "reaches ``MIN_GAIN_RATIO`` of the measured time. Every other rule weighs the "
            "steps as if each were a typical one."
        ),
        buckets=(),
        reads=(
            "the account's periodic split (nsysprobe explain account: its excess per "
            "bucket, ``buckets``) and the NVTX ranges run only in those steps (``range``, whose "
            "name picks the advice: checkpoint, logging or evaluation)."
        ),
        evidence=(
            "account",
            "steps",
            "measured_ns",
            "buckets",
            "period_steps",
            "periodic_steps",
            "occurrences",
            "range",
            "ranges",
            "typical_step_ns",
            "periodic_step_median_ns",
            "excess_ns",
            "excess_busy_ns",
            "excess_idle_ns",
            "details",
            "bound",
        ),
        account_keys=False,
        thresholds=("periodic_ratio", "periodic_min"),
        fix=(
            "Take the event off the training thread or run it less often: a checkpoint copied "
            "to the host once and written by another thread (or "
            "torch.distributed.checkpoint.async_save); logging read back once per log line, "
            "histograms built elsewhere; an evaluation on fewer batches, less often, or in "
            "another process. An event that mostly waits for its DataLoader needs "
            "persistent_workers=True on that loader."
        ),
        code="""\
import threading

def save_in_background(model, path):
    # One copy of the weights to the host, then the write on another thread.
    state = {k: v.detach().to("cpu", non_blocking=True) for k, v in model.state_dict().items()}
    torch.cuda.current_stream().synchronize()  # the copies are done
    writer = threading.Thread(target=torch.save, args=(state, path))
    writer.start()
    return writer

writer = None
for step, batch in enumerate(loader):
    train_step(batch)
    if step % save_every == 0:
        if writer is not None:
            writer.join()
        writer = save_in_background(model, f"ckpt-{step}.pt")""",
        confirm=(
            "The periodic steps come down to a typical step: ``periodic_step`` leaves the "
            "recommendations or saves less, and the range it named (evidence ``range``) takes "
            "less time in those steps."
        ),
        example=Example(
            "h200_checkpoint.sqlite",
            "torch.save of the model's and the optimizer's state every 4 steps, on the training "
            "thread",
            "every 4 steps (5 times: step 7, step 11, step 15, ...) a step took 184.6 ms "
            "against 14.6 ms for the others, in 'save checkpoint' (896.9 ms in those steps): "
            "864.7 ms beyond them (74% of the step time), mostly os_call 470.4 ms, cpu 272.5 "
            "ms, readback 56.4 ms",
        ),
    ),
    "shared_gpu": Page(
        fires=(
            "This process's GPU work was issued but waited while another process's work held "
            "the GPU (``other_process``: where the thread had no work ready, its own cause "
            "stands), listed when it reaches ``MIN_GAIN_RATIO`` of the measured time. Its gain "
            "is that time: alone on its GPU, the waiting work could have run then, and no "
            "more."
        ),
        buckets=("other_process",),
        reads="the other processes' kernels, copies and memsets on the same GPU.",
        evidence=("bound",),
        fix=(
            "Give each job a GPU of its own: nvidia-smi lists the processes on a GPU, "
            "CUDA_VISIBLE_DEVICES picks the one a job sees. Where sharing is meant, partition "
            "the GPU (MIG) so that each job gets its own share, not time slices."
        ),
        code="""\
# nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
# One GPU per job:
#   CUDA_VISIBLE_DEVICES=0 python train.py &
#   CUDA_VISIBLE_DEVICES=1 python evaluate.py""",
        confirm="``other_process`` is gone from the new capture's account.",
        no_example=(
            "no trace the project holds gives it: in the shared-GPU capture "
            "(h200_shared_gpu.sqlite) the two processes' kernels run time-sliced, each kernel "
            "recorded over the other's, so only 0.4% and 1.4% of their steps waited apart from "
            "their own work (where the other process is not in the trace, ``gpu_bound``'s "
            "shared-GPU lever reads the kernels' durations instead: h200_contention.sqlite)"
        ),
        compared=False,
    ),
    "profiler_overhead": Page(
        fires=(
            "The GPU idled while nsys did its own work in the process (buffer flushes, "
            "instrumentation): ``profiler_overhead``, listed when it reaches "
            "``MIN_GAIN_RATIO`` of the measured time."
        ),
        buckets=("profiler_overhead",),
        reads="nsys's PROFILER_OVERHEAD table.",
        evidence=(),
        fix=(
            "The measurement, not the workload: capture fewer event kinds and a shorter range, "
            "and compare with the workload's own unprofiled steps/s (nsysprobe ladder does)."
        ),
        code="""\
for step, batch in enumerate(loader):
    if step == 10:
        torch.cuda.profiler.start()
    train_step(batch)
    if step == 20:  # a few steps are enough
        torch.cuda.profiler.stop()
        break
# nsys profile --trace=cuda,nvtx --capture-range=cudaProfilerApi \\
#     --capture-range-end=stop --flush-on-cudaprofilerstop=false python train.py""",
        confirm="``profiler_overhead`` shrinks in the new capture.",
        example=Example(
            "cs336_h100_train_nsys2023.4.sqlite",
            "an H100 Transformer LM training capture",
            "nsys's own overhead (buffer flushes, instrumentation) covers 279.8 ms of idle (32% "
            "of the step time): the measurement, not the workload",
            published=_CS336,
        ),
    ),
    "gpu_idle": Page(
        fires=(
            "The GPU idled with work already queued but started late (dependencies between "
            "streams, cudaStreamWaitEvent, scheduling: ``queued``, less what ``kernel_gaps`` "
            "reads) or in other CUDA calls (``cuda_api``), listed when that reaches "
            "``MIN_GAIN_RATIO`` of the measured time. "
            "Also when no rule reaches that floor but the idle is ``GPU_BOUND_IDLE_RATIO`` of "
            "the step or more: the idle spread over several causes (every idle bucket, no gain)."
        ),
        buckets=("queued", "cuda_api"),
        reads="spread over several causes: every idle bucket of the account.",
        evidence=(),
        thresholds=("min_gain_ratio", "gpu_bound_idle_ratio"),
        fix=(
            "No canned fix: look at the streams and events around the gaps in the timeline. "
            "Work queued but started late usually waits on another stream: record the event "
            "right after the work it guards, not at the end of the step."
        ),
        code="""\
# The timeline of a few steps: nsysprobe analyze run.sqlite --html run.html
done = torch.cuda.Event()
with torch.cuda.stream(side):
    features = encoder(x)
    done.record()  # right after the producer, not at the end of the step
torch.cuda.current_stream().wait_event(done)  # the consumer waits for that only
out = head(features)""",
        confirm="``queued`` and ``cuda_api`` shrink.",
        example=Example(
            "h200_nccl_one_rank.sqlite",
            "one-rank NCCL: DDP ResNet-18 steps plus all_reduce, all_gather, broadcast and "
            "reduce_scatter per step",
            "the GPU sat idle 7.7 ms (8% of the step time) with work already queued but "
            "started late (dependencies between streams, cudaStreamWaitEvent, scheduling) or "
            "in other CUDA calls: cudaEventRecordWithFlags 0.1 ms, cuKernelGetName 0.1 ms, "
            "cudaStreamWaitEvent 0.0 ms",
        ),
    ),
    "numa_binding": Page(
        fires=(
            "A capture with CPU scheduling data (--cpuctxsw) analyzed with the machine's "
            "topology, of more than one NUMA node, the GPU's known: the training thread or the "
            "loader processes ran under ``cpu_placement.LOCAL_RATIO`` of their time on the "
            "GPU's node (``split``; ``remote`` at ``cpu_placement.REMOTE_RATIO`` or less). Its "
            "gain is the measured time times ``NUMA_TIME_SAVED_WHEN_REMOTE`` (what binding "
            "saved a fully remote job in the source article) times their share of run time "
            "off the node, listed when it reaches ``MIN_GAIN_RATIO`` of the measured time."
        ),
        buckets=(),
        reads=(
            "the CPU placement analysis (nsysprobe explain placement): each role's run time "
            "per NUMA node."
        ),
        evidence=(
            "gpu_node",
            "off_node_ratio",
            "assumed_time_saved_when_fully_remote",
            "measured_ns",
        ),
        account_keys=False,
        thresholds=(),
        fix=(
            "Bind each rank and its DataLoader workers to the CPUs and memory of its GPU's "
            "NUMA node: nsysprobe launch (or nsysprobe numa exec under torchrun) before the "
            "process starts, and the workers through their worker_init_fn."
        ),
        code="""\
# nsysprobe launch --nproc-per-node 8 --numa node -- python train.py
from nsysprobe.numa import NumaWorkerInit, bind_local_rank

outcome = bind_local_rank("node")  # this rank: its GPU's node
loader = DataLoader(
    dataset, num_workers=8, worker_init_fn=NumaWorkerInit(outcome.binding)
)""",
        confirm=(
            "Capture with --cpuctxsw again and analyze with --topology: every role is "
            "``local`` and ``numa_binding`` is gone."
        ),
        no_example=(
            "no trace the project holds gives it: its --cpuctxsw capture "
            "(h200_multiworker-cpuctxsw.sqlite) ran on a machine of one NUMA node"
        ),
    ),
    "gpu_bound": Page(
        fires=(
            "No other rule reaches ``MIN_GAIN_RATIO`` of the measured time and the GPU idled "
            "under ``GPU_BOUND_IDLE_RATIO`` of it: the GPU is fed, and the next gains are in "
            "compute. The lever (``kernels``, the first that applies): kernels that ran "
            "``kernels.CONTENTION_RATIO`` of their time or more beyond the same kernel's "
            "median in the other steps (a shared GPU); fp32 "
            "GEMM/conv at ``kernels.FP32_LEVER_RATIO`` of the kernel time or more (TF32/bf16); "
            "elementwise and normalization at ``kernels.FUSION_LEVER_RATIO`` or more (fusion); "
            "kernels under ``kernels.TINY_NS`` at ``kernels.TINY_LEVER_RATIO`` of the kernels "
            "or more (CUDA graphs); else by the largest class (bf16, FP8, fused attention, "
            "Nsight Compute)."
        ),
        buckets=(),
        reads=(
            "the account's busy and idle time and the kernels' classes (nsysprobe explain kernels)."
        ),
        evidence=(
            "account",
            "gpu_busy_ratio",
            "idle_ratio",
            "measured_ns",
            "lever",
            "kernel_classes",
            "tiny_kernel_ratio",
        ),
        account_keys=False,
        thresholds=(
            "gpu_bound_idle_ratio",
            "min_gain_ratio",
            "fp32_lever_ratio",
            "fusion_lever_ratio",
            "tiny_lever_ratio",
        ),
        fix=(
            "Pull the lever the reason names (evidence ``lever``): tensor cores for fp32 "
            "GEMMs, bf16 autocast over TF32, torch.compile to fuse memory-bound kernels, CUDA "
            "graphs for tiny kernels, the GPU to itself when it is shared."
        ),
        code="""\
# lever tf32: fp32 matrix multiplies and convolutions onto tensor cores
torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
# lever bf16: twice TF32's tensor-core rate
with torch.autocast("cuda", dtype=torch.bfloat16):
    loss = loss_fn(model(x), y)
# lever fusion: memory-bound elementwise and normalization kernels fused
model = torch.compile(model)
# lever cuda_graphs: many tiny kernels, one launch
model = torch.compile(model, mode="reduce-overhead")""",
        confirm=(
            "The GPU stays fed (idle still under ``GPU_BOUND_IDLE_RATIO``) and steps/s rises; "
            "the class the lever named shrinks, and the next run names another lever."
        ),
        example=Example(
            "h200_gpu_bound_fp32.sqlite",
            "a wide MLP on data resident on the GPU, its GEMMs in fp32 on CUDA cores",
            "the GPU was busy 100% of the step time (idle 0.2%, under 10%) and no other fix "
            "would save 3% or more; the largest lever: 62% of the kernel time is fp32 matrix "
            "multiplies and convolutions on CUDA cores (mostly "
            "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize256x64x8_stage)",
        ),
        pair=("h200_gpu_bound_fp32.sqlite", "h200_gpu_bound_tf32.sqlite"),
    ),
    "capture_incomplete": Page(
        fires=(
            "The capture-health check (nsysprobe explain health) found a warning: no GPU "
            "work, no NVTX ranges where NVTX was asked for, dropped CUDA records, no CUDA API "
            "calls, rows left out. It leads only when there is no GPU data to diagnose; "
            "otherwise it comes last, after the verdict the GPU data supports. No gain."
        ),
        buckets=(),
        reads="the capture-health findings of severity warning (``findings``: their ids).",
        evidence=("findings",),
        account_keys=False,
        thresholds=(),
        fix=(
            "Fix the capture as each finding's fix says: trace CUDA, cover the steps with the "
            "capture range, mark each step with an NVTX range (the Python nvtx package "
            "0.2.10-0.2.11 under nsys 2023.x); nsysprobe doctor checks the set-up."
        ),
        code="""\
for step, (x, y) in enumerate(loader):
    if step == 5:
        torch.cuda.profiler.start()  # the capture range: the steady steps
    torch.cuda.nvtx.range_push(f"step {step}")  # one range per step
    train_step(x, y)
    torch.cuda.nvtx.range_pop()
    if step == 25:
        torch.cuda.profiler.stop()
        break
# nsysprobe run --output run train.py
#   (nsys profile --trace=cuda,nvtx,osrt --capture-range=cudaProfilerApi ...)""",
        confirm=(
            "Analyze the new capture (nsysprobe analyze run): ``capture_incomplete`` is gone, "
            "the steps are found and the verdict stands on GPU data; there is no run before "
            "the fix to compare it with."
        ),
        compared=False,
        example=Example(
            "centerformer_titanrtx_nsys2022.4.sqlite",
            "a CenterFormer capture with NVTX ranges only, no CUDA tables",
            "no GPU work (kernels, copies, memsets) was recorded: the capture range may not "
            "have covered the steps",
            published=(
                "YoonKyonghwan/EfficientCenterFormer's baseline.sqlite (MIT), nsys 2022.4.2"
            ),
        ),
    ),
}
