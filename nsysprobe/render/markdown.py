"""The Markdown report. Trace strings (NVTX and kernel names) are escaped so they render as
text, never as markup or HTML."""

from __future__ import annotations

import re
from collections.abc import Iterable

from nsysprobe.render.sections import Section, headline, pct, sections
from nsysprobe.report.analyze import Report

_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|<>~])")


def escape(text: str) -> str:
    text = " ".join(str(text).split())
    return _SPECIAL.sub(r"\\\1", text).replace("&", "&amp;")


def render_markdown(report: Report) -> str:
    lines = ["# nsysprobe report", "", escape(headline(report)), ""]
    verdict = report.verdict
    if verdict is not None:
        gain = (
            f" (saves ~{pct(verdict.expected_gain_ratio)})" if verdict.expected_gain_ratio else ""
        )
        lines += [
            f"**Verdict: `{verdict.id}`** — {escape(verdict.title)}{gain}",
            "",
            f"- why: {escape(verdict.reason)}",
            f"- do: {escape(verdict.advice)}",
            "",
        ]
    lines += section_lines(sections(report))
    return "\n".join(lines).rstrip() + "\n"


def section_lines(sections: Iterable[Section]) -> list[str]:
    """Each section as a Markdown heading, its notes and its table."""
    lines: list[str] = []
    for s in sections:
        lines += [f"## {escape(s.title)}", ""]
        lines += [f"{escape(n)}  " for n in s.notes]
        if s.notes:
            lines.append("")
        if s.rows:
            lines.append("| " + " | ".join(escape(h) for h in s.header) + " |")
            lines.append("|" + "---|" * len(s.header))
            lines += ["| " + " | ".join(escape(c) for c in r) + " |" for r in s.rows]
            lines.append("")
    return lines
