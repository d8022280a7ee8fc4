"""JSON text as ``json.dumps(value, indent=2, ensure_ascii=False)`` writes it, byte for byte,
in about 70% of its time on a report.

With ``indent``, the standard library writes every value through its Python encoder: 0.10 s
for the 3.8 MB report of the kernel-heavy 1e6 replica on this project's machine, against 0.02 s
for its C encoder, which writes no indentation. Most of a report's containers are flat (a
step's row, a detail: no container inside): each of those is written by the C encoder with
the newline and indentation of its level as the separator between items, and only the
containers that hold containers are walked here.
"""

from __future__ import annotations

import json
from functools import cache
from json.encoder import c_make_encoder

INDENT = "  "
_TEXT = json.encoder.encode_basestring  # the C function where there is one


def dumps(value) -> str:
    """``json.dumps(value, indent=2, ensure_ascii=False)`` of a value that holds no cycle (a
    report holds none: it is not looked for, and one ends in a RecursionError)."""
    out: list[str] = []
    _write(value, 0, out)
    return "".join(out)


@cache
def _flat_encoder(level: int):
    """Writes a container of no containers at ``level`` (its items one level deeper) as a
    list of strings: the C encoder where there is one, each item separated by a newline and
    their indentation."""
    separator = ",\n" + INDENT * (level + 1)
    encoder = json.JSONEncoder(ensure_ascii=False, separators=(separator, ": "))
    if c_make_encoder is None:
        return lambda value, _level: [encoder.encode(value)]
    return c_make_encoder(None, encoder.default, _TEXT, None, ": ", separator, False, False, True)


_SCALAR = json.JSONEncoder(ensure_ascii=False)
_INFINITY = float("inf")
_CONTAINERS = (dict, list, tuple)


def _scalar(value) -> str:
    """A value that is no container, as the encoder writes it."""
    if isinstance(value, str):
        return _TEXT(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        if value != value:
            return "NaN"
        if value == _INFINITY:
            return "Infinity"
        if value == -_INFINITY:
            return "-Infinity"
        return float.__repr__(value)
    return _SCALAR.encode(value)  # what it does with any other value (TypeError)


def _write(value, level: int, out: list[str]) -> None:
    """Append the text of ``value`` written at ``level`` to ``out``."""
    if isinstance(value, dict):
        items = value.values()
        opening, closing = "{", "}"
    elif isinstance(value, (list, tuple)):
        items = value
        opening, closing = "[", "]"
    else:
        out.append(_scalar(value))
        return
    if not value:
        out.append(opening + closing)
        return
    inner = "\n" + INDENT * (level + 1)
    if not any(isinstance(v, _CONTAINERS) for v in items):
        text = "".join(_flat_encoder(level)(value, 0))
        out.append(opening + inner + text[1:-1] + "\n" + INDENT * level + closing)
        return
    between = "," + inner
    out.append(opening)
    if closing == "}":
        for n, (key, v) in enumerate(value.items()):
            # A key that is no string as the encoder writes it: a number, true, false or null,
            # as a string.
            name = _TEXT(key) if isinstance(key, str) else _SCALAR.encode({key: None})[1:-7]
            out.append((between if n else inner) + name + ": ")
            if isinstance(v, _CONTAINERS):
                _write(v, level + 1, out)
            else:
                out.append(_scalar(v))
    else:
        for n, v in enumerate(value):
            out.append(between if n else inner)
            if isinstance(v, _CONTAINERS):
                _write(v, level + 1, out)
            else:
                out.append(_scalar(v))
    out.append("\n" + INDENT * level + closing)
