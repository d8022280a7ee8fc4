"""Secrets, paths and addresses in the text an export shows, replaced so that the figures
stay the same: what ``nsysprobe scrub`` (``nsysprobe.trace.scrub``) runs on every text it keeps.
"""

from __future__ import annotations

import functools
import hashlib
import heapq
import hmac
import io
import os
import re
import unicodedata
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
# text's length: a crafted 16 MiB name costs seconds, not hours of backtracking. What a
# rule reads past its regex (a value's quotes, the pieces of a run) it reads once. Each rule
# runs only when the text holds what it needs.

# A run of digits as ``range_pattern`` masks it, or a ``#``.
_RUN = re.compile(r"\d+|#")
_HASH = re.compile("#")
_CACHED_CHARS = 1024
_LETTERS = 12
_DIGITS = 12

# Settings whose value is a secret, by the words of their name, in any case, with ``_``,
# ``-``, ``.`` or nothing between them: HF_TOKEN, --hf-token, WANDB_API_KEY, AccountKey,
# x-api-key, APIKEY, aws_secret_access_key, PGPASSWORD, PASSCODE, passphrase, pwd, PW,
# session, sessionId, PHPSESSID, sid, Cookie, Authorization, signature, sig, private.key; a
# word that ends in ``pass`` (PGPASS, -storepass, requirepass) but for the English ones
# (bypass, compass). A word in odd case (``pAsSwOrD``) is read whole as well as in its
# camel-case words. A name is read in its compatibility form (full-width and mathematical
# letters as ASCII), without the characters that show nothing (zero-width, soft hyphen,
# combining marks), its Cyrillic and Greek look-alikes read as the Latin letters they
# look like (``pаssword``), and a name holding a percent-escape (``%74oken``: what it
# stands for cannot be read from the pattern, which masks digits) always says secret. A name
# of the password family takes its value after any separator, whitespace alone included
# (``password\n  hunter2``); the others after ``=``, ``:``, ``:=``, ``=>``, ``->``, ``<<<``
# or a linking word (``token is K``) (or a character that looks like one of them: ``＝``,
# ``：``, ``﹦``, ...), or whitespace when the name is a flag (``--api-key KEY``) or follows
# a command that sets it (``aws configure set aws_secret_access_key KEY``). An opening
# bracket right after any of these names is a separator too (``password(hunter2)``,
# ``api_key[K]``), and the value is then all that lies before its matching closing bracket,
# but an index (``keys[3]``, ``self.key[idx]``) is no value. ``max_tokens``,
# ``key_padding_mask``, ``tokenizer`` or ``bypass`` are not such names.
_SECRET_STEMS = (
    "pass", "pw", "secret", "token", "key", "auth", "cred", "cookie", "sig", "sess", "sid",
)  # fmt: skip
_SECRET_WORDS = frozenset(
    "pass passwd password passwords passcode passphrase passkey pwd pw secret secrets token "
    "auth authorization oauth authkey authtoken credential credentials cred creds cookie "
    "cookies session sessionid sessionkey sessiontoken sessid sid signature sig apikey "
    "apitoken accesskey privatekey secretkey accountkey clientsecret masterkey".split()
)
# Words that name a secret at the end of a longer word too (PGPASSWORD, MYAPIKEY, csrftoken).
_SECRET_ENDINGS = (
    "password", "passwords", "passwd", "passcode", "passphrase", "secret", "token", "apikey",
    "accesskey", "privatekey", "secretkey", "sessionid", "sessid", "credential",
    "credentials", "cookie", "signature", "authorization",
)  # fmt: skip
_PASSWORD_ENDINGS = ("password", "passwords", "passwd", "passcode", "passphrase")
# Words ending in ``pass`` that name no password.
_NOT_A_PASS = frozenset(
    "bypass compass encompass overpass underpass surpass trespass multipass onepass twopass "
    "singlepass".split()
)
# A header whose value is the rest of its field: a scheme and a credential (``Token K``,
# ``Basic K``, ``Digest ...``), or a list of cookies (``Cookie: a=K; b=K``).
_FIELD_HEADERS = ("authorization", "cookie", "cookies")
# The longest name read for its words (``_secret_name``).
_NAME_CHARS = 256
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")
_LETTER_RUN = re.compile("[A-Za-z]+")
_PERCENT_ESCAPE = re.compile(r"%(?:#|[A-Fa-f][#A-Fa-f])")
_KINDS = "secret|path|address|url|host"


