"""The headline figures of one run, as ``compare`` and ``history`` show them.

``metrics_of`` reads them from a ``Report``; ``metrics_from_json`` from the report's saved JSON
form (``analysis.json`` of a run folder, ``--format json``), so a run analyzed now, one
analyzed earlier and one recorded in the history give the same figures:

    steps_per_s          steps / the time from the first step's start to the last one's
                         completion (the steps analysis, ``windows.py``)
    median_step_ns       the median step (window)
    step_timing          how the steps were timed: "completion" (each step to its completion on
                         the GPU, ``windows.py``), or "cpu range" (their NVTX ranges: an analysis
                         written before report schema 2, or a history entry made by it)
    gpu_busy_ratio       union of GPU work in the steps / their wall time; without a step range
                         the devices' busy time / their span (``busy_basis`` says which); both
                         ``intervals.busy_ratio``
    idle_per_step_ns     median over steps of the step's GPU idle time
    gap_ns               the step accounts' idle time in gaps over the threshold (all devices);
                         None from a report written before schema 3 (its gaps were the
                         devices' idle stretches over the whole capture)
    pageable_htod_bytes  bytes copied host-to-device from pageable memory (total)
    exposed_copy_ns      HtoD copy time during which no kernel ran (total, union per device)
    top_recommendation   the first recommendation's id
    step_wall_ns         every step's wall time (window): the distribution ``compare`` tests
    gpus                 what ran the GPU work, as ``compare`` tells machines apart: the GPU
                         model without bus ids ("NVIDIA H200", "2 x NVIDIA H200"), "no GPU" when
                         none ran (a CPU run), "" when not known (an analysis or a history
                         entry an older nsysprobe wrote)

A JSON form that comes from a file or a history row is anybody's: ``parse_json`` refuses what
nsysprobe never writes (NaN, Infinity, nesting deeper than ``MAX_JSON_DEPTH``) and every figure
is checked for its type and range (``FIGURES``) before any arithmetic touches it; names are
cut and escaped (``safetext.name``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from nsysprobe.analyses.intervals import busy_ratio
from nsysprobe.common.safetext import name
from nsysprobe.report.analyze import Report

INT64_MAX = 2**63 - 1  # SQLite's largest integer, and numpy's
PATH_CHARS = 4096  # the longest path Linux opens: a path shown is cut only past it
MAX_JSON_DEPTH = 32  # a report's JSON nests 8 deep
# Objects and arrays a JSON form may open: a report's holds one per ~100 bytes (800 in the
# largest sample's 97 kB; 10,000 steps with a few child ranges each, some 70,000). Each costs
# Python some 60-300 bytes however small its text ("{}," is 3), so their count is what bounds
# the parser's memory.
MAX_JSON_CONTAINERS = 1 << 18
BUSY_BASES = ("steps", "span", "none")
# How steps were timed (``RunMetrics.step_timing``): to their completion on the GPU since
# report schema 2, by their CPU ranges before.
COMPLETION, CPU_RANGE = "completion", "cpu range"
STEP_TIMINGS = (COMPLETION, CPU_RANGE)
# The report schema from which steps are timed to their completion.
COMPLETION_SCHEMA = 2
# The report schema from which gaps are the step account's idle stretches in its steady steps;
# before, the devices' idle stretches over the whole capture: not the same figure.
ACCOUNT_GAPS_SCHEMA = 3

# Each figure's type and the range it lies in. steps_per_s is steps over at least 1 ns: at most
# the steps a report can hold per ns (0 when there are no steps to time).
_NS = (int, 0, INT64_MAX)
_RATIO = (float, 0.0, 1.0)
FIGURES = {
    "step_count": _NS,
    "steps_per_s": (float, 0.0, 1e18),
    "median_step_ns": _NS,
    "gpu_busy_ratio": _RATIO,
    "idle_per_step_ns": _NS,
    "gap_ns": _NS,
    "pageable_htod_bytes": _NS,
    "exposed_copy_ns": _NS,
    "top_gain_ratio": _RATIO,
    "step_wall_ns": _NS,  # each step's
}


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
    step_timing: str = COMPLETION
    gpus: str = ""


NO_GPU = "no GPU"
# The bus id the report appends to a GPU's name: "NVIDIA H200 (0000:00:06.0)".
_BUS_ID = re.compile(r" \([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]\)$")


def gpus_used(gpus: Sequence[str], gpu_ids: Sequence[int]) -> str:
    """``RunMetrics.gpus`` from a trace's described GPUs and the device ids of its GPU work."""
    if not gpu_ids:
        return NO_GPU
    models = sorted({_BUS_ID.sub("", g) for g in gpus})
    if not models:
        return "1 unnamed GPU" if len(gpu_ids) == 1 else f"{len(gpu_ids)} unnamed GPUs"
    model = " / ".join(models)
    return model if len(gpu_ids) == 1 else f"{len(gpu_ids)} x {model}"


class FigureError(ValueError):
    """A report's JSON form that nsysprobe did not write: the message says where
    (``steps.rows[3].wall_ns: inf; expected a whole number from 0 to ...``)."""


