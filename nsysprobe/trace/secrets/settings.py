"""Where the value after a name that says secret is, and where it ends (``assignments``): the
separators (``=``, ``:``, ``=>``, a linking word, their look-alikes and encoded forms),
quotes, brackets, a header's field, the lines of a YAML block scalar; the item after a quoted
name (``quoted_pairs``) and an element's text (``elements``); and the credential after
``Bearer`` or ``Basic`` and private key blocks (``AUTH``, ``PRIVATE_KEY``).
"""

from __future__ import annotations

import functools
import heapq
import re
from collections.abc import Iterator

from nsysprobe.trace.secrets.names import FIELD_HEADERS, NAME, NAME_CHARS, WORD, secret_name
from nsysprobe.trace.secrets.placeholders import KINDS, LETTERS, SECRET

# ``=`` and ``:`` and the characters that look like them.
_EQUALS = "=\uff1d\ufe66\u207c\u208c\ua78a\u30a0\u2261\u2248"
_COLONS = ":\uff1a\ufe55\ufe13\ua789\u02f8\u2236\u05c3\u0589\u02d0\u0703\u0704"
_ARROWS = "\u2254\u21d2\u2192\u2190\u21a6\u27f6\u279c\u2a74"
# An operator, escaped too (``token\=K``, ``"token"\:"K"``); ``::=`` and ``<-`` as well;
# ``<<<`` feeds a here-string (``--password-stdin <<< K``); a linking word between spaces
# sets a value too (``password is K``).
_OP = (
    rf"\\{{0,8}}(?:[{_EQUALS}]>|[{_COLONS}][{_EQUALS}]|::=|[{_EQUALS}]|[{_COLONS}](?![{_COLONS}])"
    rf"|->|<-|[{_ARROWS}])|<<<|(?<=\s)(?i:is|was|equals)(?=\s)"
)
_COLON_OP = re.compile(rf"[{_COLONS}]")
# After a name: its closing quote (escaped too: ``\"password\":``), brackets and whitespace,
# an operator, more brackets and whitespace.
_SEPARATOR = re.compile(
    rf"(?P<sep>(?:\\{{0,8}}[\"'`])?[\s\[\](){{}}]{{0,64}}"
    rf"(?:(?P<op>{_OP})[\s\[\](){{}}]{{0,64}})?)"
)
# An operator between a name and its value.
_OPERATOR = re.compile(rf"[^\S\n]*(?:{_OP})")
# Before a value in brackets: a separator ending in an opening bracket.
_OPENING = re.compile(
    rf"(?P<sep>(?:\\{{0,8}}[\"'`])?[^\S\n]{{0,64}}(?:(?P<op>{_OP})[^\S\n]{{0,64}})?[\[({{])"
)
# Separators written encoded, as the pattern shows them (digits masked), read as ``=``:
# percent-escapes (``token%3DK``, ``%253D``), JSON and C escapes (``\u003d``, ``\x3d``),
# HTML entities (``&#x3D;``, ``&#61;``, ``&equals;``); as ``:`` their forms of a colon; and
# ``\u0020`` as a space. A masked escape stands for several characters (``%3D`` and ``%2D``
# are both ``%#D``): each is read as the separator it may be, and as what it was.
_ENCODED = re.compile(
    r"(?P<eq>%#[Dd]|\\[ux]#[Dd]|&#[xX]#[Dd];|&##;|&equals;)"
    r"|(?P<colon>%#[Aa]|\\[ux]#[Aa]|&#[xX]#[Aa];|&colon;)"
    r"|(?P<space>\\u#(?![A-Fa-f]))"
)
_DECODED_AS = {"eq": "=", "colon": ":", "space": " "}
# What U+FFFD (a byte the export's encoding could not decode) is read as: a separator (a
# CP-1252 no-break space, ``password\xa0=``) or a character that shows nothing inside a name
# (``pass\xe9word``).
_UNDECODED = "\ufffd"
_IN_A_NAME = "\u200b"
# A value is everything up to the next whitespace that no quotes hold, whatever punctuation
# it holds (``password=Tr0ub4dor&AMP;x|y(z)``): quoted parts go whole, a quote its line does
# not close is a character. A value that opens with a quote (``\"`` in escaped JSON) ends at
# its closing quote when what follows is whitespace or closing punctuation
# (``{"password": "K", "user": ...}``), else it goes on. One closing character is left out
# of it (``AccountKey=K;``, ``f(password=K)``): a list's or a call's, not the secret's.
_VALUE_STOP = re.compile(r"[\s\"'`]")
_QUOTE = re.compile(r"\\{0,8}[\"'`]")
_QUOTED_END = re.compile(r"[,;)\]}]*(?:\s|\Z)|[,;)\]}]+\\{0,8}[\"'`]")
_CLOSERS = {")": "(", "]": "[", "}": "{"}
# What goes on after a bracketed value: not whitespace or closing punctuation.
_GOES_ON = re.compile(r"[^\s,;)\]}]")
# Quoted parts one value is read through; past it the value is the rest of its line (no
# quoted part goes past the line: fail closed).
VALUE_QUOTES = 4096


