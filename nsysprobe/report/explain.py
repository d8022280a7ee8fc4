"""What each analysis measures and what each recommendation means, from the one place they
are written: each analysis module's docstring (``nsysprobe/analyses/``) and the catalogue of
recommendation ids in ``nsysprobe/diagnose/rules.py``. ``nsysprobe explain`` prints them; the
README's tables are ``markdown_tables()``, and a test fails when the README drifts from it.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass

from nsysprobe.errors import InputError

# The analyses a report holds, in the order the report shows them: name -> module.
ANALYSES = {
    "gaps": "gaps",
    "transfers": "transfers",
    "osrt": "osrt",
    "overlap": "overlap",
    "account": "account",
    "python_frames": "python_frames",
    "kernels": "kernels",
    "steps": "steps",
    "windows": "windows",
    "step_patterns": "step_patterns",
    "communication": "communication",
    "arrivals": "arrivals",
    "placement": "cpu_placement",
    "health": "health",
    "timeline": "timeline",
}
# A catalogue line of rules.py: four spaces, the id, two spaces or more, its meaning.
_CATALOGUE_LINE = re.compile(r"^    ([a-z_]+)\s{2,}(\S.*)$")
_CONTINUED = re.compile(r"^\s{8,}(\S.*)$")


@dataclass(frozen=True)
class Topic:
    name: str
    kind: str  # "analysis" or "recommendation"
    summary: str  # one paragraph, one line
    text: str  # the whole definition


def analyses() -> list[Topic]:
    out = []
    for name, module in ANALYSES.items():
        doc = importlib.import_module(f"nsysprobe.analyses.{module}").__doc__ or ""
        text = doc.strip()
        summary = " ".join(text.split("\n\n", 1)[0].split())
        out.append(Topic(name, "analysis", summary, text))
    return out


def recommendations() -> list[Topic]:
    doc = importlib.import_module("nsysprobe.diagnose.rules").__doc__ or ""
    meanings: dict[str, list[str]] = {}
    current = None
    for line in doc.splitlines():
        head, more = _CATALOGUE_LINE.match(line), _CONTINUED.match(line)
        if head:
            current = head.group(1)
            meanings[current] = [head.group(2)]
        elif more and current:
            meanings[current].append(more.group(1))
        else:
            current = None
    # What every rule shares (floors, order): the paragraphs after the catalogue.
    shared = doc.strip().split("\n\n")[-1:]
    return [
        Topic(
            rec_id,
            "recommendation",
            " ".join(words),
            "\n\n".join([f"{rec_id}: " + " ".join(words), *shared]),
        )
        for rec_id, words in meanings.items()
    ]


def topics() -> list[Topic]:
    return analyses() + recommendations()


def explain(name: str) -> Topic:
    """The analysis or recommendation called ``name``; InputError naming them all otherwise."""
    for topic in topics():
        if topic.name == name:
            return topic
    known = ", ".join(t.name for t in topics())
    raise InputError(
        f"explain {name!r}: no analysis or recommendation of that name; one of {known}"
    )


def markdown_tables() -> str:
    """The README's two tables: the analyses, and the recommendations' ids."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    lines = ["| analysis | what it measures |", "| --- | --- |"]
    lines += [f"| `{t.name}` | {cell(t.summary)} |" for t in analyses()]
    lines += ["", "| recommendation | when it is made |", "| --- | --- |"]
    lines += [f"| `{t.name}` | {cell(t.summary)} |" for t in recommendations()]
    return "\n".join(lines) + "\n"
