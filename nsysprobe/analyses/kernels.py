"""What kind of work the GPU did: kernel time by class, and the lever a GPU-bound loop has.

Each kernel of a process on a device is put in one class by its name (the short name nsys
records; the first rule that matches wins):

    NCCL                      nccl...
    attention                 flash..., fmha..., ...attention..., sdpa
    GEMM/conv TF32            a matrix multiply or convolution (gemm, gemv, matmul, conv,
                              wgrad/dgrad/fprop, implicit_gemm, winograd, xmma, cutlass, nvjet)
                              whose name says tf32: tensor cores at TF32
    GEMM/conv 16/8-bit        the same saying bf16, f16, fp16, hmma, s16816, fp8/e4m3, int8/imma,
                              or a cuBLASLt nvjet kernel: tensor cores at half precision or less
    GEMM/conv fp32            the rest of them (sgemm, ..._f32f32_f32f32_f32..., ffma, direct
                              convolutions): fp32 on CUDA cores, the slowest way there is
    normalization/reduction   reduce, softmax, ...norm..., bn_..., triton_red/per
    elementwise/layout        elementwise, triton_poi, fill, copy, cat, index, gather/scatter,
                              transpose, nchwToNhwc..., multi_tensor_apply (optimizer steps)
    other                     everything else

and kernels shorter than ``TINY_NS`` are counted apart too (their count share and time share):
a kernel that short finishes before the next is launched unless the CPU runs well ahead.

**Kernels slower than themselves.** Over the steady steps, each kernel is set against the
same kernel (name, and its place in its step's launch order) in the other steps: the time it
ran beyond their median, summed, over the kernel time, is ``slowdown_ratio``. A loop alone on
its GPU repeats its kernels within a few per cent (under 8 % on every capture of the project,
dynamic shapes included); kernels time-sliced with another process's run far longer than
their own median.

**The lever** of a GPU-bound loop, the first that applies (``lever``):

    slowdown at ``CONTENTION_RATIO`` or more                        -> the GPU is shared:
                                                                        run the job alone
    fp32 GEMM/conv at ``FP32_LEVER_RATIO`` of kernel time or more  -> TF32 / bf16 autocast
    normalization/reduction + elementwise at ``FUSION_LEVER_RATIO`` -> fusion (torch.compile)
    tiny kernels at ``TINY_LEVER_RATIO`` of the kernels or more     -> CUDA graphs / compile
    TF32 GEMM/conv the largest class                                 -> bf16 autocast
    16/8-bit GEMM/conv the largest class                             -> FP8 / a larger batch
    attention the largest class                                      -> fused attention (SDPA)
    otherwise                                                        -> profile the largest
                                                                        class (Nsight Compute)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from nsysprobe.analyses.events import Events
from nsysprobe.common.frames import Tables
from nsysprobe.common.table import ranked
from nsysprobe.trace.values import pid_of

TINY_NS = 10_000
FP32_LEVER_RATIO = 0.25
FUSION_LEVER_RATIO = 0.40
TINY_LEVER_RATIO = 0.50
CONTENTION_RATIO = 0.20
# A kernel is set against its own median only where it ran in this many steady steps.
MIN_REPEATS = 4

_MATMUL = r"gemm|gemv|matmul|conv|wgrad|dgrad|fprop|implicit|winograd|xmma|cutlass|nvjet"
_LOW_PRECISION = r"bf16|f16|fp16|h16|hmma|s16816|s1688|fp8|e4m3|e5m2|int8|imma|i8i8|nvjet"
RULES = (
    ("NCCL", r"nccl"),
    ("attention", r"flash|fmha|attention|sdpa"),
    ("GEMM/conv TF32", rf"(?=.*(?:{_MATMUL})).*tf32"),
    ("GEMM/conv 16/8-bit", rf"(?=.*(?:{_MATMUL})).*(?:{_LOW_PRECISION})"),
    ("GEMM/conv fp32", _MATMUL),
    ("normalization/reduction", r"reduce|softmax|norm|bn_|triton_red|triton_per"),
    (
        "elementwise/layout",
        r"elementwise|triton_poi|fill|copy|cat|index|gather|scatter|transpose|nchwtonhwc|"
        r"nhwctonchw|multi_tensor_apply",
    ),
)
OTHER = "other"


@dataclass(frozen=True)
class KernelClass:
    name: str
    ns: int
    count: int
    share_ratio: float  # of the kernel time
    top_kernel: str  # the class's kernel with the most time


@dataclass(frozen=True)
class Lever:
    id: str  # tf32 | fusion | cuda_graphs | bf16 | fp8 | fused_attention | profile
    what: str  # one line with the figure behind it
    advice: str


@dataclass(frozen=True)
class KernelsResult(Tables):
    TABLES = {"classes": KernelClass}

    pid: int
    device_id: int
    kernel_ns: int  # sum of kernel durations (not a union: streams may overlap)
    count: int
    classes: tuple[KernelClass, ...]  # largest first
    tiny_count_ratio: float  # kernels under TINY_NS, of the count
    tiny_time_ratio: float  # and of the time
    slowdown_ratio: float  # kernel time beyond the same kernel's median in the steady steps
    lever: Lever | None  # None: no kernel rows (a CUDA graph recorded whole)

    def share(self, name: str) -> float:
        return next((c.share_ratio for c in self.classes if c.name == name), 0.0)


def classify(name: str) -> str:
    low = name.lower()
    return next((cls for cls, rule in RULES if re.search(rule, low)), OTHER)


def analyze_kernels(
    events: Events, pid: int, device_id: int, steps: tuple[np.ndarray, np.ndarray] | None = None
) -> KernelsResult:
    """The kernels of process ``pid`` on GPU ``device_id``, by class, and their lever;
    ``steps``: the steady steps' (starts, ends), for ``slowdown_ratio``."""
    k = events.kernels
    mine = np.flatnonzero((pid_of(k["globalPid"]) == pid) & (k["deviceId"] == device_id))
    dur = np.clip(k["end"][mine] - k["start"][mine], 0, None)
    slowdown = _slowdown(k["start"][mine], k["correlationId"][mine], k["nameId"][mine], dur, steps)
    names, codes = ranked(k["nameId"][mine])
    texts = [events.name_of(n) for n in names.tolist()]
    per_name = np.bincount(codes, weights=dur, minlength=len(texts)) if len(texts) else dur
    count_per_name = np.bincount(codes, minlength=len(texts))
    total = int(dur.sum())
    by_class: dict[str, list[int]] = {}
    for i, text in enumerate(texts):
        by_class.setdefault(classify(text), []).append(i)
    classes = []
    for cls, idx in by_class.items():
        ns = int(per_name[idx].sum())
        top = idx[int(np.argmax(per_name[idx]))]
        classes.append(
            KernelClass(
                name=cls,
                ns=ns,
                count=int(count_per_name[idx].sum()),
                share_ratio=ns / total if total else 0.0,
                top_kernel=texts[top],
            )
        )
    classes.sort(key=lambda c: (-c.ns, c.name))
    tiny = dur < TINY_NS
    result = KernelsResult(
        pid=pid,
        device_id=device_id,
        kernel_ns=total,
        count=int(dur.size),
        classes=tuple(classes),
        tiny_count_ratio=float(tiny.mean()) if dur.size else 0.0,
        tiny_time_ratio=float(dur[tiny].sum() / total) if total else 0.0,
        slowdown_ratio=slowdown,
        lever=None,
    )
    return KernelsResult(**{**vars(result), "lever": lever(result)})