class _Text:
    """A pattern and where each quote (or line end) next occurs in it: the values of a text
    are read in one pass, however many quotes it holds."""

    def __init__(self, pattern: str, names: str | None = None):
        self.pattern = pattern
        self.names = pattern if names is None else names  # where names are read (a view)
        self._next: dict[str, tuple[int, int]] = {}

    def find(self, needle: str, pos: int) -> int:
        """Where ``needle`` next occurs at or after ``pos``; the text's length when never."""
        known = self._next.get(needle)
        if known is not None and known[0] <= pos <= known[1]:
            return known[1]
        at = self.pattern.find(needle, pos)
        at = len(self.pattern) if at < 0 else at
        self._next[needle] = (pos, at)
        return at

    def closing(self, quote: str, pos: int, line_end: int) -> int | None:
        """Where ``quote`` (opened before ``pos``) closes on its line, an escaped quote
        (``\\"``) not closing a plain one; None when it does not."""
        pattern = self.pattern
        while (at := self.find(quote, pos)) < line_end:
            before = at
            if len(quote) == 1:
                while before > pos and pattern[before - 1] == "\\":
                    before -= 1
            if (at - before) % 2 == 0:
                return at
            pos = at + 1
        return None

    def value_end(self, start: int) -> int:
        """Where the value that starts at ``start`` ends (see above)."""
        pattern = self.pattern
        line_end = self.find("\n", start)
        pos = start
        opening = _QUOTE.match(pattern, start)
        if opening is not None:
            closed = self.closing(opening[0], opening.end(), line_end)
            if closed is None:
                pos = opening.end()
            else:
                pos = closed + len(opening[0])
                if _QUOTED_END.match(pattern, pos):
                    return pos
        for _ in range(VALUE_QUOTES):
            stop = _VALUE_STOP.search(pattern, pos)
            if stop is None:
                return self._trimmed(start, len(pattern))
            if stop[0] not in "\"'`":
                return self._trimmed(start, stop.start())
            closed = self.closing(stop[0], stop.end(), line_end)
            pos = stop.end() if closed is None else closed + 1
        return line_end

    def _trimmed(self, start: int, end: int) -> int:
        """``end`` before the one closing character that ends the value, if one does."""
        if end - start < 2:
            return end
        last = self.pattern[end - 1]
        if last in ",;":
            return end - 1
        opener = _CLOSERS.get(last)
        if opener and self.pattern.count(opener, start, end) < self.pattern.count(last, start, end):
            return end - 1
        return end


_CLOSING = {"(": ")", "[": "]", "{": "}"}
# What a bracketed value is looked for in: this many characters after its opening bracket,
# and brackets of its kind nested this deep inside it. Past either, the value is the rest of
# the line: a secret is never left for being odd. A bracket its line leaves open is a
# separator (``PGPASSWORD=(K``: the word after it). The bound keeps scrubbing linear: every
# secret name with a bracket reads at most this far.
BRACKETED_CHARS = 1024
BRACKETS_NESTED = 3
# What changes the depth or starts a quote, for each kind of bracket.
_BRACKET_TURNS = {o: re.compile(rf"[\n\"'{re.escape(o + c)}]") for o, c in _CLOSING.items()}


