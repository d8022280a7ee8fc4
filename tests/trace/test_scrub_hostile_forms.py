"""Secrets a second hostile round of issue 33 found kept by ``nsysprobe scrub``, and names it
mangled.

Kept: a random key right after ``=`` (``WANDB=K``: no run of a key could start after ``=``);
a secret's quoted name followed by its value as the next item (``["--password", "K"]``,
``{"name": "DB_PASSWORD", "value": "K"}``, ``<password>K</password>``); names and separators
holding a byte the export's encoding could not decode (``password\\xa0=K`` reads
``password\\ufffd=K``); separators written encoded (``token%3DK``, ``token\\u003dK``,
``password&#x3D;K``); names in odd case, with zero-width characters or Cyrillic look-alikes,
``PGPASS``, ``PW``, ``PHPSESSID``, ``-storepass``, a name a command sets (``aws configure
set NAME K``); tools' password flags (``curl -su u:K``, ``rar -hpK``, ``htpasswd -b F U K``);
the word after the value's marker (``token: |`` and the lines below it, ``password is K``,
``<<< K``); the rest of a known token after a line break or a space, a known token with its
prefix in another case or in full-width letters. Mangled: Triton kernel names
(``triton_poi_fused_add_0d1d2d3de``), closing tags (``</s>``), index expressions
(``keys[3]``), versions (``driver 550.54.15.1``). And a run of dashes took quadratic time
(``token`` and 60,000 dashes: 36 s); ``benchmarks/scrub_linear.py`` times every such shape,
here they are scrubbed at 1 MiB and must come out right.

Every expectation below is the planted input's: the secret that must be gone, the part of the
text that must stay.
"""

from __future__ import annotations

import base64
import random
import shutil
import sqlite3
import string
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reliability.test_scrub_secrets import (
    CORPUS_TRACE,
    _random_body,
    _text_values,
    _token_parts,
    invoke,
    plant_in_kept_columns,
)

from nsysprobe.trace.scrub import scrub
from nsysprobe.trace.secrets.placeholders import PLACEHOLDER
from nsysprobe.trace.secrets.scrubber import scrub_text

from conftest import SAMPLE_TRACES

S = "Wq8rTz4Lx"  # a secret's value, as the hostile round planted it
_ALNUM = string.ascii_letters + string.digits
_URLSAFE = _ALNUM + "-_"


def plain(text: str) -> str:
    """``text`` with each placeholder written as its kind only."""
    return PLACEHOLDER.sub(lambda m: f"<{m[1]}>", text)


def assert_gone(text: str, secret: str, kept: str) -> None:
    """``secret`` is not in ``text`` scrubbed, and ``kept`` (a part of ``text``) still is."""
    out = scrub_text(text)
    assert secret not in out, out
    assert kept in out, out


# -- G1: a random key right after ``=`` ----------------------------------------------------


@pytest.mark.parametrize(
    "text, secret, kept",
    [
        ("WANDB=OL8dKLzdocJ2isAjIhKtJ0RlgLKOmxgJ", "OL8dKLzdocJ2isAj", "WANDB="),
        ("Batch 12 id=TeKdNnFRIBXuDL7DxtpYlSXpfKtHF4vU", "TeKdNnFRIBXuDL7D", "Batch 12 id="),
        ("a=1&b2=CsMehGAkWvj7FAc9QeWJKY40uvSwMFLZ&c=2", "CsMehGAkWvj7FAc9", "a=1&b2="),
        ("AWS=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI", "AWS="),
        ("x==De1f8rESQedUStPKR0CsTy4Qwb8DwkNh", "De1f8rESQedUStPK", "x=="),
    ],
)
def test_a_random_key_right_after_an_equals_sign_goes(text, secret, kept):
    assert_gone(text, secret, kept)


