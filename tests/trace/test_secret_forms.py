"""Secrets in brackets and in ``Authorization`` headers, the forms a hostile tester found
surviving ``scrub_text``: ``password[K]`` and ``password(K)`` came back as they were, and
``Authorization: Token K`` lost its scheme word but kept its credential. And the real names of
the sample traces (kernels, CUDA and OS calls, threads, NVTX ranges) stay as they are.
"""

from __future__ import annotations

import sqlite3

import pytest

from nsysprobe.trace.secrets.placeholders import PLACEHOLDER
from nsysprobe.trace.secrets.scrubber import MAX_PLACEHOLDERS, scrub_text
from nsysprobe.trace.secrets.settings import BRACKETED_CHARS

from conftest import SAMPLE_TRACES


def plain(text: str) -> str:
    """``text`` with each placeholder written as its kind only."""
    return PLACEHOLDER.sub(lambda m: f"<{m[1]}>", text)


def assert_scrubbed(text: str, secret: str, scrubbed: str) -> None:
    out = scrub_text(text)
    assert secret not in out, out
    assert plain(out) == scrubbed


@pytest.mark.parametrize(
    "text, secret, scrubbed",
    [
        ("password[hunter2xyz]", "hunter2xyz", "password[<secret>]"),
        ("password(hunter2xyz)", "hunter2xyz", "password(<secret>)"),
        ("step 3 api_key[ K3yabc9 ] done", "K3yabc9", "step 3 api_key[ <secret> ] done"),
        ("token(K4tokxyz) next", "K4tokxyz", "token(<secret>) next"),
        ("HF_TOKEN{K5abc} next", "K5abc", "HF_TOKEN{<secret>} next"),
        ("db.password(hunter2xyz).connect()", "hunter2xyz", "db.password(<secret>).connect()"),
        # spaces inside the brackets, and a value of several words
        ("password ( hunter 2 xyz ) rest", "hunter 2 xyz", "password ( <secret> ) rest"),
        ("password=[hunter2 xyz] next", "xyz", "password=[<secret>] next"),
        ("HF_TOKEN=(K7 abc) next", "K7 abc", "HF_TOKEN=(<secret>) next"),
        # quotes inside the brackets, a closing bracket within them
        ('password("hunter2 xyz")', "hunter2", "password(<secret>)"),
        ("api_key['K8 with spaces'] ok", "K8 with", "api_key[<secret>] ok"),
        ('password("a)b2c") ok', "b2c", "password(<secret>) ok"),
        # nested brackets
        ("password[[hunter2xyz]] ok", "hunter2xyz", "password[<secret>] ok"),
        ("password((hu(n)ter2)) ok", "ter2", "password(<secret>) ok"),
        ("token(f(K9a), [K9b]) ok", "K9b", "token(<secret>) ok"),
        # never closed: the opening bracket still separates, the value is the one word
        ("password(hunter2xyz", "hunter2xyz", "password(<secret>"),
    ],
)
def test_a_secret_in_brackets_after_its_name_is_replaced(text, secret, scrubbed):
    assert_scrubbed(text, secret, scrubbed)


@pytest.mark.parametrize(
    "text, secret, scrubbed",
    [
        ("Authorization: Token hunter2xyz", "hunter2xyz", "Authorization: <secret> <secret>"),
        ("Authorization: Basic dXNlcjpwYXNz", "dXNlcjpwYXNz", "Authorization: <secret> <secret>"),
        (
            'Authorization: Digest username="bob", realm="api", nonce="dcd98b7102dd2f0e", '
            'response="6629fae49393a05397450978507c4ef1"',
            "6629fae",
            "Authorization: <secret> <secret>",
        ),
        (
            "Proxy-Authorization: Basic dXNlcjpwYXNz",
            "dXNlcjpwYXNz",
            "Proxy-Authorization: <secret> <secret>",
        ),
        (
            "authorization:   Token   hunter2xyz  ",
            "hunter2xyz",
            "authorization:   <secret>   <secret>  ",
        ),
        (
            "HTTP_AUTHORIZATION=Basic dXNlcjpwYXNz\nstep 3",
            "dXNlcjpwYXNz",
            "HTTP_AUTHORIZATION=<secret> <secret>\nstep 3",
        ),
        # within quotes, the field ends at its closing quote; escaped quotes do not end it
        (
            "curl -H 'Authorization: Token hunter2xyz' -H 'Accept: json' get",
            "hunter2xyz",
            "curl -H 'Authorization: <secret> <secret>' -H 'Accept: json' get",
        ),
        (
            'curl -H "Authorization: Digest username=\\"bob\\", response=\\"6629fae4\\"" get',
            "6629fae4",
            'curl -H "Authorization: <secret> <secret>" get',
        ),
    ],
)
def test_an_authorization_header_loses_its_scheme_and_credential(text, secret, scrubbed):
    assert_scrubbed(text, secret, scrubbed)