def _bracketed_value(text: str, at: int) -> tuple[int, int, int] | None:
    """(start, stop, end): what lies between the opening bracket at ``at`` and its matching
    closing bracket on the same line (``password("a)b")``: quoted text goes whole, a quote
    that never closes is a character), and where the setting ends, past that bracket. One
    that does not close within the bounds (``BRACKETED_CHARS``) takes the rest of the line;
    None for one its line (or text) leaves open."""
    opening, turns = text[at], _BRACKET_TURNS[text[at]]
    stop = min(len(text), at + 1 + BRACKETED_CHARS)
    depth, pos = 1, at + 1
    while (turn := turns.search(text, pos, stop)) is not None:
        char, pos = turn[0], turn.end()
        if char == "\n":
            return None
        if char in "\"'":
            closes = text.find(char, pos, stop)
            if closes >= 0 and "\n" not in text[pos:closes]:
                pos = closes + 1
        elif char == opening:
            depth += 1
            if depth > BRACKETS_NESTED + 1:
                break
        else:
            depth -= 1
            if not depth:
                return at + 1, turn.start(), turn.end()
    if stop == len(text) and depth <= BRACKETS_NESTED + 1:
        return None  # the text ended first
    line_end = text.find("\n", at)
    line_end = len(text) if line_end < 0 else line_end
    return at + 1, line_end, line_end


# The rest of a header's field after its first word: up to the end of the line, or to the
# quote that the header's name follows (``-H 'Authorization: Basic K'``), escaped quotes
# aside.
_FIELD_REST = {q: re.compile(rf"[^\n\r{q}\\]*(?:\\.[^\n\r{q}\\]*)*") for q in ("", '"', "'", "`")}
# A placeholder of an earlier rule, as the pattern shows it.
_HELD_PLACEHOLDER = re.compile(rf"<(?:{KINDS}):[a-z]{{{LETTERS}}}#?>")
# Values of such settings that are not secrets.
_HARMLESS = re.compile(r"true|false|yes|no|none|null|nil|on|off|", re.I)
_HARMLESS_VALUE = re.compile(rf"((?:\\{{0,8}}[\"'`])?)(?:{_HARMLESS.pattern})\1", re.I)
# A dash after a name and whitespace is punctuation (``password - reset``), not a value.
_DASH = re.compile(r"-{1,3}")
AUTH = re.compile(
    r"\b(?P<scheme>bearer|basic|token)(?P<sep>\s{1,16})(?P<value>[\w#.~+/-]+=*)", re.I
)
PRIVATE_KEY = re.compile(
    r"-----BEGIN[A-Z ]{0,40}PRIVATE KEY(?: BLOCK)?-----.*?"
    r"(?:-----END[A-Z ]{0,40}PRIVATE KEY(?: BLOCK)?-----|\Z)",
    re.S,
)


def assignments(pattern: str) -> Iterator[tuple[int, int, str]]:
    """The values of settings whose name says secret, in every way of reading the names and
    separators of ``pattern`` (``_name_views``)."""
    views = _name_views(pattern)
    if len(views) == 1:
        return _settings(pattern, pattern)
    return merged(*(_settings(pattern, view) for view in views))


def _name_views(pattern: str) -> list[str]:
    """``pattern`` as it is, and, when it holds encoded separators (``_ENCODED``) or
    undecoded bytes (``_UNDECODED``), with those read as separators, and with undecoded bytes
    read as characters inside a name. Each is as long as ``pattern``: what is found in one
    is at the same place in all."""
    encoded = _ENCODED.search(pattern) is not None
    undecoded = _UNDECODED in pattern
    if not (encoded or undecoded):
        return [pattern]
    if encoded:
        decoded = _ENCODED.sub(lambda m: " " * (len(m[0]) - 1) + _DECODED_AS[m.lastgroup], pattern)
    else:
        decoded = pattern
    views = [pattern, decoded.replace(_UNDECODED, " ")]
    if undecoded:
        views.append(decoded.replace(_UNDECODED, _IN_A_NAME))
    return views


