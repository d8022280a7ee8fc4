"""One block of an event table's rows read as joined text: checked per value, or fast.

The reader (``intervals._int_columns``) reads a table's integer columns a block of rowids
at a time: SQLite joins each column of the block into one comma-separated text that numpy
parses. Read exactly, every value passes through ``CASE typeof(...)`` and every row through
the interval test (``typeof(start) = 'integer' AND end >= start ...``): a per-value cost of
40-45 % of the query on a real export (measured 2026-12-02 on this project's 2-core machine,
one block of 262,144 rows of the NVTX-heavy replica in ``benchmarks/README.md``: 0.22 s
against 0.14 s for NVTX, 0.19 s against 0.11 s for kernels).

The fast query selects the columns as they are (``ifnull`` for NULL: one value per row in
every column) and checks the block as a whole instead: one ``max()`` over every value (SQLite
orders TEXT and BLOB above every number, so an integer maximum means no TEXT or BLOB value),
and the joined text made only of digits, ``-`` and ``,`` (no REAL: SQLite writes them with
``.``, ``e`` or as ``Inf``). Rows failing the interval test and values out
of bounds are then dropped or made -1 in numpy, as the exact query does in SQL. A block that
fails any check is read again exactly, so the result is the exact one on every block; after
one such block, the rest of the table is read exactly at once.
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass, field

import numpy as np

# A NULL start or end reads as this in the fast query: below any valid time, so the row is
# dropped as the exact query drops it.
NULL_TIME = -(1 << 62)
# A NULL text reads as this whole value in the fast query (checked against count(text)).
NULL_TEXT = b"\x01"
_INTEGER_TEXT = b"0123456789,-"
_DIGITS_TO_ZERO = bytes.maketrans(b"123456789", b"000000000")


class NulInText(Exception):
    """A text value holds NUL, the separator of a block's joined texts."""


@dataclass
class BlockQuery:
    """The two queries of one table's blocks, and what the fast one's values need.

    ``exact`` and ``fast`` end in ``AND <rowid> BETWEEN ? AND ?`` when the table is read in
    blocks. ``fast`` (None when the table's declared types do not allow it) returns
    ``count(*)``, the maximum of every value, with ``text`` ``count(text)`` and
    ``min(text)``, then the joined columns (and texts) in the order of ``exact``'s.
    ``bounds``: column index -> (low, high), values outside read as -1. ``text_id``: the
    index of the column that tells a row named by its ``text`` (-2) from one named by its
    ``textId``.
    """

    exact: str
    fast: str | None
    columns: int
    text: bool
    max_time: int
    bounds: dict[int, tuple[int, int]] = field(default_factory=dict)
    text_id: int | None = None
    _fell_back: threading.Event = field(default_factory=threading.Event, repr=False)

    def run(self, db, params: tuple = ()) -> tuple[list, int | None]:
        """(one array per column and with ``text`` the block's masked texts, None where the
        block has no rows; the block's row count before the interval test, or None when it
        was read exactly)."""
        if self.fast is not None and not self._fell_back.is_set():
            try:
                row = db.execute(self.fast, params).fetchone()
                got = self._checked(row)
            except (sqlite3.Error, NulInText):
                # The fast text holds rows the interval test drops (a NULL start is 20
                # characters there, a NUL in their name): the exact query reads the block, or
                # fails with what is wrong with it.
                got = None
            if got is not None:
                return got, int(row[0])
            self._fell_back.set()
        return parse(db.execute(self.exact, params).fetchone(), self.text), None

    def _checked(self, row: tuple) -> list | None:
        """The fast query's block as the exact query returns it, or None if it is not one
        the fast query can read."""
        count, top = row[0], row[1]
        at = 4 if self.text else 2
        if count == 0:
            return [None] * (self.columns + self.text)
        if not isinstance(top, int):  # TEXT, BLOB or REAL among the values
            return None
        if self.text and not (row[3] is None or isinstance(row[3], (str, bytes))):
            return None  # a number in ``text`` (numbers sort below text: its minimum)
        ints = [_tokens(t, count) for t in row[at : at + self.columns]]
        if any(a is None for a in ints):
            return None
        texts = None
        if self.text:
            codes, values = masked(row[at + self.columns], count)
            nulls = _rows_of(codes, values, NULL_TEXT)
            if int(nulls.sum()) != count - row[2]:  # a text that is NULL_TEXT itself
                return None
            values = [b"" if v == NULL_TEXT else v for v in values]  # coalesce(text, '')
            ints[self.text_id] = np.where(nulls, ints[self.text_id], -2)
            texts = (codes, values)
        for k, (low, high) in self.bounds.items():
            v = ints[k]
            ints[k] = np.where((v >= low) & (v <= high), v, -1)
        s, e = ints[0], ints[1]
        keep = (e >= s) & (s >= -self.max_time) & (e <= self.max_time)
        if not keep.all():
            if not keep.any():
                return [None] * (self.columns + self.text)
            ints = [a[keep] for a in ints]
            if texts is not None:
                used, codes = np.unique(texts[0][keep], return_inverse=True)
                texts = (codes.astype(np.int64), [texts[1][i] for i in used])
        return [*ints, texts] if self.text else ints


