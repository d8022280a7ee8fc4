"""Secrets, paths and addresses in the text an export shows, replaced so that the figures
stay the same: what ``nsysprobe scrub`` (``nsysprobe.trace.scrub``) runs on every text it keeps.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import io
import os
import re
from collections.abc import Iterator

# What each kind of replaced text becomes: ``<kind:hash>`` (see ``Scrubber``).
SECRET = "secret"
LOCAL_PATH = "path"
ADDRESS = "address"
URL = "url"
HOST = "host"
# A placeholder: the kind, 12 lowercase letters (a keyed hash of the replaced text with its
# digits masked) and, when it held digits, 12 digits (a keyed hash of the text as it was).
PLACEHOLDER = re.compile(r"<(secret|path|address|url|host):[a-z]{12}(?:[0-9]{12})?>")


# How scrubbing keeps the figures. The analyses tell names apart by equality and group NVTX
# ranges by their pattern (``range_pattern``: each run of digits becomes ``#``). So what is
# replaced is decided on the text's pattern alone (``Batch 3 /data/ab.jpg`` and
# ``Batch 4 /data/cd.jpg`` alike), never on its digits, and each replaced part becomes
# ``<kind:letters>``, the letters a keyed hash (HMAC, a key per scrub) of the part's pattern,
# which a pattern keeps as it is; a part that held digits (or ``#``) gets 12 digits more, a
# keyed hash of the part as it was, which a pattern masks as its own digits. Two names then
# have equal patterns after scrubbing exactly when they had before, and are equal exactly when
# they were, up to hash collisions (2^-56 a pair of patterns, 2^-40 a pair of texts of one
# pattern).
#
# So every rule below reads the pattern: digits are ``#`` there (a ``#`` of the text too,
# which ``range_pattern`` cannot tell from a digit either). Every rule starts only where a run
# of its characters starts (a lookbehind) or at a fixed text, so scrubbing is linear in the
# text's length: a crafted 16 MiB name costs seconds, not hours of backtracking. Each rule
# runs only when the text holds what it needs.

# A run of digits as ``range_pattern`` masks it, or a ``#``.
_RUN = re.compile(r"\d+|#")
_HASH = re.compile("#")
_CACHED_CHARS = 1024
_LETTERS = 12
_DIGITS = 12

# Settings whose value is a secret, by the words of their name: HF_TOKEN, --hf-token,
# WANDB_API_KEY, AccountKey, api_key, aws_secret_access_key, PGPASSWORD, Authorization,
# session_id. A name of the password family takes its value after any separator, whitespace
# alone included (``password\n  hunter2``); the others after ``=``, ``:``, ``:=``, ``=>`` or
# ``->``, or whitespace when the name is a flag (``--api-key KEY``). An opening bracket right
# after any of these names is a separator too (``password(hunter2)``, ``api_key[K]``), and
# the value is then all that lies before its matching closing bracket. An ``Authorization``
# header's value is its scheme and the credential after it (``Token K``, ``Basic K``,
# ``Digest username=..., response=...``): the rest of its line, or of the quotes it is in.
# ``max_tokens``, ``key_padding_mask`` or ``tokenizer`` are not such names.
_SECRET_STEMS = ("pass", "pwd", "secret", "token", "key", "auth", "cred", "cookie", "sig", "sess")
_PASSWORD_STEMS = ("passw", "passphrase")
_SECRET_WORDS = frozenset(
    "pass pwd token auth authorization oauth credential credentials creds cookie cookies "
    "signature sig apikey accesskey privatekey secretkey accountkey sessionid sessionkey "
    "sessiontoken".split()
)
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")
_KINDS = "secret|path|address|url|host"
# A name: not one inside a placeholder (``<path:kqzvwmbtxyaq>``).
_NAME = re.compile(
    r"(?<![\w#$.<-])"
    + "".join(f"(?<!<{kind}:)" for kind in _KINDS.split("|"))
    + r"[-$]*[A-Za-z_][\w#.$-]*"
)
# After a name: any separator, then the value: quoted, or one token of any characters but
# whitespace and delimiters, up to a placeholder. The token is written as runs of one
# character class (``[^...<]*``) between the ``<`` it holds, not as a repeat of an
# alternative: SQLite-sized values (16 MiB) would otherwise cost the regex engine a
# backtracking state per character, gigabytes.
_TOKEN_CHAR = r"[^\s,;&|()\[\]{}<]"
_SEPARATOR_VALUE = re.compile(
    r"(?P<sep>[\"'`]?[\s\[\](){}]{0,64}(?:(?P<op>=>|:=|=|:(?!:)|->)[\s\[\](){}]{0,64})?)"
    r"(?P<value>\"[^\"\n]*\"|'[^'\n]*'"
    rf"|[\"'`]?(?!<(?:{_KINDS}):)(?=[^\s,;&|()\[\]{{}}])"
    rf"{_TOKEN_CHAR}*(?:<(?!(?:{_KINDS}):){_TOKEN_CHAR}*)*)"
)
# An operator between a name and its value.
_OPERATOR = re.compile(r"[^\S\n]*(?:=>|:=|=|:(?!:)|->)")
# Before a value in brackets: a separator ending in an opening bracket.
_OPENING = re.compile(
    r"(?P<sep>[\"'`]?[^\S\n]{0,64}(?:(?P<op>=>|:=|=|:(?!:)|->)[^\S\n]{0,64})?[\[({])"
)


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


# The rest of a header's field after its scheme: up to the end of the line, or to the quote
# that the header's name follows (``-H 'Authorization: Basic K'``), escaped quotes aside.
_FIELD_REST = {q: re.compile(rf"[^\n\r{q}\\]*(?:\\.[^\n\r{q}\\]*)*") for q in ("", '"', "'", "`")}
# A placeholder of an earlier rule, as the pattern shows it.
_HELD_PLACEHOLDER = re.compile(rf"<(?:{_KINDS}):[a-z]{{{_LETTERS}}}#?>")
# Values of such settings that are not secrets.
_HARMLESS = re.compile(r"true|false|yes|no|none|null|nil|on|off|", re.I)

# Password flags of common tools (``sshpass -p PASS``, ``mysql -pPASS``, ``curl -u
# user:pass``), within the command that names the tool: ``-p`` means a port or a path to
# most other programs. Long flags (``--password``) are names as above.
_TOOL_FLAGS = {
    **dict.fromkeys(
        "sshpass mysql mysqldump mysqladmin mysqlimport mysqlshow mariadb mariadb-dump "
        "mongo mongosh mongodump mongorestore mongoexport mongoimport #z #za rar unrar "
        "login".split(),  # docker/podman/helm login -p
        "p",
    ),
    **dict.fromkeys("sqlcmd bcp ipmitool zip unzip".split(), "P"),
    **dict.fromkeys("ldapsearch ldapadd ldapmodify ldapdelete ldappasswd ldapwhoami".split(), "w"),
    "redis-cli": "a",
    "smbclient": "U",
    "curl": "u",
    "openssl": "k",
}
_TOOL = re.compile(
    r"(?<![\w#.-])(?P<tool>"
    + "|".join(re.escape(t) for t in sorted(_TOOL_FLAGS, key=len, reverse=True))
    + r")(?![\w#.-])"
)
_COMMAND_END = re.compile(r"[;&|\n]")
_SHORT_FLAG = re.compile(
    r"(?<!\S)-(?P<flag>[A-Za-z])(?:\s{1,16}|=)?"
    r"(?P<value>\"[^\"\n]*\"|'[^'\n]*'|(?![-<])[^\s\"'`;&|<>]+)"
)
_AUTH = re.compile(
    r"\b(?P<scheme>bearer|basic|token)(?P<sep>\s{1,16})(?P<value>[\w#.~+/-]+=*)", re.I
)
_PRIVATE_KEY = re.compile(
    r"-----BEGIN[A-Z ]{0,40}PRIVATE KEY-----.*?(?:-----END[A-Z ]{0,40}PRIVATE KEY-----|\Z)",
    re.S,
)
_URL = re.compile(r"\b[A-Za-z][A-Za-z#+.-]{0,30}://[^\s\"'<>]*")
_ADDRESS = re.compile(r"(?<![\w#.+-])[\w#.+-]+@[A-Za-z#-]+(?:\.[A-Za-z#-]+)*(?![\w#-])")
# Token formats of common services (digits are ``#``, so lengths are at least these).
_KNOWN_PREFIX = re.compile(
    r"hf_|gh[pousr]_|github_pat_|glpat-|sk-|xox|AKIA|ASIA|AIza|npm_|pypi-|eyJ"
)
_KNOWN_TOKEN = re.compile(
    r"(?<![\w#])(?:hf_[A-Za-z#]{12,}|gh[pousr]_[A-Za-z#]{4,}|github_pat_[\w#]{8,}"
    r"|glpat-[\w#-]{8,}|sk-(?:ant-|proj-)?[\w#-]{12,}|xox[abposr]-[\w#-]{6,}"
    r"|(?:AKIA|ASIA)[A-Z#]{4,16}|AIza[\w#-]{16,}|npm_[A-Za-z#]{12,}|pypi-[\w#-]{16,}"
    r"|eyJ[\w#-]{4,}\.[\w#-]{4,}\.[\w#-]{4,})(?![\w#-])"
)
_LONG_RUN = re.compile(r"[A-Za-z#+/]{12}")
# Hex strings (a 32-digit one has about 20 characters once its digits are masked).
_HEX = re.compile(r"(?<![\w#-])[#a-fA-F]{12,}(?![\w#-])")
# Long random-looking strings (checked by ``_looks_random``): AWS secret keys and the like.
_RANDOM = re.compile(r"(?<![\w#+/=-])[A-Za-z#+/]{28,}={0,2}(?![\w#+/=-])")
_IN_WORDS = re.compile(r"[A-Z]?[a-z]{3,}")
_WINDOWS_PATH = re.compile(
    r"(?<![\w#])[A-Za-z]:[\\/][^\s\"'<>|*?,;]*|\\\\[^\s\\\"'<>]+\\[^\s\"'<>]*"
)
_PATH_PART = r"[^\s/\"'<>|:;,()\[\]{}=*?\\]"
_POSIX_PATH = re.compile(
    rf"(?<![\w#.~/\\-])/{_PATH_PART}+(?:/{_PATH_PART}*)*"
    rf"|(?<![\w#.])~[\w#.-]*/{_PATH_PART}*(?:/{_PATH_PART}*)*"
)
_TLDS = (
    "com|net|org|io|ai|edu|gov|local|localdomain|lan|internal|intranet|corp|cluster|cloud"
    "|uk|de|fr|cn|jp|eu|ch"
)
_HAS_TLD = re.compile(rf"\.(?:{_TLDS})(?![\w#.-])", re.I)
_HOST = re.compile(
    rf"(?<![\w#.-])(?:[A-Za-z#](?:[A-Za-z#-]{{0,61}}[A-Za-z#])?\.)+(?:{_TLDS})(?![\w#.-])",
    re.I,
)
# An IPv4 address, its numbers masked (``10.1.2.3:29500``); ``2025.3.1.90-...`` is a version.
_IPV4 = re.compile(r"(?<![\w#.])#\.#\.#\.#(?![\w#.-])")


@functools.lru_cache(maxsize=1 << 12)
def _secret_name(name: str) -> int:
    """2 for a name of the password family, 1 for another secret's name, else 0."""
    lower = name.lower()
    if not any(stem in lower for stem in _SECRET_STEMS):
        return 0
    words = [w.lower() for w in _WORD.findall(name)]
    if any(stem in lower for stem in _PASSWORD_STEMS):
        return 2 if words and any(stem in words[-1] for stem in _PASSWORD_STEMS) else 1
    for i, word in enumerate(words):
        if "secret" in word or word in _SECRET_WORDS or word.endswith("token"):
            return 1
        if word == "session" and words[i + 1 : i + 2] in (["id"], ["key"], ["token"]):
            return 1
    return 1 if words and words[-1] in ("key", "keys") else 0


