"""Sizes as every output shows them: decimal units (1 GB = 10^9 bytes), as nsys does."""

from __future__ import annotations


def size(nbytes: float) -> str:
    """``1_500_000`` -> ``1.50 MB``; under a kB, whole bytes."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:,.2f} {unit}"
    return f"{int(nbytes)} B"