def _slowdown(start, corr, name, dur, steps) -> float:
    """Kernel time beyond the median of the same kernel (name, place in its step's launch
    order) across the steady steps, over the kernel time in them."""
    if steps is None or not steps[0].size or not dur.size:
        return 0.0
    s0, s1 = steps
    step = np.searchsorted(s0, start, side="right") - 1
    inside = (step >= 0) & (start < s1[np.clip(step, 0, None)])
    if not inside.any():
        return 0.0
    step, corr, name, dur = step[inside], corr[inside], name[inside], dur[inside]
    order = np.lexsort((corr, step))  # by step, then launch order
    step, name, dur = step[order], name[order], dur[order]
    first = np.searchsorted(step, step)  # each kernel's step's first row
    place = np.arange(step.size) - first
    _, name_code = ranked(name)
    _, group = np.unique(name_code.ravel() * (place.max() + 1) + place, return_inverse=True)
    group = group.ravel()
    # Each group's median at once: durations sorted within groups, the middle one or two.
    counts = np.bincount(group)
    ordered = _by_group(dur, group)
    begin = np.concatenate(([0], np.cumsum(counts)[:-1]))
    median = (ordered[begin + (counts - 1) // 2] + ordered[begin + counts // 2]) / 2
    repeated = counts[group] >= MIN_REPEATS
    excess = float(np.clip(dur - median[group], 0, None)[repeated].sum())
    return excess / float(dur.sum()) if dur.sum() else 0.0


def _by_group(values: np.ndarray, group: np.ndarray) -> np.ndarray:
    """``values`` sorted by group, then by value: one sort of (group, value) as one integer
    where the values are int64 and the pair fits 62 bits (a tenth of the time of a sort on two
    keys), else that sort."""
    if not values.size:
        return values
    low = int(values.min())
    span = int(values.max()) - low + 1
    if values.dtype != np.int64 or (int(group.max()) + 1) * span >= 1 << 62:
        return values[np.lexsort((values, group))]
    key = group.astype(np.int64) * span + (values - low)
    key.sort()
    return key % span + low


def lever(r: KernelsResult) -> Lever | None:
    """The first lever that applies (module docstring)."""
    if not r.count:
        return None
    if r.slowdown_ratio >= CONTENTION_RATIO:
        return Lever(
            "shared_gpu",
            f"kernels ran {r.slowdown_ratio:.0%} of their time beyond the same kernel's median "
            "in the other steps: another process shares this GPU (time-sliced with it)",
            "run the job alone on its GPU (nvidia-smi shows the other processes; "
            "CUDA_VISIBLE_DEVICES), or give each its own MIG slice or MPS share; compare "
            "steps/s alone",
        )
    fp32 = r.share("GEMM/conv fp32")
    if fp32 >= FP32_LEVER_RATIO:
        return Lever(
            "tf32",
            f"{fp32:.0%} of the kernel time is fp32 matrix multiplies and convolutions on CUDA "
            f"cores ({_top(r, 'GEMM/conv fp32')})",
            "run them on tensor cores: torch.backends.cuda.matmul.allow_tf32 = True and "
            "torch.backends.cudnn.allow_tf32 = True (or torch.set_float32_matmul_precision("
            "'high')), or bf16 with torch.autocast('cuda', dtype=torch.bfloat16)",
        )
    fusable = r.share("normalization/reduction") + r.share("elementwise/layout")
    if fusable >= FUSION_LEVER_RATIO:
        return Lever(
            "fusion",
            f"{fusable:.0%} of the kernel time is elementwise, layout and normalization kernels "
            f"(memory-bound: {_top(r, 'elementwise/layout', 'normalization/reduction')})",
            "fuse them: torch.compile(model), channels_last for convolution nets (no "
            "nchwToNhwc copies), fused optimizers (foreach/fused=True)",
        )
    if r.tiny_count_ratio >= TINY_LEVER_RATIO:
        return Lever(
            "cuda_graphs",
            f"{r.tiny_count_ratio:.0%} of the {r.count:,} kernels run under "
            f"{TINY_NS / 1000:g} us ({r.tiny_time_ratio:.0%} of the kernel time)",
            "fewer, larger kernels: torch.compile(mode='reduce-overhead') or CUDA graphs "
            "(torch.cuda.graphs), a larger batch",
        )
    top = r.classes[0]
    where = f"{top.share_ratio:.0%} of the kernel time is {top.name} ({_top(r, top.name)})"
    if top.name == "GEMM/conv TF32":
        return Lever(
            "bf16",
            where,
            "bf16 autocast (torch.autocast('cuda', dtype=torch.bfloat16)): twice TF32's "
            "tensor-core rate",
        )
    if top.name == "GEMM/conv 16/8-bit":
        return Lever(
            "fp8",
            where,
            "FP8 matrix multiplies (Transformer Engine, torchao float8) on Hopper, or a larger "
            "batch per kernel if the GPU is not full",
        )
    if top.name == "attention":
        return Lever(
            "fused_attention",
            where,
            "a fused attention kernel: torch.nn.functional.scaled_dot_product_attention "
            "(FlashAttention), and bf16",
        )
    return Lever(
        "profile", where, f"profile the {top.name} kernels with Nsight Compute (ncu) first"
    )


def _top(r: KernelsResult, *names: str) -> str:
    best = max((c for c in r.classes if c.name in names), key=lambda c: c.ns, default=None)
    return f"mostly {best.top_kernel[:60]}" if best else "none"