# Keys after ``=`` in settings whose name says nothing, 1,000 of each kind from a fixed seed,
# and how many may be missed: measured with this seed and two more (0 of 64 hex digits or 64
# base64url characters; at most 2, 5 and 4 of 44 base64, 43 base64url and 40 base62: the
# rates of the same keys standing alone, ``test_random_keys_inside_words_are_found``). Before
# the fix all 1,000 of each kind were kept.
_AFTER_EQUALS = {
    "hex64": (lambda r: r.randbytes(32).hex(), 0),
    "base64url-64": (lambda r: base64.urlsafe_b64encode(r.randbytes(48)).decode(), 0),
    "base64-44": (lambda r: base64.b64encode(r.randbytes(32)).decode(), 2),
    "base64url-43": (lambda r: base64.urlsafe_b64encode(r.randbytes(32)).decode()[:43], 5),
    "base62-40": (lambda r: "".join(r.choice(_ALNUM) for _ in range(40)), 4),
}


@pytest.mark.parametrize("kind", sorted(_AFTER_EQUALS))
def test_random_keys_after_an_equals_sign_are_found(kind):
    make, allowed = _AFTER_EQUALS[kind]
    rng = random.Random(f"issue-33-round-2/{kind}")
    missed = []
    for _ in range(1000):
        key = make(rng)
        form = rng.choice(["WANDB={}", "id={}", "a=1&b2={}&c=2", "x=={}", "run?k={}", "AWS={};"])
        text = form.format(key)
        if key[8:24] in scrub_text(text):
            missed.append(text)
    assert len(missed) <= allowed, missed


# -- G3: a quoted name, then its value -----------------------------------------------------


@pytest.mark.parametrize(
    "text, kept",
    [
        (f'["train.py", "--password", "{S}"]', '["train.py", "--password", '),
        (f"['--api-key', '{S}']", "['--api-key', "),
        (f"argv=['train.py', '--hf-token', '{S}', '--lr', '0.1']", "'--lr', '0.1']"),
        (f'{{"name": "DB_PASSWORD", "value": "{S}"}}', '{"name": "DB_PASSWORD", "value": '),
        (f'{{"Key": "api_key", "Value": "{S}"}}', '"Value": '),
        (f'<add key="ApiKey" value="{S}"/>', "<add key="),
        (f"<password>{S}</password>", "</password>"),
        (f'<entry key="token">{S}</entry>', "<entry key="),
        (f'<input name="password" value="{S}">', '<input name="password"'),
    ],
)
def test_a_quoted_secret_name_loses_the_value_that_follows_it(text, kept):
    assert_gone(text, S, kept)


# -- G2: bytes the export's encoding cannot decode -------------------------------------------

# (the bytes planted, the text's start as read back, the secret)
_UNDECODED = [
    (b"password\xa0=\xa0Wq8rTz4LxA", "password\ufffd=", "Wq8rTz4LxA"),  # CP-1252 no-break spaces
    (b"DB_PASSWORD\xa0Wq8rTz4LxB", "DB_PASSWORD\ufffd", "Wq8rTz4LxB"),
    (b"api_key\xff=Wq8rTz4LxC", "api_key\ufffd=", "Wq8rTz4LxC"),
    (b"pass\xe9word=Wq8rTz4LxD", "pass\ufffdword=", "Wq8rTz4LxD"),  # a Latin-1 letter
    (b"tok\xc3en: Wq8rTz4LxE", "tok\ufffden: ", "Wq8rTz4LxE"),  # half a UTF-8 character
]


def test_names_and_separators_holding_undecodable_bytes_lose_their_values(tmp_path):
    src, out = tmp_path / "in.sqlite", tmp_path / "out.sqlite"
    shutil.copyfile(SAMPLE_TRACES / "h200_pinned.sqlite", src)
    db = sqlite3.connect(src)
    _plant_bytes(db, [planted for planted, _, _ in _UNDECODED])
    db.commit()
    db.close()
    scrub(src, out)
    raw, texts = out.read_bytes(), _text_values(out)
    for _, start, secret in _UNDECODED:
        assert secret.encode() not in raw, secret
        assert any(t.startswith(start + "<secret:") for t in texts), start


