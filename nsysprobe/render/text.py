"""The plain-text report: the verdict first, then each section as an aligned table.

``width`` is the terminal's (``nsysprobe.render.layout``): every line fits it, cells wrapped at
spaces. Without one (a file, a pipe) each row is one line. Either way every word is printed:
nothing is cut.
"""

from __future__ import annotations

from nsysprobe.render.layout import fit, table, text_width, wrap
from nsysprobe.render.sections import Section, headline, pct, sections
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


def section_text(section: Section, width: int | None = None) -> list[str]:
    """A section as its title, underlined, its notes and its table, fit to ``width``."""
    width = fit(width)
    title = wrap(section.title, width)
    out = [*title, "-" * max(text_width(t) for t in title)]
    for note in section.notes:
        out += wrap(note, width, hang="  ")
    if section.rows:
        out += table(section.header, section.rows, width)
    return out
