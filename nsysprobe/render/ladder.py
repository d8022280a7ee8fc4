"""A Ladder -> text, Markdown or JSON: one row per rung, then the notes and any problems.

Columns: steps/s from the profiled runs' traces (nsysprobe's analysis) and by the workload's
own clock under nsys, speed-up over the baseline, share of the cached ceiling (both from the
traces), GPU busy (profiled runs), profiled/plain steps/s (the workload's clock), the top
recommendation and whether it is the expected next rung. The JSON carries every figure
unrounded and every run.
"""

from __future__ import annotations

import dataclasses
import json

from nsysprobe.ladder.run import CLOCK_TOLERANCE, Ladder, Row
from nsysprobe.render import render_as
from nsysprobe.render.layout import fit, table, wrap
from nsysprobe.render.markdown import escape

HEADER = (
    "rung",
    "steps/s",
    "workload's clock",
    "speed-up",
    "of ceiling",
    "GPU busy",
    "profiled/plain",
    "top recommendation",
    "expected next",
)
CHECK_TEXT = {
    "expected": "yes",
    "no_gpu": "not checked: no GPU",
    "failed": "not checked: run failed",
}


def notes(ladder: Ladder) -> list[str]:
    runs = "1 profiled run" if ladder.repeats == 1 else f"median of {ladder.repeats} profiled runs"
    words = " ".join(ladder.options.args("multiworker")) or "their defaults"
    if ladder.options.workers is not None:
        words += " (--workers to the rungs with worker processes only)"
    return [
        f"steps/s: {runs}, read from the trace by nsysprobe (steps over the time from the "
        "first step's start to the last one's completion on the GPU); workload's clock: the "
        "same runs timed by the workload itself (they must agree within "
        f"{CLOCK_TOLERANCE:.0%}); speed-up over the baseline; of ceiling: share of the cached "
        "rung's steps/s",
        "GPU busy: union of GPU work in the profiled steps / their wall time; profiled/plain: "
        "the workload's steps/s under nsys / without it (1 minus it is the profiling cost)",
        "expected next: whether the top recommendation names the next rung's change "
        "(gpu_bound for streams, prefetch and cached)",
        f"workload options: {words}; nsys {ladder.nsys_version or 'unknown'}",
    ]


def cells(row: Row) -> tuple[str, ...]:
    return (
        row.rung,
        _num(row.steps_per_s, "{:,.2f}"),
        _num(row.profiled_steps_per_s, "{:,.2f}"),
        _num(row.speedup, "{:,.2f}x"),
        _num(row.share_of_ceiling, "{:.1%}"),
        _num(row.gpu_busy_ratio, "{:.1%}"),
        _num(row.profiled_over_plain, "{:.3f}"),
        _recommendation(row),
        CHECK_TEXT.get(row.check, f"no: expected {row.expected_recommendation}"),
    )


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else fmt.format(value)


def _recommendation(row: Row) -> str:
    top = row.top_recommendation or "-"
    agreeing = sum(r == row.top_recommendation for r in row.recommendations)
    if agreeing < len(row.recommendations):
        return f"{top} ({agreeing} of {len(row.recommendations)} runs)"
    return top


def render_ladder_text(ladder: Ladder, width: int | None = None) -> str:
    """The ladder's table, laid out for ``width`` columns (None: each row on one line)."""
    width = fit(width)
    lines = table(HEADER, [cells(row) for row in ladder.rows], width, rule=True)
    lines.append("")
    for note in notes(ladder):
        lines += wrap(note, width, hang="  ")
    if ladder.problems:
        lines += ["", "Problems:"]
        for p in ladder.problems:
            lines += wrap(p, width, "  ", "    ")
    return "\n".join(lines) + "\n"


def render_ladder_markdown(ladder: Ladder) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "| --- |" + " ---: |" * 6 + " --- | --- |"]
    for row in ladder.rows:
        c = cells(row)
        lines.append("| " + " | ".join(escape(x) for x in c) + " |")
    lines += [""] + [f"{escape(n)}  " for n in notes(ladder)]
    if ladder.problems:
        lines += ["", "**Problems**", ""] + [f"- {escape(p)}" for p in ladder.problems]
    return "\n".join(lines) + "\n"


def ladder_dict(ladder: Ladder) -> dict:
    runs = []
    for run in ladder.runs:
        data = dataclasses.asdict(run)
        data["mode"] = run.mode
        runs.append(data)
    return {
        "schema_version": ladder.schema_version,
        "repeats": ladder.repeats,
        "nsys_version": ladder.nsys_version,
        "workload_options": dataclasses.asdict(ladder.options),
        "rows": [
            {**dataclasses.asdict(row), "recommendations": list(row.recommendations)}
            for row in ladder.rows
        ],
        "runs": runs,
        "problems": list(ladder.problems),
    }


def render_ladder_json(ladder: Ladder) -> str:
    return json.dumps(ladder_dict(ladder), indent=2, ensure_ascii=False) + "\n"


RENDERERS = {
    "text": render_ladder_text,
    "markdown": render_ladder_markdown,
    "json": render_ladder_json,
}


def render_ladder(ladder: Ladder, fmt: str = "text", width: int | None = None) -> str:
    return render_as(RENDERERS, ladder, fmt, width)
