"""CPU and node lists in the kernel's text form (``0-3,8,10-11``), both ways, within Linux's
limits.

Every CPU or node list nsysprobe reads (sysfs, ``/proc``, recorded command outputs) is expanded
here, and nowhere else, so a list naming ids no Linux machine has (``0-2000000000``) is a
one-line error instead of gigabytes of memory:

- ``MAX_CPUS``: CPU ids run below ``NR_CPUS``, which the kernel's Kconfig caps at 8192
  (``MAXSMP`` on x86-64; arm64 allows 4096).
- ``MAX_NODES``: node ids run below ``MAX_NUMNODES`` = 2^``NODES_SHIFT``, at most 2^10.

A list is at most ``MAX_LIST_CHARS`` long, and reading it costs one pass over its text and at
most one over the ids below the limit, however its ranges overlap (``0-8191,0-8191,...``,
which no kernel prints); the ids of every set are shared, not made anew for each list.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from itertools import compress

from nsysprobe.errors import TopologyError

MAX_CPUS = 8192
MAX_NODES = 1024
# The longest list the kernel prints for MAX_CPUS ids (every other CPU: "0,2,4,...") is under
# 20 kB; anything much longer is not a kernel list.
MAX_LIST_CHARS = 64 * 1024
_CPULIST = re.compile(r"[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*")
_ID_DIGITS = 9  # more digits than any id below MAX_CPUS, few enough for int() to stay cheap
_IDS = tuple(range(MAX_CPUS))
# Kernel lists have a few ranges; past this many, ids are marked in a bitmap instead of a set.
_FEW_RANGES = 8


def is_cpulist(text: str) -> bool:
    """True when ``text`` has the shape of a kernel CPU list (``0-17,36-53``)."""
    text = text.strip()
    return len(text) <= MAX_LIST_CHARS and bool(_CPULIST.fullmatch(text))


def parse_id(text: str, *, where: str, kind: str = "CPU", fix: str = "") -> int:
    """One id below Linux's limit: a node's (``kind="node"``) below ``MAX_NODES``, any other
    (a CPU's, a socket's, a core's) below ``MAX_CPUS``."""
    text = text.strip()
    limit = MAX_NODES if kind == "node" else MAX_CPUS
    if not (text.isascii() and text.isdigit()):
        raise TopologyError(
            f"{where}: {kind} id {text[:40]!r} is not a number; {fix or _default_fix(kind)}"
        )
    if len(text) > _ID_DIGITS or int(text) >= limit:
        raise TopologyError(_too_big(where, kind, text, limit, fix))
    return int(text)


def parse_cpulist(
    text: str, *, where: str = "a CPU list", kind: str = "CPU", fix: str = ""
) -> frozenset[int]:
    """``"0-2,4"`` -> ``{0, 1, 2, 4}``; an empty string is the empty set.

    ``kind="node"`` reads a node list (``Mems_allowed_list``, a NUMA affinity). Ids at or past
    ``MAX_CPUS`` (``MAX_NODES``) raise TopologyError naming ``where`` and ``fix``."""
    text = text.strip()
    limit = MAX_NODES if kind == "node" else MAX_CPUS
    if len(text) > MAX_LIST_CHARS:
        raise TopologyError(
            f"{where}: a {kind} list of {len(text)} characters, longer than any the kernel "
            f"prints for {limit} ids; {fix or _default_fix(kind)}"
        )
    ranges: list[tuple[int, int]] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        first, dash, last = part.partition("-")
        if not all(n.isascii() and n.isdigit() for n in (first, last or first)) or (
            dash and not last
        ):
            raise TopologyError(
                f"cannot read {part[:40]!r} in {where}: expected numbers and ranges like 0-3,8"
            )
        if len(first) > _ID_DIGITS or len(last) > _ID_DIGITS:
            raise TopologyError(_too_big(where, kind, max(first, last, key=len), limit, fix))
        low, high = int(first), int(last or first)
        if high < low:
            raise TopologyError(f"range {part!r} in {where} runs backwards: write it low-high")
        if high >= limit:
            raise TopologyError(_too_big(where, kind, str(high), limit, fix))
        ranges.append((low, high))
    return _covered(ranges, limit)


def parse_nodelist(text: str, *, where: str, fix: str = "") -> frozenset[int]:
    """A NUMA node list (``0-1``), ids below ``MAX_NODES``."""
    return parse_cpulist(text, where=where, kind="node", fix=fix)


def format_cpulist(ids: Iterable[int]) -> str:
    """``{0, 1, 2, 4}`` -> ``"0-2,4"``, the inverse of :func:`parse_cpulist`."""
    ranges: list[str] = []
    ordered = sorted(set(ids))
    start = 0
    for i in range(1, len(ordered) + 1):
        if i == len(ordered) or ordered[i] != ordered[i - 1] + 1:
            low, high = ordered[start], ordered[i - 1]
            ranges.append(str(low) if low == high else f"{low}-{high}")
            start = i
    return ",".join(ranges)


def _covered(ranges: list[tuple[int, int]], limit: int) -> frozenset[int]:
    """The ids of ``ranges`` (each within ``limit``), in time linear in their count and limit."""
    if len(ranges) <= _FEW_RANGES:
        ids: set[int] = set()
        for low, high in ranges:
            ids.update(_IDS[low : high + 1])
        return frozenset(ids)
    marks = bytearray(limit)
    for low, high in ranges:
        marks[low : high + 1] = b"\x01" * (high - low + 1)
    return frozenset(compress(_IDS, marks))


def _too_big(where: str, kind: str, number: str, limit: int, fix: str) -> str:
    shown = number if len(number) <= 20 else f"{number[:12]}... ({len(number)} digits)"
    what = "nodes" if kind == "node" else "CPUs"
    return (
        f"{where}: {kind} {shown} is past the {limit} {what} Linux supports "
        f"(ids 0-{limit - 1}); {fix or _default_fix(kind)}"
    )


def _default_fix(kind: str) -> str:
    return f"give {kind} ids as the kernel prints them, e.g. 0-3,8"
