"""Text laid out for a width: aligned tables whose cells wrap at spaces, wrapped lines, and a
report section (``section_text``: its title, notes and table) as the text reports print it.

``width=None`` is output that is not a terminal (a file, a pipe, a notebook): every row on one
line and every cell whole, for grep and diff. With a width (a terminal's), no line is longer
than it and nothing is cut. A table that fits with each row on one line is laid out so;
otherwise it takes the shortest (fewest lines) of these that fit, the first of equals:

    wrapped: each column at least    #  id      gain  why
    its longest word, cells wrapped  1  pinned  3.5%  40 host-to-device copies (4.03 GB)
    at spaces                                         came from pageable memory

    blocks: the columns in groups    #  step     wall      busy
    that fit, the first column (the  0  Batch 5  468.7 ms  88.7 ms
    row's key) in each, a blank
    line between groups              #  compute  loading
                                     0  59.5 ms  378.0 ms

    stacked: one row after another, #: 1
    each cell "header: value"          id: pinned
                                       why: 40 host-to-device copies (4.03 GB) came
                                         from pageable memory

A cell of ``SHORT`` columns or fewer ("6,741.8 ms", "memcpy HtoD") is never wrapped in a
table, and a number keeps its unit ("0.8 ms") on its line. A word is broken only where it is
longer than a whole line, over lines, every character kept. Widths are counted in terminal
columns: East Asian wide characters take two, combining marks none.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nsysprobe.render.sections import Section

GAP = "  "
SHORT = 16
# Units never put on a line apart from their number.
UNITS = frozenset(("ns", "us", "ms", "s", "B", "kB", "MB", "GB", "TB", "GB/s", "MB/s", "%", "pt"))
# Below this, a "terminal" is taken to be this wide: a table of ids and percentages needs it.
MIN_WIDTH = 20


def text_width(text: str) -> int:
    """Terminal columns ``text`` takes."""
    if text.isascii():
        return len(text)
    return sum(_char_width(c) for c in text)


def _char_width(char: str) -> int:
    if unicodedata.combining(char):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def fit(width: int | None) -> int | None:
    """``width`` as the layouts take it: None (no wrapping), or at least ``MIN_WIDTH``."""
    return None if width is None else max(int(width), MIN_WIDTH)


def wrap(text: str, width: int | None, indent: str = "", hang: str = "") -> list[str]:
    """``text`` as lines of at most ``width`` columns, broken at spaces: the first line after
    ``indent``, the others after ``hang``; one line when ``width`` is None."""
    if width is None:
        return [indent + text]
    lines: list[str] = []
    line, used = indent, text_width(indent)
    start = used  # columns of the line's prefix: a line with no word yet is empty
    for word in words(text):
        w = text_width(word)
        if used > start and used + 1 + w <= width:
            line, used = f"{line} {word}", used + 1 + w
            continue
        if used > start:
            lines.append(line)
            line, used = hang, text_width(hang)
            start = used
        room = max(width - used, 1)
        while w > room:  # longer than a whole line: broken, every character kept
            head, word = _split(word, room)
            lines.append(line + head)
            line, used = hang, text_width(hang)
            start, room, w = used, max(width - used, 1), text_width(word)
        line, used = line + word, used + w
    lines.append(line)
    return [x.rstrip() for x in lines]


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


def words(text: str) -> list[str]:
    """The words of ``text``, a unit kept with its number ("6,741.8 ms", "5.1 GB/s")."""
    out: list[str] = []
    for word in text.split():
        if out and word.rstrip("),;:.") in UNITS and out[-1][-1:].isdigit():
            out[-1] = f"{out[-1]} {word}"
        else:
            out.append(word)
    return out


def _split(word: str, columns: int) -> tuple[str, str]:
    """``word`` cut after at most ``columns`` columns (at least one character)."""
    used = 0
    for i, char in enumerate(word):
        used += _char_width(char)
        if used > columns:
            return word[: max(i, 1)], word[max(i, 1) :]
    return word, ""


def table(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    width: int | None = None,
    *,
    rule: bool = False,
) -> list[str]:
    """``header`` and ``rows`` as aligned lines (see the module docstring); ``rule`` draws a
    line of dashes under the header."""
    grid = [tuple(" ".join(str(c).split()) for c in r) for r in (header, *rows)]
    columns = range(len(grid[0]))
    natural = [max(text_width(r[i]) for r in grid) for i in columns]
    if width is None or _room(natural) <= fit(width):
        return _lines(grid, natural, rule)
    width = fit(width)
    least = [max(_least(r[i]) for r in grid) for i in columns]
    layouts = []
    if _room(least) <= width:
        layouts.append(_lines(grid, _share(natural, least, width), rule))
    blocks = _blocks(least, width)
    if blocks is not None:
        out: list[str] = []
        for block in blocks:
            part = [tuple(r[i] for i in block) for r in grid]
            sizes = _share([natural[i] for i in block], [least[i] for i in block], width)
            out += ([""] if out else []) + _lines(part, sizes, rule)
        layouts.append(out)
    layouts.append(_stacked(grid, width))
    return min(layouts, key=len)  # the shortest; of equals, the first


def _room(sizes: Sequence[int]) -> int:
    return sum(sizes) + len(GAP) * (len(sizes) - 1)


def _least(cell: str) -> int:
    """The narrowest a cell's column may be: the cell when it is short, else its longest word."""
    whole = text_width(cell)
    if whole <= SHORT:
        return whole
    return max((text_width(w) for w in words(cell)), default=0)