def _assignments(pattern: str) -> Iterator[tuple[int, int, str]]:
    """The values of settings whose name says secret."""
    end = 0
    for name in _NAME.finditer(pattern):
        if name.start() < end:
            continue
        strength = _secret_name(name[0])
        if not strength:
            continue
        found = _in_brackets(pattern, name, strength) or _after_separator(pattern, name, strength)
        if found is None:
            continue
        spans, end = found
        for start, stop in spans:
            yield start, stop, SECRET


_Value = tuple[list[tuple[int, int]], int]  # the spans to replace, and where the setting ends


def _in_brackets(pattern: str, name: re.Match, strength: int) -> _Value | None:
    """What lies between the brackets after ``name`` (``password(hunter2)``); None for empty
    brackets that an operator follows (``api_key[]=K``: they are the name's)."""
    opening = _OPENING.match(pattern, name.end())
    if opening is None or not _sets_value(opening["sep"], opening["op"], strength, name[0]):
        return None
    inside = _bracketed_value(pattern, opening.end() - 1)
    if inside is None:
        return None
    start, stop, end = inside
    start, stop = _stripped(pattern, start, stop)
    value = pattern[start:stop]
    if not value and _OPERATOR.match(pattern, end):
        return None
    if _HARMLESS.fullmatch(value.strip("\"'`")) or _only_placeholders(value):
        return [], end
    return [(start, stop)], end


