"""A Comparison -> text, Markdown or JSON: one row per run, the first run is the reference.

Columns: steps, steps/s, speed-up (steps/s over the first run's), GPU busy, GPU idle per step
(median), pageable HtoD bytes and exposed copy time (totals over the capture), the verdict
of the per-step test against the first run, and the top recommendation. Figures after the
first row carry their difference to the first in parentheses.
"""

from __future__ import annotations

import dataclasses
import json

from nsysprobe.common.units import size
from nsysprobe.render.layout import fit, table, wrap
from nsysprobe.render.markdown import escape
from nsysprobe.render.sections import ms
from nsysprobe.report.metrics import RunMetrics
from nsysprobe.runs.compare import SCHEMA_VERSION, Comparison, Difference

HEADER = (
    "run",
    "steps",
    "steps/s",
    "speed-up",
    "GPU busy",
    "idle/step",
    "pageable HtoD",
    "exposed copy",
    "vs first",
    "top recommendation",
)
NOTE = (
    "speed-up = steps/s over the first run's (steps/s = steps / the time from the first "
    "step's start to the last one's completion); vs first = Mann-Whitney U test on the "
    "per-step wall times (each step from the last one's completion to its own); pageable "
    "HtoD and exposed copy are totals over each capture"
)


def rows(comparison: Comparison) -> list[tuple[str, ...]]:
    first = comparison.runs[0].metrics
    out = []
    for run, diff in zip(comparison.runs, comparison.differences):
        m = run.metrics
        # Steps timed two ways measure two things: no difference of their figures is shown.
        ref = None if diff is None or m.step_timing != first.step_timing else first
        out.append(
            (
                run.label,
                "-" if m.step_count is None else f"{m.step_count:,}",
                _delta(m.steps_per_s, ref and ref.steps_per_s, lambda v: f"{v:,.2f}", "{:+,.2f}"),
                "1.00x (reference)"
                if diff is None
                else ("-" if diff.speedup is None else f"{diff.speedup:,.2f}x"),
                _busy(m, ref),
                _delta(m.idle_per_step_ns, ref and ref.idle_per_step_ns, ms, None, ms),
                _delta(m.pageable_htod_bytes, ref and ref.pageable_htod_bytes, size, None, size),
                _delta(m.exposed_copy_ns, ref and ref.exposed_copy_ns, ms, None, ms),
                "-" if diff is None else verdict_text(diff),
                m.top_recommendation or "-",
            )
        )
    return out


def verdict_text(diff: Difference) -> str:
    if diff.verdict in ("faster", "slower"):
        return f"{diff.verdict} ({confidence_text(diff.confidence)}, p={diff.p_value:.2g})"
    if diff.verdict == "within noise":
        return f"within noise (p={diff.p_value:.2g})"
    return f"unknown: {diff.why}"


def confidence_text(confidence: float) -> str:
    """``0.998`` -> ``99.8% confidence``. A test is never certain: above 99.9 % (where one
    decimal would round up to 100.0 %) it reads ``over 99.9% confidence``."""
    if confidence > 0.999:
        return "over 99.9% confidence"
    return f"{confidence:.1%} confidence"


def _busy(m: RunMetrics, ref: RunMetrics | None) -> str:
    if m.gpu_busy_ratio is None:
        return "-"
    text = f"{m.gpu_busy_ratio:.1%}" + (" of span" if m.busy_basis == "span" else "")
    if ref is not None and ref.gpu_busy_ratio is not None:
        text += f" ({(m.gpu_busy_ratio - ref.gpu_busy_ratio) * 100:+.1f} pt)"
    return text


def _delta(value, ref, fmt, delta_fmt, delta_fn=None) -> str:
    if value is None:
        return "-"
    text = fmt(value)
    if ref is None:
        return text
    d = value - ref
    if delta_fn is not None:
        return f"{text} ({'+' if d >= 0 else '-'}{delta_fn(abs(d))})"
    return f"{text} ({delta_fmt.format(d)})"


def gate_lines(comparison: Comparison) -> list[str]:
    """The gate's verdict and one line per check (empty without a gate)."""
    g = comparison.gate
    if g is None:
        return []
    head = "gate: FAILED" if g.failed else "gate: passed"
    return [head] + [
        f"{'FAIL' if c.failed else 'pass'}  {c.run}: {c.check} ({c.why})" for c in g.checks
    ]


def render_comparison_text(comparison: Comparison, width: int | None = None) -> str:
    """The table, laid out for ``width`` columns (None: each row on one line)."""
    width = fit(width)
    lines = table(HEADER, rows(comparison), width, rule=True)
    for warning in comparison.warnings:
        lines += ["", *wrap(f"warning: {warning}", width, hang="  ")]
    lines += ["", *wrap(NOTE, width, hang="  ")]
    for r in comparison.runs:
        lines += wrap(f"{r.label}: {r.source}", width, hang="  ")
    gate = gate_lines(comparison)
    lines += [""] + [x for line in gate for x in wrap(line, width, hang="      ")] if gate else []
    return "\n".join(lines) + "\n"


def render_comparison_markdown(comparison: Comparison) -> str:
    """A table fit for a pull-request comment, the gate's verdict first when there is one."""
    lines = []
    g = comparison.gate
    if g is not None:
        lines += [f"**nsysprobe gate: {'failed' if g.failed else 'passed'}**", ""]
        lines += [
            f"- {'❌' if c.failed else '✅'} {escape(c.run)}: {escape(c.check)} ({escape(c.why)})"
            for c in g.checks
        ]
        lines.append("")
    lines += [f"> **Warning:** {escape(w)}\n" for w in comparison.warnings]
    lines += ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(escape(c) for c in r) + " |" for r in rows(comparison)]
    lines += ["", escape(NOTE)]
    return "\n".join(lines) + "\n"


def comparison_dict(comparison: Comparison) -> dict:
    runs = []
    for run, diff in zip(comparison.runs, comparison.differences):
        metrics = dataclasses.asdict(run.metrics)
        metrics["step_wall_ns"] = list(run.metrics.step_wall_ns)
        runs.append(
            {
                "label": run.label,
                "source": run.source,
                **metrics,
                "vs_first": None if diff is None else dataclasses.asdict(diff),
            }
        )
    out = {"schema_version": SCHEMA_VERSION, "runs": runs, "warnings": list(comparison.warnings)}
    if comparison.gate is not None:
        out["gate"] = {
            "failed": comparison.gate.failed,
            "checks": [dataclasses.asdict(c) for c in comparison.gate.checks],
        }
    return out


def render_comparison_json(comparison: Comparison) -> str:
    # Every figure is finite (compare checks what it reads): NaN would not be JSON.
    text = json.dumps(comparison_dict(comparison), indent=2, ensure_ascii=False, allow_nan=False)
    return text + "\n"


RENDERERS = {
    "text": render_comparison_text,
    "markdown": render_comparison_markdown,
    "json": render_comparison_json,
}
