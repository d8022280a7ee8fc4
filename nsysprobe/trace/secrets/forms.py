"""What is a secret or a local name by its form alone: the keys of common services
(``_TOKEN_FORMS``: ``hf_``, ``ghp_``, ``sk-``, ``AKIA``, JWTs), random-looking runs and hex
strings (``random_runs``, ``hex_strings``) as against names such as ``triton_poi_fused_add_0d1d2de``
or mangled C++ names; URLs, e-mail addresses, local paths, host names with a known top-level
domain, and IPv4 and IPv6 addresses (not versions).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from nsysprobe.trace.secrets.names import IGNORABLE
from nsysprobe.trace.secrets.placeholders import SECRET, TooMany
from nsysprobe.trace.secrets.settings import merged

URL_PATTERN = re.compile(r"\b[A-Za-z][A-Za-z#+.-]{0,30}://[^\s\"'<>]*")
ADDRESS_PATTERN = re.compile(r"(?<![\w#.+-])[\w#.+-]+@[A-Za-z#-]+(?:\.[A-Za-z#-]+)*(?![\w#-])")
# Token formats of common services, found inside words too (``xghp_...``, ``id=sk_live_...``):
# (prefix, the characters of the body, the shortest body at the start of a word, the
# shortest inside a word, what a body inside a word must look like, the body's length when
# the service issues one length, else 0). Digits are ``#`` in the pattern, so the lengths
# are at most the real ones. A body is one class of characters, so that a match that is no
# token still ends its run: each run is read once. Tokens are read in full-width letters as
# in ASCII (``ｇｈｐ＿...``), and with a prefix in another case (``HF_...``, ``akia...``) when
# they stand as a word of their own and mix classes (or look random, where the format says
# so). A token shorter than its service's length whose rest follows a break (``ghp_K\nK``,
# ``AKIA... ...``, ``"K" + "K"``) goes with its rest.
_ANY, _MIXED, _RANDOM = 0, 1, 2
_TOKEN_FORMS = {
    "aws": (r"AKIA|ASIA", r"[A-Z#]", 4, 12, _ANY, 16),
    "github": (r"gh[pousr]_", r"[A-Za-z#]", 4, 20, _MIXED, 36),
    "github_pat": (r"github_pat_", r"[\w#]", 8, 20, _ANY, 0),
    "gitlab": (r"glpat-", r"[\w#-]", 8, 16, _ANY, 20),
    "stripe": (r"(?:sk|rk|pk)_(?:live|test)_|whsec_", r"[A-Za-z#]", 8, 12, _ANY, 0),
    "openai": (r"sk-(?:proj|ant|svcacct|admin)-", r"[\w#-]", 12, 20, _ANY, 0),
    "openai_legacy": (r"sk-", r"[\w#-]", 12, 20, _RANDOM, 48),
    "slack": (r"xox[abposre]-", r"[\w#-]", 6, 10, _ANY, 0),
    "google_oauth": (r"ya#\.", r"[\w#.-]", 16, 16, _ANY, 0),
    "google_api": (r"AIza", r"[\w#-]", 16, 24, _ANY, 35),
    "huggingface": (r"hf_", r"[A-Za-z#]", 12, 30, _MIXED, 34),
    "npm": (r"npm_", r"[A-Za-z#]", 12, 24, _MIXED, 36),
    "pypi": (r"pypi-", r"[\w#-]", 16, 32, _ANY, 0),
    "jwt": (r"eyJ", r"[\w#.-]", 8, 16, _ANY, 0),  # and two dots (``_is_jwt``)
}
KNOWN_PREFIX = re.compile("|".join(form[0] for form in _TOKEN_FORMS.values()), re.I)
_TOKEN_SOURCE = "|".join(
    f"(?P<{name}>{prefix}){body}+" for name, (prefix, body, *_) in _TOKEN_FORMS.items()
)
_KNOWN_TOKEN = re.compile(_TOKEN_SOURCE)
# Only a word of its own is read with its prefix in another case (and only there, starting
# with a prefix's first letter, is a case-blind prefix looked for: at every character it is
# slow).
_PREFIX_LETTERS = "aeghnprswxy"
_RECASED_TOKEN = re.compile(rf"(?<![\w#])(?=[{_PREFIX_LETTERS}])(?:{_TOKEN_SOURCE})", re.I)
_CANONICAL_PREFIX = {name: re.compile(form[0]) for name, form in _TOKEN_FORMS.items()}
_TOKEN_BODY = {
    case: {name: re.compile(form[1] + "+", case) for name, form in _TOKEN_FORMS.items()}
    for case in (0, re.I)
}
# Full-width ASCII (``ｇｈｐ＿``) as ASCII: one character for one.
FULL_WIDTH = {code: code - 0xFEE0 for code in range(0xFF01, 0xFF5F)}
# What a token's rest may follow: whitespace (after a ``\`` too), characters that show
# nothing, or one punctuation mark, and a quote, ``+`` and a quote (``"K" + "K"``); at most
# ``_TOKEN_BREAKS`` of them, each before 4 characters or more of the body (fewer than 8 that
# are a word, in one class and pronounceable, are the text's next word).
_TOKEN_BREAK = re.compile(
    rf"(?:\\?\s{{1,4}}|[{IGNORABLE}]{{1,4}}|[-_./+,|:;])?"
    r"(?:[\"'`][^\S\n]{0,4}\+?[^\S\n]{0,4}[\"'`][^\S\n]{0,4})?"
)
_TOKEN_BREAKS = 4
_TOKEN_REST = 4
_WORD_CHAR = re.compile(r"[\w#]")
# A JWT after its ``eyJ``: the rest of its header, its payload and its signature.
_JWT = re.compile(r"[\w#-]{4,}\.[\w#-]{4,}(?:\.[\w#-]*){1,3}")
# Long random-looking runs, inside words too: base64 (``+``, ``/``, ``=``), base64url (``-``,
# ``_``) and the like, of 24 characters or more once digits are masked (a key of 32 or
# more). A run of these characters is cut at its ``_`` and ``-`` into pieces. A piece of 8
# characters or more in one class and pronounceable (``elementwise``) is a word and ends a
# stretch; one that mixes classes is random when it, or a stretch of ``_WINDOW`` characters
# in it, is mostly not in words or switches class often (``_random_span``). A stretch of
# pieces with a random one and 16 random characters or more (short pieces that mix classes
# count) is a key, with the other pieces it holds (``ckpt_Zm9vYmFy..._v2`` goes whole),
# while ``sm90_xmma_gemm_f16f16_..._kernel`` stays. A run that starts as a mangled C++ name
# does (``_ZN``, ``_Z#``, ``_ZL``, ...), whose codes (``IfLi#EEEEvT#``) look random, is left
# to the formats above and hex. A run starts after ``=`` too (``WANDB=K``, ``id=K``): a
# value's key is a run of its own.
_RUN_OF_KEY = re.compile(r"(?<![A-Za-z#+/_-])[A-Za-z#+/_-]{24,}={0,2}")
# The signature a Triton 2.1 kernel's name ends in after ``_``: each argument's index and
# what is known of it (``d`` divisible by 16, ``e`` equal to 1, ``c`` a constant):
# ``triton_poi_fused_add_0d1d2d3de``, ``fused_moe_kernel_0d1d2...d19``. Neither hex nor a key.
_TRITON_SIGNATURE = re.compile(r"(?:#(?:de?|e|c))+#?")
_TRITON_CHARS = 1024  # longer is no signature (and read by no repeated group)
_MANGLED_RUN = re.compile("_Z[NLZSTG#]")
_KEY_PIECE = re.compile(r"[A-Za-z#+/=]+")
_PIECE_CHARS = 8
_KEY_CHARS = 16
_KEY_RUN = 24
_MIXED_RUN = 32
_WINDOW = 24
_CLASS_RUN = re.compile(r"[A-Z]+|[a-z]+|#(?:x#)*|[^A-Za-z#]+")
_VOWELS = re.compile("[AEIOUYaeiouy]")
# Words in a random-looking span: ``Kernel``, ``ECONNABORTED`` (``_is_said``).
_KEY_WORDS = re.compile("[A-Z][a-z]{2,}|[a-z]{3,}|[A-Z]{4,}")
_WORD_VOWELS = re.compile("[AEIOUaeiou]")
# Pieces one text is cut into at most: a text of more (``a_a_a_...``, never a name) becomes
# one secret placeholder whole (see ``MAX_PLACEHOLDERS``).
MAX_KEY_PIECES = 1 << 17
# Spans longer than this are not read for words (``_in_words``).
_WORDS_CHARS = 4096
_UPPER = re.compile("[A-Z]")
_LOWER = re.compile("[a-z]")
# Hex strings, inside words too (a 32-digit one has about 20 characters once its digits are
# masked, rarely fewer than 9): 12 characters or more with 2 runs of digits and 2 letters,
# or 9 or more with 3 of each. In a mangled C++ name (``_Z...``) only one that no letter
# follows: there a hash, a length and a name run together (``9c8c8d3a33embedding``).
_HEX = re.compile(r"(?<![#a-fA-F])[#a-fA-F]{9,}")
LONG_HEX = re.compile(r"[#a-fA-F]{9}")
_MANGLED = re.compile(r"(?<![\w#$.])_Z[\w#$.]*")
_LETTER = re.compile("[A-Za-z]")
LONG_RUN = re.compile(r"[A-Za-z#+/_-]{24}")
_IN_WORDS = re.compile(r"[A-Z]?[a-z]{3,}")
WINDOWS_PATH = re.compile(
    r"(?<![\w#])[A-Za-z]:[\\/][^\s\"'<>|*?,;]*|\\\\[^\s\\\"'<>]+\\[^\s\"'<>]*"
)
_PATH_PART = r"[^\s/\"'<>|:;,()\[\]{}=*?\\]"
# A path, not a closing tag (``</s>``, ``<b>bold</b>``, ``</password>``).
POSIX_PATH = re.compile(
    rf"(?<![\w#.~/\\-])(?!(?<=<)/[A-Za-z_][\w.:-]{{0,255}}>)/{_PATH_PART}+(?:/{_PATH_PART}*)*"
    rf"|(?<![\w#.])~[\w#.-]*/{_PATH_PART}*(?:/{_PATH_PART}*)*"
)
_TLDS = (
    "com|net|org|io|ai|edu|gov|local|localdomain|lan|internal|intranet|corp|cluster|cloud"
    "|uk|de|fr|cn|jp|eu|ch"
)
HAS_TLD = re.compile(rf"\.(?:{_TLDS})(?![\w#.-])", re.I)
HOST_PATTERN = re.compile(
    rf"(?<![\w#.-])(?:[A-Za-z#](?:[A-Za-z#-]{{0,61}}[A-Za-z#])?\.)+(?:{_TLDS})(?![\w#.-])",
    re.I,
)
# An IPv4 address, its numbers masked (``10.1.2.3:29500``); ``2025.3.1.90-...`` is a version,
# and so are four numbers right after a word that says so (``version 2.5.1.0``, ``driver
# 550.54.15.1``, ``v 1.2.3.4``). Whether a number passes 255 is not read: the pattern masks
# digits, so that ``driver 10.0.0.1`` and ``driver 550.54.15.1`` stay alike.
IPV4 = re.compile(r"(?<![\w#.])#\.#\.#\.#(?![\w#.-])")
_VERSION_WORD = re.compile(
    r"(?<![A-Za-z])(?i:version|ver|driver|release|build|revision|rev|v)\.?[^\S\n]{0,4}[:=]?"
    r"[^\S\n]{0,4}\Z"
)
# An IPv6 address: eight groups, or fewer around one ``::`` (``fe80::1``, ``::1``), the last
# one perhaps an IPv4 address (``::ffff:10.0.0.1``), then perhaps a zone (``%eth0``). One
# holds a digit (``aten::add`` and ``c10::Half`` are names): ``has_digit``.
_GROUP = r"[#A-Fa-f]{1,4}"
_LAST_GROUP = rf"(?:#\.#\.#\.#|{_GROUP})"
IPV6 = re.compile(
    rf"(?<![A-Za-z#:.%])(?:(?:{_GROUP}:){{7}}{_LAST_GROUP}"
    rf"|(?:{_GROUP}:){{1,7}}:(?:(?:{_GROUP}:){{0,6}}{_LAST_GROUP})?"
    rf"|::(?:(?:{_GROUP}:){{0,6}}{_LAST_GROUP})?)"
    r"(?:%[\w#.-]+)?(?![\w#:.])"
)


def auth_value(match: re.Match) -> bool:
    return match["scheme"].lower() == "bearer" or _looks_random(match["value"])


def _looks_random(value: str) -> bool:
    """Letters and digits mixed, and mostly not in words: a key, not an identifier such as
    ``Conv2dWgradOutputGradientTileAccessIteratorOptimized``."""
    if "#" not in value or not any(c.isalpha() for c in value):
        return False
    in_words = sum(len(m) for m in _IN_WORDS.findall(value))
    return in_words < len(value) / 2


def hex_strings(pattern: str) -> Iterator[tuple[int, int, str]]:
    """The hex strings of ``pattern`` (see ``_HEX``)."""
    mangled = [m.span() for m in _MANGLED.finditer(pattern)] if "_Z" in pattern else []
    at = 0  # the first mangled name that may hold the next hex string
    for m in _HEX.finditer(pattern):
        start, end = m.span()
        while at < len(mangled) and mangled[at][1] <= start:
            at += 1
        if at < len(mangled) and mangled[at][0] <= start and _LETTER.match(pattern, end):
            continue
        if _triton_signature(pattern, start, end):
            continue
        runs = pattern.count("#", start, end)
        least = 2 if end - start >= 12 else 3
        if runs >= least and end - start - runs >= least:
            yield start, end, SECRET


def has_digit(match: re.Match) -> bool:
    return "#" in match[0]


def no_version(match: re.Match) -> bool:
    """Whether an IPv4 address's match is not a version (``IPV4``)."""
    before = match.string[max(0, match.start() - 24) : match.start()]
    return _VERSION_WORD.search(before) is None


