"""Which names say that the value after them is a secret (``secret_name``): ``HF_TOKEN``,
``--hf-token``, ``AccountKey``, ``PGPASSWORD``, read in any case, through characters that show
nothing and look-alike letters; ``max_tokens``, ``tokenizer`` or ``bypass`` are no such names.
"""

from __future__ import annotations

import functools
import re
import unicodedata

from nsysprobe.trace.secrets.placeholders import KINDS, LETTERS

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
SECRET_STEMS = (
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
FIELD_HEADERS = ("authorization", "cookie", "cookies")
# The longest name read for its words (``secret_name``).
NAME_CHARS = 256
WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")
_LETTER_RUN = re.compile("[A-Za-z]+")
_PERCENT_ESCAPE = re.compile(r"%(?:#|[A-Fa-f][#A-Fa-f])")


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
IGNORABLE = _ranges(
    [c for c in range(0x10000) if unicodedata.category(chr(c)) in ("Cf", "Mn", "Me")]
    + [*range(0xE0000, 0xE0080), *range(0xE0100, 0xE01F0)]
)
_IGNORABLES = re.compile(f"[{IGNORABLE}]+")
# Cyrillic and Greek letters and small capitals that look like Latin letters, read as those
# in a name.
_CONFUSABLES = str.maketrans(
    "аеорсухѕіјԁԛԝһӏкмнтвьАВЕЅІЈКМНОРСТХУΑΒΕΖΗΙΚΜΝΟΡΤΥΧαεικνορτυχᴀʙᴄᴅᴇꜰɢʜɪᴊᴋʟᴍɴᴏᴘʀꜱᴛᴜᴠᴡʏᴢ",
    "aeopcyxsijdqwhlkmhtbbABESIJKMHOPCTXYABEZHIKMNOPTYXaeikvoptuxabcdefghijklmnoprstuvwyz",
)
# Not a placeholder's letters, nor its kind: ``<path:kqzvwmbtxyaq>`` (``password`` after a
# ``<secret:`` that no placeholder closes is a name).
_IN_PLACEHOLDER = "|".join(f"(?<=<{kind}:)" for kind in KINDS.split("|"))
_NOT_A_PLACEHOLDER = (
    rf"(?!(?:{_IN_PLACEHOLDER})[a-z]{{{LETTERS}}}#?>)(?!(?<=<)(?:{KINDS}):[a-z]{{{LETTERS}}}#?>)"
)
# A name: letters of any script, ``_``, ``$``, ``-``, ``.``, digits, percent-escapes and
# characters that show nothing after the first, after anything but a letter
# (``<password=K>``, ``1password=K``, ``%password=K``). It starts where a run of ``-`` and
# ``$`` starts, so a run of them that no letter ends is read once (``-`` * 60,000 took 36 s
# when a name could start at every dash).
NAME = re.compile(
    rf"(?<![^\W\d])(?<![-${IGNORABLE}]){_NOT_A_PLACEHOLDER}[-$]*(?:[^\W\d]|%(?=[#A-Fa-f]))"
    rf"[\w#.$%{IGNORABLE}-]*"
)


def _read_as(name: str) -> str:
    """``name`` as it is read: in its compatibility form (``ｐａｓｓ`` is ``pass``), without
    the characters that show nothing, its Cyrillic and Greek look-alikes as Latin letters."""
    if name.isascii():
        return name
    name = _IGNORABLES.sub("", unicodedata.normalize("NFKD", name))
    return name.translate(_CONFUSABLES)


def secret_name(name: str) -> int:
    """2 for a name of the password family, 1 for another secret's name, else 0. A name
    longer than ``NAME_CHARS`` that holds the stem of a secret's name is one (such a name is
    no identifier; it is not kept in the cache either)."""
    if len(name) <= NAME_CHARS:
        return _short_secret_name(name)
    name = _read_as(name)
    lower = name.lower()
    return int(_PERCENT_ESCAPE.search(name) is not None or any(s in lower for s in SECRET_STEMS))


@functools.lru_cache(maxsize=1 << 12)
def _short_secret_name(name: str) -> int:
    name = _read_as(name)
    if _PERCENT_ESCAPE.search(name):
        return 1
    lower = name.lower()
    if not any(stem in lower for stem in SECRET_STEMS):
        return 0
    words = [w.lower() for w in WORD.findall(name)]
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
