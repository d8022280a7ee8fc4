"""Text from a trace or a user made safe to show: the one sanitizer for everything printed.

A trace's names (GPU, process, thread, NVTX range, kernel, function) and the paths users give
are anybody's bytes. Shown raw they can drive the terminal: ESC/OSC sequences recolor, retitle
or hide lines, ``\\r`` overwrites them, bidi marks reorder them, a newline forges one. Every
character of Unicode's control and format classes (Cc, Cf, surrogates left by undecodable
file names, line and paragraph separators) is therefore written as a visible escape,
``\\u001b``. The escape is JSON's own, so JSON output stays valid and means the same text.

``name`` also cuts a name to ``NAME_CHARS``: a 20 MB thread name must not become gigabytes of
report. The trace reader passes every name through it, so each output (text, Markdown, JSON,
HTML, the history, error messages) gets the same short, safe name.
"""

from __future__ import annotations

import re

# Longest name kept, in characters; longer ones end in ``ELLIPSIS``.
NAME_CHARS = 200
ELLIPSIS = "…"

# Unicode categories Cc, Cf, Cs, Zl and Zp (Unicode 15.1), as ranges. A test checks this
# against ``unicodedata`` of the running Python.
_UNSAFE_RANGES = (
    (0x0000, 0x001F),
    (0x007F, 0x009F),
    (0x00AD, 0x00AD),
    (0x0600, 0x0605),
    (0x061C, 0x061C),
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x180E, 0x180E),
    (0x200B, 0x200F),
    (0x2028, 0x202E),
    (0x2060, 0x2064),
    (0x2066, 0x206F),
    (0xD800, 0xDFFF),
    (0xFEFF, 0xFEFF),
    (0xFFF9, 0xFFFB),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
)


def _class(ranges) -> re.Pattern[str]:
    parts = (f"\\U{lo:08x}" if lo == hi else f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in ranges)
    return re.compile(f"[{''.join(parts)}]")


_UNSAFE = _class(_UNSAFE_RANGES)
# The same, but newlines and tabs pass: for reports of many lines; and of those, the ASCII
# ones. (Classes, not a lookahead before each character: the JSON report of the 1e6 replica,
# 3.8 MB of ASCII, in 0.013 s against 0.10 s.)
_UNSAFE_IN_LINES = _class(((0x00, 0x08), (0x0B, 0x1F), *_UNSAFE_RANGES[1:]))
_UNSAFE_ASCII_IN_LINES = _class(((0x00, 0x08), (0x0B, 0x1F), (0x7F, 0x7F)))


def _escape(match: re.Match[str]) -> str:
    cp = ord(match.group())
    if cp <= 0xFFFF:
        return f"\\u{cp:04x}"
    cp -= 0x10000  # JSON's surrogate pair
    return f"\\u{0xD800 + (cp >> 10):04x}\\u{0xDC00 + (cp & 0x3FF):04x}"


def one_line(text: str) -> str:
    """``text`` with every control or format character escaped, newlines included."""
    return _UNSAFE.sub(_escape, text)


def printable(text: str) -> str:
    """``text`` with every control or format character escaped but newlines and tabs: what a
    report of many lines may print."""
    return (_UNSAFE_ASCII_IN_LINES if text.isascii() else _UNSAFE_IN_LINES).sub(_escape, text)


def name(text: str, limit: int = NAME_CHARS) -> str:
    """A name from a trace, cut to ``limit`` characters and on one safe line."""
    if len(text) > limit:
        text = text[: limit - len(ELLIPSIS)] + ELLIPSIS
    return one_line(text)