@pytest.mark.parametrize(
    "text, secret, scrubbed",
    [
        ("X-Api-Key: hunter2xyz", "hunter2xyz", "X-Api-Key: <secret>"),
        ('{"Authorization": "Token hunter2xyz"}', "hunter2xyz", '{"Authorization": <secret>}'),
        ("Authorization: Bearer abc.DEF-ghi_123456", "abc.DEF", "Authorization: <secret> <secret>"),
        ("PGPASSWORD=(hunter2xyz)", "hunter2xyz", "PGPASSWORD=(<secret>)"),
    ],
)
def test_the_header_and_bracket_forms_caught_before_still_are(text, secret, scrubbed):
    assert_scrubbed(text, secret, scrubbed)


@pytest.mark.parametrize(
    "name",
    [
        "foo(password)",
        "check_password() failed",
        "token (see the docs)",
        "api_key (from the environment)",
        "Authorization header missing",
        "token(none)",
        "params[password]",
    ],
)
def test_brackets_that_set_no_value_stay(name):
    assert scrub_text(name) == name


# The StringIds that name what the analyses show, by table and column.
_NAMED_BY = {
    "CUPTI_ACTIVITY_KIND_KERNEL": ("demangledName", "shortName", "mangledName"),
    "CUPTI_ACTIVITY_KIND_RUNTIME": ("nameId",),
    "OSRT_API": ("nameId",),
    "ThreadNames": ("nameId",),
    "NVTX_EVENTS": ("textId",),
}
_SECRET_WORDS = ("pass", "pwd", "secret", "token", "key", "auth", "cred", "cookie", "sig", "sess")


def _real_names() -> set[str]:
    names: set[str] = set()
    for path in sorted(SAMPLE_TRACES.glob("*.sqlite")):
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            for table, columns in _NAMED_BY.items():
                have = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
                for column in (c for c in columns if c in have):
                    names.update(
                        value
                        for (value,) in db.execute(
                            f"SELECT DISTINCT s.value FROM {table} AS t "
                            f"JOIN StringIds AS s ON s.id = t.{column}"
                        )
                    )
            if {row[1] for row in db.execute("PRAGMA table_info(NVTX_EVENTS)")} >= {"text"}:
                names.update(
                    value
                    for (value,) in db.execute(
                        "SELECT DISTINCT text FROM NVTX_EVENTS WHERE text IS NOT NULL"
                    )
                )
        finally:
            db.close()
    return names


@pytest.fixture(scope="module")
def real_names() -> set[str]:
    names = _real_names()
    assert len(names) > 500, "the sample traces' names were not found"
    return names


def _has_secret_word(name: str) -> bool:
    return any(word in name.lower() for word in _SECRET_WORDS)


def test_real_names_without_a_secret_word_stay_as_they_are(real_names):
    plain_names = [n for n in real_names if not _has_secret_word(n)]
    assert any("vectorized_elementwise_kernel" in n for n in plain_names)
    assert "Batch 12" in plain_names and "iteration 10" in plain_names
    assert [n for n in plain_names if scrub_text(n) != n] == []


def test_real_names_holding_a_secret_word_in_an_identifier_stay_as_they_are(real_names):
    """``cub::DeviceSelect::UniqueByKey``, ``pthread_cond_signal``, ``unsigned int``: words
    of secrets' names inside a kernel's or a call's name are not settings."""
    worded = [n for n in real_names if _has_secret_word(n)]
    assert {"cub::DeviceSelect::UniqueByKey", "pthread_cond_signal"} <= set(worded)
    assert [n for n in worded if scrub_text(n) != n] == []


def test_brackets_past_the_bounds_or_the_line_fail_closed():
    """A bracket that does not close within ``BRACKETED_CHARS`` or within three nested takes
    the rest of the line: the secret goes, odd as its form is."""
    key = "K" + "a1" * BRACKETED_CHARS
    for text, secret in [
        (f"password({key}) next", key),
        ("password(" + '"a "' * 600 + "S3cretX) next", "S3cretX"),
        ("password(f(g(h(i(S3cretX))))) next", "S3cretX"),
        ("token{a{b{c{d{S3cretX}}}}} next", "S3cretX"),
    ]:
        out = plain(scrub_text(text + "\nline two"))
        assert secret not in out, out
        assert out.endswith("(<secret>\nline two") or out.endswith("{<secret>\nline two"), out


def test_empty_brackets_an_operator_follows_belong_to_the_name():
    assert_scrubbed("api_key[]=S3cretX next", "S3cretX", "api_key[]=<secret> next")
    assert_scrubbed("token{} := S3cretX", "S3cretX", "token{} := <secret>")


def test_a_text_of_thousands_of_secrets_becomes_one_placeholder():
    """Past ``MAX_PLACEHOLDERS`` a text is one secret whole: equal texts stay equal."""
    text = "/home/alice/run.log " * (MAX_PLACEHOLDERS + 1)
    out = scrub_text(text)
    assert plain(out) == "<secret>"
    assert scrub_text(text) == out and scrub_text(text + "x") != out
    fewer = plain(scrub_text("/home/alice/run.log " * 3))
    assert fewer == "<path> <path> <path> "