def _after_separator(pattern: str, name: re.Match, strength: int) -> _Value | None:
    """The value after ``name`` and a separator (``password: hunter2``); for an
    ``Authorization`` header, the credential after its scheme too."""
    found = _SEPARATOR_VALUE.match(pattern, name.end())
    if found is None:
        return None
    value = found["value"]
    if not _sets_value(found["sep"], found["op"], strength, name[0]) or (
        found["op"] is None and value.startswith("-")
    ):
        return None
    if _HARMLESS.fullmatch(value.strip("\"'`")):
        return None
    spans = [(found.start("value"), found.end("value"))]
    quoted = len(value) > 1 and value[0] == value[-1] and value[0] in "\"'`"
    if quoted or not _has_scheme(name[0]):
        return spans, found.end()
    quote = pattern[name.start() - 1 : name.start()]
    rest = _FIELD_REST[quote if quote in "\"'`" else ""].match(pattern, found.end())
    start, stop = _stripped(pattern, rest.start(), rest.end())
    if not _only_placeholders(pattern[start:stop]):
        spans.append((start, stop))
    return spans, rest.end()


def _sets_value(sep: str, op: str | None, strength: int, name: str) -> bool:
    """Whether ``sep`` after a secret's ``name`` starts its value: ``=``, ``:`` and the like
    always; an opening bracket right after the name; whitespace after a name of the password
    family or a flag."""
    if op is not None or sep.lstrip("\"'`")[:1] in ("(", "[", "{"):
        return True
    return (strength == 2 or name.startswith("-")) and any(c.isspace() for c in sep)


