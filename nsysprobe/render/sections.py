"""The report's sections as titled tables, shared by the text, Markdown and HTML renderers:
what a section is and the figures' formats; ``report_sections`` puts a report's together.

Each section is (title, note, header, rows): the renderers only lay them out, so the formats
cannot disagree on a figure.
"""

from __future__ import annotations

from dataclasses import dataclass

from nsysprobe.report.analyze import Report


@dataclass(frozen=True)
class Section:
    title: str
    notes: tuple[str, ...]
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


def ms(ns: float) -> str:
    return f"{ns / 1e6:,.1f} ms"


def pct(ratio: float) -> str:
    return f"{ratio:.1%}"


def headline(report: Report) -> str:
    t = report.trace
    return f"{t.path}: nsys {t.nsys_version or 'version unknown'}, {gpus_text(t)}"


def gpus_text(t) -> str:
    """The GPUs the trace describes; else the device ids its GPU work ran on."""
    if t.gpus:
        return ", ".join(t.gpus)
    if not t.gpu_ids:
        return "no GPU described and no GPU work"
    ids = " and ".join(", ".join(f"GPU {i}" for i in t.gpu_ids).rsplit(", ", 1))
    return f"{ids} (device ids of its GPU work; the trace describes no GPU)"


def shown(listed: int, total: int, what: str, where: str = "all are in the JSON") -> tuple:
    """The note of a table that shows the first ``listed`` of ``total`` rows, else nothing."""
    return (f"{listed:,} of {total:,} {what} shown; {where}",) if listed < total else ()