def _plant_bytes(db: sqlite3.Connection, values: list[bytes]) -> None:
    """Each of ``values`` as an NVTX range's text and a thread's name, as TEXT holding those
    bytes whatever they are."""
    top = db.execute("SELECT max(id) FROM StringIds").fetchone()[0]
    tid = db.execute("SELECT globalTid FROM ThreadNames LIMIT 1").fetchone()[0]
    for i, value in enumerate(values):
        db.execute(
            "INSERT INTO StringIds (id, value) VALUES (?, CAST(? AS TEXT))", (top + 1 + i, value)
        )
        db.execute(
            "INSERT INTO ThreadNames (nameId, priority, globalTid) VALUES (?, 0, ?)",
            (top + 1 + i, tid + 1 + i),
        )
        db.execute(
            "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) "
            "VALUES (?, ?, 59, CAST(? AS TEXT), ?, 0)",
            (10_000 + i, 20_000 + i, value, tid),
        )


@pytest.mark.parametrize(
    "text, kept",
    [
        (f"password\ufffd=\ufffd{S}", "password\ufffd="),
        (f"DB_PASSWORD\ufffd{S}", "DB_PASSWORD\ufffd"),
        (f"api_key\ufffd={S}", "api_key\ufffd="),
        (f"pass\ufffdword={S}", "pass\ufffdword="),
    ],
)
def test_a_replacement_character_is_read_as_a_separator_or_a_letter(text, kept):
    assert_gone(text, S, kept)


# -- G4: separators written encoded ----------------------------------------------------------


@pytest.mark.parametrize(
    "text, kept",
    [
        (f"redirect=%2Fcb%3Ftoken%3D{S}", "redirect=%2Fcb%3Ftoken%3D"),
        (f"body=password%3D{S}%26user%3Dbob", "body=password%3D"),
        (f"GET /login?next=%2Fcb%3Ftoken%3D{S} HTTP/1.1", " HTTP/1.1"),
        (f"token%253D{S}", "token%253D"),
        (f"callback: https%3A%2F%2Fx%3Fapikey%3D{S}", "callback: "),
        (f'{{"q":"token\\u003d{S}"}}', '{"q":"token\\u003d'),
        (f"password\\x3d{S}", "password\\x3d"),
        (f'{{"cmd":"--password\\u0020{S}"}}', '{"cmd":"--password\\u0020'),
        (f"password&#x3D;{S}", "password&#x3D;"),
        (f"token&#61;{S}", "token&#61;"),
        (f"token&equals;{S}", "token&equals;"),
        (f"api_key%3A{S}", "api_key%3A"),
    ],
)
def test_encoded_separators_separate(text, kept):
    assert_gone(text, S, kept)


# -- G5: names not read before ---------------------------------------------------------------


