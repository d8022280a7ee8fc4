"""The recommendations about the run as a whole: the verdict when no rule reaches its floor
(``gpu_bound``, or ``gpu_idle`` spread over many causes), the NUMA placement of the training
and loader threads (``numa_binding``), and an incomplete capture (``capture_incomplete``)."""

from __future__ import annotations

from nsysprobe.analyses.account import Account
from nsysprobe.analyses.health import Finding
from nsysprobe.analyses.intervals import busy_ratio
from nsysprobe.analyses.kernels import (
    FP32_LEVER_RATIO,
    FUSION_LEVER_RATIO,
    TINY_LEVER_RATIO,
    KernelsResult,
)
from nsysprobe.diagnose.common import (
    GPU_BOUND_IDLE_RATIO,
    MIN_GAIN_RATIO,
    Evidence,
    Outcome,
    bucket_evidence,
    ratio,
)


def spread_idle(a: Account) -> Outcome:
    idle = [b for b in a.buckets if b.kind == "idle"]
    return Outcome(
        title="The GPU idles, for many small reasons",
        reason=(
            f"the GPU sat idle {a.idle_ratio:.0%} of the step time, spread over several "
            f"causes, no fix for one of them saving {MIN_GAIN_RATIO:.0%}: "
            + ", ".join(f"{b.name} {b.share_ratio:.1%}" for b in idle[:4])
        ),
        expected_gain_ratio=0.0,
        saved_ns=0,
        advice="no single fix: see the step account for where the idle time goes",
        evidence=bucket_evidence(a, *(b.name for b in idle)),
        thresholds={"min_gain_ratio": MIN_GAIN_RATIO, "gpu_bound_idle_ratio": GPU_BOUND_IDLE_RATIO},
    )


def gpu_bound(a: Account, k: KernelsResult | None) -> Outcome:
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
    return Outcome(
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


def capture_problems(ev: Evidence) -> list[Finding]:
    return [f for f in ev.health if f.severity == "warning"]


def capture_incomplete(ev: Evidence, blocking: bool) -> Outcome:
    problems = capture_problems(ev)
    return Outcome(
        title="Fix the capture first" if blocking else "Complete the capture",
        reason="; ".join(f.message for f in problems),
        expected_gain_ratio=0.0,
        saved_ns=0,
        advice="; ".join(f.fix for f in problems),
        evidence={"findings": ", ".join(f.id for f in problems)},
    )


# Binding a fully remote training process and its loaders to the GPU's node took the second
# source article's 8xA100 job from 1.04 to 1.24 steps/s: 16 % less time per step. Without a
# way to measure the remote penalty in one trace, the gain is that figure scaled by the share
# of run time spent off the GPU's node.
NUMA_TIME_SAVED_WHEN_REMOTE = 1 - 1.04 / 1.24


def numa(ev: Evidence, a: Account) -> Outcome | None:
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
    return Outcome(
        title="Bind the training process and its loaders to the GPU's NUMA node",
        reason=f"GPU {p.gpu_bus_id} is on NUMA node {p.gpu_node}, but the {where}",
        expected_gain_ratio=ratio(saved, base),
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
