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

import pandas as pd

from nsysprobe.analyses.events import Events, api_name, per_distinct
from nsysprobe.trace.reader import pid_of


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
class TransfersResult:
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
    kind = per_distinct(mc["copyKind"].to_numpy(), lambda k: copy_labels.get(k, f"kind {k}"))
    src = per_distinct(mc["srcKind"].to_numpy(), lambda k: mem_labels.get(k, "Unknown"))
    dst = per_distinct(mc["dstKind"].to_numpy(), lambda k: mem_labels.get(k, "Unknown"))
    table = pd.DataFrame(
        {
            "copy_kind": kind,
            "src_kind": src,
            "dst_kind": dst,
            # Summed as floats: exact to 2^53 (9 PB), and no overflow whatever the rows hold.
            "bytes": mc["bytes"].clip(lower=0).astype("float64"),
            "dur": mc["end"] - mc["start"],
            "api": _issuing_api(events),
        }
    )
    rows = []
    if len(table):
        grouped = table.groupby(["copy_kind", "src_kind", "dst_kind"], sort=False)
        agg = grouped.agg(count=("dur", "size"), bytes=("bytes", "sum"), dur=("dur", "sum"))
        agg = agg.sort_values("dur", ascending=False)
        rows = [
            TransferRow(
                copy_kind=k,
                src_kind=s,
                dst_kind=d,
                count=int(r["count"]),
                bytes=int(r["bytes"]),
                duration_ns=int(r["dur"]),
                gbps=_gbps(r["bytes"], r["dur"]),
            )
            for (k, s, d), r in agg.iterrows()
        ]
    sync_api = {a: _is_sync_api(a) for a in table["api"].dropna().unique()}
    synchronous = table["api"].map(sync_api).eq(True).to_numpy() | (
        (table["src_kind"] == "Pageable") & (table["copy_kind"] == "HtoD")
    )
    matched = table[table["api"].notna()]
    by_api = []
    if len(matched):
        agg = matched.groupby(["api", "copy_kind", "src_kind"], sort=False).agg(
            count=("dur", "size"), bytes=("bytes", "sum"), dur=("dur", "sum")
        )
        by_api = [
            ApiRow(
                api=a,
                copy_kind=k,
                src_kind=s,
                count=int(r["count"]),
                bytes=int(r["bytes"]),
                duration_ns=int(r["dur"]),
                synchronous=_is_sync_api(a) or (s == "Pageable" and k == "HtoD"),
            )
            for (a, k, s), r in agg.sort_values("dur", ascending=False).iterrows()
        ]
    pageable = table[(table["copy_kind"] == "HtoD") & (table["src_kind"] == "Pageable")]
    pinned = table[(table["copy_kind"] == "HtoD") & (table["src_kind"] == "Pinned")]
    memcpy_busy = sum(events.device_time(d, "memcpy") for d in events.device_ids)
    kernel_busy = sum(events.device_time(d, "kernel") for d in events.device_ids)
    return TransfersResult(
        rows=tuple(rows),
        by_api=tuple(by_api),
        memcpy_count=len(table),
        memcpy_bytes=int(table["bytes"].sum()),
        memcpy_busy_ns=memcpy_busy,
        kernel_busy_ns=kernel_busy,
        memcpy_kernel_ratio=memcpy_busy / kernel_busy if kernel_busy else 0.0,
        pageable_htod_count=len(pageable),
        pageable_htod_bytes=int(pageable["bytes"].sum()),
        pageable_htod_ns=int(pageable["dur"].sum()),
        pinned_htod_gbps=_gbps(pinned["bytes"].sum(), pinned["dur"].sum()) if len(pinned) else None,
        sync_copy_count=int(synchronous.sum()),
        sync_copy_ns=int(table.loc[synchronous, "dur"].sum()),
        unmatched_count=int(table["api"].isna().sum()),
    )


def _issuing_api(events: Events) -> pd.Series:
    """Name of the API call that issued each copy, joined on (process, correlation id)."""
    mc = events.memcpy
    if not len(mc) or not len(events.runtime):
        return pd.Series([None] * len(mc), dtype=object)
    calls = events.issuing_calls(pid_of(mc["globalPid"]), mc["correlationId"].to_numpy())
    names = {i: api_name(events.name_of(i)) for i in calls["nameId"].dropna().unique()}
    return calls["nameId"].map(names).astype(object).where(calls["nameId"].notna(), None)


def _is_sync_api(api: object) -> bool:
    return isinstance(api, str) and ("Memcpy" in api) and ("Async" not in api)


def _gbps(nbytes: float, ns: float) -> float:
    return float(nbytes) / float(ns) if ns else 0.0
