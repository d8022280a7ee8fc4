"""The account's inputs: a process's GPU operations on a device, each with its busy kind, and
the process's CUDA API calls, each with its category."""

from __future__ import annotations

import numpy as np

from nsysprobe.analyses import intervals as iv
from nsysprobe.analyses.account.arrays import distinct_rows
from nsysprobe.analyses.account.causes import COMMUNICATION, COMPUTE, MEMSET
from nsysprobe.analyses.calls import api_kind, slow_launches
from nsysprobe.analyses.communication import collective_of, is_communication_kernel
from nsysprobe.analyses.events import Events
from nsysprobe.analyses.rows import api_name, columns_where, first_row_of
from nsysprobe.common.table import Labels, Table
from nsysprobe.trace.values import pid_of


def gpu_ops(ev: Events, pid: int, dev: int, nccl=None) -> Table:
    """Every GPU operation of the process on the device, by start: ``start``, ``end``,
    ``correlationId``, ``kind`` (its busy kind), ``copy`` (HtoD, DtoH, ... for copies,
    else empty) and ``coll`` (its NCCL collective, else empty) as ``Labels``, ``bytes``."""
    kinds: list[str] = []  # busy-kind labels; rows carry codes into it
    copies: list[str] = [""]
    collectives: list[str] = [""]  # NCCL collective names; "" for other work

    def mine(df: Table, *more: str) -> dict[str, np.ndarray]:
        """The columns ``start``, ``end``, ``correlationId`` and ``more`` of the process's
        rows on the device."""
        on = (df["deviceId"] == dev) & (pid_of(df["globalPid"]) == pid)
        return columns_where(df, on, ("start", "end", "correlationId", *more))

    if nccl is not None and len(nccl):
        nccl_corr = np.asarray(nccl["correlationId"])
        nccl_coll = np.array(
            [_code(collectives, n) for n in nccl["collective"].tolist()], dtype=np.int64
        )
    else:
        nccl_corr = nccl_coll = np.empty(0, dtype=np.int64)

    def issued_by_nccl(f: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Work issued inside an NCCL range is communication, named by that range
        (unless a kernel's own name says which collective it is)."""
        hit = first_row_of(nccl_corr, f["correlationId"])
        inside = hit >= 0
        if inside.any():
            unnamed = inside & (f["coll"] == 0)
            f["coll"][unnamed] = nccl_coll[hit[unnamed]]
            f["kind"][inside] = _code(kinds, COMMUNICATION)
        return f

    parts = []
    k = mine(ev.kernels, "nameId")
    if k["start"].size:
        parts.append(_kernel_columns(ev, k, kinds, collectives, issued_by_nccl))
    g = mine(ev.graphs)
    if g["start"].size:
        parts.append(_op_columns(g, _code(kinds, COMPUTE), 0))
    c = mine(ev.memcpy, "bytes", "copyKind", "srcKind", "dstKind")
    if c["start"].size:
        parts.append(issued_by_nccl(_copy_columns(ev, c, kinds, copies)))
    m = mine(ev.memset)
    if m["start"].size:
        parts.append(issued_by_nccl(_op_columns(m, _code(kinds, MEMSET), 0)))
    if not parts:
        parts.append(_op_columns(k, np.empty(0, np.int64), 0))
    cols = (
        {n: np.concatenate([p[n] for p in parts]) for n in parts[0]} if len(parts) > 1 else parts[0]
    )
    del parts, k, g, c, m
    starts = cols["start"]
    if not iv.ascending(starts):
        order = np.argsort(starts, kind="stable")
        cols = {n: v[order] for n, v in cols.items()}
        del order
    for n, labels in (("kind", kinds), ("copy", copies), ("coll", collectives)):
        cols[n] = Labels(cols[n], labels)
    return Table(cols)


def _code(labels: list[str], label: str) -> int:
    if label not in labels:
        labels.append(label)
    return labels.index(label)


def _kernel_columns(ev: Events, k, kinds, collectives, issued_by_nccl) -> dict[str, np.ndarray]:
    """The kernels' columns (``_op_columns``): communication when the name says a collective,
    or when issued inside an NCCL range, else compute; named by their collective."""
    ids = k["nameId"]
    distinct = iv.sorted_unique(ids)
    names = [ev.name_of(i) for i in distinct.tolist()]
    named = [is_communication_kernel(n) for n in names]
    # A kernel whose name says no collective is named by the NCCL range issuing it.
    coll_of = np.array(
        [_code(collectives, collective_of(n)) if c else 0 for n, c in zip(names, named)],
        dtype=np.int64,
    )
    at = np.searchsorted(distinct, ids)
    comm = np.asarray(named, dtype=bool)[at]
    codes = np.where(comm, _code(kinds, COMMUNICATION), _code(kinds, COMPUTE))
    f = issued_by_nccl(_op_columns(k, codes, 0, coll_of[at]))
    # Still unnamed (no NCCL range either): the kernel's own name.
    unnamed = comm & (f["coll"] == collectives.index(""))
    if unnamed.any():
        own = np.array([_code(collectives, n) for n in names], dtype=np.int64)
        f["coll"][unnamed] = own[at[unnamed]]
    del at, comm, codes, unnamed
    return f


def _copy_columns(ev: Events, c, kinds, copies) -> dict[str, np.ndarray]:
    """The copies' columns (``_op_columns``), each of kind "memcpy K M" (``copy``: K) and its
    ``bytes``."""
    labels_copy = ev.lookups.copy_kind_labels
    labels_mem = ev.lookups.mem_kind_labels
    # One label per distinct (copy kind, source, destination): few, however many rows.
    distinct, inverse = distinct_rows(c["copyKind"], c["srcKind"], c["dstKind"])
    kind_codes, copy_codes = [], []
    for ck, sk, dk in distinct:
        label = labels_copy.get(int(ck), f"kind {int(ck)}")
        # The host side names the memory kind of a copy to or from the host.
        host = labels_mem.get(int(sk if label == "HtoD" else dk), "Unknown")
        name = f"memcpy {label} {host}" if label in ("HtoD", "DtoH") else f"memcpy {label}"
        kind_codes.append(_code(kinds, name))
        copy_codes.append(_code(copies, label))
    f = _op_columns(c, np.array(kind_codes)[inverse], np.array(copy_codes)[inverse])
    f["bytes"] = np.clip(c["bytes"], 0, None)
    return f


def runtime_calls(ev: Events, pid: int) -> Table:
    """The process's CUDA API calls by start: ``start``, ``end``, ``globalTid``,
    ``correlationId``, ``api`` (name, ``Labels`` sorted) and ``cat``. The columns of the
    report's own table are shared, not copied, when every call is the process's (one
    process per report, as most are)."""
    rt = ev.runtime
    mine = pid_of(rt["globalTid"]) == pid
    cols = columns_where(rt, mine, ("start", "end", "globalTid", "correlationId", "nameId"))
    del mine
    ids = cols.pop("nameId")
    distinct = iv.sorted_unique(ids)
    names = [api_name(ev.name_of(i)) for i in distinct.tolist()]
    labels = sorted(set(names))
    code_of = np.array([labels.index(n) for n in names], dtype=np.int32)
    cat_of = np.array([api_kind(n) for n in names], dtype=np.int8)
    which = np.searchsorted(distinct, ids)
    del ids
    cols["api"] = Labels(code_of[which], labels)
    starts = cols["start"]
    cols["cat"] = slow_launches(cat_of[which], cols["end"] - starts)
    del which
    out = Table(cols)
    if not iv.ascending(starts):
        out = out.take(np.argsort(starts, kind="stable"))
    return out


# -- the account ----------------------------------------------------------------------


def _op_columns(rows: dict[str, np.ndarray], kind, copy, coll=0) -> dict[str, np.ndarray]:
    """start, end, correlationId of ``rows``, the codes of ``kind``, ``copy`` and ``coll``
    (writable, one per row), ``bytes`` 0."""
    n = rows["start"].size

    def per_row(code) -> np.ndarray:
        return np.array(np.broadcast_to(np.asarray(code, dtype=np.int32), (n,)))

    return {
        "start": rows["start"],
        "end": rows["end"],
        "correlationId": rows["correlationId"],
        "kind": per_row(kind),
        "copy": per_row(copy),
        "bytes": np.zeros(n, dtype=np.int64),
        "coll": per_row(coll),
    }