@functools.lru_cache(maxsize=1 << 12)
def _has_scheme(name: str) -> bool:
    """Whether ``name`` is an ``Authorization`` header's (``Proxy-Authorization`` too), whose
    value is a scheme and a credential: ``Token K``, ``Basic K``, ``Digest ...``."""
    words = _WORD.findall(name)
    return bool(words) and words[-1].lower() == "authorization"


def _stripped(pattern: str, start: int, stop: int) -> tuple[int, int]:
    """``start`` and ``stop`` moved past the whitespace at either end of the text between."""
    while start < stop and pattern[start].isspace():
        start += 1
    while stop > start and pattern[stop - 1].isspace():
        stop -= 1
    return start, stop


def _only_placeholders(text: str) -> bool:
    return not _HELD_PLACEHOLDER.sub("", text).strip()


def _tool_flags(pattern: str) -> Iterator[tuple[int, int, str]]:
    """The values of the password flags of the tools in ``_TOOL_FLAGS``."""
    end = 0
    for tool in _TOOL.finditer(pattern):
        if tool.start() < end:
            continue
        stop = _COMMAND_END.search(pattern, tool.end())
        end = stop.start() if stop else len(pattern)
        flags = _TOOL_FLAGS[tool["tool"]]
        for flag in _SHORT_FLAG.finditer(pattern, tool.end(), end):
            if flag["flag"] in flags:
                yield flag.start("value"), flag.end("value"), SECRET


def _auth_value(match: re.Match) -> bool:
    return match["scheme"].lower() == "bearer" or _looks_random(match["value"])


def _looks_random(value: str) -> bool:
    """Letters and digits mixed, and mostly not in words: a key, not an identifier such as
    ``Conv2dWgradOutputGradientTileAccessIteratorOptimized``."""
    if "#" not in value or not any(c.isalpha() for c in value):
        return False
    in_words = sum(len(m) for m in _IN_WORDS.findall(value))
    return in_words < len(value) / 2


def _is_hex(match: re.Match) -> bool:
    return match[0].count("#") >= 2 and sum(c.isalpha() for c in match[0]) >= 2


def _found(pattern: re.Pattern, kind: str, group: str | int = 0, keep=None):
    def spans(text: str) -> Iterator[tuple[int, int, str]]:
        for m in pattern.finditer(text):
            if keep is None or keep(m):
                yield m.start(group), m.end(group), kind

    return spans


def _has_secret_word(text: str) -> bool:
    lower = text.lower()
    return any(stem in lower for stem in _SECRET_STEMS)


