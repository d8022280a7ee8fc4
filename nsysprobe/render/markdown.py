"""The Markdown report. Trace strings (NVTX and kernel names) are escaped so they render as
text, never as markup, HTML, a link, a mention or math.

A report is pasted into pull requests, so ``escape`` also defuses what GitHub turns into
something live in plain text: ``@user`` and ``@org/team`` mentions (which notify), ``#123``
and ``GH-123`` references (which cross-link that issue), URLs with a scheme (``http://``),
``www.`` hosts and e-mail addresses (autolinks), and ``$...$`` math. GitHub looks for
mentions and references in the rendered text, where an entity is already decoded, so a WORD
JOINER (U+2060: zero width, no line break) goes after the ``@``, the ``#``, the ``GH-`` and
the ``:`` of ``://``, and before the ``.`` of ``www.``: the text reads the same and matches
none of them. It is written as the entity ``&#8288;`` (the character itself is a format
character, which everything printed escapes). ``$`` becomes ``&#36;``: it renders as ``$``,
and the math parser, which reads the source, does not take it for a delimiter.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from nsysprobe.render.report_sections import sections
from nsysprobe.render.sections import Section, headline, pct
from nsysprobe.report.analyze import Report

_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|<>~])")
# What GitHub makes live in text (after _SPECIAL has run: ``#`` is ``\#`` by then).
_LIVE = re.compile(r"@(?=\w)|#(?=\d)|(?i:\bgh-)(?=\d)|:(?=//)|(?i:www)(?=\.)|\$")
_WORD_JOINER = "&#8288;"


def _defuse(match: re.Match[str]) -> str:
    live = match.group()
    return "&#36;" if live == "$" else live + _WORD_JOINER


def escape(text: str) -> str:
    text = " ".join(str(text).split())
    text = _SPECIAL.sub(r"\\\1", text).replace("&", "&amp;")
    return _LIVE.sub(_defuse, text)


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