def figure(field: str, value: object) -> int | float | None:
    """``value`` as figure ``field`` of ``FIGURES`` when it has its type and lies in its
    range (an int is a float's value too), else None."""
    return _valid(FIGURES[field], value)


def metrics_of(report: Report) -> RunMetrics:
    """The figures of ``report``, read from its fields: the same figures ``metrics_from_json``
    reads from its JSON form. Lenient: a figure out of range that an analysis computed from an
    odd trace reads as not measured (None), rather than failing the analysis that made it."""

    def each(values: list[int]) -> list[int] | None:
        checked = [figure("step_wall_ns", v) for v in values]
        return None if None in checked else checked

    steps, gaps = report.steps, report.gaps
    rows = steps.rows if steps else ()
    walls, idles = each([r.wall_ns for r in rows]), each([r.gpu_idle_ns for r in rows])
    devices = gaps.devices if gaps else ()
    spans, busys = each([d.span_ns for d in devices]), each([d.busy_ns for d in devices])
    if steps:
        busy, basis = figure("gpu_busy_ratio", steps.gpu_busy_ratio), "steps"
    elif spans and busys and sum(spans):
        busy, basis = figure("gpu_busy_ratio", busy_ratio(sum(busys), sum(spans))), "span"
    else:
        busy, basis = None, "none"
    top = report.recommendations[0] if report.recommendations else None
    return RunMetrics(
        trace=name(report.trace.path),
        step_count=figure("step_count", steps.count) if steps else None,
        steps_per_s=figure("steps_per_s", steps.steps_per_s) if steps else None,
        median_step_ns=figure("median_step_ns", steps.median_step_ns) if steps else None,
        gpu_busy_ratio=busy,
        busy_basis=basis,
        idle_per_step_ns=_median_int(sorted(idles)) if idles else None,
        gap_ns=figure("gap_ns", gaps.gap_ns) if gaps else None,
        pageable_htod_bytes=(
            figure("pageable_htod_bytes", report.transfers.pageable_htod_bytes)
            if report.transfers
            else None
        ),
        exposed_copy_ns=(
            figure("exposed_copy_ns", report.overlap.exposed_ns) if report.overlap else None
        ),
        top_recommendation=name(top.id) if top else None,
        top_gain_ratio=figure("top_gain_ratio", top.expected_gain_ratio) if top else None,
        step_wall_ns=tuple(walls or ()),
        gpus=name(gpus_used(report.trace.gpus, report.trace.gpu_ids)),
    )


def metrics_from_json(data: object, *, strict: bool = True) -> RunMetrics:
    """Figures from a report's JSON form (``nsysprobe analyze --format json``).

    Each figure is checked against ``FIGURES``: one missing, of the wrong type or out of range
    raises FigureError naming it, or with ``strict=False`` reads as not measured (None; no
    step times at all when one of them is bad). A section of the wrong shape always raises.
    """

    def checked(field: str, value: object, where: str):
        got = figure(field, value)
        if got is None and strict:
            raise FigureError(f"{where}: {_shown(value)}; expected {_expected(FIGURES[field])}")
        return got

    def fig(field: str, section: dict | None, key: str, where: str):
        """Figure ``field``, found at ``key`` of ``section`` (None when there is none)."""
        return checked(field, section.get(key, _MISSING), f"{where}.{key}") if section else None

    def each(rows: list[tuple[str, dict]], key: str) -> list[int] | None:
        """Nanoseconds ``key`` of every row; None when one is bad."""
        values = [fig("step_wall_ns", row, key, where) for where, row in rows]
        return None if None in values else values

    if not isinstance(data, dict):
        raise FigureError(f"the top level: {_shown(data)}; expected an object")
    steps = _section(data, "steps")
    rows = _objects(steps, "rows", "steps.rows") if steps else []
    walls, idles = each(rows, "wall_ns"), each(rows, "gpu_idle_ns")
    devices = _objects(data, "devices", "devices")
    spans, busys = each(devices, "span_ns"), each(devices, "busy_ns")
    if steps:
        busy, basis = fig("gpu_busy_ratio", steps, "gpu_busy_ratio", "steps"), "steps"
    elif spans and busys and sum(spans):
        ratio = busy_ratio(sum(busys), sum(spans))
        busy, basis = checked("gpu_busy_ratio", ratio, "devices: busy_ns / span_ns"), "span"
    else:
        busy, basis = None, "none"
    trace = _section(data, "trace")
    version = data.get("schema_version")
    known = isinstance(version, int) and not isinstance(version, bool)
    old = known and version < COMPLETION_SCHEMA
    device_gaps = known and version < ACCOUNT_GAPS_SCHEMA
    recs = _objects(data, "recommendations", "recommendations")[:1]
    top = recs[0][1] if recs else None
    return RunMetrics(
        trace=name(_text(trace.get("path", ""), "trace.path")) if trace else "",
        step_count=fig("step_count", steps, "count", "steps"),
        steps_per_s=fig("steps_per_s", steps, "steps_per_s", "steps"),
        median_step_ns=fig("median_step_ns", steps, "median_step_ns", "steps"),
        gpu_busy_ratio=busy,
        busy_basis=basis,
        idle_per_step_ns=_median_int(sorted(idles)) if idles else None,
        gap_ns=None if device_gaps else fig("gap_ns", _section(data, "gaps"), "gap_ns", "gaps"),
        pageable_htod_bytes=fig(
            "pageable_htod_bytes", _section(data, "transfers"), "pageable_htod_bytes", "transfers"
        ),
        exposed_copy_ns=fig("exposed_copy_ns", _section(data, "overlap"), "exposed_ns", "overlap"),
        top_recommendation=name(_text(top.get("id"), "recommendations[0].id")) if top else None,
        top_gain_ratio=fig("top_gain_ratio", top, "expected_gain_ratio", "recommendations[0]"),
        step_wall_ns=tuple(walls or ()),
        step_timing=CPU_RANGE if old else COMPLETION,
        gpus=_gpus(trace),
    )