def parse(row: tuple, text: bool = False) -> list:
    """The exact query's block: comma-separated integer texts (None where the block had no
    rows) to int64 arrays; with ``text``, the row's last value is masked text (``masked``)."""
    ints = row[:-1] if text else row
    out: list = [None if t is None else np.fromstring(t, dtype=np.int64, sep=",") for t in ints]
    if text:
        rows = next((a.size for a in out if a is not None), 0)
        out.append(None if row[-1] is None else masked(row[-1], rows))
    return out


def masked(joined: str | bytes, rows: int) -> tuple[np.ndarray, list[bytes]]:
    """One block's text values, joined by NUL, with every ASCII digit made ``0``: (code per
    row, distinct masked values in the order they first occur). ``range_pattern`` of a masked
    value is that of the value (digits stay digits; ASCII bytes never fall inside a UTF-8
    sequence, valid or not), and far fewer values are distinct."""
    raw = joined.encode("utf-8") if isinstance(joined, str) else joined
    parts = raw.translate(_DIGITS_TO_ZERO).split(b"\0")
    if len(parts) != rows:
        raise NulInText("a text value holds NUL")
    codes: dict[bytes, int] = {}
    out = np.fromiter((codes.setdefault(p, len(codes)) for p in parts), np.int64, len(parts))
    return out, list(codes)


def _rows_of(codes: np.ndarray, values: list[bytes], value: bytes) -> np.ndarray:
    if value not in values:
        return np.zeros(codes.size, dtype=bool)
    return codes == values.index(value)


def _tokens(joined: bytes, count: int) -> np.ndarray | None:
    """The ``count`` integers of a column's joined text, or None if it holds a REAL (SQLite
    writes one with ``.``, ``e`` or as ``Inf``). Called once the block's maximum is known to
    be a number: no TEXT or BLOB, so every other value is an integer, written ``-?[0-9]+``."""
    if joined.translate(None, _INTEGER_TEXT):
        return None
    return np.fromstring(joined, dtype=np.int64, sep=",", count=count)


class Gathered:
    """A table's blocks, taken in rowid order, copied into one array per column as each
    arrives (and with ``text``, one code per row into the distinct masked names of every
    block), so no block outlives its copy: the blocks' buffers are all alike and the C heap
    serves each from the last one's memory, with no block kept between them.

    ``capacity``: the most rows the blocks can hold (their rowid spans), or None for one
    block taken whole."""

    def __init__(self, columns: int, text: bool, capacity: int | None):
        self.columns, self.text, self.capacity = columns, text, capacity
        self.rows = 0
        self.counts: list[int | None] = []
        self._arrays: list[np.ndarray] | None = None
        if capacity is not None:
            self._arrays = [np.empty(capacity, np.int64) for _ in range(columns + text)]
        self._names: dict[bytes, int] = {}

    def take(self, result: tuple[list, int | None]) -> None:
        """One block as ``BlockQuery.run`` returns it."""
        values, count = result
        self.counts.append(count)
        if values[0] is None:
            return
        n = values[0].size
        if any(v.size != n for v in values[: self.columns]) or (
            self.text and values[-1][0].size != n
        ):
            raise ValueError("columns came back with different row counts")
        if self.text:
            codes, names = values[-1]
            mapping = np.array([self._names.setdefault(u, len(self._names)) for u in names])
            values = [*values[:-1], mapping[codes] if mapping.size else codes]
        if self._arrays is None:
            if self.rows:
                raise ValueError("a second block without room for it")
            self._arrays = values
        else:
            if self.rows + n > self.capacity:
                raise ValueError("a block holds more rows than its rowids allow")
            for into, v in zip(self._arrays, values):
                into[self.rows : self.rows + n] = v
        self.rows += n

    def columns_read(self) -> list[np.ndarray]:
        """One int64 array per column (the rows taken; with ``text``, last, each row's code
        into ``names``)."""
        if self._arrays is None:
            return [np.empty(0, np.int64) for _ in range(self.columns + self.text)]
        n = self.rows
        # Rows the blocks did not fill were never written: a view leaves their pages unused,
        # unless most of the room is left (then a copy lets the room go).
        return [a[:n] if n * 2 >= a.size else a[:n].copy() for a in self._arrays]

    @property
    def names(self) -> list[bytes]:
        """The distinct masked names, in the order of the codes."""
        return list(self._names)

    @property
    def total(self) -> int | None:
        """The rows of the blocks before the interval test, None if a block was read
        exactly."""
        return None if None in self.counts else sum(self.counts)
