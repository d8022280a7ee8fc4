"""Transfers: copies by copy kind and memory kind, and the APIs that issued them.

Per (copy kind, source memory kind, destination memory kind): count, bytes, the **sum** of copy
durations and the achieved GB/s (bytes / summed duration). Copy- and memory-kind labels come
from the export's ``ENUM_CUDA_MEMCPY_OPER`` and ``ENUM_CUDA_MEM_KIND`` when present and from
the exported numbering otherwise (0 Pageable, 1 Pinned, 2 Device, ...; raw CUPTI numbers
memory kinds differently).

``memcpy_busy_ns`` and ``kernel_busy_ns`` are **unions** over all devices, and their ratio says
how much GPU time copies take against compute.

Each copy is joined to the CUDA API call that issued it by correlation id **and** process
(correlation ids are per process: joining on the id alone mixes up ranks). Copies issued
through a synchronous API (``cudaMemcpy``, ``cuMemcpyHtoD``, ... without ``Async``) block the
CPU thread until the copy ends; so do ``Async`` copies from pageable memory.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nsysprobe.analyses.events import Events
from nsysprobe.analyses.rows import api_name, per_distinct
from nsysprobe.common.frames import Tables
from nsysprobe.common.table import Groups, descending
from nsysprobe.trace.values import pid_of


@dataclass(frozen=True)
class TransferRow:
    copy_kind: str
    src_kind: str
    dst_kind: str
    count: int
    bytes: int
    duration_ns: int  # sum of copy durations
    gbps: float  # bytes / duration_ns (GB/s)


@dataclass(frozen=True)
class ApiRow:
    api: str
    copy_kind: str
    src_kind: str
    count: int
    bytes: int
    duration_ns: int  # sum of the copies' GPU durations
    synchronous: bool  # the API blocks its thread until the copy ends


@dataclass(frozen=True)
class TransfersResult(Tables):
    TABLES = {"rows": TransferRow, "by_api": ApiRow}

    rows: tuple[TransferRow, ...]
    by_api: tuple[ApiRow, ...]
    memcpy_count: int
    memcpy_bytes: int
    memcpy_busy_ns: int  # union over devices
    kernel_busy_ns: int  # union over devices
    memcpy_kernel_ratio: float  # memcpy_busy_ns / kernel_busy_ns
    pageable_htod_count: int
    pageable_htod_bytes: int
    pageable_htod_ns: int  # sum of durations
    pinned_htod_gbps: float | None  # achieved by pinned HtoD copies, when there are any
    sync_copy_count: int  # copies that blocked their thread (sync API or pageable source)
    sync_copy_ns: int  # sum of their durations
    unmatched_count: int  # copies with no API call found (API not traced)


def analyze_transfers(events: Events) -> TransfersResult:
    mc = events.memcpy
    mem_labels = events.lookups.mem_kind_labels
    copy_labels = events.lookups.copy_kind_labels
    kind = per_distinct(mc["copyKind"], lambda k: copy_labels.get(k, f"kind {k}"))
    src = per_distinct(mc["srcKind"], lambda k: mem_labels.get(k, "Unknown"))
    dst = per_distinct(mc["dstKind"], lambda k: mem_labels.get(k, "Unknown"))
    # Summed as floats: exact to 2^53 (9 PB), and no overflow whatever the rows hold.
    nbytes = np.clip(mc["bytes"], 0, None).astype(np.float64)
    dur = mc["end"] - mc["start"]
    api, matched = _issuing_api(events)
    rows = [
        TransferRow(
            copy_kind=k,
            src_kind=s,
            dst_kind=d,
            count=n,
            bytes=int(b),
            duration_ns=int(t),
            gbps=_gbps(b, t),
        )
        for k, s, d, n, b, t in _largest_first([kind, src, dst], nbytes, dur)
    ]
    pageable_htod = (src == "Pageable") & (kind == "HtoD")
    synchronous = pageable_htod.copy()
    synchronous[matched] |= per_distinct(api[matched], _is_sync_api, bool)
    by_api = [
        ApiRow(
            api=a,
            copy_kind=k,
            src_kind=s,
            count=n,
            bytes=int(b),
            duration_ns=int(t),
            synchronous=_is_sync_api(a) or (s == "Pageable" and k == "HtoD"),
        )
        for a, k, s, n, b, t in _largest_first(
            [api[matched], kind[matched], src[matched]], nbytes[matched], dur[matched]
        )
    ]
    pinned = (kind == "HtoD") & (src == "Pinned")
    memcpy_busy = sum(events.device_time(d, "memcpy") for d in events.device_ids)
    kernel_busy = sum(events.device_time(d, "kernel") for d in events.device_ids)
    return TransfersResult(
        rows=tuple(rows),
        by_api=tuple(by_api),
        memcpy_count=len(mc),
        memcpy_bytes=int(nbytes.sum()),
        memcpy_busy_ns=memcpy_busy,
        kernel_busy_ns=kernel_busy,
        memcpy_kernel_ratio=memcpy_busy / kernel_busy if kernel_busy else 0.0,
        pageable_htod_count=int(pageable_htod.sum()),
        pageable_htod_bytes=int(nbytes[pageable_htod].sum()),
        pageable_htod_ns=int(dur[pageable_htod].sum()),
        pinned_htod_gbps=(_gbps(nbytes[pinned].sum(), dur[pinned].sum()) if pinned.any() else None),
        sync_copy_count=int(synchronous.sum()),
        sync_copy_ns=int(dur[synchronous].sum()),
        unmatched_count=int((~matched).sum()),
    )


def _largest_first(keys: list[np.ndarray], nbytes: np.ndarray, dur: np.ndarray):
    """(*key, count, bytes, ns) of each distinct ``keys`` combination, the longest first
    (ties in order of first appearance)."""
    if not dur.size:
        return []
    by = Groups(keys, sort=False)
    count, total_bytes, ns = by.count(), by.sum(nbytes), by.sum(dur)
    order = descending(ns)
    return zip(
        *(k[order].tolist() for k in by.keys),
        count[order].tolist(),
        total_bytes[order].tolist(),
        ns[order].tolist(),
    )


def _issuing_api(events: Events) -> tuple[np.ndarray, np.ndarray]:
    """The name of the API call that issued each copy, joined on (process, correlation id),
    None where none was found; and the mask of the copies whose call was found."""
    mc = events.memcpy
    names = np.full(len(mc), None, dtype=object)
    if not len(mc) or not len(events.runtime):
        return names, np.zeros(len(mc), dtype=bool)
    ids = events.issuing_calls(pid_of(mc["globalPid"]), mc["correlationId"])["nameId"]
    found = ~np.isnan(ids) if ids.dtype.kind == "f" else np.ones(ids.size, dtype=bool)
    names[found] = per_distinct(ids[found].astype(np.int64), lambda i: api_name(events.name_of(i)))
    return names, found


def _is_sync_api(api: object) -> bool:
    return isinstance(api, str) and ("Memcpy" in api) and ("Async" not in api)


def _gbps(nbytes: float, ns: float) -> float:
    return float(nbytes) / float(ns) if ns else 0.0