def _triton_signature(pattern: str, start: int, end: int) -> bool:
    """Whether the span is the signature a Triton kernel's name ends in (``_TRITON_SIGNATURE``)."""
    return (
        end - start <= _TRITON_CHARS
        and pattern[start - 1 : start] == "_"
        and _TRITON_SIGNATURE.fullmatch(pattern, start, end) is not None
    )


def _class_bits(pattern: str, start: int, end: int) -> int:
    """Which of upper-case letters, lower-case letters and digits the span holds: 1, 2, 4."""
    return (
        (_UPPER.search(pattern, start, end) is not None)
        | (_LOWER.search(pattern, start, end) is not None) << 1
        | (pattern.find("#", start, end) >= 0) << 2
    )


def _classes(pattern: str, start: int, end: int) -> int:
    """How many of upper-case letters, lower-case letters and digits the span holds."""
    return bin(_class_bits(pattern, start, end)).count("1")


def known_tokens(pattern: str) -> Iterator[tuple[int, int, str]]:
    """The tokens of ``_TOKEN_FORMS``, at the start of a word or inside one, in full-width
    letters too, and with their prefix in another case."""
    view = pattern if pattern.isascii() else pattern.translate(FULL_WIDTH)
    return merged(_tokens(view, recased=False), _tokens(view, recased=True))


