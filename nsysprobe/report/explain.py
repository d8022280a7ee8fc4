"""What each analysis measures and what each recommendation means, from the one place they
are written: each analysis module's docstring (``nsysprobe/analyses/``, in the order
``report/declared.py`` declares them), the rows of recommendations in
``nsysprobe/diagnose/rules.py`` (``RULES``: each id and its meaning) and each id's page in
``nsysprobe/diagnose/pages.py``. ``nsysprobe explain`` prints them; the README's tables are
``markdown_tables()``, and a test fails when the README drifts from it.

A constant named between double backquotes, bare or as module.NAME (windows.PERIODIC_RATIO),
is shown with its value as the code holds it when the text is shown: 3% (MIN_GAIN_RATIO =
0.03), the name still between its backquotes (``fill``). A recommendation's example is the
shipped trace analyzed when the page is asked for, where ``sample_traces/`` is at hand (a
checkout), else the line kept beside the id.
"""

from __future__ import annotations

import importlib
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

from nsysprobe.diagnose.pages import PAGES, Page
from nsysprobe.diagnose.rules import RULES as RULE_ROWS
from nsysprobe.errors import InputError, NsysprobeError
from nsysprobe.report.declared import ANALYSES

RULES = "nsysprobe.diagnose.rules"
# Where a bare constant's name is looked up after the text's own module (by default the
# diagnosis's shared one); ``module.NAME`` is looked up in the module of that name in these
# packages.
SHARED_HOME = "nsysprobe.diagnose.common"
HOMES = (
    SHARED_HOME,
    "nsysprobe.diagnose.inputs",
    "nsysprobe.diagnose.copies",
    "nsysprobe.diagnose.host",
    "nsysprobe.diagnose.communication",
    "nsysprobe.diagnose.patterns",
    "nsysprobe.diagnose.verdicts",
    "nsysprobe.analyses.account",
    "nsysprobe.analyses.windows",
    "nsysprobe.analyses.kernels",
    "nsysprobe.analyses.step_patterns",
    "nsysprobe.analyses.gaps",
    "nsysprobe.analyses.calls",
    "nsysprobe.analyses.arrivals",
    "nsysprobe.analyses.cpu_placement",
)
PACKAGES = ("nsysprobe.analyses", "nsysprobe.diagnose")
# The traces the examples name, in a checkout; an installed package has none.
SAMPLE_TRACES = Path(__file__).resolve().parents[2] / "sample_traces"
# What every page's comparison asks of the run after the fix: no slower beyond noise, and
# faster (``nsysprobe compare --fail-if-slower PCT --fail-if EXPR``).
FAIL_IF_SLOWER = 0
FAIL_IF = ("speedup<1",)
# A page's parts, in order, after the id's catalogue line.
PARTS = (
    "When it fires",
    "What it reads and writes",
    "The fix",
    "Example from a real trace",
    "How to confirm the fix worked",
)
SHARED = "What every recommendation shares"
WIDTH = 96

# A constant's name between double backquotes, not yet followed by its value.
_CONSTANT = re.compile(r"``((?:[a-z_]+\.)?[A-Z][A-Z0-9_]*)``(?! = )")
_MISSING = object()


@dataclass(frozen=True)
class Topic:
    name: str
    kind: str  # "analysis" or "recommendation"
    summary: str  # one paragraph, one line
    text: str  # the whole definition
    markdown: str  # the same, as Markdown


def constant(ref: str, home: str = SHARED_HOME) -> object:
    """The value of the constant ``ref`` (``NAME`` or ``module.NAME``) as the code holds it
    now: a bare name in ``home``'s module, then in ``HOMES``; None when no module has it."""
    module, _, name = ref.rpartition(".")
    places = [f"{p}.{module}" for p in PACKAGES] if module else [home, *HOMES]
    for place in places:
        try:
            value = getattr(importlib.import_module(place), name, _MISSING)
        except ModuleNotFoundError:
            continue
        if _shown(value):
            return value
    return None


def _shown(value: object) -> bool:
    if isinstance(value, tuple):
        return all(isinstance(v, str) for v in value)
    return isinstance(value, (int, float, str)) and not isinstance(value, bool)