def _ranges(codes: list[int]) -> str:
    """A character class's ranges for the code points ``codes`` (sorted)."""
    out, start = [], None
    for i, code in enumerate(codes):
        if start is None:
            start = code
        if i + 1 == len(codes) or codes[i + 1] != code + 1:
            out.append(re.escape(chr(start)) + ("-" + re.escape(chr(code)) if code > start else ""))
            start = None
    return "".join(out)


# Characters that show nothing, inside a name (``pass\u200bword``): format characters
# (zero-width spaces and joiners, the soft hyphen, direction marks, tags) and combining
# marks, in the Basic Multilingual Plane and the tag and variation-selector planes.
_IGNORABLE = _ranges(
    [c for c in range(0x10000) if unicodedata.category(chr(c)) in ("Cf", "Mn", "Me")]
    + [*range(0xE0000, 0xE0080), *range(0xE0100, 0xE01F0)]
)
_IGNORABLES = re.compile(f"[{_IGNORABLE}]+")
# Cyrillic and Greek letters and small capitals that look like Latin letters, read as those
# in a name.
_CONFUSABLES = str.maketrans(
    "аеорсухѕіјԁԛԝһӏкмнтвьАВЕЅІЈКМНОРСТХУΑΒΕΖΗΙΚΜΝΟΡΤΥΧαεικνορτυχᴀʙᴄᴅᴇꜰɢʜɪᴊᴋʟᴍɴᴏᴘʀꜱᴛᴜᴠᴡʏᴢ",
    "aeopcyxsijdqwhlkmhtbbABESIJKMHOPCTXYABEZHIKMNOPTYXaeikvoptuxabcdefghijklmnoprstuvwyz",
)
# Not a placeholder's letters, nor its kind: ``<path:kqzvwmbtxyaq>`` (``password`` after a
# ``<secret:`` that no placeholder closes is a name).
_IN_PLACEHOLDER = "|".join(f"(?<=<{kind}:)" for kind in _KINDS.split("|"))
_NOT_A_PLACEHOLDER = (
    rf"(?!(?:{_IN_PLACEHOLDER})[a-z]{{{_LETTERS}}}#?>)(?!(?<=<)(?:{_KINDS}):[a-z]{{{_LETTERS}}}#?>)"
)
# A name: letters of any script, ``_``, ``$``, ``-``, ``.``, digits, percent-escapes and
# characters that show nothing after the first, after anything but a letter
# (``<password=K>``, ``1password=K``, ``%password=K``). It starts where a run of ``-`` and
# ``$`` starts, so a run of them that no letter ends is read once (``-`` * 60,000 took 36 s
# when a name could start at every dash).
_NAME = re.compile(
    rf"(?<![^\W\d])(?<![-${_IGNORABLE}]){_NOT_A_PLACEHOLDER}[-$]*(?:[^\W\d]|%(?=[#A-Fa-f]))"
    rf"[\w#.$%{_IGNORABLE}-]*"
)
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
_HELD_PLACEHOLDER = re.compile(rf"<(?:{_KINDS}):[a-z]{{{_LETTERS}}}#?>")
# Values of such settings that are not secrets.
_HARMLESS = re.compile(r"true|false|yes|no|none|null|nil|on|off|", re.I)
_HARMLESS_VALUE = re.compile(rf"((?:\\{{0,8}}[\"'`])?)(?:{_HARMLESS.pattern})\1", re.I)
# A dash after a name and whitespace is punctuation (``password - reset``), not a value.
_DASH = re.compile(r"-{1,3}")

