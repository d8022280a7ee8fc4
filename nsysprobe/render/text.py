"""The plain-text report: the verdict first, then each section as an aligned table."""

from __future__ import annotations

from nsysprobe.render.sections import Section, headline, pct, sections
from nsysprobe.report.analyze import Report

MAX_CELL = 70


def render_text(report: Report) -> str:
    lines = [headline(report), ""]
    verdict = report.verdict
    if verdict is not None:
        gain = (
            f" (saves ~{pct(verdict.expected_gain_ratio)})" if verdict.expected_gain_ratio else ""
        )
        lines.append(f"VERDICT: {verdict.id} - {verdict.title}{gain}")
        lines.append(f"  why: {verdict.reason}")
        lines.append(f"  do:  {verdict.advice}")
        lines.append("")
    for section in sections(report):
        lines.extend(_table(section))
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _clip(cell: str) -> str:
    cell = " ".join(cell.split())
    return cell if len(cell) <= MAX_CELL else cell[: MAX_CELL - 3] + "..."


def _table(section: Section) -> list[str]:
    out = [section.title, "-" * len(section.title)]
    out.extend(section.notes)
    if not section.rows:
        return out
    rows = [tuple(_clip(c) for c in section.header)] + [
        tuple(_clip(c) for c in r) for r in section.rows
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        out.append("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    return out
