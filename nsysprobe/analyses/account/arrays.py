"""Arrays of millions of rows with few distinct values: texts as codes, distinct rows packed
into integers, and the runs of idle intervals made at once."""

from __future__ import annotations

import numpy as np

from nsysprobe.analyses.rows import per_distinct
from nsysprobe.common.table import Labels, ranked

# Idle intervals whose figures are made at once (``_interval_facts``), a few MB each.
INTERVALS_PER_RUN = 1 << 18


class Texts:
    """The details' texts as codes (-1: none): pieces come by the million, names by the few."""

    def __init__(self):
        self.texts: list[str] = []
        self._codes: dict[str, int] = {}
        self.ranges: set[int] = set()  # the codes of NVTX range names

    def code(self, text: str | None) -> int:
        if text is None or text == "":
            return -1
        code = self._codes.get(text)
        if code is None:
            code = self._codes[text] = len(self.texts)
            self.texts.append(text)
        return code

    def codes(self, coded: Coded) -> np.ndarray:
        """The codes of texts given as ``(which, texts)``: each row's index into ``texts``
        (-1, None or "" for none), as ``joined`` gives them."""
        which, distinct = coded
        # -1 picks the last entry: none.
        return np.array([self.code(t) for t in distinct] + [-1], dtype=np.int64)[which]

    def adopt(self, other: Texts, codes: np.ndarray) -> np.ndarray:
        """``codes`` of ``other``'s texts as codes of these: ``other``'s texts coded here in
        the order it coded them, its NVTX range names among ``ranges``."""
        if not other.texts:
            return codes
        # -1 picks the last entry: none.
        mine = np.array([self.code(t) for t in other.texts] + [-1], dtype=np.int64)
        self.ranges.update(mine[sorted(other.ranges)].tolist())
        return mine[codes]

    def of_category(self, column: Labels, idx: np.ndarray) -> np.ndarray:
        """The codes of a ``Labels`` column's texts at the rows ``idx``."""
        cats = column.categories
        return per_distinct(
            column.codes[idx],
            lambda k: self.code(str(cats[k])) if k >= 0 else -1,
            np.int64,
        )


# Texts per row as ``(which, texts)``: each row's index into a few distinct texts (-1: none),
# so that no string is made per row.
Coded = tuple[np.ndarray, list[str] | np.ndarray]


def one(text: str, n: int) -> Coded:
    """``text`` on each of ``n`` rows."""
    return np.zeros(n, dtype=np.int64), [text]


def joined(first: Coded, second: Coded, form: str) -> tuple[np.ndarray, list[str]]:
    """Per row, the text of ``first`` followed by ``form`` filled with that of ``second``
    (nothing where it is none or empty), one string per distinct pair."""
    (a_codes, a_texts), (b_codes, b_texts) = first, second
    width = len(b_texts) + 1
    key = np.asarray(a_codes, dtype=np.int64) * width + (np.asarray(b_codes, dtype=np.int64) + 1)
    keys, which = ranked(key, len(a_texts) * width)
    labels = []
    for k in keys.tolist():
        a, b = a_texts[k // width], b_texts[k % width - 1] if k % width else ""
        labels.append(f"{a}{form.format(b)}" if b else str(a))
    return which, labels


def size_labels(nbytes: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Sizes as "4 B", "64 kB", "128 MB" (``Coded``): few distinct values, each formatted
    once."""
    sizes, which = np.unique(nbytes, return_inverse=True)
    labels = [
        f"{b / 1e6:.0f} MB" if b >= 1e6 else f"{b / 1e3:.0f} kB" if b >= 1e3 else f"{b} B"
        for b in sizes.tolist()
    ]
    return which.reshape(-1), labels


# Bits per column when the columns of ``distinct_rows`` are packed into one integer.
_ROW_BITS = 21
# A column of ``distinct_rows`` with values below this (an enum: copy kinds, memory kinds) is
# packed as it is; one with larger values by the rank of each among its distinct ones.
_SMALL_RANGE = 1 << 8


def distinct_rows(
    first: np.ndarray, second: np.ndarray, third: np.ndarray
) -> tuple[list[tuple[int, int, int]], np.ndarray]:
    """The distinct rows of three integer columns, sorted, and each row's index into them.
    Few are distinct among millions of rows: when every value fits ``_ROW_BITS`` bits, a row
    is one integer and the distinct ones are marked in a table (``ranked``), nothing sorted
    (``np.unique`` over the rows sorts them all: 0.35 s for the 0.9 M copies of one rank of
    the user-reported shape)."""
    cols = [np.asarray(c, dtype=np.int64) for c in (first, second, third)]
    if not cols[0].size:
        return [], np.empty(0, dtype=np.intp)
    if all(c.min() >= 0 and c.max() < 1 << _ROW_BITS for c in cols):
        # Each column's values, or their ranks, make one digit of the row's integer: rows in
        # order are integers in order. (At most 2^21 digits each: no overflow.)
        key = np.zeros(cols[0].size, dtype=np.int64)
        digits = []  # per column, the value of each digit
        for c in cols:
            high = int(c.max()) + 1
            values, digit = (np.arange(high), c) if high <= _SMALL_RANGE else ranked(c, high)
            key *= values.size
            key += digit
            digits.append(values)
        del digit
        n2, n3 = digits[1].size, digits[2].size
        keys, codes = ranked(key, digits[0].size * n2 * n3)
        del key
        parts = (keys // (n2 * n3), keys // n3 % n2, keys % n3)
        rows = list(zip(*(v[p].tolist() for v, p in zip(digits, parts))))
        return rows, codes
    distinct, inverse = np.unique(np.stack(cols, axis=1), axis=0, return_inverse=True)
    return [tuple(r) for r in distinct.tolist()], inverse.ravel()


def runs(n: int):
    """The runs [lo, hi) of ``INTERVALS_PER_RUN`` rows of ``n``, in order."""
    for lo in range(0, n, INTERVALS_PER_RUN):
        yield lo, min(lo + INTERVALS_PER_RUN, n)
