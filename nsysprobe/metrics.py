"""The headline figures of one run, as ``compare`` and ``history`` show them.

They are read from the report's JSON form (``analysis.json`` of a run folder has the same
shape), so a run analyzed now, one analyzed earlier and one recorded in the history give the
same figures:

    steps_per_s          1 / median step wall time (the steps analysis)
    gpu_busy_ratio       union of GPU work in the steps / their wall time; without a step range
                         the devices' busy time / their span (``busy_basis`` says which)
    idle_per_step_ns     median over steps of the step's GPU idle time
    gap_ns               total GPU idle time in gaps over the threshold (all devices)
    pageable_htod_bytes  bytes copied host-to-device from pageable memory (total)
    exposed_copy_ns      HtoD copy time during which no kernel ran (total, union per device)
    top_recommendation   the first recommendation's id
    step_wall_ns         every step's wall time: the distribution ``compare`` tests
"""

from __future__ import annotations

from dataclasses import dataclass

from nsysprobe.report import Report


@dataclass(frozen=True)
class RunMetrics:
    trace: str  # the trace file's name
    step_count: int | None
    steps_per_s: float | None
    median_step_ns: int | None
    gpu_busy_ratio: float | None
    busy_basis: str  # "steps", "span" or "none"
    idle_per_step_ns: int | None
    gap_ns: int | None
    pageable_htod_bytes: int | None
    exposed_copy_ns: int | None
    top_recommendation: str | None
    top_gain_ratio: float | None
    step_wall_ns: tuple[int, ...]


def metrics_of(report: Report) -> RunMetrics:
    from nsysprobe.render.jsonfmt import report_dict

    return metrics_from_json(report_dict(report))


def metrics_from_json(data: dict) -> RunMetrics:
    """Figures from a report's JSON form (``nsysprobe analyze --format json``)."""
    steps = data.get("steps") or None
    walls = tuple(int(r["wall_ns"]) for r in steps["rows"]) if steps else ()
    idles = sorted(int(r["gpu_idle_ns"]) for r in steps["rows"]) if steps else []
    devices = data.get("devices") or []
    if steps:
        busy, basis = float(steps["gpu_busy_ratio"]), "steps"
    elif devices and sum(d["span_ns"] for d in devices):
        busy = sum(d["busy_ns"] for d in devices) / sum(d["span_ns"] for d in devices)
        basis = "span"
    else:
        busy, basis = None, "none"
    gaps, transfers, overlap = data.get("gaps"), data.get("transfers"), data.get("overlap")
    recs = data.get("recommendations") or []
    return RunMetrics(
        trace=str(data.get("trace", {}).get("path", "")),
        step_count=int(steps["count"]) if steps else None,
        steps_per_s=float(steps["steps_per_s"]) if steps else None,
        median_step_ns=int(steps["median_step_ns"]) if steps else None,
        gpu_busy_ratio=busy,
        busy_basis=basis,
        idle_per_step_ns=_median_int(idles) if idles else None,
        gap_ns=int(gaps["gap_ns"]) if gaps else None,
        pageable_htod_bytes=int(transfers["pageable_htod_bytes"]) if transfers else None,
        exposed_copy_ns=int(overlap["exposed_ns"]) if overlap else None,
        top_recommendation=recs[0]["id"] if recs else None,
        top_gain_ratio=float(recs[0]["expected_gain_ratio"]) if recs else None,
        step_wall_ns=walls,
    )


def _median_int(sorted_values: list[int]) -> int:
    n = len(sorted_values)
    mid = n // 2
    if n % 2:
        return sorted_values[mid]
    return (sorted_values[mid - 1] + sorted_values[mid]) // 2