def merged(*streams: Iterator[tuple[int, int, str]]) -> Iterator[tuple[int, int, str]]:
    """The spans of ``streams`` (each in order) in order, those that overlap joined."""
    current = None
    for span in heapq.merge(*streams):
        if current is not None and span[0] < current[1]:
            current = (current[0], max(current[1], span[1]), current[2])
            continue
        if current is not None:
            yield current
        current = span
    if current is not None:
        yield current


def _settings(pattern: str, names: str) -> Iterator[tuple[int, int, str]]:
    """The values of settings whose name says secret, their names and separators read in
    ``names`` (a view of ``pattern``), their values in ``pattern``."""
    text = _Text(pattern, names)
    end = 0
    for name in NAME.finditer(names):
        if name.start() < end:
            continue
        strength = secret_name(name[0])
        if not strength:
            continue
        found = _in_brackets(text, name, strength) or _after_separator(text, name, strength)
        if found is None:
            continue
        spans, end = found
        for start, stop in spans:
            yield start, stop, SECRET


_Value = tuple[list[tuple[int, int]], int]  # the spans to replace, and where the setting ends
# An index in brackets after a name that is not of the password family: a number, a slice
# or a lower-case identifier (``keys[3]``, ``token_ids[-1]``, ``self.key[idx]``, ``k[i+1]``).
_INDEX = re.compile(r"-?#|#?:#?(?::#?)?|[a-z_][a-z_.]{0,31}(?:[-+]#)?")


def _in_brackets(text: _Text, name: re.Match, strength: int) -> _Value | None:
    """What lies between the brackets after ``name`` (``password(hunter2)``), and after an
    operator what follows them up to whitespace too (``password=[K]K``); None for empty
    brackets that an operator follows (``api_key[]=K``: they are the name's)."""
    pattern = text.pattern
    opening = _OPENING.match(text.names, name.end())
    if opening is None or not _sets_value(text, name, opening, strength):
        return None
    inside = _bracketed_value(pattern, opening.end() - 1)
    if inside is None:
        return None
    start, stop, end = inside
    start, stop = _stripped(pattern, start, stop)
    value = pattern[start:stop]
    if not value and _OPERATOR.match(pattern, end):
        return None
    if opening["op"] is None and strength == 1 and opening[0][-1] == "[":
        if _INDEX.fullmatch(value):
            return [], end
    spans = []
    if not (_HARMLESS.fullmatch(value.strip("\"'`")) or only_placeholders(value)):
        spans.append((start, stop))
    if opening["op"] is not None and _GOES_ON.match(pattern, end):
        stop = text.value_end(end)
        spans.append((end, stop))
        end = stop
    return spans, end


def _after_separator(text: _Text, name: re.Match, strength: int) -> _Value | None:
    """The value after ``name`` and a separator (``password: hunter2``); for a header whose
    value is its field (``Authorization: Token K``, ``Cookie: a=K; b=K``), the rest of the
    field too; for a YAML block scalar (``token: |``), the lines it holds."""
    pattern = text.pattern
    found = _SEPARATOR.match(text.names, name.end())
    start = found.end()
    if start == len(pattern) or pattern[start].isspace():
        return None
    if not _sets_value(text, name, found, strength):
        return None
    stop = text.value_end(start)
    value = pattern[start:stop]
    if _HARMLESS_VALUE.fullmatch(value) or (found["op"] is None and _DASH.fullmatch(value)):
        return None
    if only_placeholders(value):
        return [], stop
    if found["op"] is not None and _BLOCK_SCALAR.fullmatch(value):
        block = _block_lines(text, name.start(), stop)
        if block is not None:
            return block
    spans = [(start, stop)]
    quoted = len(value) > 1 and value[0] == value[-1] and value[0] in "\"'`"
    if quoted or not _takes_field(name[0][-NAME_CHARS:], found["op"]):
        return spans, stop
    return _field_rest(text, name, spans, stop)