# (whether a text may hold it, its spans), in order: a later rule sees the placeholders of the
# earlier ones. A setting's value goes whole, whatever it holds (``password=p@ss:word``); a
# URL's ``user:password`` is one URL.
_RULES = (
    (lambda t: "PRIVATE KEY" in t, _found(_PRIVATE_KEY, SECRET)),
    (
        lambda t: any(w in t.lower() for w in ("bearer", "basic", "token")),
        _found(_AUTH, SECRET, "value", _auth_value),
    ),
    (_has_secret_word, _assignments),
    (_TOOL.search, _tool_flags),
    (lambda t: "://" in t, _found(_URL, URL)),
    (lambda t: "@" in t, _found(_ADDRESS, ADDRESS)),
    (_KNOWN_PREFIX.search, _found(_KNOWN_TOKEN, SECRET)),
    (_LONG_RUN.search, _found(_HEX, SECRET, keep=_is_hex)),
    (_LONG_RUN.search, _found(_RANDOM, SECRET, keep=lambda m: _looks_random(m[0]))),
    (lambda t: ":\\" in t or ":/" in t or "\\\\" in t, _found(_WINDOWS_PATH, LOCAL_PATH)),
    (lambda t: "/" in t, _found(_POSIX_PATH, LOCAL_PATH)),
    (_HAS_TLD.search, _found(_HOST, HOST)),
    (lambda t: "#.#.#.#" in t, _found(_IPV4, HOST)),
)

# A plan: the scrubbed pattern, and for each of its ``#`` that a placeholder holds (by the
# ``#``'s index), the placeholder's letters and how many runs of digits its part held.
_Plan = tuple[str, tuple[tuple[int, str, int], ...]]


class TooLong(Exception):
    """The scrubbed text would be longer than the caller allows."""


class _TooMany(Exception):
    """A text of more than ``MAX_PLACEHOLDERS`` secrets, paths, addresses and the like."""


# Placeholders one pass over a text makes at most. Names hold a few; a text of hundreds of
# thousands (``password=`` 500,000 times in 4 MiB took 460 MB to scrub) becomes one secret
# placeholder whole: nothing of it is kept, equal texts stay equal, and memory stays bounded.
MAX_PLACEHOLDERS = 4096


