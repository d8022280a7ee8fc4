"""A ManyReport -> text, Markdown, JSON or HTML: the ranks side by side, the stragglers, the
slowest ranks and what distinguishes them, then the reports that could not be analyzed.

Columns of the rank table: steps, steps/s (steps over time), median step, GPU busy, GPU idle
per step (median), pageable HtoD bytes and OS-runtime call time (totals over the capture),
step start lag (see ``nsysprobe.analyses.cross_rank``), the per-step test against every other
rank pooled, and the top recommendation.
"""

from __future__ import annotations

import dataclasses
import json

from nsysprobe.analyses.cross_rank import ManyReport, RankSummary, RankVerdict
from nsysprobe.common.units import size
from nsysprobe.render.layout import fit, section_text, wrap
from nsysprobe.render.markdown import escape, section_lines
from nsysprobe.render.sections import Section, ms, pct
from nsysprobe.render.step_sections import arrivals_section

HEADER = (
    "rank",
    "steps",
    "steps/s",
    "median step",
    "GPU busy",
    "idle/step",
    "pageable HtoD",
    "OS runtime",
    "start lag",
    "vs others",
    "top recommendation",
)


def headline(report: ManyReport) -> str:
    reports = len({r.source for r in report.ranks})
    clock = {
        "utc": "step starts aligned on each report's session start (UTC)",
        "partial": "step starts aligned only where a report records its session start",
        "none": "no report records its session start: step starts not aligned",
    }[report.alignment]
    plural = "" if reports == 1 else "s"
    return f"{len(report.ranks)} ranks from {reports} report{plural}; {clock}"


def many_sections(report: ManyReport) -> list[Section]:
    out = [_ranks(report)]
    if report.arrivals is not None:
        out += [_arrivals(report), _collectives(report), _rounds(report)]
    out.append(_stragglers(report))
    if report.slowest:
        out.append(_slowest(report))
    if report.errors:
        out.append(
            Section(
                "Not analyzed",
                (),
                ("rank", "error"),
                tuple((r.label, r.error or "") for r in report.errors),
            )
        )
    return out


def _opt(value, fmt) -> str:
    return "-" if value is None else fmt(value)


def _row(s: RankSummary, v: RankVerdict) -> tuple[str, ...]:
    if s.error is not None:
        return (s.label, *("-",) * 8, "not analyzed", "-")
    busy = _opt(s.gpu_busy_ratio, pct)
    if s.busy_basis == "span":
        busy += " (span)"
    test = v.verdict
    if v.slowdown_ratio is not None:
        test += f" (x{v.slowdown_ratio:.2f}, p={v.p_value:.2g})"
    elif v.p_value is not None:
        test += f" (p={v.p_value:.2g})"
    return (
        s.label,
        _opt(s.step_count, str),
        _opt(s.steps_per_s, lambda x: f"{x:,.2f}"),
        _opt(s.median_step_ns, ms),
        busy,
        _opt(s.idle_per_step_ns, ms),
        _opt(s.pageable_htod_bytes, size),
        _opt(s.osrt_ns, ms),
        _opt(v.start_lag_ns, ms),
        test,
        s.top_recommendation or "-",
    )


def _ranks(report: ManyReport) -> Section:
    test = (
        "vs others: from the arrivals at the collectives (below) for ranks with NCCL work; "
        "else a one-sided Mann-Whitney U of the rank's step times (each over the ranks' "
        "median of the same step) against every other rank's pooled, slower at p < "
        f"{report.thresholds['alpha_per_rank']:.2g} (Bonferroni) and a median "
        f"x{report.thresholds['min_slowdown_ratio']:.2f} or more"
    )
    notes = (
        test,
        "GPU busy is over the steps, '(span)' over the devices' span when no step range was found",
    )
    rows = tuple(_row(s, v) for s, v in zip(report.ranks, report.verdicts))
    return Section("Ranks", notes, HEADER, rows)


def _arrivals(report: ManyReport) -> Section:
    nccl = {s.label: (s.communication_ns, s.communication_exposed_ns) for s in report.ranks}
    return arrivals_section(report.arrivals, nccl)


def _collectives(report: ManyReport) -> Section:
    rows = tuple(
        (
            c.collective,
            str(c.instances),
            ", ".join(f"{label} {n}" for label, n in c.last_counts) or "ties",
            ms(c.median_held_up_ns),
        )
        for c in report.arrivals.collectives
    )
    return Section(
        "Latest rank by collective",
        (),
        ("collective", "instances", "last (instances)", "median held up"),
        rows,
    )


ROUNDS_SHOWN = 20


def _rounds(report: ManyReport) -> Section:
    a = report.arrivals
    shown = a.rounds[:ROUNDS_SHOWN]
    notes = (
        (f"the first {ROUNDS_SHOWN} of {len(a.rounds)}; every round is in the JSON",)
        if len(a.rounds) > ROUNDS_SHOWN
        else ()
    )
    rows = tuple(
        (str(r.index), r.name, str(r.instances), r.last or "tie", ms(r.held_up_ns)) for r in shown
    )
    title = {"steps": "step", "bursts": "burst of collectives", "collectives": "collective"}
    return Section(
        f"Latest rank per {title[a.rounds_basis]}",
        notes,
        ("#", "round", "instances", "last", "held up"),
        rows,
    )