def _field_rest(text: _Text, name: re.Match, spans: list[tuple[int, int]], stop: int) -> _Value:
    """``spans`` and the rest of a header's field after its first word at ``stop``, up to
    the end of its line or of the quotes the header's name is in."""
    pattern = text.pattern
    quote = pattern[name.start() - 1 : name.start()]
    rest = _FIELD_REST[quote if quote in "\"'`" else ""].match(pattern, stop)
    start, stop = _stripped(pattern, rest.start(), rest.end())
    while start < stop and pattern[start] in ",;":  # ``Cookie: a=K; b=K``
        start, stop = _stripped(pattern, start + 1, stop)
    if not only_placeholders(pattern[start:stop]):
        spans.append((start, stop))
    return spans, rest.end()


# A YAML block scalar's header (``|``, ``>-``, ``|2+``): its value is on the lines below,
# those indented deeper than its name's line (blank lines among them).
_BLOCK_SCALAR = re.compile(r"[|>](?:[-+]#?|#[-+]?)?")
_INDENTED = re.compile(r"[^\S\n]*(?=\n|\Z)|(?P<indent>[^\S\n]+)[^\n]*")
_LINE_INDENT = re.compile(r"[^\S\n]*")


def _block_lines(text: _Text, name_start: int, stop: int) -> _Value | None:
    """The lines of the block scalar whose header ends at ``stop``, its name at
    ``name_start``; None when its line goes on or no line is indented deeper. The name's
    indentation is read within ``NAME_CHARS`` before it (a name further along its line has
    none). A line is read by one header at most: scrubbing stays linear."""
    pattern = text.pattern
    after = _LINE_INDENT.match(pattern, stop).end()
    if after < len(pattern) and pattern[after] != "\n":
        return None
    line = pattern.rfind("\n", max(0, name_start - NAME_CHARS), name_start) + 1
    indent = 0
    if line or name_start <= NAME_CHARS:
        indent = len(_LINE_INDENT.match(pattern, line, name_start)[0])
    end = text.find("\n", stop)
    first = last = None
    while end < len(pattern):
        row = _INDENTED.match(pattern, end + 1)
        if row is None or (row["indent"] is not None and len(row["indent"]) <= indent):
            break
        if row["indent"] is not None and row.end() > row.end("indent"):
            first = row.end("indent") if first is None else first
            last = row.end()
        end = row.end()
    return None if first is None else ([(first, last)], last)


# Words after which a name and whitespace set a value (``aws configure set NAME K``,
# ``git config NAME K``), looked for on the name's line within ``NAME_CHARS`` before it.
_SETTER = re.compile(r"(?<![\w-])(?i:set|config|configure|config:set)(?![\w-])")


def _sets_value(text: _Text, name: re.Match, sep: re.Match, strength: int) -> bool:
    """Whether the separator ``sep`` after a secret's ``name`` starts its value: ``=``,
    ``:`` and the like always; an opening bracket right after the name; whitespace after a
    name of the password family, a flag, or a name a command sets (``_SETTER``)."""
    if sep["op"] is not None or sep["sep"].lstrip("\\\"'`")[:1] in ("(", "[", "{"):
        return True
    if not any(c.isspace() for c in sep["sep"]):
        return False
    if strength == 2 or name[0].startswith("-"):
        return True
    at = name.start()
    line = text.names.rfind("\n", max(0, at - NAME_CHARS), at) + 1
    return _SETTER.search(text.names, max(line, at - NAME_CHARS), at) is not None


@functools.lru_cache(maxsize=1 << 12)
def _takes_field(name: str, op: str | None) -> bool:
    """Whether ``name`` is a header's whose value is the rest of its field: an
    ``Authorization`` (``Proxy-Authorization`` too) after any operator, a ``Cookie`` (or
    ``Set-Cookie``) after a colon."""
    words = WORD.findall(name)
    last = words[-1].lower() if words else ""
    if last == "authorization":
        return True
    return last in FIELD_HEADERS and op is not None and bool(_COLON_OP.fullmatch(op))


