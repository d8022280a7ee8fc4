"""The rules in the order they run (``_RULES``: a later rule sees the placeholders of the
earlier ones) and the engine that applies them to a text (``Scrubber``, ``scrub_text``): a rule
runs only when the text holds what it needs, and what a pattern becomes is planned once.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import io
import os
import re
from collections.abc import Iterator

from nsysprobe.trace.secrets.flags import TOOL, tool_flags
from nsysprobe.trace.secrets.forms import (
    ADDRESS_PATTERN,
    FULL_WIDTH,
    HAS_TLD,
    HOST_PATTERN,
    IPV4,
    IPV6,
    KNOWN_PREFIX,
    LONG_HEX,
    LONG_RUN,
    POSIX_PATH,
    URL_PATTERN,
    WINDOWS_PATH,
    auth_value,
    has_digit,
    hex_strings,
    known_tokens,
    no_version,
    random_runs,
)
from nsysprobe.trace.secrets.names import SECRET_STEMS
from nsysprobe.trace.secrets.placeholders import (
    ADDRESS,
    CACHED_CHARS,
    DIGITS,
    HASH,
    HOST,
    LETTERS,
    LOCAL_PATH,
    RUN,
    SECRET,
    URL,
    TooMany,
)
from nsysprobe.trace.secrets.settings import (
    AUTH,
    PRIVATE_KEY,
    assignments,
    elements,
    quoted_pairs,
)


def _found(pattern: re.Pattern, kind: str, group: str | int = 0, keep=None):
    def spans(text: str) -> Iterator[tuple[int, int, str]]:
        for m in pattern.finditer(text):
            if keep is None or keep(m):
                yield m.start(group), m.end(group), kind

    return spans


def _may_hold_token(text: str) -> bool:
    view = text if text.isascii() else text.translate(FULL_WIDTH)
    return KNOWN_PREFIX.search(view) is not None


def _has_quote(text: str) -> bool:
    return '"' in text or "'" in text or "`" in text


def _may_hold_setting(text: str) -> bool:
    lower = text.lower()
    return any(stem in lower for stem in SECRET_STEMS) or "%" in text or not text.isascii()


# (whether a text may hold it, its spans), in order: a later rule sees the placeholders of the
# earlier ones. A setting's value goes whole, whatever it holds (``password=p@ss:word``); a
# URL's ``user:password`` is one URL.
_RULES = (
    (lambda t: "PRIVATE KEY" in t, _found(PRIVATE_KEY, SECRET)),
    (
        lambda t: any(w in t.lower() for w in ("bearer", "basic", "token")),
        _found(AUTH, SECRET, "value", auth_value),
    ),
    (TOOL.search, tool_flags),
    (lambda t: _has_quote(t) and _may_hold_setting(t), quoted_pairs),
    (lambda t: "<" in t and _may_hold_setting(t), elements),
    (_may_hold_setting, assignments),
    (lambda t: "://" in t, _found(URL_PATTERN, URL)),
    (lambda t: "@" in t, _found(ADDRESS_PATTERN, ADDRESS)),
    (_may_hold_token, known_tokens),
    (LONG_RUN.search, random_runs),
    (LONG_HEX.search, hex_strings),
    (lambda t: ":\\" in t or ":/" in t or "\\\\" in t, _found(WINDOWS_PATH, LOCAL_PATH)),
    (lambda t: "/" in t, _found(POSIX_PATH, LOCAL_PATH)),
    (HAS_TLD.search, _found(HOST_PATTERN, HOST)),
    (lambda t: "::" in t or t.count(":") >= 7, _found(IPV6, HOST, keep=has_digit)),
    (lambda t: "#.#.#.#" in t, _found(IPV4, HOST, keep=no_version)),
)
# A plan: the scrubbed pattern, and for each of its ``#`` that a placeholder holds (by the
# ``#``'s index), the placeholder's letters and how many runs of digits its part held.
_Plan = tuple[str, tuple[tuple[int, str, int], ...]]


class TooLong(Exception):
    """The scrubbed text would be longer than the caller allows."""


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
        if len(text) <= CACHED_CHARS // 4:
            scrubbed = self._cached_scrub(text)
        else:
            scrubbed = self._scrub(text, max_chars)
        if max_chars is not None and len(scrubbed) > max_chars:
            raise TooLong
        return scrubbed

    def _scrub(self, text: str, max_chars: int | None = None) -> str:
        pattern = RUN.sub("#", text)
        try:
            if len(pattern) <= CACHED_CHARS:
                plan = self._cached_plan(pattern)
            else:
                plan = self._plan(pattern, max_chars)
        except TooMany:
            return f"<{SECRET}:{self._letters_of(text)}>"
        if plan is None:
            return text
        scrubbed, held = plan
        runs = (m[0] for m in RUN.finditer(text))
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

        return HASH.sub(fill, scrubbed) if "#" in scrubbed else scrubbed

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
                raise TooMany
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
        for _ in range(LETTERS):
            number, r = divmod(number, 26)
            letters.append(chr(ord("a") + r))
        return "".join(letters)

    def _digits_of(self, letters: str, runs: tuple[str, ...]) -> str:
        """The digits of the placeholder ``letters`` over a part that held ``runs``."""
        data = (letters + "\0" + "\0".join(runs)).encode("utf-8")
        return f"{int.from_bytes(self._hash(b't', data), 'big') % 10**DIGITS:0{DIGITS}d}"

    def _hash(self, domain: bytes, data: bytes) -> bytes:
        return hmac.new(self._key, domain + data, hashlib.sha256).digest()[:16]


_SCRUBBER = Scrubber(os.urandom(32))


def scrub_text(text: str, key: bytes | None = None) -> str:
    """``text`` with secrets, local paths, e-mail addresses, URLs and host names replaced by
    placeholders (``<secret:…>``, ``<path:…>``, ``<address:…>``, ``<url:…>``, ``<host:…>``, see
    ``PLACEHOLDER``) that keep which texts are equal and which have equal range patterns.

    Names stay as they are: ``aten::add``, ``Batch 12``, ``loss=0.5``, ``max_tokens=4096``,
    ``void at::native::vectorized_elementwise_kernel<4, ...>``, ``triton_poi_fused_add_0d1d2de``,
    ``</s>``, ``version 2.5.1.0``. What is replaced: the value
    after a name that says secret (``HF_TOKEN=``, ``--hf-token``, ``api_key :=``,
    ``AccountKey=``, ``PASSCODE=``, ``session=``, ``X-Api-Key:``, ``password＝``,
    ``"password": "..."``, ``\\"password\\":\\"...\\"``, ``?token=``, ``%74oken=``,
    ``:password =>``, ``password:`` and a new line): everything up to the next whitespace
    that no quotes hold, whatever punctuation it holds, or all up to the matching bracket
    (``PGPASSWORD=(...)``, ``password(...)``, ``api_key[...]``), but not an index
    (``keys[3]``); the lines of a YAML block scalar (``token: |``); the item after a quoted
    name (``["--password", "..."]``, ``{"name": "DB_PASSWORD", "value": "..."}``) and an
    element's text (``<password>...</password>``); names read in any case, through
    characters that show nothing, look-alike letters, undecodable bytes and encoded
    separators (``pass\u200bword=``, ``pаssword=``, ``token%3D``); an ``Authorization``
    header's scheme and credential and a ``Cookie`` header's cookies (the rest of the line or
    quoted field); the password flags of common tools (``sshpass -p``, ``curl -su``,
    ``rar -hp``, ``htpasswd -b``); the token after ``Bearer``; the formats of common
    services' keys, inside words too, with their rest past a line break, their prefix in any
    case or in full-width letters (``hf_``, ``ghp_``, ``sk-``, ``sk_live_``, ``xoxb-``,
    ``AKIA``, ``AIza``, ``ya29.``, JWTs, private key blocks); hex and random-looking runs of
    32 characters or so, inside words and right after ``=`` too; absolute
    paths (``/home/...``, ``~/...``, ``C:\\Users\\...``), ``user@host``, URLs, host names
    with a known top-level domain, IPv4 and IPv6 addresses (``fe80::1%eth0``, ``[::1]:80``).

    The placeholders are keyed hashes: with the same ``key`` (bytes) a text always becomes
    the same; without one, a key made for this process is used.
    """
    return (_SCRUBBER if key is None else Scrubber(key))(text)
