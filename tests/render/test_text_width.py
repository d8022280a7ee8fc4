"""Text output fits the terminal and keeps every word (issue 34, item 2).

On a terminal (a real pseudo-terminal here, its width from ``COLUMNS`` or from the terminal
itself) no line of ``nsysprobe analyze`` is longer than the width; written to a pipe or a file
each table row is one line. Either way every word of every recommendation's reason and advice,
as the JSON form has them, is in the text: nothing is cut.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import struct
import subprocess
import sys
import termios
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import nsysprobe
from nsysprobe.cli import main
from nsysprobe.render import render
from nsysprobe.render.layout import table, text_width, wrap

from conftest import SAMPLE_TRACES

TRACES = sorted(SAMPLE_TRACES.glob("*.sqlite")) + sorted(
    (SAMPLE_TRACES / "h200_ladder").glob("*.sqlite")
)
MARK = "=== nsysprobe analyze "


def advice_words(path: Path) -> Counter:
    """Every word of every recommendation's reason and advice, from the JSON form."""
    data = json.loads(render(nsysprobe.analyze(path), "json"))
    words: Counter = Counter()
    for rec in data["recommendations"]:
        words.update(rec["reason"].split())
        words.update(rec["advice"].split())
    assert words, f"{path.name}: no recommendation to read"
    return words


@pytest.fixture(scope="module")
def words() -> dict[str, Counter]:
    return {p.name: advice_words(p) for p in TRACES}