def _stripped(pattern: str, start: int, stop: int) -> tuple[int, int]:
    """``start`` and ``stop`` moved past the whitespace at either end of the text between."""
    while start < stop and pattern[start].isspace():
        start += 1
    while stop > start and pattern[stop - 1].isspace():
        stop -= 1
    return start, stop


def only_placeholders(text: str) -> bool:
    return not _HELD_PLACEHOLDER.sub("", text).strip()


# A secret's name in quotes whose value is the next item of its list (``["train.py",
# "--password", "K"]``, ``('--api-key', 'K')``), the next key's value in its object or
# element (``{"name": "DB_PASSWORD", "value": "K"}``, ``<add key="ApiKey" value="K"/>``), or
# its element's text (``<entry key="token">K</entry>``).
_QUOTED_NAME = re.compile(r"(?<![\\\w])(?P<q>\\{0,8}[\"'`])(?P<name>[^\"'`\s\\]{1,256})(?P=q)")
_NEXT_ITEM = re.compile(
    r"(?P<key>\s{0,64}(?:[,;]\s{0,64})?"
    r"(?:(?P<kq>\\{0,8}[\"'`])[A-Za-z_][\w.-]{0,31}(?P=kq)|[A-Za-z_][\w.-]{0,31})"
    r"\s{0,16}[:=]\s{0,16})"
    r"|(?P<item>\s{0,64}[,;]\s{0,64}(?=\\{0,8}[\"'`]))"
    r"|(?P<text>\s{0,16}>)"
)
# An element named as a secret: its text up to the next ``<`` (``<password>K</password>``).
_ELEMENT = re.compile(
    rf"<(?!(?:{KINDS}):[a-z]{{{LETTERS}}}#?>)(?P<name>[^\W\d][\w.:-]{{0,255}})"
    r"(?:\s[^<>]{0,1024})?>"
)


def quoted_pairs(pattern: str) -> Iterator[tuple[int, int, str]]:
    """The values that follow a secret's quoted name (``_QUOTED_NAME``)."""
    text = _Text(pattern)
    end = 0
    for quoted in _QUOTED_NAME.finditer(pattern):
        if quoted.start() < end or not secret_name(quoted["name"]):
            continue
        after = _NEXT_ITEM.match(pattern, quoted.end())
        if after is None:
            continue
        if after["text"] is not None:
            stop = text.find("<", after.end())
        else:
            stop = _item_end(text, after.end())
        found = _value_span(pattern, after.end(), stop)
        if found is not None:
            yield found
            end = found[1]


def elements(pattern: str) -> Iterator[tuple[int, int, str]]:
    """The text of elements named as secrets (``_ELEMENT``)."""
    text = _Text(pattern)
    end = 0
    for element in _ELEMENT.finditer(pattern):
        if element.start() < end or not secret_name(element["name"]):
            continue
        found = _value_span(pattern, element.end(), text.find("<", element.end()))
        if found is not None:
            yield found
            end = found[1]


def _item_end(text: _Text, start: int) -> int:
    """Where the item at ``start`` ends: its closing quote when it opens with one that its
    line closes, else where a setting's value would (``_Text.value_end``)."""
    opening = _QUOTE.match(text.pattern, start)
    if opening is not None:
        line_end = text.find("\n", start)
        closed = text.closing(opening[0], opening.end(), line_end)
        if closed is not None:
            return closed + len(opening[0])
    return text.value_end(start)


def _value_span(pattern: str, start: int, stop: int) -> tuple[int, int, str] | None:
    """The secret between ``start`` and ``stop``, whitespace around it left out; None when
    that is nothing, a harmless word (``true``, ``none``) or placeholders only."""
    start, stop = _stripped(pattern, start, stop)
    value = pattern[start:stop]
    if not value or _HARMLESS_VALUE.fullmatch(value) or only_placeholders(value):
        return None
    return start, stop, SECRET