def _gpus(trace: dict | None) -> str:
    """``RunMetrics.gpus`` of a saved report's ``trace``; "" when it does not say (written
    before ``gpu_ids``, or not as nsysprobe writes it)."""
    gpus, ids = (trace or {}).get("gpus"), (trace or {}).get("gpu_ids")
    if not isinstance(gpus, list) or not all(isinstance(g, str) for g in gpus):
        return ""
    if not isinstance(ids, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) for i in ids
    ):
        return ""
    return name(gpus_used(gpus, ids))


def parse_json(raw: bytes) -> object:
    """JSON as nsysprobe writes it: FigureError (a ValueError) when it opens more than
    ``MAX_JSON_CONTAINERS`` objects and arrays (counted before parsing: a brace inside a string
    counts too) or nests deeper than ``MAX_JSON_DEPTH``, ValueError when it is not UTF-8 JSON
    or holds NaN or Infinity."""
    opened = raw.count(b"{") + raw.count(b"[")
    if opened > MAX_JSON_CONTAINERS:
        raise FigureError(
            f"{opened:,} objects and arrays, more than the {MAX_JSON_CONTAINERS:,} of "
            f"nsysprobe's largest JSON"
        )
    try:
        value = json.loads(raw.decode("utf-8"), parse_constant=_not_json)
    except RecursionError:  # the parser's own bound, some 1,000 deep
        value = None
        too_deep = True
    else:
        too_deep = _deeper_than(value, MAX_JSON_DEPTH)
    if too_deep:
        raise FigureError(f"nested more than {MAX_JSON_DEPTH} deep, deeper than nsysprobe's JSON")
    return value


_MISSING = object()


def _deeper_than(value: object, limit: int) -> bool:
    """Whether objects and arrays nest more than ``limit`` deep in ``value`` (level by level,
    without recursion)."""
    level, depth = [value], 0
    while any(isinstance(v, (dict, list)) for v in level):
        depth += 1
        if depth > limit:
            return True
        level = [
            item
            for v in level
            if isinstance(v, (dict, list))
            for item in (v.values() if isinstance(v, dict) else v)
        ]
    return False


def _not_json(constant: str):
    raise ValueError(f"{constant} is not a JSON number")


def _valid(spec: tuple, value: object) -> int | float | None:
    kind, lo, hi = spec
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if kind is int and not isinstance(value, int):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if not lo <= value <= hi:
        return None
    return float(value) if kind is float else value


def _expected(spec: tuple) -> str:
    kind, lo, hi = spec
    return f"a whole number from {lo} to {hi}" if kind is int else f"a number from {lo:g} to {hi:g}"


def _shown(value: object) -> str:
    """``value`` in a message, short whatever it is."""
    if value is _MISSING:
        return "missing"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, str):
        return name(json.dumps(value[:40]), 40)
    return name(json.dumps(value) if isinstance(value, bool) or value is None else repr(value), 40)


def _section(data: dict, key: str) -> dict | None:
    """``data[key]``: an object, or None when it is missing, null or empty."""
    value = data.get(key)
    if not value:
        return None
    if not isinstance(value, dict):
        raise FigureError(f"{key}: {_shown(value)}; expected an object")
    return value


def _objects(data: dict, key: str, where: str) -> list[tuple[str, dict]]:
    """The objects of the list ``data[key]`` (none when it is missing or null), each with
    where it is."""
    value = data.get(key)
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):  # a tuple: a Report's own form
        raise FigureError(f"{where}: {_shown(value)}; expected an array")
    out = []
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise FigureError(f"{where}[{i}]: {_shown(item)}; expected an object")
        out.append((f"{where}[{i}]", item))
    return out


def _text(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise FigureError(f"{where}: {_shown(value)}; expected a string")
    return value


def _median_int(sorted_values: list[int]) -> int:
    n = len(sorted_values)
    mid = n // 2
    if n % 2:
        return sorted_values[mid]
    return (sorted_values[mid - 1] + sorted_values[mid]) // 2
