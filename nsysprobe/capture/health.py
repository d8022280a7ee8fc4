"""Capture health: a capture that traced NVTX yet holds no NVTX ranges is called out, with why."""

from __future__ import annotations

from pathlib import Path

from nsysprobe.capture.machine import NVTX_FIX, nvtx_records_ranges, nvtx_version
from nsysprobe.trace.reader import Trace
from nsysprobe.trace.schema import NVTX_RANGE_TYPES


def nvtx_note(sqlite: Path, trace: str, nsys_version: str) -> str | None:
    """A line to print when NVTX was traced but no ranges were recorded; None when healthy."""
    if "nvtx" not in trace.split(","):
        return None
    with Trace(sqlite) as opened:
        counts = opened.nvtx_counts()
    if any(counts.get(kind, 0) for kind in NVTX_RANGE_TYPES):
        return None
    nvtx = nvtx_version()
    if nvtx is not None and nvtx_records_ranges(nvtx, nsys_version) is False:
        return (
            f"the capture holds no NVTX ranges: Python nvtx {nvtx} records none under nsys "
            f"{nsys_version}; {NVTX_FIX}"
        )
    return (
        "the capture holds no NVTX ranges: the workload pushed none inside the capture "
        "(wrap its steps in nvtx.annotate(...) to get a per-step breakdown)"
    )