def _tokens(view: str, recased: bool) -> Iterator[tuple[int, int, str]]:
    """The tokens in ``view`` whose prefix is as the service writes it, or (``recased``)
    those whose prefix is not."""
    end = 0
    for m in (_RECASED_TOKEN if recased else _KNOWN_TOKEN).finditer(view):
        form = m.lastgroup
        if m.start() < end:
            continue
        if recased and (form == "jwt" or _CANONICAL_PREFIX[form].fullmatch(m[form])):
            continue
        stop = m.end()
        while view[stop - 1] == ".":
            stop -= 1
        if form == "jwt" and not _JWT.fullmatch(view, m.end(form), stop):
            continue
        body = stop - m.end(form)
        if _TOKEN_FORMS[form][5]:
            stop, body = _with_rest(view, stop, form, body, recased)
        if _is_token(view, m, stop, body, recased):
            yield m.start(), stop, SECRET
            end = stop


def _is_token(view: str, m: re.Match, stop: int, body: int, recased: bool) -> bool:
    """Whether the match of a token's prefix, up to ``stop`` with ``body`` characters of its
    body (its rest past breaks too), is one (``_TOKEN_FORMS``)."""
    form = m.lastgroup
    _, _, shortest, shortest_inside, looks, _ = _TOKEN_FORMS[form]
    first = m.end(form)
    at_start = m.start() == 0 or not _WORD_CHAR.match(view, m.start() - 1)
    if recased:
        ends = stop == len(view) or not _WORD_CHAR.match(view, stop)
        if not (at_start and ends and body >= shortest_inside and _classes(view, first, stop) >= 2):
            return False
        return looks != _RANDOM or any(_keys(view, first, stop, [0]))
    if body >= shortest and at_start:
        return True
    return body >= shortest_inside and (
        looks == _ANY
        or (looks == _MIXED and _classes(view, first, stop) >= 2)
        or (looks == _RANDOM and any(_keys(view, first, stop, [0])))
    )


