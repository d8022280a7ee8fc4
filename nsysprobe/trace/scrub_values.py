"""What each value ``nsysprobe scrub`` keeps becomes (``KeptValues``): the SQL functions the copy
calls on every kept text (``nsysprobe_text``: scrubbed by ``secrets.scrubber``), version
number, capture option, payload (``trace.payloads``), frame file and schema entry name; and
the limits on how much scrubbing may lengthen the text, which stop the copy with a one-line
error (``too_long``: the copy, ``trace.scrub``, says it). ``number_sql`` and ``text_sql`` are the
SQL that reads a kept column through them.
"""

from __future__ import annotations

import os
import re
import sqlite3

from nsysprobe.trace import schema
from nsysprobe.trace.payloads import SCHEMA_NAMES, RawFrame, clean_blob, clean_json, scrubbed_file
from nsysprobe.trace.secrets.scrubber import Scrubber, TooLong

# The longest text value copied; nsys writes none near it (long C++ kernel names are KiBs).
MAX_TEXT_BYTES = 16 << 20
# SQLite's limit on one value read or written: a text scrubbed may grow by this much.
MAX_VALUE_BYTES = MAX_TEXT_BYTES + (1 << 20)
# Numbers and dots, as every export writes them (``2025.3.2.0``, ``3.20.3``); a suffix could
# carry anything, so only the number is kept.
_VERSION = re.compile(r"[0-9]+(?:\.[0-9]+)*")


class _TextTooLong(Exception):
    """Raised inside ``nsysprobe_text``: scrubbing lengthened the text past its limit."""


class KeptValues:
    """The SQL functions of one scrub, and what they counted: the texts scrubbed, the bytes
    the placeholders added, the string ids the copied frames name."""

    def __init__(self, layouts: dict, text_growth_limit: int, max_text_growth: int):
        self.layouts = layouts  # the payloads' layouts (``payloads.blob_layouts``)
        self.codec = "utf-8"  # the export's text encoding, set once the copy has read it
        self.frame_functions: set[int] = set()
        self.frame_files: set[int] = set()
        self.scrubbed = 0
        self.scrubber = Scrubber(os.urandom(32))  # a key per scrub: nothing to brute-force
        self.text_growth_limit = text_growth_limit
        self.max_text_growth = max_text_growth
        self.text_growth = 0  # bytes the placeholders added so far
        self.too_long: str | None = None  # why nsysprobe_text stopped the copy

    def register(self, db: sqlite3.Connection) -> None:
        db.create_function("nsysprobe_text", 2, self.text, deterministic=True)
        db.create_function("nsysprobe_version", 2, self.version, deterministic=True)
        db.create_function("nsysprobe_key", 2, self.key, deterministic=True)
        db.create_function("nsysprobe_payload", 3, self.payload, deterministic=True)
        db.create_function("nsysprobe_file", 2, self.file, deterministic=True)
        db.create_function("nsysprobe_known", 2, self.known, deterministic=True)

    def text(self, value, is_text: int):
        """SQL ``nsysprobe_text``: a kept text (or BLOB) value, scrubbed."""
        if not isinstance(value, bytes):
            return value
        text = self._decoded(value, is_text)
        return self._kept(value, text, self._scrubbed(text))

    def _kept(self, value: bytes, text: str, clean: str) -> str:
        """``clean``, the scrubbed ``text`` of ``value``, counted against the growth limit."""
        if clean != text:
            self.scrubbed += 1
            grown = len(clean.encode(self.codec, errors="surrogatepass")) - len(value)
            self.text_growth += max(0, grown)
            if self.text_growth > self.text_growth_limit:
                self.too_long = (
                    f"its scrubbed text would be more than {mib(self.text_growth_limit)} "
                    f"longer than the original ({self.max_text_growth}x the export's size)"
                )
                raise _TextTooLong
            if len(value) + grown > MAX_VALUE_BYTES:
                self.too_long = f"a text would grow past {mib(MAX_VALUE_BYTES)} when scrubbed"
                raise _TextTooLong
        return clean

    def payload(self, value, blob: int, domain):
        """SQL ``nsysprobe_payload``: a sample's payload holding its frames and nothing else
        (``payloads.clean_json``, ``clean_blob``), or NULL when it is none; the string ids
        of its frames are noted for ``StringIds``."""
        found: tuple[str | bytes, list[RawFrame]] | None = None
        if blob and isinstance(value, bytes) and isinstance(domain, int):
            found = clean_blob(value, domain, self.layouts)
        elif not blob and isinstance(value, (str, bytes)):
            found = clean_json(value)
        if found is None:
            return None
        for function, file, _ in found[1]:
            self.frame_functions.add(function)
            self.frame_files.add(file)
        return found[0]

    def known(self, value, is_text: int):
        """SQL ``nsysprobe_known``: a payload schema entry's name when it is one the reader
        looks for (``payloads.SCHEMA_NAMES``), else NULL."""
        if not isinstance(value, bytes):
            return None
        text = self._decoded(value, is_text)
        return text if text in SCHEMA_NAMES else None

    def file(self, value, is_text: int):
        """SQL ``nsysprobe_file``: a frame's file, its folders a placeholder
        (``payloads.scrubbed_file``)."""
        if not isinstance(value, bytes):
            return value
        text = self._decoded(value, is_text)
        return self._kept(value, text, scrubbed_file(text, self._scrubbed))

    def _scrubbed(self, text: str) -> str:
        try:
            return self.scrubber(text, max_chars=MAX_VALUE_BYTES)
        except TooLong:
            self.too_long = f"a text would grow past {mib(MAX_VALUE_BYTES)} when scrubbed"
            raise _TextTooLong from None

    def version(self, value, is_text: int):
        """SQL ``nsysprobe_version``: the version number a value starts with (``2025.3.2.0``
        is not an IPv4 address), and nothing after it; else the value scrubbed as other text."""
        if isinstance(value, bytes) and is_text:
            number = _VERSION.match(self._decoded(value, is_text))
            if number:
                return number.group(0)
        return self.text(value, is_text)

    def key(self, value, is_text: int):
        """SQL ``nsysprobe_key``: the part after the last ``:`` of a capture option's name when
        it is one the reader reads (``schema.CAPTURE_KEYS``), else NULL: SQLite's GLOB that
        chose the row stops at a NUL, so the name may end in anything."""
        if not isinstance(value, bytes):
            return None
        key = self._decoded(value, is_text).rsplit(":", 1)[-1]
        return key if key in schema.CAPTURE_KEYS else None

    def _decoded(self, raw: bytes, is_text: int) -> str:
        """Text in the export's encoding, a BLOB as UTF-8 (as the reader reads them), bytes
        that are not valid replaced."""
        codec = self.codec if is_text else "utf-8"
        try:
            return raw.decode(codec)
        except UnicodeDecodeError:
            return raw.decode(codec, errors="replace")


def mib(size: int) -> str:
    return f"{size / (1 << 20):,.1f} MiB"


def ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def number_sql(col: str) -> str:
    c = ident(col)
    return f"CASE typeof({c}) WHEN 'integer' THEN {c} WHEN 'real' THEN {c} END"


def text_sql(col: str, function: str = "nsysprobe_text") -> str:
    """The column's text and BLOBs through ``function`` (as bytes: Python decodes them
    leniently, exports hold non-UTF-8 text); numbers and NULL as they are, without a call."""
    c = ident(col)
    return (
        f"CASE typeof({c}) WHEN 'text' THEN {function}(CAST({c} AS BLOB), 1) "
        f"WHEN 'blob' THEN {function}({c}, 0) ELSE {c} END"
    )
