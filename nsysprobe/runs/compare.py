"""Runs side by side: each run's headline figures and how each differs from the first.

A run is a trace (``.sqlite``, ``.nsys-rep``/``.qdrep``, analyzed now), a run folder (its
``analysis.json`` as ``nsysprobe run`` writes it, else the one ``*.sqlite`` in it) or the id of
a history entry (``nsysprobe history``). A path wins over an id of the same spelling.

An ``analysis.json`` is read by one loader, ``read_analysis``: at most ``MAX_ANALYSIS_BYTES``
(a real one is tens of kB), JSON without NaN or Infinity nesting at most
``metrics.MAX_JSON_DEPTH`` deep, every figure checked for its type and range
(``metrics.FIGURES``); anything else is a one-line error naming the file and the field. Run
labels and sources are file names and paths, anybody's text: they are cut and escaped
(``safetext.name``) before anything shows them.

Whether a run is faster than the first is decided on the **distributions** of per-step wall
times, not on one number: a two-sided Mann-Whitney U test (exact over every split of the
pooled steps when there are at most ``EXACT_SPLITS`` splits, else the normal approximation
with tie correction). When p >= ``ALPHA`` the difference is *within noise*; otherwise the run
is *faster* or *slower* with confidence 1 - p. The speed-up is the ratio of steps per second
(steps over time).

Steps are windows from one step's completion to the next (``analyses/windows.py``); a run
whose steps were timed by their CPU ranges (an ``analysis.json`` or a history entry an older
nsysprobe wrote) is not tested against one timed to completion: in a loop where the CPU runs
ahead, the two measure different things.

**The gate** (``gate``, ``nsysprobe compare --fail-if-slower PCT --fail-if EXPR``) checks every
run after the first against it, for CI: a run fails ``--fail-if-slower PCT`` when its steps are
*slower* by the test above (beyond noise) and its time per step (one over steps/s) is more
than PCT % longer than the first run's; one whose steps cannot be tested (under ``MIN_STEPS``
in either run, or timed differently) fails too, saying so: a gate that cannot check must not
pass silently (a crashed job captures no steps). ``--fail-if METRIC<VALUE`` (``<``, ``<=``,
``>``, ``>=``) fails a run whose figure meets the condition, or that lacks the figure; METRIC
is a figure of the table (``GATE_METRICS``). Each check is a condition that fails the run, and
its line answers it: ``slower by more than 5% (no: time per step -85.0%, faster beyond noise,
p=6.8e-08)``, ``gpu_busy_ratio<0.9 (yes: gpu_busy_ratio = 0.21)``, or ``cannot test: ...``.

Runs whose GPU work ran on different GPUs (``metrics.RunMetrics.gpus``: a CPU run beside an
H200 run) are compared all the same, with a warning in every format (``machine_warnings``).
"""

from __future__ import annotations

import errno
import math
import re
from dataclasses import dataclass
from pathlib import Path

from nsysprobe.analyses.stats import ALPHA, MIN_STEPS, mann_whitney
from nsysprobe.common.safetext import name
from nsysprobe.errors import InputError
from nsysprobe.report.metrics import (
    CPU_RANGE,
    PATH_CHARS,
    RunMetrics,
    metrics_from_json,
    metrics_of,
    parse_json,
)
from nsysprobe.report.saved import ANALYSIS_FILE

SCHEMA_VERSION = 1
# An analysis.json is tens of kB (10,000 step rows, the most a report lists, make some 2 MB).
MAX_ANALYSIS_BYTES = 16 << 20


@dataclass(frozen=True)
class Run:
    label: str  # short name shown in tables
    source: str  # the path, or "history #N"
    metrics: RunMetrics


@dataclass(frozen=True)
class Difference:
    """How ``run`` differs from the first run of the comparison."""

    speedup: float | None  # steps/s of the run / steps/s of the first
    verdict: str  # "faster", "slower", "within noise", "unknown"
    p_value: float | None  # two-sided Mann-Whitney U on per-step wall times
    confidence: float | None  # 1 - p when faster or slower
    faster_share_ratio: float | None  # P(a step of the run is shorter than one of the first)
    why: str  # one line: the test, or why there is none


@dataclass(frozen=True)
class Check:
    run: str  # the run's label
    check: str  # what was checked, e.g. "slower by more than 5%" or "gpu_busy_ratio<0.9"
    value: float | None  # the figure checked (the slowdown in % for --fail-if-slower)
    failed: bool
    why: str


@dataclass(frozen=True)
class Gate:
    checks: tuple[Check, ...]

    @property
    def failed(self) -> bool:
        return any(c.failed for c in self.checks)


@dataclass(frozen=True)
class Comparison:
    runs: tuple[Run, ...]
    differences: tuple[Difference | None, ...]  # None for the first run
    gate: Gate | None = None  # when thresholds were given
    warnings: tuple[str, ...] = ()  # what makes the runs unlike (``machine_warnings``)