# Password flags of common tools, read within the command that names the tool (``-p`` means
# a port or a path to most other programs). A flag as written below: a short one takes its
# value attached or as the next word (``mysql -pK``, ``sshpass -p K``), also at the end of
# a group of short flags (``curl -su user:K``); a long one after ``=`` or as the next word
# (``curl --proxy-user user:K``); one of several letters after one dash is an option of its
# own, its value attached or next (``rar -hpK``); ``+N`` after a flag: its value is the Nth
# word after it that is no option (``htpasswd -b FILE USER K``, ``vault login K``, ``net use
# \\srv\share /user:NAME K``). A value never starts with ``-``; ``<<<`` before it is a
# here-string's. Tools whose options are whole words (``openssl -keyout``) take no attached
# value. Flags that say what they are (``--password``, ``-storepass``) are names, read above.
_TOOL_FLAGS = {
    **dict.fromkeys(
        "sshpass mysql mysqldump mysqladmin mysqlimport mysqlshow mariadb mariadb-dump "
        "mongo mongosh mongodump mongorestore mongoexport mongoimport #z #za twine "
        "login".split(),  # docker/podman/helm login -p
        "-p",
    ),
    **dict.fromkeys("rar unrar".split(), "-p -hp"),
    **dict.fromkeys("sqlcmd bcp ipmitool zip unzip".split(), "-P"),
    **dict.fromkeys("ldapsearch ldapadd ldapmodify ldapdelete ldappasswd ldapwhoami".split(), "-w"),
    "redis-cli": "-a",
    "smbclient": "-U",
    "curl": "-u -U --user --proxy-user",
    "openssl": "-k",
    "ssh-keygen": "-N -P",
    "htpasswd": "-b+3",
    "vault": "login+1",
    "net": "/user:+1",
}
_WHOLE_WORD_OPTIONS = frozenset({"openssl"})
_TOOL = re.compile(
    r"(?<![\w#.-])(?P<tool>"
    + "|".join(re.escape(t) for t in sorted(_TOOL_FLAGS, key=len, reverse=True))
    + r")(?![\w#.-])"
)
_COMMAND_END = re.compile(r"[;&|\n]")
# The parts of a command's words: quoted parts go whole (``-p 'a b'``), a quote its line
# does not close is a part of its own. A word is its parts next to each other (read without
# a repeated group, whose stack grows with the word: a 16 MiB word took 2 GB).
_ARG_PART = re.compile(r"""[^\s"']+|"[^"\n]*"|'[^'\n]*'|["']""")
_SHORT_GROUP = re.compile("-[A-Za-z]{2,}")
_AUTH = re.compile(
    r"\b(?P<scheme>bearer|basic|token)(?P<sep>\s{1,16})(?P<value>[\w#.~+/-]+=*)", re.I
)
_PRIVATE_KEY = re.compile(
    r"-----BEGIN[A-Z ]{0,40}PRIVATE KEY(?: BLOCK)?-----.*?"
    r"(?:-----END[A-Z ]{0,40}PRIVATE KEY(?: BLOCK)?-----|\Z)",
    re.S,
)
_URL = re.compile(r"\b[A-Za-z][A-Za-z#+.-]{0,30}://[^\s\"'<>]*")
_ADDRESS = re.compile(r"(?<![\w#.+-])[\w#.+-]+@[A-Za-z#-]+(?:\.[A-Za-z#-]+)*(?![\w#-])")

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
_KNOWN_PREFIX = re.compile("|".join(form[0] for form in _TOKEN_FORMS.values()), re.I)
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
_FULL_WIDTH = {code: code - 0xFEE0 for code in range(0xFF01, 0xFF5F)}
# What a token's rest may follow: whitespace (after a ``\`` too), characters that show
# nothing, or one punctuation mark, and a quote, ``+`` and a quote (``"K" + "K"``); at most
# ``_TOKEN_BREAKS`` of them, each before 4 characters or more of the body (fewer than 8 that
# are a word, in one class and pronounceable, are the text's next word).
_TOKEN_BREAK = re.compile(
    rf"(?:\\?\s{{1,4}}|[{_IGNORABLE}]{{1,4}}|[-_./+,|:;])?"
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
_LONG_HEX = re.compile(r"[#a-fA-F]{9}")
_MANGLED = re.compile(r"(?<![\w#$.])_Z[\w#$.]*")
_LETTER = re.compile("[A-Za-z]")
_LONG_RUN = re.compile(r"[A-Za-z#+/_-]{24}")
_IN_WORDS = re.compile(r"[A-Z]?[a-z]{3,}")
_WINDOWS_PATH = re.compile(
    r"(?<![\w#])[A-Za-z]:[\\/][^\s\"'<>|*?,;]*|\\\\[^\s\\\"'<>]+\\[^\s\"'<>]*"
)
_PATH_PART = r"[^\s/\"'<>|:;,()\[\]{}=*?\\]"
# A path, not a closing tag (``</s>``, ``<b>bold</b>``, ``</password>``).
_POSIX_PATH = re.compile(
    rf"(?<![\w#.~/\\-])(?!(?<=<)/[A-Za-z_][\w.:-]{{0,255}}>)/{_PATH_PART}+(?:/{_PATH_PART}*)*"
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
# An IPv4 address, its numbers masked (``10.1.2.3:29500``); ``2025.3.1.90-...`` is a version,
# and so are four numbers right after a word that says so (``version 2.5.1.0``, ``driver
# 550.54.15.1``, ``v 1.2.3.4``). Whether a number passes 255 is not read: the pattern masks
# digits, so that ``driver 10.0.0.1`` and ``driver 550.54.15.1`` stay alike.
_IPV4 = re.compile(r"(?<![\w#.])#\.#\.#\.#(?![\w#.-])")
_VERSION_WORD = re.compile(
    r"(?<![A-Za-z])(?i:version|ver|driver|release|build|revision|rev|v)\.?[^\S\n]{0,4}[:=]?"
    r"[^\S\n]{0,4}\Z"
)
# An IPv6 address: eight groups, or fewer around one ``::`` (``fe80::1``, ``::1``), the last
# one perhaps an IPv4 address (``::ffff:10.0.0.1``), then perhaps a zone (``%eth0``). One
# holds a digit (``aten::add`` and ``c10::Half`` are names): ``_has_digit``.
_GROUP = r"[#A-Fa-f]{1,4}"
_LAST_GROUP = rf"(?:#\.#\.#\.#|{_GROUP})"
_IPV6 = re.compile(
    rf"(?<![A-Za-z#:.%])(?:(?:{_GROUP}:){{7}}{_LAST_GROUP}"
    rf"|(?:{_GROUP}:){{1,7}}:(?:(?:{_GROUP}:){{0,6}}{_LAST_GROUP})?"
    rf"|::(?:(?:{_GROUP}:){{0,6}}{_LAST_GROUP})?)"
    r"(?:%[\w#.-]+)?(?![\w#:.])"
)


def _read_as(name: str) -> str:
    """``name`` as it is read: in its compatibility form (``ｐａｓｓ`` is ``pass``), without
    the characters that show nothing, its Cyrillic and Greek look-alikes as Latin letters."""
    if name.isascii():
        return name
    name = _IGNORABLES.sub("", unicodedata.normalize("NFKD", name))
    return name.translate(_CONFUSABLES)


def _secret_name(name: str) -> int:
    """2 for a name of the password family, 1 for another secret's name, else 0. A name
    longer than ``_NAME_CHARS`` that holds the stem of a secret's name is one (such a name is
    no identifier; it is not kept in the cache either)."""
    if len(name) <= _NAME_CHARS:
        return _short_secret_name(name)
    name = _read_as(name)
    lower = name.lower()
    return int(_PERCENT_ESCAPE.search(name) is not None or any(s in lower for s in _SECRET_STEMS))


@functools.lru_cache(maxsize=1 << 12)
def _short_secret_name(name: str) -> int:
    name = _read_as(name)
    if _PERCENT_ESCAPE.search(name):
        return 1
    lower = name.lower()
    if not any(stem in lower for stem in _SECRET_STEMS):
        return 0
    words = [w.lower() for w in _WORD.findall(name)]
    if not words:
        return 0
    return max(_by_words(words), _by_letter_runs(lower))


def _by_words(words: list[str]) -> int:
    """What a name's camel-case words say (``accessToken``, ``PGPASSWORD``, ``api_key``)."""
    if words[-1].endswith(_PASSWORD_ENDINGS) or "".join(words[-2:]) in _PASSWORD_ENDINGS:
        return 2
    if any(w in _SECRET_WORDS or w.endswith(_SECRET_ENDINGS) for w in words):
        return 1
    if any(a + b in _SECRET_WORDS for a, b in zip(words, words[1:])):
        return 1
    return 1 if words[-1] in ("key", "keys") else 0


def _by_letter_runs(lower: str) -> int:
    """What a name's runs of letters say, each read whole whatever its case (``pAsSwOrD``,
    ``PGPASS``, ``-storepass``)."""
    runs = _LETTER_RUN.findall(lower)
    if not runs:
        return 0
    strength = _by_words(runs)
    if strength:
        return strength
    return int(any(run.endswith("pass") and run not in _NOT_A_PASS for run in runs))


def _assignments(pattern: str) -> Iterator[tuple[int, int, str]]:
    """The values of settings whose name says secret, in every way of reading the names and
    separators of ``pattern`` (``_name_views``)."""
    views = _name_views(pattern)
    if len(views) == 1:
        return _settings(pattern, pattern)
    return _merged(*(_settings(pattern, view) for view in views))


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


def _merged(*streams: Iterator[tuple[int, int, str]]) -> Iterator[tuple[int, int, str]]:
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
    for name in _NAME.finditer(names):
        if name.start() < end:
            continue
        strength = _secret_name(name[0])
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
    if not (_HARMLESS.fullmatch(value.strip("\"'`")) or _only_placeholders(value)):
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
    if _only_placeholders(value):
        return [], stop
    if found["op"] is not None and _BLOCK_SCALAR.fullmatch(value):
        block = _block_lines(text, name.start(), stop)
        if block is not None:
            return block
    spans = [(start, stop)]
    quoted = len(value) > 1 and value[0] == value[-1] and value[0] in "\"'`"
    if quoted or not _takes_field(name[0][-_NAME_CHARS:], found["op"]):
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
    if not _only_placeholders(pattern[start:stop]):
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
    indentation is read within ``_NAME_CHARS`` before it (a name further along its line has
    none). A line is read by one header at most: scrubbing stays linear."""
    pattern = text.pattern
    after = _LINE_INDENT.match(pattern, stop).end()
    if after < len(pattern) and pattern[after] != "\n":
        return None
    line = pattern.rfind("\n", max(0, name_start - _NAME_CHARS), name_start) + 1
    indent = 0
    if line or name_start <= _NAME_CHARS:
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
# ``git config NAME K``), looked for on the name's line within ``_NAME_CHARS`` before it.
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
    line = text.names.rfind("\n", max(0, at - _NAME_CHARS), at) + 1
    return _SETTER.search(text.names, max(line, at - _NAME_CHARS), at) is not None


@functools.lru_cache(maxsize=1 << 12)
def _takes_field(name: str, op: str | None) -> bool:
    """Whether ``name`` is a header's whose value is the rest of its field: an
    ``Authorization`` (``Proxy-Authorization`` too) after any operator, a ``Cookie`` (or
    ``Set-Cookie``) after a colon."""
    words = _WORD.findall(name)
    last = words[-1].lower() if words else ""
    if last == "authorization":
        return True
    return last in _FIELD_HEADERS and op is not None and bool(_COLON_OP.fullmatch(op))


def _stripped(pattern: str, start: int, stop: int) -> tuple[int, int]:
    """``start`` and ``stop`` moved past the whitespace at either end of the text between."""
    while start < stop and pattern[start].isspace():
        start += 1
    while stop > start and pattern[stop - 1].isspace():
        stop -= 1
    return start, stop


def _only_placeholders(text: str) -> bool:
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
    rf"<(?!(?:{_KINDS}):[a-z]{{{_LETTERS}}}#?>)(?P<name>[^\W\d][\w.:-]{{0,255}})"
    r"(?:\s[^<>]{0,1024})?>"
)


def _quoted_pairs(pattern: str) -> Iterator[tuple[int, int, str]]:
    """The values that follow a secret's quoted name (``_QUOTED_NAME``)."""
    text = _Text(pattern)
    end = 0
    for quoted in _QUOTED_NAME.finditer(pattern):
        if quoted.start() < end or not _secret_name(quoted["name"]):
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


def _elements(pattern: str) -> Iterator[tuple[int, int, str]]:
    """The text of elements named as secrets (``_ELEMENT``)."""
    text = _Text(pattern)
    end = 0
    for element in _ELEMENT.finditer(pattern):
        if element.start() < end or not _secret_name(element["name"]):
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
    if not value or _HARMLESS_VALUE.fullmatch(value) or _only_placeholders(value):
        return None
    return start, stop, SECRET


def _tool_flags(pattern: str) -> Iterator[tuple[int, int, str]]:
    """The values of the password flags of the tools in ``_TOOL_FLAGS``."""
    end = 0
    for tool in _TOOL.finditer(pattern):
        if tool.start() < end:
            continue
        stop = _COMMAND_END.search(pattern, tool.end())
        end = stop.start() if stop else len(pattern)
        for start, stop in _flag_values(pattern, tool.end(), end, tool["tool"]):
            if not _only_placeholders(pattern[start:stop]):
                yield start, stop, SECRET


def _flag_values(pattern: str, start: int, end: int, tool: str) -> Iterator[tuple[int, int]]:
    """The values of ``tool``'s password flags in its command's words, ``start`` to ``end``."""
    flags = _TOOL_FLAGS[tool].split()
    attached = tool not in _WHOLE_WORD_OPTIONS
    waiting, positional = None, False  # words to pass before a flag's value, once one is read
    for first, last in _words(pattern, start, end):
        text = pattern[first:last]
        if waiting is not None:
            if text == "<<<" or (positional and text.startswith("-")):
                continue
            if not text.startswith("-"):
                if not waiting:
                    yield first, last
                waiting = waiting - 1 if waiting else None
                continue
            waiting = None  # a flag with no value: this word is read as one below
        for flag in flags:
            found = _flag_in(text, flag, attached)
            if found is None:
                continue
            at, waiting = found
            positional = "+" in flag
            if at is not None and at < len(text):
                yield first + at, last
                waiting = None
            break


def _words(pattern: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """The spans of the words between ``start`` and ``end`` (``_ARG_PART``)."""
    first = last = None
    for part in _ARG_PART.finditer(pattern, start, end):
        if part.start() != last:
            if first is not None:
                yield first, last
            first = part.start()
        last = part.end()
    if first is not None:
        yield first, last


def _flag_in(word: str, flag: str, attached: bool) -> tuple[int | None, int] | None:
    """How ``word`` holds ``flag`` (see ``_TOOL_FLAGS``): where its attached value starts
    (None for none) and how many words after it to pass before its value; None when it
    does not hold it."""
    flag, plus, nth = flag.partition("+")
    if plus:
        group = len(flag) == 2 and _SHORT_GROUP.fullmatch(word) and flag[1] in word
        spelled = word.startswith(flag) or (flag[0] == "/" and word[: len(flag)].lower() == flag)
        return (None, int(nth) - 1) if group or spelled else None
    if word == flag:
        return None, 0
    if flag.startswith("--") or not attached:
        return (len(flag) + 1, 0) if word.startswith(flag + "=") else None
    if word.startswith(flag) and not word.startswith("--"):
        return len(flag) + (word[len(flag) : len(flag) + 1] == "="), 0
    if len(flag) == 2 and _SHORT_GROUP.fullmatch(word) and word[-1] == flag[1]:
        return None, 0
    return None


def _auth_value(match: re.Match) -> bool:
    return match["scheme"].lower() == "bearer" or _looks_random(match["value"])


def _looks_random(value: str) -> bool:
    """Letters and digits mixed, and mostly not in words: a key, not an identifier such as
    ``Conv2dWgradOutputGradientTileAccessIteratorOptimized``."""
    if "#" not in value or not any(c.isalpha() for c in value):
        return False
    in_words = sum(len(m) for m in _IN_WORDS.findall(value))
    return in_words < len(value) / 2


def _hex(pattern: str) -> Iterator[tuple[int, int, str]]:
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


def _has_digit(match: re.Match) -> bool:
    return "#" in match[0]


def _no_version(match: re.Match) -> bool:
    """Whether an IPv4 address's match is not a version (``_IPV4``)."""
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


def _known_tokens(pattern: str) -> Iterator[tuple[int, int, str]]:
    """The tokens of ``_TOKEN_FORMS``, at the start of a word or inside one, in full-width
    letters too, and with their prefix in another case."""
    view = pattern if pattern.isascii() else pattern.translate(_FULL_WIDTH)
    return _merged(_tokens(view, recased=False), _tokens(view, recased=True))


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


def _random_runs(pattern: str) -> Iterator[tuple[int, int, str]]:
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
            raise _TooMany
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


def _found(pattern: re.Pattern, kind: str, group: str | int = 0, keep=None):
    def spans(text: str) -> Iterator[tuple[int, int, str]]:
        for m in pattern.finditer(text):
            if keep is None or keep(m):
                yield m.start(group), m.end(group), kind

    return spans


def _may_hold_token(text: str) -> bool:
    view = text if text.isascii() else text.translate(_FULL_WIDTH)
    return _KNOWN_PREFIX.search(view) is not None


def _has_quote(text: str) -> bool:
    return '"' in text or "'" in text or "`" in text


def _may_hold_setting(text: str) -> bool:
    lower = text.lower()
    return any(stem in lower for stem in _SECRET_STEMS) or "%" in text or not text.isascii()


# (whether a text may hold it, its spans), in order: a later rule sees the placeholders of the
# earlier ones. A setting's value goes whole, whatever it holds (``password=p@ss:word``); a
# URL's ``user:password`` is one URL.
_RULES = (
    (lambda t: "PRIVATE KEY" in t, _found(_PRIVATE_KEY, SECRET)),
    (
        lambda t: any(w in t.lower() for w in ("bearer", "basic", "token")),
        _found(_AUTH, SECRET, "value", _auth_value),
    ),
    (_TOOL.search, _tool_flags),
    (lambda t: _has_quote(t) and _may_hold_setting(t), _quoted_pairs),
    (lambda t: "<" in t and _may_hold_setting(t), _elements),
    (_may_hold_setting, _assignments),
    (lambda t: "://" in t, _found(_URL, URL)),
    (lambda t: "@" in t, _found(_ADDRESS, ADDRESS)),
    (_may_hold_token, _known_tokens),
    (_LONG_RUN.search, _random_runs),
    (_LONG_HEX.search, _hex),
    (lambda t: ":\\" in t or ":/" in t or "\\\\" in t, _found(_WINDOWS_PATH, LOCAL_PATH)),
    (lambda t: "/" in t, _found(_POSIX_PATH, LOCAL_PATH)),
    (_HAS_TLD.search, _found(_HOST, HOST)),
    (lambda t: "::" in t or t.count(":") >= 7, _found(_IPV6, HOST, keep=_has_digit)),
    (lambda t: "#.#.#.#" in t, _found(_IPV4, HOST, keep=_no_version)),
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