def _with_rest(view: str, stop: int, form: str, body: int, recased: bool) -> tuple[int, int]:
    """Where a token of ``form`` that ends at ``stop`` with ``body`` characters of its body,
    fewer than its service issues, ends with the rest that follows it past breaks
    (``_TOKEN_BREAK``), and how many characters of its body it then holds."""
    chars = _TOKEN_BODY[re.I if recased else 0][form]
    missing = _TOKEN_FORMS[form][5] - body
    for _ in range(_TOKEN_BREAKS):
        cut = _TOKEN_BREAK.match(view, stop) if missing >= _TOKEN_REST else None
        rest = chars.match(view, cut.end()) if cut and cut.end() > stop else None
        if rest is None:
            break
        first, last = rest.span()
        if not _TOKEN_REST <= last - first <= missing:
            break
        short = last - first < _PIECE_CHARS
        if short and _is_word(view, first, last, _class_bits(view, first, last)):
            break  # the text's next word (``AKIA... DONE``, ``ghp_... then``)
        stop, missing = last, missing - (last - first)
    return stop, _TOKEN_FORMS[form][5] - missing


def _random_span(pattern: str, start: int, end: int) -> bool:
    """Whether the span mixes classes of characters as keys do and words do not: it holds
    two of upper case, lower case and digits, and is mostly not in words (``_KEY_WORDS``
    that can be said) or switches class often with few vowels (``_switches_often``). A span too
    long to be a word's is random when it mixes classes (fail closed)."""
    if _classes(pattern, start, end) < 2:
        return False
    length = end - start
    if length > _WORDS_CHARS:
        return True
    if _in_words(pattern, start, end) * 2 < length:
        return True
    return _switches_often(*_shape(pattern, start, end))