# Figures a --fail-if condition may name: RunMetrics' numbers, and the speed-up over the first.
GATE_METRICS = (
    "steps_per_s",
    "speedup",
    "median_step_ns",
    "gpu_busy_ratio",
    "idle_per_step_ns",
    "gap_ns",
    "pageable_htod_bytes",
    "exposed_copy_ns",
    "top_gain_ratio",
    "step_count",
)
_CONDITION = re.compile(r"^\s*([a-z_]+)\s*(<=|>=|<|>)\s*(\S+)\s*$")
_OPS = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def parse_condition(text: str) -> tuple[str, str, float]:
    """``"gpu_busy_ratio<0.9"`` -> ("gpu_busy_ratio", "<", 0.9); InputError when malformed."""
    found = _CONDITION.match(text)
    hint = f"write METRIC<VALUE with < <= > >=, METRIC one of {', '.join(GATE_METRICS)}"
    if not found:
        raise InputError(f"--fail-if {text!r}: not a condition; {hint}")
    metric, op, raw = found.groups()
    if metric not in GATE_METRICS:
        raise InputError(f"--fail-if {text!r}: unknown figure {metric!r}; {hint}")
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise InputError(f"--fail-if {text!r}: {raw!r} is not a finite number; {hint}")
    return metric, op, value


def check_percentage(pct: float | None) -> None:
    """InputError unless ``pct`` (--fail-if-slower) is None or a finite 0 or more."""
    if pct is not None and not (math.isfinite(pct) and pct >= 0):
        raise InputError(f"--fail-if-slower {pct}: give a percentage of 0 or more, e.g. 5")


def gate(
    comparison: Comparison, fail_if_slower: float | None, conditions: tuple[str, ...] = ()
) -> Gate:
    """Every run after the first, checked against the thresholds (see the module docstring)."""
    check_percentage(fail_if_slower)
    parsed = [(text.strip(), *parse_condition(text)) for text in conditions]
    first = comparison.runs[0].metrics
    checks = []
    for run, diff in zip(comparison.runs[1:], comparison.differences[1:]):
        if fail_if_slower is not None:
            checks.append(_slower_check(run, diff, first, fail_if_slower))
        for text, metric, op, limit in parsed:
            value = diff.speedup if metric == "speedup" else getattr(run.metrics, metric)
            if value is None:
                why = f"cannot test: {metric} is not measured"
                checks.append(Check(run.label, text, None, True, why))
                continue
            met = _OPS[op](float(value), limit)
            why = f"{'yes' if met else 'no'}: {metric} = {value:.6g}"
            checks.append(Check(run.label, text, float(value), met, why))
    return Gate(tuple(checks))


def _slower_check(run: Run, diff: Difference, first: RunMetrics, pct: float) -> Check:
    what = f"slower by more than {pct:g}%"
    if diff.verdict == "unknown" or not diff.speedup:
        why = diff.why if diff.verdict == "unknown" else "no steps/s to compare"
        return Check(run.label, what, None, True, f"cannot test: {why}")
    slowdown = (1 / diff.speedup - 1) * 100  # time per step, against the first run's
    beyond = diff.verdict == "slower"
    failed = beyond and slowdown > pct
    # The answer to the check's question first, then the figure and the test behind it.
    figure = f"time per step {slowdown:+.1f}%"
    if failed:
        why = f"yes: {figure}, slower beyond noise, p={diff.p_value:.2g}"
    elif beyond:
        why = f"no: {figure}, slower beyond noise, p={diff.p_value:.2g}, but not over {pct:g}%"
    elif diff.verdict == "faster":
        why = f"no: {figure}, faster beyond noise, p={diff.p_value:.2g}"
    else:
        why = f"no: {figure}, within noise, p={diff.p_value:.2g}"
    return Check(run.label, what, slowdown, failed, why)


def difference(first: RunMetrics, other: RunMetrics) -> Difference:
    speedup = (
        other.steps_per_s / first.steps_per_s
        if first.steps_per_s and other.steps_per_s is not None
        else None
    )
    if speedup is not None and not math.isfinite(speedup):
        speedup = None  # 1e9 steps/s over 1e-300: no figure anybody measured
    a, b = first.step_wall_ns, other.step_wall_ns
    if first.step_timing != other.step_timing:
        older = "the first run" if first.step_timing == CPU_RANGE else "this run"
        return Difference(
            None,
            "unknown",
            None,
            None,
            None,
            f"{older} timed its steps by their CPU ranges (an older nsysprobe); analyze its "
            f"trace again to time them to completion",
        )
    if len(a) < MIN_STEPS or len(b) < MIN_STEPS:
        return Difference(
            speedup,
            "unknown",
            None,
            None,
            None,
            f"needs {MIN_STEPS}+ steps in each run to test (has {len(a)} and {len(b)})",
        )
    u, p = mann_whitney(b, a)
    # U of b counts pairs where b's step is longer; the share where it is shorter is the rest.
    faster_share = 1.0 - u / (len(a) * len(b))
    test = f"Mann-Whitney U on {len(b)} vs {len(a)} step times, p={p:.3g}"
    if p >= ALPHA:
        return Difference(speedup, "within noise", p, None, faster_share, test)
    verdict = "faster" if faster_share > 0.5 else "slower"
    return Difference(speedup, verdict, p, 1.0 - p, faster_share, test)


