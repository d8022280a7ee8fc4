"""Why a late rank is late: the buckets of its step account where it spends more time per
step than the other ranks' median, each group of buckets named with the recommendation that
removes it (``late_causes``). The arrivals at the collectives say which rank is late
(``arrivals.py``), within one report (``nsysprobe.diagnose.rules``) or across reports
(``cross_rank.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# What a late rank's extra time per step in these buckets of its step account means, and the
# recommendation (``nsysprobe.diagnose.rules``) that removes it; ``memcpy X`` names match by prefix.
CAUSES = (
    (
        ("loading", "loader_wait"),
        "input: it makes or waits for its batches",
        "multiprocess_loading",
    ),
    (("memcpy HtoD Pageable", "blocking_copy"), "pageable host-to-device copies", "pinned_memory"),
    (("memcpy HtoD Pinned",), "input copies not overlapped with compute", "stream_pipelining"),
    (("sync",), "host synchronizations", "host_sync"),
    (("readback", "memcpy DtoH"), "device-to-host read-backs", "device_to_host"),
    (("allocator",), "allocator calls", "allocator_churn"),
    (("launch",), "kernel launch overhead", "launch_overhead"),
    (("cpu",), "its training thread's own CPU work", "cpu_overhead"),
    (("os_call", "os_wait"), "OS-runtime calls", "os_runtime_stall"),
    (("module_loading",), "CUDA module loading", "warmup_in_capture"),
    (("profiler_overhead",), "nsys's own overhead on this rank", "profiler_overhead"),
    (
        ("compute", "memset", "memcpy DtoD", "memcpy"),
        "slower GPU work: its kernels take longer (a slower or throttled GPU, or more work)",
        "gpu_work",
    ),
    (("queued", "cuda_api"), "GPU work that started late, other CUDA calls", "gpu_idle"),
    (("other_process",), "another process's work on its GPU", "shared_gpu"),
)
# A cause must add this much per step of the account, this share of the time the rank held
# the others up per step, and this share of the other ranks' own time in those buckets (GPU
# work of 25 ms varies by more than 50 us from rank to rank): less does not explain lateness.
CAUSE_FLOOR_NS = 50_000
CAUSE_SHARE_RATIO = 0.10
CAUSE_RELATIVE_RATIO = 0.10


@dataclass(frozen=True)
class Cause:
    """Why a straggler is late: where its step account spends more than the others'."""

    what: str
    recommendation: str  # a recommendation id of ``nsysprobe.diagnose.rules`` ("gpu_work": none)
    buckets: tuple[str, ...]
    ns_per_step: float  # this rank's
    others_ns_per_step: float  # the other ranks' median


def late_causes(
    mine: dict[str, float], others: list[dict[str, float]], held_ns_per_step: float
) -> tuple[Cause, ...]:
    """Why a late rank is late: the groups of ``CAUSES`` where its step account (bucket ->
    mean ns per step) spends more than the other ranks' median, by at least
    ``CAUSE_FLOOR_NS``, ``CAUSE_SHARE_RATIO`` of the time it held the others up per step and
    ``CAUSE_RELATIVE_RATIO`` of the others' own time there; largest first."""
    if not others:
        return ()
    floor = max(CAUSE_FLOOR_NS, CAUSE_SHARE_RATIO * held_ns_per_step)
    out = []
    for names, what, rec in CAUSES:
        value = _bucket_sum(mine, names)
        median = float(np.median([_bucket_sum(o, names) for o in others]))
        if value - median >= max(floor, CAUSE_RELATIVE_RATIO * median):
            out.append(Cause(what, rec, names, value, median))
    return tuple(sorted(out, key=lambda c: -(c.ns_per_step - c.others_ns_per_step)))


_CLAIMED = {n for group, _, _ in CAUSES for n in group if n != "memcpy"}


def _bucket_sum(buckets: dict[str, float], names: tuple[str, ...]) -> float:
    """The sum over the buckets named (``memcpy X`` by prefix; a group's ``memcpy`` takes the
    copies no other group names)."""
    total = 0.0
    for bucket, ns in buckets.items():
        if bucket in names or any(bucket.startswith(n + " ") for n in names if n != "memcpy"):
            total += ns
        elif (
            "memcpy" in names
            and bucket.startswith("memcpy ")
            and not any(bucket == c or bucket.startswith(c + " ") for c in _CLAIMED)
        ):
            total += ns
    return total
