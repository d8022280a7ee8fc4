"""Communication: which GPU work is NCCL's, and each collective's time, exposed or hidden.

GPU work is communication when NCCL issued it:

- kernels named ``nccl…Kernel…`` (``ncclDevKernel_AllReduce_Sum_f32_RING_LL``; older NCCL
  ``ncclKernel_…``; RCCL and MSCCL name theirs the same way), and
- any kernel, copy or memset issued by a CUDA call made inside one of NCCL's own NVTX ranges
  (ranges in the process's ``NCCL`` domain, or named ``ncclAllReduce``, ``ncclGroupEnd``, ...):
  a one-rank communicator copies instead of launching a kernel (seen on the H200 with NCCL
  2.28.9: ``ncclAllReduce`` ranges over device-to-device copies and no NCCL kernel).

A collective's name is the one its kernel carries (``AllReduce``, ``AllGather``,
``SendRecv``), else its NCCL range's without the ``nccl`` prefix (``AllReduce``).

The step account (``account/``) gives communication its own busy kind: the time NCCL work
ran with no compute kernel running is *exposed*; the rest ran under compute (*overlapped*).
Exposed communication is either transfer time or time a collective waited for a later rank to
arrive; which is which takes every rank (``arrivals.py``).

No export seen holds NCCL's message sizes: nsys 2025.3.1 and 2026.2.1 write the NCCL ranges'
payload schemas (``NVTX_PAYLOAD_SCHEMA_ENTRIES``: "Message size [bytes]") but no payload
values (``binaryData`` and ``jsonText`` empty), so bytes are not reported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from nsysprobe.analyses import intervals as iv
from nsysprobe.analyses.rows import per_category, rows_of_thread
from nsysprobe.common.table import Groups, Table, first_seen
from nsysprobe.trace.values import pid_of

_KERNEL = re.compile(r"^(?:nccl|rccl|msccl)\w*?kernel", re.IGNORECASE)
# ncclAllReduce, ncclGroupEnd, ncclSend: NCCL's API names (not ncclx_user_range).
_RANGE = re.compile(r"^nccl[A-Z]")
NCCL_DOMAIN = "NCCL"


def is_communication_kernel(name: str) -> bool:
    return bool(_KERNEL.match(name))


# NCCL's collectives, the longer names first (ReduceScatter before Reduce).
COLLECTIVES = (
    "ReduceScatter",
    "AllReduce",
    "AllGather",
    "AllToAll",
    "Broadcast",
    "SendRecv",
    "Reduce",
    "Send",
    "Recv",
)


def collective_of(name: str) -> str:
    """The collective a kernel or NCCL range name says, whatever NCCL's naming of the day:
    ``ncclDevKernel_AllReduce_Sum_f32_RING_LL``, ``ncclKernel_AllGather_RING_LL_Sum_int8_t``,
    ``ncclAllReduceRingLLKernel_sum_f32`` (NCCL 2.7) and the range ``ncclAllReduce`` all give
    ``AllReduce``; a name that says none (``ncclDevKernel_Generic``) gives "" (the NCCL range
    that issued it may say)."""
    if not (_KERNEL.match(name) or _RANGE.match(name)):
        return ""
    lower = name.lower()
    return next((c for c in COLLECTIVES if c.lower() in lower), "")


@dataclass(frozen=True)
class CollectiveSummary:
    """One collective (by name) in the steps of one account."""

    name: str  # AllReduce, AllGather, ReduceScatter, SendRecv, Broadcast, ...
    count: int
    total_ns: int  # each operation's own duration, summed
    exposed_ns: int  # the part of that with no compute kernel running


def nccl_issued(runtime: Table, nvtx: Table, domains: dict) -> dict[int, Table]:
    """pid -> the CUDA calls made inside NCCL's NVTX ranges: ``correlationId`` (sorted) and
    ``collective`` (the innermost NCCL range's, as ``collective_of`` names it).

    ``domains``: (pid, domainId) -> domain name, from the domain-creation rows.
    """
    if not len(nvtx) or not len(runtime):
        return {}
    # Millions of NVTX ranges in a PyTorch trace: test each distinct name and (process,
    # domain) once, not each row.
    nccl_domain = [(p << 32) | d for (p, d), name in domains.items() if name == NCCL_DOMAIN]
    in_domain = np.zeros(len(nvtx), dtype=bool)
    if nccl_domain:
        domain = nvtx["domainId"]
        # Domain ids first (a cheap test), then the process of the rows that pass it.
        maybe = np.flatnonzero(np.isin(domain, [k & 0xFFFFFFFF for k in nccl_domain]))
        dom = domain[maybe].astype(np.int64)  # a 32-bit column: widened before the shift
        keys = (pid_of(nvtx["globalTid"][maybe]) << 32) | (dom & 0xFFFFFFFF)
        in_domain[maybe] = np.isin(keys, np.array(nccl_domain, dtype=np.int64))
    # ``_RANGE`` and the collectives' names hold no digits: a range's pattern says as much.
    named = per_category(nvtx["pattern"], lambda p: bool(_RANGE.match(p)), bool)
    ranges = nvtx.take(in_domain | named)
    if not len(ranges):
        return {}
    collective = per_category(ranges["pattern"], collective_of)
    call_start, call_corr = runtime["start"], runtime["correlationId"]
    found: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
    # The ranges of each thread, threads in order of first appearance, rows in table order.
    tids, which = first_seen(ranges["globalTid"])
    by_thread = np.argsort(which, kind="stable")
    cuts = np.searchsorted(which[by_thread], np.arange(1, tids.size))
    for tid, own in zip(tids.tolist(), np.split(by_thread, cuts)):
        # Only row numbers until the calls inside a range are known: the thread may have made
        # millions of calls, a few of them inside NCCL's ranges.
        mine = rows_of_thread(runtime, tid)
        holder = iv.innermost_cover(ranges["start"][own], ranges["end"][own], call_start[mine])
        inside = holder >= 0
        if inside.any():
            found.setdefault(int(pid_of(np.array([tid]))[0]), []).append(
                (call_corr[mine[inside]], collective[own][holder[inside]])
            )
    out = {}
    for p, parts in found.items():
        corr = np.concatenate([c for c, _ in parts])
        names = np.concatenate([n for _, n in parts])
        # A call in two threads' ranges counts once, as first found; by correlation id.
        _, first = np.unique(corr, return_index=True)
        out[p] = Table({"correlationId": corr[first], "collective": names[first]})
    return out


def summarize(
    starts: np.ndarray,
    ends: np.ndarray,
    names: np.ndarray,
    compute: iv.Intervals,
    windows: iv.Intervals,
) -> tuple[CollectiveSummary, ...]:
    """Per collective name: the operations starting inside a window, their time and the part
    of it under no compute kernel (``compute``: the union of compute kernels), largest first."""
    w = iv.outermost_cover(windows[0], windows[1], starts) if starts.size else starts
    keep = w >= 0
    s, e, n = starts[keep], ends[keep], names[keep]
    if not s.size:
        return ()
    hidden = iv.covered(s, e, compute)
    groups = Groups([n], sort=False)
    ns = e - s
    count, total, exposed = groups.count(), groups.sum(ns), groups.sum(ns - hidden)
    out = [
        CollectiveSummary(str(k), int(c), int(t), int(round(x)))
        for k, c, t, x in zip(groups.keys[0].tolist(), count, total, exposed)
    ]
    return tuple(sorted(out, key=lambda c: (-c.exposed_ns, -c.total_ns, c.name)))