@pytest.mark.parametrize(
    "text, kept",
    [
        (f"PGPASS={S}", "PGPASS="),
        (f"PW={S}", "PW="),
        (f"DB_PW={S}", "DB_PW="),
        (f"PHPSESSID={S}", "PHPSESSID="),
        (f"JSESSIONID={S}", "JSESSIONID="),
        (f"sid={S}", "sid="),
        (f"connect.sid={S}", "connect.sid="),
        (f"REDIS_ROOTPASS={S}", "REDIS_ROOTPASS="),
        (f"pAsSwOrD={S}", "pAsSwOrD="),
        (f"tOkEn: {S}", "tOkEn: "),
        (f"pass\u200bword={S}", "pass\u200bword="),
        (f"to\u00adken={S}", "to\u00adken="),
        (f"password\u2060={S}", "password\u2060="),
        (f"--pass\ufeffword {S}", "--pass\ufeffword "),
        (f"PASSWORD\u0301={S}", "PASSWORD\u0301="),
        (f"p\u0430ssword={S}", "p\u0430ssword="),  # Cyrillic a
        (f"t\u043eken={S}", "t\u043eken="),  # Cyrillic o
        (f"\u0455ecret={S}", "\u0455ecret="),  # Cyrillic dze
        (f"\u0440\u0430\u0455\u0455w\u043erd={S}", "="),
        (f"\u1d18\u1d00ss\u1d21\u1d0f\u0280\u1d05={S}", "="),  # small capitals
        (f"keytool -importcert -storepass {S} -keystore k.jks", "-keystore k.jks"),
        (f"keytool -genkey -keypass {S}", "keytool -genkey -keypass "),
        (
            f"aws configure set aws_secret_access_key {S}",
            "aws configure set aws_secret_access_key ",
        ),
        (f"git config --global github.token {S}", "github.token "),
        (f"redis-cli CONFIG SET requirepass {S}", "requirepass "),
    ],
)
def test_names_in_more_spellings_are_read(text, kept):
    assert_gone(text, S, kept)


# -- G6: tools' password flags ----------------------------------------------------------------


@pytest.mark.parametrize(
    "text, kept",
    [
        (f"curl --user admin:{S} https://x", "curl --user "),
        (f"curl -su admin:{S} https://x", "curl -su "),
        (f"curl -k -u admin:{S} https://x", "curl -k -u "),
        (f"curl -uadmin:{S} https://x", "curl -u"),
        (f"curl -U u:{S} https://x", "curl -U "),
        (f"curl --proxy-user u:{S} https://x", "curl --proxy-user "),
        (f"twine upload -u __token__ -p {S} dist/*", "twine upload -u __token__ -p "),
        (f"ssh-keygen -N {S} -f k", "ssh-keygen -N "),
        (f"ssh-keygen -P old -N {S}", "ssh-keygen -P "),
        (f"rar a -hp{S} x.rar", "rar a -hp"),
        (f"unrar x -p{S} x.rar", "unrar x -p"),
        (f"htpasswd -b f user {S}", " f user "),
        (f"htpasswd -bc f user {S}", " f user "),
        (f"net use \\\\srv\\share /user:admin {S}", "net use "),
        (f"vault login {S}", "vault login "),
        (f"mysql -h db -u root -p{S} -e 'select 1'", "mysql -h db -u root -p"),
    ],
)
def test_tools_password_flags_lose_their_values(text, kept):
    assert_gone(text, S, kept)


def test_a_tools_other_flags_keep_their_values():
    for text in ("mysql -uprod -h db", "openssl req -keyout k.pem -new", "curl -sS -o out"):
        assert scrub_text(text) == text


# -- G7: the value is the word after its marker ------------------------------------------------


@pytest.mark.parametrize(
    "text, secret, kept",
    [
        (f"token: |\n  {S}\nuser: bob", S, "user: bob"),
        (f"token: >-\n  {S}\n  {S}2\nnext: 1", S, "next: 1"),
        (f"db:\n  password: |\n    {S}\n  host: h", S, "  host: h"),
        (f"password is {S}", S, "password is "),
        (f"the token was {S} here", S, " here"),
        (f"docker login -u me --password-stdin <<< {S}", S, "--password-stdin <<< "),
        (f"token <- '{S}'", S, "token <- "),
        (f"token\\={S}", S, "token\\="),
        (f"token ::= {S}", S, "token ::= "),
        (f"token\u2190{S}", S, "token\u2190"),
    ],
)
def test_the_value_is_the_word_its_marker_points_at(text, secret, kept):
    assert_gone(text, secret, kept)


def test_a_block_scalars_lines_go_and_the_next_setting_stays():
    out = plain(scrub_text(f"token: |\n  {S}\n\n  {S}x\nuser: bob"))
    assert out == "token: |\n  <secret>\nuser: bob"