def _in_words(pattern: str, start: int, end: int) -> int:
    """How many characters of the span are in words (``_KEY_WORDS`` that can be said)."""
    return sum(len(m[0]) for m in _KEY_WORDS.finditer(pattern, start, end) if _is_said(m[0]))


def _is_said(word: str) -> bool:
    """Whether a word has vowels enough to be said: one letter in five or more."""
    vowels = len(_WORD_VOWELS.findall(word))
    return vowels > 0 and vowels * 5 >= len(word)


def _shape(pattern: str, start: int, end: int) -> tuple[int, int, int, int]:
    """(characters, class switches, letters, vowels) of the span: ``#x#x#`` is one class."""
    switches = sum(1 for _ in _CLASS_RUN.finditer(pattern, start, end)) - 1
    letters = end - start - pattern.count("#", start, end)
    return end - start, switches, letters, len(_VOWELS.findall(pattern, start, end))


def _switches_often(length: int, switches: int, letters: int, vowels: int) -> bool:
    """At 45% of the characters or more (``ConvWgradOutput...``: at one in three), with
    fewer than a third of the letters vowels (``DeviceUniqueByKey...`` has more)."""
    return switches * 20 >= (length - 1) * 9 and vowels * 3 < letters


def _random_piece(pattern: str, start: int, end: int) -> bool:
    """Whether the piece, or one of its stretches of ``_WINDOW`` characters (one at every
    half window: a key glued to words, ``finalZm9vYmFy...data``), is random."""
    if _random_span(pattern, start, end):
        return True
    if end - start <= _WINDOW or end - start > _WORDS_CHARS:
        return False
    last = end - _WINDOW
    return any(
        _random_span(pattern, at, at + _WINDOW) for at in (*range(start, last, _WINDOW // 2), last)
    )


class _Stretch:
    """Pieces of a run next to each other, none a word, and what they hold."""

    def __init__(self, pattern: str):
        self.pattern = pattern
        self.pieces: list[tuple[int, int]] = []
        self.random = 0  # characters of random pieces and of short ones mixing classes
        self.long_random = False  # whether a piece of 8 or more is random
        self.classes = 0  # upper, lower, digits: a bit each (``_class_bits``)
        self.long_mixed = False  # whether a piece of 8 or more holds all three classes

    def add(self, start: int, end: int, classes: int) -> None:
        pattern = self.pattern
        self.pieces.append((start, end))
        self.classes |= classes
        mixed = classes not in (0, 1, 2, 4)
        if end - start < _PIECE_CHARS:
            word = _KEY_WORDS.fullmatch(pattern, start, end)
            if mixed and not (word and _is_said(word[0])):
                self.random += end - start  # ``Oi#A#``, ``f#``, not ``Sum``
        else:
            self.long_mixed |= classes == 7
            if mixed and _random_piece(pattern, start, end):
                self.random += end - start
                self.long_random = True

    def span(self) -> tuple[int, int]:
        return self.pieces[0][0], self.pieces[-1][1]

    def is_key(self) -> bool:
        """A random piece and 16 random characters in 24 or more; or 32 characters or more
        of all three classes, its pieces taken together switching class often, or mostly not
        in words with a piece of 8 or more of all three (not ``nvjet_tst_64x4_h_bz_coopA``)."""
        start, end = self.span()
        if self.long_random and self.random >= _KEY_CHARS and end - start >= _KEY_RUN:
            return True
        if end - start < _MIXED_RUN or self.classes != 7:
            return False
        shape, in_words = [0, 0, 0, 0], 0
        for first, last in self.pieces:
            if last - first <= _WORDS_CHARS:
                for i, n in enumerate(_shape(self.pattern, first, last)):
                    shape[i] += n
                in_words += _in_words(self.pattern, first, last)
        return _switches_often(*shape) or (self.long_mixed and in_words * 2 < shape[0])


def random_runs(pattern: str) -> Iterator[tuple[int, int, str]]:
    """The stretches of ``_RUN_OF_KEY`` runs that hold a key (see there)."""
    count = [0]
    for run in _RUN_OF_KEY.finditer(pattern):
        if not _MANGLED_RUN.match(pattern, run.start()):
            for start, end in _keys(pattern, run.start(), run.end(), count):
                yield start, end, SECRET


def _keys(pattern: str, start: int, end: int, count: list[int]) -> Iterator[tuple[int, int]]:
    """The stretches of pieces between ``start`` and ``end`` that hold a key; ``count`` the
    pieces read so far in the text (``MAX_KEY_PIECES``)."""
    stretch = None
    for piece in _KEY_PIECE.finditer(pattern, start, end):
        count[0] += 1
        if count[0] > MAX_KEY_PIECES:
            raise TooMany
        first, last = piece.span()
        classes = _class_bits(pattern, first, last)
        word = last - first >= _PIECE_CHARS and _is_word(pattern, first, last, classes)
        if word or _triton_signature(pattern, first, last):
            if stretch is not None and stretch.is_key():
                yield stretch.span()
            stretch = None
            continue
        if stretch is None:
            stretch = _Stretch(pattern)
        stretch.add(first, last, classes)
    if stretch is not None and stretch.is_key():
        yield stretch.span()


def _is_word(pattern: str, start: int, end: int, classes: int) -> bool:
    """Whether the piece is in one class and pronounceable: ``elementwise``, ``VECTORIZED``,
    not ``gworxxkk`` (the end of a key)."""
    return classes in (0, 1, 2, 4) and len(_VOWELS.findall(pattern, start, end)) * 4 >= end - start
