"""CPU and node lists in the kernel's text form (``0-3,8,10-11``), both ways."""

from __future__ import annotations

import re
from collections.abc import Iterable

from nsysprobe.errors import TopologyError

_CPULIST = re.compile(r"^\d+(-\d+)?(,\d+(-\d+)?)*$")


def is_cpulist(text: str) -> bool:
    """True when ``text`` has the shape of a kernel CPU list (``0-17,36-53``)."""
    return bool(_CPULIST.match(text.strip()))


def parse_cpulist(text: str, *, where: str = "a CPU list") -> frozenset[int]:
    """``"0-2,4"`` -> ``{0, 1, 2, 4}``; an empty string is the empty set."""
    ids: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        first, _, last = part.partition("-")
        try:
            low, high = int(first), int(last or first)
        except ValueError:
            raise TopologyError(
                f"cannot read {part!r} in {where}: expected numbers and ranges like 0-3,8"
            ) from None
        if high < low:
            raise TopologyError(f"range {part!r} in {where} runs backwards: write it low-high")
        ids.update(range(low, high + 1))
    return frozenset(ids)


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