# -- G8: known tokens split, recased, in full-width letters -----------------------------------

GH = "ghp_aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5"
HF = "hf_aBcDeFgHiJkLmNoPqRsTuVwXyZaBcDeFgH"
AK = "AKIAIOSFODNN7EXAMPLE"
_BREAKS = ["\n", " ", "\t", "\u200b", "\u00ad", "-", "_", ".", "/", "+", ",", "|", ":"]
_BREAKS += ["\\\n", '"+"', '" + "', "' '"]


@pytest.mark.parametrize("token", [GH, HF, AK], ids=["github", "huggingface", "aws"])
@pytest.mark.parametrize("cut", _BREAKS, ids=ascii)
def test_a_known_token_split_by_a_break_goes_whole(token, cut):
    half = len(token) // 2
    text = f"key {token[:half]}{cut}{token[half:]} done"
    assert_gone(text, token[half:][-8:], " done")


@pytest.mark.parametrize(
    "text, secret",
    [
        ("HF_" + HF[3:], HF[-12:]),
        ("Ghp_" + GH[4:], GH[-12:]),
        (AK.lower(), AK.lower()[-10:]),
        ("key akiaiosfodnn7example now", "iosfodnn7example"),
        ("\uff47\uff48\uff50\uff3f" + GH[4:], GH[-12:]),  # full-width ghp_
        ("\uff21\uff2b\uff29\uff21" + AK[4:], AK[-10:]),  # full-width AKIA
    ],
)
def test_a_known_token_recased_or_in_full_width_letters_goes(text, secret):
    out = scrub_text(text)
    assert secret not in out, out


def test_the_word_after_a_whole_token_stays():
    assert plain(scrub_text(f"{AK} next word")) == "<secret> next word"
    assert plain(scrub_text(f"{GH} then done")) == "<secret> then done"
    assert plain(scrub_text(f"{AK} DONE")) == "<secret> DONE"


# -- M1-M4: names that stay as they are ------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        # M1: Triton 2.1 kernels' signatures
        "triton_poi_fused_add_0d1d2d3de",
        "triton_per_fused__softmax_0d1d2de3de",
        "triton_red_fused_native_layer_norm_0d1d2d3d4d5de6de",
        "triton__0d1d2d3d4d5de6de",
        "fused_moe_kernel_0d1d2d3d4d5d6d7d8d9d10d11d12d13d14d15d16d17d18d19",
        "_attn_fwd_0d1d2d3d4d5d6d7d8d9d10d11d12d13d14d15d16c17d18d19d20c21d22d23d24c",
        "triton_poi_fused_add_0d1d2de",
        # M2: closing tags
        "</s>",
        "special tokens: ['<s>', '</s>']",
        "<b>bold</b>",
        "<|im_start|>user<|im_end|></s>",
        # M3: index expressions
        "keys[3]",
        "token_ids[12]",
        "kv_cache.key[2]",
        "self.key[idx]",
        "token_ids[-1]",
        "keys[i+1]",
        "key_cache[layer_idx]",
        # M4: versions
        "version 2.5.1.0",
        "driver 550.54.15.1",
        "CUDA driver version: 12.4.0.1",
        "v 1.2.3.4",
        # words that only look like the new names
        "bypass=1",
        "compass heading",
        "forward pass 2",
        "multipass reduce",
        "Asia/Tokyo",
        "sessions=4",
        "token is none",
    ],
)
def test_ordinary_names_are_not_mangled(name):
    assert scrub_text(name) == name


def test_what_stays_is_decided_by_the_pattern_so_a_host_after_a_version_word_stays_too():
    """The pattern masks digits (``range_pattern``): ``driver 10.0.0.1`` is read as
    ``driver 550.54.15.1`` is, and an address anywhere else is still one."""
    assert scrub_text("driver 10.0.0.1") == "driver 10.0.0.1"
    assert plain(scrub_text("master 10.0.0.1:29500")) == "master <host>:29500"
    assert plain(scrub_text("</home/alice/x>")) == "<<path>>"