def on_a_terminal(paths: list[Path], columns: int, env_columns: bool) -> dict[str, str]:
    """``nsysprobe analyze PATH`` for each path, its standard output a pseudo-terminal
    ``columns`` wide (told by ``$COLUMNS``, else by the terminal's own size, with ``COLUMNS``
    unset): path name -> what it printed. One process runs them all, the command line's own
    ``main`` for each."""
    program = (
        "import sys\nfrom nsysprobe.cli import main\n"
        "for path in sys.argv[1:]:\n"
        f"    sys.stdout.write({MARK!r} + path + '\\n'); sys.stdout.flush()\n"
        "    main(['analyze', path, '--no-history'], standalone_mode=False)\n"
    )
    master, slave = pty.openpty()
    # The terminal's own size: 40 rows of 300 columns unless COLUMNS says the width.
    size = 300 if env_columns else columns
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, size, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    if env_columns:
        env["COLUMNS"] = str(columns)
    proc = subprocess.Popen(
        [sys.executable, "-c", program, *map(str, paths)],
        stdin=slave,
        stdout=slave,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    assert proc.wait(timeout=600) == 0
    text = b"".join(chunks).decode().replace("\r\n", "\n")
    out = {}
    for part in text.split(MARK)[1:]:
        head, _, body = part.partition("\n")
        out[Path(head).name] = body
    assert sorted(out) == sorted(p.name for p in paths)
    return out


@pytest.mark.parametrize("columns, env_columns", [(80, True), (200, False)])
def test_every_sample_trace_fits_the_terminal_and_keeps_every_word(words, columns, env_columns):
    printed = on_a_terminal(TRACES, columns, env_columns)
    for trace, text in printed.items():
        lines = text.splitlines()
        longest = max(lines, key=text_width)
        assert text_width(longest) <= columns, f"{trace} at {columns}: {longest!r}"
        lost = words[trace] - Counter(text.split())
        assert not lost, f"{trace} at {columns}: {sorted(lost)} cut"
    # The terminal's width is used: 200 columns lay the same report out wider than 80.
    widest = max(text_width(line) for text in printed.values() for line in text.splitlines())
    assert widest > 80 if columns == 200 else widest <= 80


@pytest.mark.parametrize("width", [None, 80, 200])
def test_every_sample_trace_keeps_every_word_at_any_width(words, width):
    """The library's text at 80 and 200 columns and unwrapped, as a file gets it."""
    for path in TRACES:
        text = render(nsysprobe.analyze(path), "text", width)
        lost = words[path.name] - Counter(text.split())
        assert not lost, f"{path.name} at {width}: {sorted(lost)} cut"
        if width is not None:
            assert max(text_width(line) for line in text.splitlines()) <= width


def test_piped_output_keeps_each_row_on_one_line_and_every_word():
    """Not a terminal: no wrapping, so each recommendation is one line holding its whole
    reason and advice, however long."""
    path = SAMPLE_TRACES / "h200_baseline.sqlite"
    result = CliRunner().invoke(main, ["analyze", str(path), "--no-history"])
    assert result.exit_code == 0, result.output
    data = json.loads(render(nsysprobe.analyze(path), "json"))
    lines = result.stdout.splitlines()
    for rec in data["recommendations"]:
        [row] = [line for line in lines if f" {rec['id']} " in line and rec["advice"] in line]
        assert " ".join(rec["reason"].split()) in row
    assert max(map(len, lines)) > 200  # the long rows stay whole


def test_piped_output_through_a_real_pipe_is_not_wrapped(tmp_path):
    """``| less`` or ``> file``: even with COLUMNS set, a pipe is not a terminal."""
    path = SAMPLE_TRACES / "h200_baseline.sqlite"
    env = {**os.environ, "COLUMNS": "80"}
    cmd = [sys.executable, "-m", "nsysprobe", "analyze", str(path), "--no-history"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
    assert max(map(len, out.splitlines())) > 200
    assert not advice_words(path) - Counter(out.split())


def test_width_option_wraps_piped_output_and_zero_unwraps_it():
    path = SAMPLE_TRACES / "h200_baseline.sqlite"
    narrow = CliRunner().invoke(main, ["analyze", str(path), "--no-history", "--width", "60"])
    assert narrow.exit_code == 0, narrow.output
    assert max(map(text_width, narrow.stdout.splitlines())) <= 60
    assert not advice_words(path) - Counter(narrow.stdout.split())
    whole = CliRunner().invoke(main, ["analyze", str(path), "--no-history", "--width", "0"])
    assert max(map(len, whole.stdout.splitlines())) > 200


# -- the layout itself ------------------------------------------------------------------------

WORD = st.text(alphabet="abcxyz0123456789.,()=_-", min_size=1, max_size=15)
CELL = st.lists(WORD, min_size=1, max_size=30).map(" ".join)


@settings(max_examples=300, deadline=None)
@given(
    rows=st.integers(1, 4).flatmap(
        lambda n: st.lists(st.tuples(*[CELL] * n), min_size=1, max_size=5)
    ),
    width=st.integers(20, 220),
)
def test_a_table_fits_any_width_and_keeps_every_word(rows, width):
    """Words of at most 15 characters always fit a line of 20: none is broken, none lost."""
    header, *body = rows
    lines = table(header, body, width)
    assert all(text_width(line) <= width for line in lines)
    want = Counter(w for row in rows for cell in row for w in cell.split())
    got = Counter(lines_words(lines))
    assert not want - got


def lines_words(lines: list[str]) -> list[str]:
    return [w.removesuffix(":") for line in lines for w in line.split()]


def test_a_table_that_fits_is_one_line_per_row_and_unwrapped_without_a_width():
    header, rows = ("#", "why"), [("1", "a " * 100)]
    assert table(header, rows, None) == ["#  why", "1  " + ("a " * 100).strip()]
    assert table(header, [("1", "short")], 80) == ["#  why", "1  short"]


def test_wrapped_cells_keep_a_number_with_its_unit_and_short_cells_whole():
    lines = table(("bucket", "mostly"), [("cpu", "Compute 11.2 ms, Batch # 0.7 ms, x 0.2 ms")], 24)
    assert "11.2 ms," in "\n".join(lines) and "0.7 ms," in "\n".join(lines)
    assert all(len(line) <= 24 for line in lines)


def test_wide_characters_take_two_columns():
    assert text_width("データ") == 6 and text_width("e\u0301") == 1
    lines = table(("name", "what"), [("データローダー", "読み込み " * 20)], 40)
    assert all(text_width(line) <= 40 for line in lines)


def test_a_word_longer_than_the_line_is_broken_with_every_character_kept():
    word = "x" * 50
    lines = wrap(f"see {word} here", 20)
    assert all(len(line) <= 20 for line in lines)
    assert "".join(lines).replace(" ", "") == f"see{word}here"
