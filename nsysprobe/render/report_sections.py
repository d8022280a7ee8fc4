"""A report's sections in order: the recommendations, the capture's health, then each declared
analysis's sections (``report/declared.py``) in the order it declares them, and the skipped
analyses."""

from __future__ import annotations

from nsysprobe.render import gpu_sections, step_sections
from nsysprobe.render.sections import Section, pct
from nsysprobe.report.analyze import Report
from nsysprobe.report.declared import ANALYSES


def sections(report: Report) -> list[Section]:
    out = [_recommendations(report)]
    if report.findings:
        out.append(
            Section(
                "Capture health",
                (),
                ("finding", "what", "fix"),
                tuple((f.id, f.message, f.fix) for f in report.findings),
            )
        )
    for analysis in ANALYSES:  # in the order they are declared
        for build in SECTIONS.get(analysis.name, ()):
            section = build(report)
            if section is not None:
                out.append(section)
    if report.skipped:
        out.append(
            Section(
                "Skipped analyses",
                (),
                ("analysis", "why", "to capture it"),
                tuple((s.analysis, s.reason, s.fix) for s in report.skipped),
            )
        )
    return out


def _recommendations(report: Report) -> Section:
    rows = tuple(
        (str(i), r.id, pct(r.expected_gain_ratio), r.reason, r.advice)
        for i, r in enumerate(report.recommendations, 1)
    )
    return Section(
        "Recommendations, by time saved",
        ("gain: share of the measured time the fix would save (estimate; see evidence in JSON)",),
        ("#", "id", "gain", "why", "what to change"),
        rows,
    )


# Each analysis's sections (``report/declared.py`` declares the analyses and their order);
# the analyses declared as parts of others (``shown=False``) have none.
SECTIONS = {**step_sections.SECTIONS, **gpu_sections.SECTIONS}