def _stragglers(report: ManyReport) -> Section:
    if report.stragglers:
        by_label = {v.label: v for v in report.verdicts}
        causes = {r.label: r.causes for r in report.slowest}
        notes = []
        for label in report.stragglers:
            notes.append(f"{label}: {by_label[label].why}")
            for c in causes.get(label, ()):
                figures = (
                    f"{c.ns_per_step:.0%} vs {c.others_ns_per_step:.0%}"
                    if c.recommendation == "numa_binding"
                    else f"{ms(c.ns_per_step)} per step vs the others' {ms(c.others_ns_per_step)}"
                )
                notes.append(f"  why: {c.what} ({figures}; see {c.recommendation})")
            if not causes.get(label):
                notes.append(
                    "  why: no bucket of its step account exceeds the other ranks': the delay "
                    "comes from outside what the trace records (host load, another process)"
                )
        notes = tuple(notes)
    elif report.arrivals is not None:
        a = report.arrivals
        at_times = [r.label for r in a.ranks if r.verdict == "late at times"]
        notes = (
            f"No straggler: no rank of the {len(a.ranks)} with collectives is consistently "
            f"later than the others while holding them up "
            f"{a.thresholds['min_held_up_ratio']:.0%} of the time."
            + (
                f" Late at times (that much, not in most rounds): {', '.join(at_times)}."
                if at_times
                else ""
            ),
        )
    else:
        tested = sum(v.verdict != "unknown" for v in report.verdicts)
        slower = [v for v in report.verdicts if v.verdict == "slower"]
        if slower:
            which = ", ".join(f"{v.label} (x{v.slowdown_ratio:.2f})" for v in slower)
            text = (
                "No straggler: no collectives to time arrivals at (ranks that do not "
                f"communicate do not wait for each other); slower than the others pooled: {which}."
            )
        elif tested:
            text = (
                f"No straggler: no collectives to time arrivals at, and none of the {tested} "
                "ranks with steps is significantly slower than the others pooled."
            )
        else:
            text = (
                "No rank could be tested: straggler detection needs per-step NVTX ranges "
                "(wrap each step in a range such as 'Batch i', or name it with --step-range)."
            )
        notes = (text,)
    return Section("Stragglers", notes, (), ())


def _slowest(report: ManyReport) -> Section:
    rows = []
    for r in report.slowest:
        first = (
            r.label,
            _opt(r.median_step_ns, ms),
            _opt(r.slowdown_ratio, lambda x: f"x{x:.2f}"),
        )
        if not r.distinctions:
            rows.append((*first, "nothing measured stands out", "", ""))
        for i, d in enumerate(r.distinctions):
            fmt = size if d.unit == "bytes" else ms
            lead = first if i == 0 else ("", "", "")
            rows.append((*lead, d.title, fmt(d.value), fmt(d.others_median)))
    notes = (
        "Stands out: a figure at least "
        f"x{report.thresholds['distinct_ratio']:.1f} the median of the other ranks.",
    )
    return Section(
        "Slowest ranks",
        notes,
        ("rank", "median step", "vs others", "stands out", "value", "others' median"),
        tuple(rows),
    )


def render_many_text(report: ManyReport, width: int | None = None) -> str:
    lines = [*wrap(headline(report), fit(width), hang="  "), ""]
    for section in many_sections(report):
        lines += section_text(section, width)
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def render_many_markdown(report: ManyReport) -> str:
    lines = ["# nsysprobe cross-rank report", "", escape(headline(report)), ""]
    lines += section_lines(many_sections(report))
    return "\n".join(lines).rstrip() + "\n"


def many_dict(report: ManyReport) -> dict:
    """``schema_version``, ``alignment``, ``thresholds``, ``ranks`` (each summary with its
    ``vs_others`` verdict), ``stragglers`` (labels) and ``slowest``."""
    ranks = []
    for s, v in zip(report.ranks, report.verdicts):
        row = dataclasses.asdict(dataclasses.replace(s, collectives=None))
        row.pop("collectives")
        row["vs_others"] = dataclasses.asdict(v)
        ranks.append(row)
    return {
        "schema_version": report.schema_version,
        "alignment": report.alignment,
        "thresholds": report.thresholds,
        "ranks": ranks,
        "arrivals": dataclasses.asdict(report.arrivals) if report.arrivals else None,
        "stragglers": list(report.stragglers),
        "slowest": [dataclasses.asdict(r) for r in report.slowest],
    }


def render_many_json(report: ManyReport) -> str:
    return json.dumps(many_dict(report), indent=2, ensure_ascii=False) + "\n"


def render_many_html(report: ManyReport) -> str:
    from nsysprobe.render.html import page

    return page(
        "many.html",
        headline=headline(report),
        sections=many_sections(report),
        schema_version=report.schema_version,
    )


RENDERERS = {
    "text": render_many_text,
    "markdown": render_many_markdown,
    "json": render_many_json,
}