def compare_runs(runs: list[Run]) -> Comparison:
    if len(runs) < 2:
        raise InputError("compare needs two runs or more; give traces, run folders or history ids")
    first = runs[0].metrics
    diffs = (None,) + tuple(difference(first, r.metrics) for r in runs[1:])
    return Comparison(runs=tuple(runs), differences=diffs, warnings=machine_warnings(runs))


def machine_warnings(runs: list[Run]) -> tuple[str, ...]:
    """A warning when the runs' GPU work ran on different GPUs (``RunMetrics.gpus``; a run
    that does not say is left out): a CPU run beside an H200 run, an H100 beside an H200."""
    known = [(r.label, r.metrics.gpus) for r in runs if r.metrics.gpus]
    if len({gpus for _, gpus in known}) < 2:
        return ()
    each = "; ".join(f"{label}: {gpus}" for label, gpus in known)
    return (
        f"the runs did not run on the same GPUs ({each}): their differences are the "
        f"machines' as much as the code's; compare runs of one machine",
    )


def load_run(spec: str, *, history_path: Path | None = None, analyze_options=None) -> Run:
    """A Run from a trace path, a run folder or a history id (see the module docstring)."""
    path = Path(spec)
    try:
        is_dir, exists = path.is_dir(), path.exists()
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:
            raise
        is_dir = exists = False  # no file has such a name: an id, perhaps
    if is_dir:
        return _from_folder(path, analyze_options or {})
    if exists:
        return _from_trace(path, analyze_options or {})
    if spec.isascii() and spec.isdigit():
        from nsysprobe.runs import history

        entry = history.get(history.entry_id(spec), history_path)
        return _run(f"#{entry.id} {entry.metrics.trace}", f"history #{entry.id}", entry.metrics)
    raise InputError(
        f"{name(spec)}: no such file, folder or history id; give a trace (.sqlite, .nsys-rep), "
        f"a run folder or an id from `nsysprobe history`"
    )


def read_analysis(path: Path) -> RunMetrics:
    """The figures of an ``analysis.json``, checked (see the module docstring)."""
    with open(path, "rb") as file:
        raw = file.read(MAX_ANALYSIS_BYTES + 1)
    fix = f"re-create it with `nsysprobe analyze TRACE --format json > {path}`"
    if len(raw) > MAX_ANALYSIS_BYTES:
        raise InputError(
            f"{path}: larger than {MAX_ANALYSIS_BYTES >> 20} MB, not an nsysprobe analysis (one "
            f"is tens of kB); {fix}"
        )
    try:
        return metrics_from_json(parse_json(raw))
    except ValueError as exc:
        raise InputError(f"{path}: not an nsysprobe analysis ({exc}); {fix}") from None


def _run(label: str, source: str, metrics: RunMetrics) -> Run:
    return Run(label=name(label), source=name(source, PATH_CHARS), metrics=metrics)


def _from_trace(path: Path, options: dict) -> Run:
    from nsysprobe.report.analyze import analyze

    report = analyze(path, **options)
    return _run(path.name, str(path), metrics_of(report))


def _from_folder(folder: Path, options: dict) -> Run:
    """A run folder's ``analysis.json``; its one ``.sqlite`` analyzed now when it has none, or
    when an older nsysprobe wrote it (steps timed by their CPU ranges)."""
    analysis = folder / ANALYSIS_FILE
    traces = sorted(p for p in folder.iterdir() if p.suffix == ".sqlite")
    if analysis.is_file():
        metrics = read_analysis(analysis)
        if metrics.step_timing != CPU_RANGE or len(traces) != 1:
            return _run(folder.name, str(folder), metrics)
    if len(traces) != 1:
        found = ", ".join(p.name for p in traces[:5]) + (", ..." if len(traces) > 5 else "")
        raise InputError(
            f"{folder}: a run folder holds {ANALYSIS_FILE} or one .sqlite export (found "
            f"{len(traces)}: {name(found or 'none', 1000)}); pass the trace itself"
        )
    return _run(folder.name, str(folder), _from_trace(traces[0], options).metrics)
