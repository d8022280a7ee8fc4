"""The plain-text report: the verdict first, then each section as an aligned table.

``width`` is the terminal's (``nsysprobe.render.layout``): every line fits it, cells wrapped at
spaces. Without one (a file, a pipe) each row is one line. Either way every word is printed:
nothing is cut.
"""

from __future__ import annotations

from nsysprobe.render.layout import fit, section_text, wrap
from nsysprobe.render.report_sections import sections
from nsysprobe.render.sections import headline, pct
from nsysprobe.report.analyze import Report


def render_text(report: Report, width: int | None = None) -> str:
    width = fit(width)
    lines = [*wrap(headline(report), width, hang="  "), ""]
    verdict = report.verdict
    if verdict is not None:
        gain = (
            f" (saves ~{pct(verdict.expected_gain_ratio)})" if verdict.expected_gain_ratio else ""
        )
        lines += wrap(f"VERDICT: {verdict.id} - {verdict.title}{gain}", width, hang="  ")
        lines += wrap(verdict.reason, width, "  why: ", " " * 7)
        lines += wrap(verdict.advice, width, "  do:  ", " " * 7)
        lines.append("")
    for section in sections(report):
        lines += section_text(section, width)
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