class Scrubber:
    """:func:`scrub_text` with one key. What a pattern becomes is remembered (patterns repeat
    far more than texts: ``step 1``, ``step 2``, ...), and so is each part's hash."""

    def __init__(self, key: bytes):
        self._key = key
        self._cached_plan = functools.lru_cache(maxsize=1 << 16)(self._plan)
        self._cached_scrub = functools.lru_cache(maxsize=1 << 16)(self._scrub)
        self._letters = functools.lru_cache(maxsize=1 << 12)(self._letters_of)
        self._digits = functools.lru_cache(maxsize=1 << 12)(self._digits_of)

    def __call__(self, text: str, max_chars: int | None = None) -> str:
        """``text`` scrubbed; ``TooLong`` when that is longer than ``max_chars``."""
        if len(text) <= _CACHED_CHARS // 4:
            scrubbed = self._cached_scrub(text)
        else:
            scrubbed = self._scrub(text, max_chars)
        if max_chars is not None and len(scrubbed) > max_chars:
            raise TooLong
        return scrubbed

    def _scrub(self, text: str, max_chars: int | None = None) -> str:
        pattern = _RUN.sub("#", text)
        try:
            if len(pattern) <= _CACHED_CHARS:
                plan = self._cached_plan(pattern)
            else:
                plan = self._plan(pattern, max_chars)
        except _TooMany:
            return f"<{SECRET}:{self._letters_of(text)}>"
        if plan is None:
            return text
        scrubbed, held = plan
        runs = (m[0] for m in _RUN.finditer(text))
        marks = iter(held)
        mark = next(marks, None)
        index = -1

        def fill(_match: re.Match) -> str:
            # The text's own run, or the digits of a placeholder over the next runs.
            nonlocal index, mark
            index += 1
            if mark is None or mark[0] != index:
                return next(runs)
            _, letters, count = mark
            mark = next(marks, None)
            return self._digits(letters, tuple(next(runs) for _ in range(count)))

        return _HASH.sub(fill, scrubbed) if "#" in scrubbed else scrubbed

    def _plan(self, pattern: str, max_chars: int | None = None) -> _Plan | None:
        """What ``pattern`` becomes, or None when nothing in it is replaced."""
        held: list[tuple[int, str, int]] = []
        changed = False
        for may_hold, find in _RULES:
            if may_hold(pattern):
                replaced = self._replaced(pattern, held, find(pattern))
                if replaced is not None:
                    pattern, held = replaced
                    changed = True
                    if max_chars is not None and len(pattern) > max_chars:
                        raise TooLong
        return (pattern, tuple(held)) if changed else None

    def _replaced(
        self, pattern: str, held: list[tuple[int, str, int]], spans
    ) -> tuple[str, list[tuple[int, str, int]]] | None:
        """``pattern`` with each (start, end, kind) of ``spans`` (in order, apart) replaced by a
        placeholder, and the placeholders' ``#`` re-indexed; None when there is none."""
        out = io.StringIO()
        new_held: list[tuple[int, str, int]] = []
        at = index = new_index = h = 0  # position, # before it, in the new pattern, in held
        found = False
        for made, (start, end, kind) in enumerate(spans):
            if made == MAX_PLACEHOLDERS:
                raise _TooMany
            found = True
            before = pattern.count("#", at, start)
            while h < len(held) and held[h][0] < index + before:
                new_held.append((held[h][0] - index + new_index, *held[h][1:]))
                h += 1
            out.write(pattern[at:start])
            index, new_index = index + before, new_index + before
            part = pattern[start:end]
            inside = part.count("#")
            runs = inside
            while h < len(held) and held[h][0] < index + inside:
                runs += held[h][2] - 1
                h += 1
            letters = self._letters(part)
            if inside:
                out.write(f"<{kind}:{letters}#>")
                new_held.append((new_index, letters, runs))
                new_index += 1
            else:
                out.write(f"<{kind}:{letters}>")
            index += inside
            at = end
        if not found:
            return None
        for mark in held[h:]:
            new_held.append((mark[0] - index + new_index, *mark[1:]))
        out.write(pattern[at:])
        return out.getvalue(), new_held

    def _letters_of(self, part: str) -> str:
        """The letters of the placeholder of ``part`` (a pattern)."""
        number = int.from_bytes(self._hash(b"p", part.encode("utf-8", "surrogatepass")), "big")
        letters = []
        for _ in range(_LETTERS):
            number, r = divmod(number, 26)
            letters.append(chr(ord("a") + r))
        return "".join(letters)

    def _digits_of(self, letters: str, runs: tuple[str, ...]) -> str:
        """The digits of the placeholder ``letters`` over a part that held ``runs``."""
        data = (letters + "\0" + "\0".join(runs)).encode("utf-8")
        return f"{int.from_bytes(self._hash(b't', data), 'big') % 10**_DIGITS:0{_DIGITS}d}"

    def _hash(self, domain: bytes, data: bytes) -> bytes:
        return hmac.new(self._key, domain + data, hashlib.sha256).digest()[:16]


_SCRUBBER = Scrubber(os.urandom(32))


def scrub_text(text: str, key: bytes | None = None) -> str:
    """``text`` with secrets, local paths, e-mail addresses, URLs and host names replaced by
    placeholders (``<secret:…>``, ``<path:…>``, ``<address:…>``, ``<url:…>``, ``<host:…>``, see
    ``PLACEHOLDER``) that keep which texts are equal and which have equal range patterns.

    Names stay as they are: ``aten::add``, ``Batch 12``, ``loss=0.5``, ``max_tokens=4096``,
    ``void at::native::vectorized_elementwise_kernel<4, ...>``. What is replaced: the value
    after a name that says secret (``HF_TOKEN=``, ``--hf-token``, ``api_key :=``,
    ``AccountKey=``, ``:password =>``, ``password:`` and a new line, ``PGPASSWORD=(...)``,
    ``password(...)``, ``api_key[...]``: all up to the matching bracket), whatever it looks
    like; an ``Authorization`` header's scheme and credential (``Authorization: Token ...``,
    ``Proxy-Authorization: Basic ...``: the rest of the line or quoted field); the password
    flags of common tools (``sshpass -p``); the token after ``Bearer``; the formats of
    common services' keys (``hf_``, ``ghp_``, ``sk-``, ``AKIA``, JWTs); hex and random-looking
    strings; absolute paths (``/home/...``, ``~/...``, ``C:\\Users\\...``), ``user@host``,
    URLs, host names with a known top-level domain and IPv4 addresses.

    The placeholders are keyed hashes: with the same ``key`` (bytes) a text always becomes
    the same; without one, a key made for this process is used.
    """
    return (_SCRUBBER if key is None else Scrubber(key))(text)
