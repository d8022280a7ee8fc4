"""The HTML report: one self-contained file, readable offline, deterministic.

The verdict and the ranked recommendations come first, then the figures, drawn as inline SVG
(no script, no network: a Content-Security-Policy forbids both):

- a timeline of a few representative steps in the style of the Nsight Systems GUI (NVTX rows
  in their own colors, CUDA API and OS-runtime calls per thread, kernels and copies per
  stream, GPU idle gaps hatched), from ``nsysprobe.analyses.timeline``. A GPU row is drawn as
  what the GPU did in each pixel column: the column shaded by the share of its time the
  work ran, each kind in its color (``busy_colors``), so a step of thousands of tiny kernels
  reads as the mostly idle row it is, not as one solid bar;
- where each step's time went: the step thread's CPU time by child range, and GPU busy/idle;
- copy/compute overlap per device;

then every table the text report has (``render.sections``), so the formats cannot disagree.

The page is written by the Jinja2 templates in ``render/templates``: ``base.html`` the
skeleton every nsysprobe page extends (the many-ranks page too), ``cards.html`` the tables,
``svg.html`` the figures, ``report.html`` this page. This module gives them the page's
cards; ``render.timeline_figure`` and ``render.charts`` lay the figures out as shapes
(``render.svg``: coordinates, colors, the words that fit a bar); the templates escape every
string they write, so trace text (NVTX, kernel, thread and function names) reaches the page
escaped by construction, its control characters dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version

import jinja2
from markupsafe import Markup

from nsysprobe.analyses.timeline import Timeline
from nsysprobe.render.charts import STEPS_CHARTED, account_figure, overlap_figure, steps_figure
from nsysprobe.render.report_sections import sections
from nsysprobe.render.sections import Section, headline, ms, pct
from nsysprobe.render.svg import Figure, ms_label
from nsysprobe.render.timeline_figure import timeline_figure
from nsysprobe.report.analyze import Report

ACCOUNT_TITLE = "Where the step time went (step account)"
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_NUMERIC = re.compile(r"^[-+]?[\d,.]+\s*(%|ms|s|B|kB|MB|GB)?$")


# -- the templates -----------------------------------------------------------------------


def _num(x: float) -> str:
    return f"{x:.1f}".rstrip("0").rstrip(".")


def _numeric_columns(section: Section) -> list[bool]:
    """Per column: every cell a number (or "-"), so the column is right-aligned."""
    return [
        all(_NUMERIC.match(r[i].strip()) or r[i].strip() == "-" for r in section.rows)
        for i in range(len(section.header))
    ]


def _clean(value: object) -> object:
    """What a template writes, before it is escaped: text without control characters."""
    if isinstance(value, str) and not isinstance(value, Markup):
        return _CONTROL.sub("", value)
    return value


def _version() -> str:
    try:
        return version("nsysprobe")
    except PackageNotFoundError:
        return "(not installed)"


ENVIRONMENT = jinja2.Environment(
    loader=jinja2.PackageLoader("nsysprobe.render", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
    finalize=_clean,
)
ENVIRONMENT.filters.update(
    num=_num, ms=ms, ms_label=ms_label, pct=pct, numeric_columns=_numeric_columns
)
ENVIRONMENT.globals["version"] = _version


def page(template: str, **context: object) -> str:
    """The page ``template`` (a file of ``render/templates``) writes from ``context``."""
    return ENVIRONMENT.get_template(template).render(**context)


# -- the cards ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Card:
    """A figure's card: the figure, or None and why not; its table; how many steps it draws."""

    figure: Figure | None
    section: Section | None = None
    drawn: int = 0
    count: int = 0
    why: str = ""
    fix: str = ""


def render_html(report: Report, timeline: Timeline | None = None) -> str:
    all_sections = sections(report)
    by_title = {s.title: s for s in all_sections}
    shown = {all_sections[0].title, ACCOUNT_TITLE, "Steps", "Copy/compute overlap"}
    return page(
        "report.html",
        report=report,
        headline=headline(report),
        recommendations=all_sections[0],
        account=_account_card(report, by_title.get(ACCOUNT_TITLE)),
        tl=timeline,
        timeline=Card(timeline_figure(timeline) if timeline and timeline.lanes else None),
        steps=_steps_card(report, by_title.get("Steps"), timeline),
        overlap=_overlap_card(report, by_title.get("Copy/compute overlap")),
        evidence=[s for s in all_sections if s.title not in shown],
    )


def _steps_card(report: Report, section: Section | None, tl: Timeline | None) -> Card:
    st = report.steps
    if st is None or section is None:
        why = next((s.reason for s in report.skipped if s.analysis == "steps"), "no steps")
        fix = next((s.fix for s in report.skipped if s.analysis == "steps"), "")
        return Card(None, why=why, fix=fix)
    drawn = min(len(st.rows), STEPS_CHARTED)
    return Card(steps_figure(report, tl), section, drawn, st.count)


def _account_card(report: Report, section: Section | None) -> Card:
    a = report.account.main if report.account else None
    if a is None or section is None:
        return Card(None)
    return Card(account_figure(report), section, min(len(a.steps), STEPS_CHARTED), a.step_count)


def _overlap_card(report: Report, section: Section | None) -> Card:
    o = report.overlap
    if o is None or not o.htod_ns:
        why = "no GPU activity in the trace" if o is None else "no host-to-device copies"
        return Card(None, why=why)
    return Card(overlap_figure(report), section)