def _literal(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"({', '.join(value)})" if isinstance(value, tuple) else repr(value)
    return f"{value:,}" if isinstance(value, int) else f"{value:.6g}"


def _plain(name: str, value: float) -> str:
    """``value`` as a reader takes it, by the unit its name says."""
    if name.endswith("_RATIO"):
        return f"{value * 100:.4g}%" if value < 1 else f"{value:g}"
    if name.endswith("_BYTES"):
        if value % (1 << 20) == 0:
            return f"{value / (1 << 20):g} MiB"
        return f"{value / 1e6:g} MB" if value >= 1e6 else f"{value / 1e3:g} kB"
    if name.endswith("_NS"):
        return f"{value / 1e6:g} ms" if value >= 1e6 else f"{value / 1e3:g} us"
    return _literal(value)


def fill(text: str, home: str = SHARED_HOME, *, compact: bool = False) -> str:
    """``text`` with each constant it names followed by its value: a double-backquoted
    MIN_GAIN_RATIO becomes 3% (MIN_GAIN_RATIO = 0.03), or with ``compact`` MIN_GAIN_RATIO =
    0.03, the name kept between its backquotes; names of no constant (SQLite tables such as
    ENUM_CUDA_MEM_KIND) stay as they are."""

    def value(found: re.Match) -> str:
        ref = found.group(1)
        v = constant(ref, home)
        if v is None:
            return found.group(0)
        named = f"``{ref}`` = {_literal(v)}"
        if isinstance(v, (int, float)) and not compact:
            return f"{_plain(ref.rpartition('.')[2], v)} ({named})"
        return named

    return _CONSTANT.sub(value, text)


def analyses() -> list[Topic]:
    out = []
    for a in ANALYSES:  # in the order the report shows them
        name, home = a.name, f"nsysprobe.analyses.{a.module}"
        doc = (importlib.import_module(home).__doc__ or "").strip()
        text = "\n\n".join(_filled_paragraph(p, home) for p in doc.split("\n\n"))
        summary = " ".join(text.split("\n\n", 1)[0].split())
        out.append(Topic(name, "analysis", summary, text, f"## `{name}`\n\n{text}\n"))
    return out


def _filled_paragraph(paragraph: str, home: str) -> str:
    """``paragraph`` filled; prose that grew is wrapped again, and the lines of a block with
    indented lines (a table, a list) get the compact form, to keep close to their columns."""
    lines = paragraph.splitlines()
    if any(line[:1].isspace() for line in lines):
        return "\n".join(fill(line, home, compact=True) for line in lines)
    done = fill(paragraph, home)
    return done if done == paragraph else _wrap(" ".join(done.split()), "")


def catalogue() -> dict[str, str]:
    """Each recommendation id -> its meaning, one line, from its row of ``rules.RULES``."""
    return {rule.id: fill(rule.summary) for rule in RULE_ROWS}


def shared() -> str:
    """What every rule shares (floors, order): the last paragraph of ``rules.py``'s docstring."""
    doc = importlib.import_module(RULES).__doc__ or ""
    return fill(" ".join(doc.strip().split("\n\n")[-1].split()))


def recommendations(*, live: bool = False) -> list[Topic]:
    """Each id's page; ``live``: its example analyzed now where the trace is at hand."""
    return [_page_topic(rec_id, summary, live) for rec_id, summary in catalogue().items()]


def topics() -> list[Topic]:
    return analyses() + recommendations()


def explain(name: str, *, live: bool = True) -> Topic:
    """The analysis or recommendation called ``name``; InputError naming them all otherwise."""
    found = next((t for t in analyses() if t.name == name), None)
    if found is not None:
        return found
    meanings = catalogue()
    if name in meanings:
        return _page_topic(name, meanings[name], live)
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
    lines += [f"| `{rec_id}` | {cell(text)} |" for rec_id, text in catalogue().items()]
    return "\n".join(lines) + "\n"


# A page is parts of paragraphs and blocks: ("p", prose), ("code", lang, verbatim text).
Block = tuple[str, ...]


def _prose(text: str) -> Block:
    return ("p", fill(text))


def _code(text: str, lang: str = "python") -> Block:
    return ("code", lang, text)


def example(rec_id: str, *, live: bool = True) -> tuple[str, bool] | None:
    """The reason the id's example trace gives: (the line, whether analyzed now); None for an
    id without an example. Analyzed now where ``live`` and the trace is in ``sample_traces/``
    and still gives the id; else the line kept beside the id."""
    ex = PAGES[rec_id].example
    if ex is None:
        return None
    path = SAMPLE_TRACES / ex.trace
    if live and not ex.published and path.is_file():
        from nsysprobe.report.analyze import analyze

        try:
            report = analyze(path)
        except NsysprobeError:
            report = None
        found = [r.reason for r in (report.recommendations if report else ()) if r.id == rec_id]
        if found:
            return found[0], True
    return ex.reason, False


def compare_command(before: str, after: str, page: Page) -> str:
    """The ``nsysprobe compare`` that confirms ``page``'s fix, from ``before`` to ``after``."""
    conditions = (*FAIL_IF, *((page.gate,) if page.gate else ()))
    fail_if = " ".join(f"--fail-if '{c}'" for c in conditions)
    return f"nsysprobe compare {before} {after} --fail-if-slower {FAIL_IF_SLOWER} {fail_if}"


def _parts(rec_id: str, page: Page, live: bool) -> list[tuple[str, list[Block]]]:
    reads = []
    if page.buckets:
        named = ", ".join(f"``{b}``" for b in page.buckets)
        reads.append(f"The step account's buckets (nsysprobe explain account): {named}.")
    reads.append(page.reads[:1].upper() + page.reads[1:])
    keys = ", ".join(page.evidence_keys())
    frames = "; with Python sampling, python_frames" if "buckets" in page.evidence_keys() else ""
    writes = (
        f"Its evidence (nsysprobe analyze --format json: recommendations[].evidence): {keys}"
        f"{frames}. Its thresholds (recommendations[].thresholds): "
        + (
            "; ".join(f"{key}: ``{key.upper()}``" for key in page.thresholds)
            if page.thresholds
            else "none"
        )
        + "."
    )

    ex, found = page.example, example(rec_id, live=live)
    if ex is None or found is None:
        shown = [_prose(f"None yet: {page.no_example}.")]
    else:
        line, now = found
        if ex.published:
            where = (
                f"{ex.trace}: {ex.what}; published by others ({ex.published}), not shipped "
                "with nsysprobe."
            )
        else:
            where = f"sample_traces/{ex.trace}: {ex.what}."
        if now:
            said = f"nsysprobe analyze sample_traces/{ex.trace} prints, for {rec_id}:"
        else:
            said = (
                f"nsysprobe analyze printed, for {rec_id}, when this page was written (a test "
                "holds the line to a fresh analysis of the trace):"
            )
        shown = [_prose(f"{where} {said}"), _code(f"why: {line}", "text")]

    confirm = [_prose(page.confirm)]
    if page.compared:
        confirm = [
            _prose(
                "Capture the same steps again after the fix (nsysprobe run --output after ..., "
                "as the run before) and compare the two runs (traces, run folders or history "
                "ids):"
            ),
            _code(compare_command("before", "after", page), "sh"),
            _prose(
                "exits 1 when the run after the fix is not faster (speed-up under 1) or is "
                "slower beyond noise"
                + (f", or when {page.gate} (--fail-if)" if page.gate else "")
                + "; its vs first column says whether the difference is beyond noise. "
                + page.confirm
            ),
        ]
    if page.pair:
        before, after = (f"sample_traces/{t}" for t in page.pair)
        confirm += [
            _prose("The shipped traces before and after this fix pass it:"),
            _code(compare_command(before, after, page), "sh"),
        ]

    return [
        (PARTS[0], [_prose(page.fires)]),
        (PARTS[1], [_prose(" ".join(reads)), _prose(writes)]),
        (PARTS[2], [_prose(page.fix), _code(page.code)]),
        (PARTS[3], shown),
        (PARTS[4], confirm),
        (SHARED, [("p", shared())]),
    ]


def _page_topic(rec_id: str, summary: str, live: bool) -> Topic:
    parts = _parts(rec_id, PAGES[rec_id], live)
    return Topic(
        rec_id,
        "recommendation",
        summary,
        _text(f"{rec_id}: {summary}", parts),
        _markdown(rec_id, summary, parts),
    )


def _wrap(text: str, indent: str) -> str:
    """``text`` wrapped, a constant and its value on one line."""
    return textwrap.fill(
        text.replace("`` = ", "``\0=\0"),
        WIDTH,
        initial_indent=indent,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    ).replace("\0", " ")


def _text(head: str, parts: list[tuple[str, list[Block]]]) -> str:
    out = [head]
    for title, blocks in parts:
        body = [
            _wrap(b[1], "    ") if b[0] == "p" else textwrap.indent(b[2], "        ")
            for b in blocks
        ]
        out.append(title + "\n" + "\n\n".join(body))
    return "\n\n".join(out)


def _markdown(rec_id: str, summary: str, parts: list[tuple[str, list[Block]]]) -> str:
    out = [f"## `{rec_id}`", summary]
    for title, blocks in parts:
        out.append(f"### {title}")
        for block in blocks:
            if block[0] == "p":
                out.append(block[1])
            else:
                out.append(f"```{block[1]}\n{block[2]}\n```")
    return "\n\n".join(out) + "\n"
