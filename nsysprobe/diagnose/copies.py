"""Rules of host-to-device and device-to-host copies: ``pinned_memory`` (pageable copies at
the pinned rate), ``stream_pipelining`` (what compute can hide of the pinned ones),
``copy_bound`` (the rest) and ``device_to_host`` (large read-backs that drain the GPU)."""

from __future__ import annotations

import re

from nsysprobe.analyses.account import Account
from nsysprobe.diagnose.common import (
    Evidence,
    Outcome,
    ms_text,
    rec,
    share_text,
    top,
)
from nsysprobe.diagnose.inputs import WEIGHT_WORDS

# NVIDIA's cuda_memcpy_sync rule leaves out host-to-device copies of 64,000 bytes or less.
MIN_COPY_BYTES = 64_000


# With no pinned copy in the trace to measure, pinned copies are assumed to run at least this
# many times faster than the pageable ones seen (pageable copies stage through a bounce buffer).
PINNED_SPEEDUP_ASSUMED = 2.0


PAGEABLE_HTOD = "memcpy HtoD Pageable"


def pinned_applies(ev: Evidence, a: Account) -> bool:
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


def pinned_memory(ev: Evidence, a: Account) -> Outcome | None:
    if not pinned_applies(ev, a):
        return None
    bucket, c = PAGEABLE_HTOD, a.htod
    mean_bytes = c.pageable_bytes / c.pageable_count
    pageable_gbps, pinned_gbps, source = _pinned_rates(a)
    kept = _pinned_kept(a)
    # The exposed copy time shrinks to the pinned rate's share; the blocking goes.
    saved = a.ns(bucket) * (1 - kept) + a.ns("blocking_copy")
    small = mean_bytes < MIN_COPY_BYTES
    return rec(
        a,
        "Pin host memory and copy with non_blocking=True",
        (bucket, "blocking_copy"),
        (
            f"{c.pageable_count} host-to-device copies ({c.pageable_bytes / 1e9:.2f} GB, "
            f"{mean_bytes / 1e6:.2f} MB each on average) came from pageable memory at "
            f"{pageable_gbps:.1f} GB/s against {pinned_gbps:.1f} GB/s pinned ({source}); "
            f"{ms_text(a.ns(bucket))} of copy time ran with no kernel "
            f"({share_text(a, bucket)} of the step time) and the thread was blocked "
            f"{ms_text(a.ns('blocking_copy'))} in them"
            + (f" ({top(a, 'blocking_copy')})" if a.ns("blocking_copy") else "")
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


def pipelining(ev: Evidence, a: Account) -> Outcome | None:
    t = ev.transfers
    bucket = PINNED_HTOD
    if t is None or not a.ns(bucket):
        return None
    hideable = a.hideable_ns.get(bucket, 0)
    return rec(
        a,
        "Copy the next batch while this one computes",
        (bucket,),
        (
            f"{ms_text(a.ns(bucket))} of pinned host-to-device copy time ran with no kernel "
            f"running ({share_text(a, bucket)} of the step time): copies and compute take turns; "
            f"overlap can hide {ms_text(hideable)} of it, the compute each step has that does "
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


def copy_bound(ev: Evidence, a: Account) -> Outcome | None:
    # Pinned copies beyond what compute can hide; pageable ones, once pinned (the rest of
    # their time: pinned_memory takes the part pinning saves), beyond the same.
    pinned = a.ns(PINNED_HTOD) - a.hideable_ns.get(PINNED_HTOD, 0)
    pageable = 0.0
    if pinned_applies(ev, a):
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
        f"{ms_text(exposed)} of host-to-device copies ran with no kernel running "
        f"({share_text(a, *buckets)} of the step time) against {ms_text(compute)} of compute: "
        f"overlap can hide no more than the compute not already under copies, so "
        f"{ms_text(rest)} is the "
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
    return rec(
        a,
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


def device_to_host(ev: Evidence, a: Account) -> Outcome | None:
    r = a.readbacks
    if not r.count:
        return None
    names = ("readback", *_dtoh_buckets(a))
    return rec(
        a,
        "Keep the work on the GPU instead of reading it back",
        names,
        (
            f"{r.count} blocking device-to-host copies ({r.median_bytes / 1e6:.1f} MB each, "
            f"median) drained the GPU, which then sat idle while the host worked on the data: "
            f"{ms_text(a.ns('readback'))} idle and {ms_text(sum(a.ns(n) for n in names[1:]))} of "
            f"exposed copy time ({share_text(a, *names)} of the step time)"
        ),
        (
            "compute the statistic on the GPU (torch ops instead of numpy) and read back only "
            "the result, or copy with .to('cpu', non_blocking=True) into pinned memory and use "
            "it a step later, off the critical path"
        ),
        readbacks=r.count,
        readback_median_bytes=r.median_bytes,
    )