# -- PERF: 1 MiB of the shapes that were quadratic -------------------------------------------

MIB = 1 << 20


def _filled(head: str, unit: str, tail: str = "") -> str:
    body = (unit * (MIB // len(unit) + 1))[: MIB - len(head) - len(tail)]
    return head + body + tail


@pytest.mark.parametrize(
    "text",
    [
        _filled("token ", "-"),
        _filled("token ", "-$"),
        _filled("token ", "$-"),
        _filled("", "</s>"),
        _filled("", "keys[3] "),
        _filled("", "version 2.5.1.0 "),
        _filled("", "token is none "),
    ],
    ids=["dashes", "dash-dollar", "dollar-dash", "tags", "index", "version", "is"],
)
def test_a_mebibyte_of_a_shape_that_was_quadratic_comes_through_as_it_was(text):
    assert scrub_text(text) == text


@pytest.mark.parametrize(
    "head, unit",
    [
        ("", "-"),
        ("", "-$"),
        ("", "%3D"),
        ("", "\ufffd"),
        ("", "\u200b"),
        ("", " \n"),
        ("ghp_aB3dE5fG", " -"),
    ],
    ids=["dashes", "dash-dollar", "encoded", "undecoded", "zero-width", "lines", "token"],
)
def test_a_secret_after_a_mebibyte_of_a_shape_that_was_quadratic_goes(head, unit):
    text = _filled(head, unit, f" password={S}")
    out = scrub_text(text)
    assert S not in out
    assert out.endswith(" password=") or plain(out).endswith(" password=<secret>")


# -- the corpus: every new form, planted in every kept column ----------------------------------

_MARKER = st.text(_ALNUM, min_size=6, max_size=10).map(lambda s: "Zq" + s)
# Punctuation a value may hold where it stands unquoted in a command or a list.
_VALUE_PUNCTUATION = st.text(st.sampled_from(list("!#$%*+,-./:=?@[]^_{}~")), max_size=3)


@st.composite
def _value(draw) -> tuple[str, list[str]]:
    marker = draw(_MARKER)
    return marker + draw(_VALUE_PUNCTUATION), [marker]


_FLAGS = ("password", "api-key", "token", "hf-token", "secret", "passwd", "auth-token")
_NAMES = ("DB_PASSWORD", "api_key", "ApiKey", "token", "client_secret", "PGPASSWORD", "HF_TOKEN")


@st.composite
def _listed(draw) -> tuple[str, list[str]]:
    """A quoted name and its value next to it (G3)."""
    value, markers = draw(_value())
    q = draw(st.sampled_from(['"', "'"]))
    flag, name = draw(st.sampled_from(_FLAGS)), draw(st.sampled_from(_NAMES))
    key, val = draw(st.sampled_from([("name", "value"), ("Key", "Value"), ("key", "value")]))
    form = draw(st.integers(0, 5))
    text = [
        f"[{q}train.py{q}, {q}--{flag}{q}, {q}{value}{q}, {q}--lr{q}]",
        f"({q}--{flag}{q},{q}{value}{q})",
        f'{{"{key}": "{name}", "{val}": "{value}"}}',
        f'<add {key}="{name}" {val}="{value}"/>',
        f"<{name}>{value}</{name}>",
        f'<entry key="{name}">{value}</entry>',
    ][form]
    return text, markers


_SECRET_NAMES = ("password", "token", "api_key", "secret", "passwd", "PGPASSWORD", "auth_token")
_LOOKALIKES = {"a": "\u0430", "e": "\u0435", "o": "\u043e", "p": "\u0440", "c": "\u0441"}
_LOOKALIKES |= {"s": "\u0455", "i": "\u0456", "k": "\u043a", "y": "\u0443", "x": "\u0445"}
_INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u034f", "\u2062"]


@st.composite
def _disguised(draw) -> tuple[str, list[str]]:
    """A secret's name in odd case, with look-alike or invisible characters or full-width
    letters, and its value (G5)."""
    name = draw(st.sampled_from(_SECRET_NAMES + ("PGPASS", "PHPSESSID", "storepass", "PW")))
    out = []
    for c in name:
        how = draw(st.sampled_from(["as is", "case", "look-alike", "invisible", "full-width"]))
        if how == "case":
            c = c.swapcase()
        elif how == "look-alike":
            c = _LOOKALIKES.get(c, c)
        elif how == "full-width" and c.isalpha():
            c = chr(ord(c) + 0xFEE0)
        out.append(c + (draw(st.sampled_from(_INVISIBLE)) if how == "invisible" else ""))
    value, markers = draw(_value())
    separator = draw(st.sampled_from(["=", ": ", " = ", "\u200b=", "=\u200b"]))
    return "".join(out) + separator + value, markers


_ENCODED = ("%3D", "%3d", "%253D", "%3A", "\\u003d", "\\u003a", "\\x3d", "&#x3D;", "&#61;")
_ENCODED += ("&equals;", "&#58;", "&colon;")


@st.composite
def _encoded(draw) -> tuple[str, list[str]]:
    """A setting whose separator is written encoded, in a URL, a body or JSON (G4)."""
    name = draw(st.sampled_from(_SECRET_NAMES))
    value, markers = draw(_value())
    setting = name + draw(st.sampled_from(_ENCODED)) + value
    form = draw(
        st.sampled_from(
            ["{}", "redirect=%2Fcb%3F{}", "body={}%26user%3Dbob", '{{"q":"{}"}}', "next={} x"]
        )
    )
    return form.format(setting), markers


_COMMANDS = (
    "curl -su admin:{v} https://x", "curl --user admin:{v} -X GET", "curl -U u:{v} https://x",
    "curl --proxy-user u:{v} https://x", "curl -k -u admin:{v} https://x", "curl -uadmin:{v} x",
    "twine upload -u __token__ -p {v} dist/*", "ssh-keygen -N {v} -f k", "rar a -hp{v} x.rar",
    "ssh-keygen -P old -N {v}", "htpasswd -b f user {v}", "htpasswd -bc f user {v}",
    "net use \\\\srv\\share /user:admin {v}", "keytool -storepass {v} -keystore k.jks",
    "keytool -genkey -keypass {v}", "aws configure set aws_secret_access_key {v}",
    "mysql -h db -uroot -p{v} -e x", "sshpass -p {v} ssh h", "vault login {v}",
    "docker login -u me --password-stdin <<< {v}", "git config --global github.token {v}",
    "password is {v}", "token: |\n  {v}\nuser: bob", "token: >-\n  {v}\n",
)  # fmt: skip


@st.composite
def _command(draw) -> tuple[str, list[str]]:
    """A tool's password flag, a name a command sets, a marker before a value (G6, G7)."""
    marker = draw(_MARKER)
    value = marker + draw(st.text(st.sampled_from(list("!#$%*+,-./:=?@^_~")), max_size=3))
    before = draw(st.sampled_from(["", "$ ", "run: ", "step 3 "]))
    return before + draw(st.sampled_from(_COMMANDS)).format(v=value), [marker]


@st.composite
def _after_equals(draw) -> tuple[str, list[str]]:
    """A random key as the value of a setting whose name says nothing (G1): of the kinds
    none of 4,000 was missed of (``test_random_keys_after_an_equals_sign_are_found``)."""
    seed = draw(st.binary(min_size=1, max_size=8))
    key = _random_body(seed, 64, draw(st.sampled_from(["0123456789abcdef", _URLSAFE])))
    form = draw(st.sampled_from(["WANDB={}", "id={}", "a=1&b2={}&c=2", "x=={}", "AWS={};"]))
    return form.format(key), sorted(_token_parts(key))


_SPLIT_FORMATS = [
    ("ghp_", 36, _ALNUM, 4),
    ("gho_", 36, _ALNUM, 4),
    ("AKIA", 16, string.ascii_uppercase + "234567", 4),
    ("hf_", 34, string.ascii_letters, 12),
    ("npm_", 36, _ALNUM, 12),
]


@st.composite
def _split_token(draw) -> tuple[str, list[str]]:
    """A known token cut in two by a break, its prefix recased or in full-width letters (G8)."""
    prefix, length, alphabet, shortest = draw(st.sampled_from(_SPLIT_FORMATS))
    body = _random_body(draw(st.binary(min_size=1, max_size=8)), length, alphabet)
    cut = draw(st.integers(shortest, length - 8))
    head, rest = body[:cut], body[cut:]
    if prefix == "AKIA":
        form = draw(st.sampled_from(["as is", "full-width"]))
    else:
        form = draw(st.sampled_from(["as is", "upper", "title", "full-width"]))
    if form == "full-width":
        prefix = "".join(chr(ord(c) + 0xFEE0) for c in prefix)
    elif form != "as is":
        prefix = prefix.upper() if form == "upper" else prefix.title()
    text = f"key {prefix}{head}{draw(st.sampled_from(_BREAKS))}{rest} done"
    return text, [rest[-8:]] + ([body[-8:]] if len(rest) >= 8 else [])


_FORMS = st.one_of(_listed(), _disguised(), _encoded(), _command(), _after_equals(), _split_token())
_UNDECODED_BYTES = [b"\xa0", b"\xff", b"\xe9", b"\x92", b"\xc3"]


@st.composite
def _undecoded(draw) -> tuple[bytes, list[str]]:
    """A setting whose name or separator holds a byte no UTF-8 decodes (G2)."""
    marker = draw(_MARKER)
    byte = draw(st.sampled_from(_UNDECODED_BYTES))
    name = draw(st.sampled_from(_SECRET_NAMES)).encode()
    form = draw(st.integers(0, 3))
    if form == 0:
        text = name + byte + b"=" + byte + marker.encode()
    elif form == 1:
        text = name + b"=" + byte + marker.encode()
    elif form == 2:
        text = b"DB_PASSWORD" + byte + marker.encode()
    else:
        at = draw(st.integers(1, len(name) - 1))
        text = name[:at] + byte + name[at:] + b"=" + marker.encode()
    return b"step 3 " + text + b" done", [marker]


@settings(
    max_examples=60,
    deadline=None,
    # The same examples every run: a run of 20,000 found three rare forms that still leak
    # (README, issue 33's third round); CI must not pass or fail by the draw.
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.lists(_FORMS, min_size=4, max_size=10), st.lists(_undecoded(), min_size=1, max_size=4))
def test_a_corpus_of_the_new_forms_planted_in_every_kept_column_never_survives(texts, blobs):
    markers = {m for _, ms in texts + blobs for m in ms}
    with tempfile.TemporaryDirectory() as folder:
        src, out = Path(folder) / "in.sqlite", Path(folder) / "out" / "shared.sqlite"
        shutil.copyfile(CORPUS_TRACE, src)
        db = sqlite3.connect(src)
        assert plant_in_kept_columns(db, [text for text, _ in texts]) > 20 * len(texts)
        _plant_bytes(db, [blob for blob, _ in blobs])
        db.commit()
        db.close()
        out.parent.mkdir()
        result = invoke("scrub", str(src), "-o", str(out))
        assert result.exit_code == 0, result.output
        raw = out.read_bytes()
        values = "\0".join(_text_values(out))
    found = sorted(m for m in markers if m.encode() in raw or m in values)
    assert found == [], f"{len(found)} planted secrets survived: {found}"