def _share(natural: list[int], least: list[int], width: int) -> list[int]:
    """Column widths from ``least`` up to ``natural`` within ``width``: the columns that want
    little get all of it first, the others share the rest in proportion to what they want."""
    sizes = list(least)
    extra = width - _room(sizes)
    wanting = sorted(
        (i for i in range(len(sizes)) if natural[i] > least[i]), key=lambda i: natural[i] - least[i]
    )
    while wanting and natural[wanting[0]] - least[wanting[0]] <= extra // len(wanting):
        i = wanting.pop(0)
        extra -= natural[i] - least[i]
        sizes[i] = natural[i]
    wants = sum(natural[i] - least[i] for i in wanting)
    given = 0
    for i in wanting:
        add = extra * (natural[i] - least[i]) // wants
        sizes[i] += add
        given += add
    for i in wanting[: extra - given]:  # what the rounding left, one column each
        sizes[i] += 1
    return sizes


def _blocks(least: list[int], width: int) -> list[list[int]] | None:
    """The columns in blocks that fit ``width`` at their least, each led by column 0; None
    when there is nothing to split or one column does not fit beside column 0."""
    if len(least) < 3:
        return None
    blocks: list[list[int]] = []
    block: list[int] = [0]
    for i in range(1, len(least)):
        if _room([least[j] for j in [*block, i]]) <= width:
            block.append(i)
        elif len(block) > 1:
            blocks.append(block)
            block = [0, i]
            if _room([least[0], least[i]]) > width:
                return None
        else:
            return None
    return [*blocks, block]


def _lines(grid: list[tuple[str, ...]], sizes: list[int], rule: bool) -> list[str]:
    out = []
    for n, row in enumerate(grid):
        cells = [wrap(c, s) if text_width(c) > s else [c] for c, s in zip(row, sizes)]
        for k in range(max(len(c) for c in cells)):
            parts = [_pad(c[k] if k < len(c) else "", s) for c, s in zip(cells, sizes)]
            out.append(GAP.join(parts).rstrip())
        if rule and n == 0:
            out.append(GAP.join("-" * s for s in sizes))
    return out


def _pad(text: str, size: int) -> str:
    return text + " " * (size - text_width(text))


def _stacked(grid: list[tuple[str, ...]], width: int) -> list[str]:
    """Each row as "header: value" lines, the first flush, the others indented."""
    header, *rows = grid
    if not rows:
        return wrap(GAP.join(header), width)
    out = []
    for row in rows:
        for i, (name, cell) in enumerate(zip(header, row)):
            lead = "" if i == 0 else "  "
            out += wrap(f"{name}: {cell}", width, lead, lead + "  ")
    return out
