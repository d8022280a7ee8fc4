"""Sizes and counts as every output shows them: decimal units (1 GB = 10^9 bytes), as nsys
does, and counts with thousands separators and the noun in its number ("1 gap", "2 gaps")."""

from __future__ import annotations


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``2, "gap"`` -> ``2 gaps``; ``1, "process", "processes"`` -> ``1 process``."""
    return f"{count:,} {noun if count == 1 else plural or noun + 's'}"


def size(nbytes: float) -> str:
    """``1_500_000`` -> ``1.50 MB``; under a kB, whole bytes."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:,.2f} {unit}"
    return f"{int(nbytes)} B"
