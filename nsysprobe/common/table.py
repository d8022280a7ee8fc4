"""Tables of events as plain numpy columns, and the groupings the analyses make of them.

The reader returns every event table as a ``Table``: named numpy arrays of one length, and a
``Labels`` column where a value is one of few texts (the NVTX ranges' patterns). The analyses
group rows with ``Groups`` and order results with ``descending`` and ``by_count``, which keep
the orders the analyses have always printed: groups in order of first appearance (or of their
keys), ties of a descending sort in the order pandas' ``sort_values(ascending=False)`` gives
them, of counts as ``value_counts`` does. Nothing here imports pandas: ``nsysprobe analyze``
starts in a fraction of the time and memory.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np


class Labels:
    """A column of texts from a few distinct ones: ``categories`` (an object array, sorted
    where the reader made it) and each row's ``codes`` into them."""

    __slots__ = ("codes", "categories")

    def __init__(self, codes: np.ndarray, categories: Sequence[str] | np.ndarray):
        self.codes = codes
        self.categories = np.asarray(categories, dtype=object).reshape(-1)

    def __len__(self) -> int:
        return len(self.codes)

    def take(self, rows: np.ndarray) -> Labels:
        return Labels(self.codes[rows], self.categories)

    def values(self) -> np.ndarray:
        """Each row's text (an object array)."""
        if not self.categories.size:
            return np.empty(len(self.codes), dtype=object)
        return self.categories[self.codes]

    def __eq__(self, text) -> np.ndarray:  # type: ignore[override]
        """Mask of the rows whose text is ``text``."""
        hit = np.flatnonzero(self.categories == text)
        if not hit.size:
            return np.zeros(len(self.codes), dtype=bool)
        return self.codes == hit[0]

    def isin(self, texts: Iterable[str]) -> np.ndarray:
        wanted = set(texts)
        keep = np.array([c in wanted for c in self.categories.tolist()], dtype=bool)
        return keep[self.codes] if keep.size else np.zeros(len(self.codes), dtype=bool)

    __hash__ = None  # type: ignore[assignment]


Column = np.ndarray | Labels


class Table:
    """Named columns of one length (numpy arrays or ``Labels``), and the rows the reader left
    out as unreadable (``dropped``)."""

    __slots__ = ("_columns", "dropped")

    def __init__(self, columns: dict[str, Column], dropped: int = 0):
        self._columns = dict(columns)
        self.dropped = dropped
        lengths = {len(v) for v in self._columns.values()}
        if len(lengths) > 1:
            raise ValueError(f"columns of different lengths: {sorted(lengths)}")

    @classmethod
    def empty(cls, names: Iterable[str]) -> Table:
        return cls({n: np.empty(0, dtype=np.int64) for n in names})

    def __len__(self) -> int:
        return len(next(iter(self._columns.values()))) if self._columns else 0

    def __contains__(self, name: str) -> bool:
        return name in self._columns

    def __getitem__(self, name: str) -> Column:
        return self._columns[name]

    def __setitem__(self, name: str, values: Column) -> None:
        if self._columns and len(values) != len(self):
            raise ValueError(f"column {name!r} has {len(values)} rows, the table {len(self)}")
        self._columns[name] = values

    def pop(self, name: str) -> Column:
        return self._columns.pop(name)

    @property
    def columns(self) -> list[str]:
        return list(self._columns)

    def take(self, rows: np.ndarray) -> Table:
        """The rows ``rows`` (indices, or a mask) as a new table, in that order."""
        return Table(
            {
                n: v.take(rows) if isinstance(v, Labels) else v[rows]
                for n, v in self._columns.items()
            }
        )

    def head(self, n: int) -> Table:
        return self.take(slice(0, n))


def concat(tables: Sequence[Table]) -> Table:
    """The rows of ``tables`` (same columns, no ``Labels``) one after another."""
    names = tables[0].columns
    return Table(
        {n: np.concatenate([t[n] for t in tables]) for n in names},
        dropped=sum(t.dropped for t in tables),
    )


def descending(values: np.ndarray) -> np.ndarray:
    """The order of ``values`` from largest to smallest, ties as pandas'
    ``sort_values(ascending=False)`` leaves them (the default quicksort over the reversed
    values, then reversed back)."""
    values = np.asarray(values)
    back = np.arange(values.size)[::-1]
    return back[values[::-1].argsort(kind="quicksort")][::-1]


def distinct(values: np.ndarray) -> np.ndarray:
    """The distinct ``values`` in rising order (``np.unique(values)`` of integers). By a sort:
    numpy 2.4's ``np.unique`` without its optional outputs hashes instead, 0.83 s against a
    sort's 0.04 s for 3 M distinct int64 here, and its ``np.ma.is_masked`` check imports
    ``numpy.ma``, 7 ms of the smallest analysis."""
    ordered = np.sort(np.asarray(values).ravel())
    if ordered.size < 2:
        return ordered
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))]


def percentile(values: np.ndarray, q: float) -> float:
    """``np.percentile(values, q)`` (its default, linear interpolation) of a non-empty 1-D
    array, the same float to the last bit: numpy 2.4's partitions at ``np.unique`` of the
    indexes, which imports ``numpy.ma`` (``distinct``)."""
    ordered = np.sort(np.asarray(values).ravel())
    at = (ordered.size - 1) * (q / 100)
    below = math.floor(at)
    low, high = ordered[below], ordered[min(below + 1, ordered.size - 1)]
    t = at - below
    step = high - low
    return float(high - step * (1 - t) if t >= 0.5 else low + step * t)


def first_seen(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(distinct, which)``: the distinct ``values`` in order of first appearance and each
    row's index into them."""
    distinct, first, which = distinct_first_which(np.asarray(values))
    order, which = _in_order_seen(first, which)
    return distinct[order], which


def _in_order_seen(first: np.ndarray, which: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct values sorted, ``first`` the row each first occurs in and ``which`` each row's
    index into them -> the order of the distinct values by first occurrence, and each row's
    index in that order."""
    order = np.argsort(first, kind="stable")
    rank = np.empty(order.size, dtype=np.int64)
    rank[order] = np.arange(order.size)
    return order, rank[which.reshape(-1)]


def by_count(values: np.ndarray) -> np.ndarray:
    """The distinct ``values``, the most frequent first, ties in order of first appearance
    (the order of pandas' ``value_counts``, a stable sort of the counts)."""
    distinct, which = first_seen(values)
    return distinct[np.argsort(-np.bincount(which, minlength=distinct.size), kind="stable")]


# Rows below which ``distinct_first_which`` does not look for runs.
RUNS_FROM = 1 << 12


def distinct_first_which(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``np.unique(values, return_index=True, return_inverse=True)``, the inverse flat. Where
    equal values come in runs (a thread's calls one after another: 2,318 runs in a million
    OS-runtime calls), only the first value of each run is sorted: fewer runs than a quarter
    of the rows."""
    values = values.ravel()
    n = values.size
    if n >= RUNS_FROM and values.dtype.kind in "iub":
        heads = np.flatnonzero(values[1:] != values[:-1]) + 1
        if heads.size * 4 < n:
            starts = np.concatenate(([0], heads))
            distinct, first, which = np.unique(
                values[starts], return_index=True, return_inverse=True
            )
            # A value's first row begins its first run; each row is its run's value.
            lengths = np.diff(np.append(starts, n))
            return distinct, starts[first], np.repeat(which.reshape(-1), lengths)
        del heads
    distinct, first, which = np.unique(values, return_index=True, return_inverse=True)
    return distinct, first, which.reshape(-1)


def ranked(values: np.ndarray, size: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The distinct ``values`` in rising order, and each value's index among them. Integers
    known to lie in [0, ``size``), with ``size`` no more than the values (or 2^16), are marked
    in a table of ``size`` entries: no sort of millions of rows; so are integers whose range
    is that small (ids, kinds: 13 M string ids of 500 distinct, 0.57 s by ``np.unique`` against
    ~0.1 s); Python objects (labels such as a copy's kind) through a dict, a tenth of
    ``np.unique``'s sort of them; anything else by ``np.unique``."""
    kind, width = values.dtype.kind, values.dtype.itemsize
    if size is None and values.size and (kind == "i" or (kind == "u" and width < 8)):
        lo, hi = int(values.min()), int(values.max())
        if hi - lo < max(values.size, 1 << 16):
            distinct, which = ranked(values.ravel().astype(np.int64) - lo, hi - lo + 1)
            return (distinct + lo).astype(values.dtype), which
    if values.dtype == object:
        listed = values.ravel().tolist()
        ordered = sorted(set(listed))  # as np.unique orders them (by <), or the same TypeError
        index = {v: i for i, v in enumerate(ordered)}
        which = np.fromiter((index[v] for v in listed), np.intp, len(listed))
        return np.fromiter(ordered, object, len(ordered)), which
    if size is None or size > max(values.size, 1 << 16):
        distinct, _, which = distinct_first_which(values.ravel())
        return distinct, which
    seen = np.zeros(size, dtype=bool)
    seen[values] = True
    distinct = np.flatnonzero(seen)
    del seen
    rank = np.zeros(size, dtype=np.intp)
    rank[distinct] = np.arange(distinct.size)
    return distinct, rank[values]


class Groups:
    """The rows of a table grouped by one or more key columns: ``keys`` (one array per key
    column, a value per group), each row's group (``of_row``), and sums, counts, minima and
    maxima per group. ``sort``: groups in order of their keys; else of first appearance."""

    def __init__(self, keys: Sequence[np.ndarray], sort: bool):
        keys = [np.asarray(k) for k in keys]
        n = keys[0].size if keys else 0
        # One integer per row that orders as its keys do: each key's rank among its distinct
        # values, in mixed radix; ranked again whenever the radix would overflow int64.
        combined, radix = np.zeros(n, dtype=np.int64), 1
        for k in keys:
            distinct, rank = ranked(k)
            width = max(distinct.size, 1)
            if radix * width >= 1 << 62:
                distinct_so_far, combined = ranked(combined)
                radix = distinct_so_far.size
            combined = combined * width + rank
            radix *= width
        uniq, first, of_row = distinct_first_which(combined)
        if not sort:
            order, of_row = _in_order_seen(first, of_row)
            first = first[order]
        self.of_row = of_row
        self.size = uniq.size
        self.keys = [k[first] for k in keys]  # each group's keys, from its first row

    def sum(self, values: np.ndarray) -> np.ndarray:
        values = np.asarray(values)
        out = np.zeros(self.size, dtype=values.dtype if values.dtype.kind == "f" else np.int64)
        np.add.at(out, self.of_row, values)
        return out

    def count(self) -> np.ndarray:
        return np.bincount(self.of_row, minlength=self.size).astype(np.int64)

    def min(self, values: np.ndarray) -> np.ndarray:
        out = np.full(self.size, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(out, self.of_row, values)
        return out

    def max(self, values: np.ndarray) -> np.ndarray:
        out = np.full(self.size, np.iinfo(np.int64).min, dtype=np.int64)
        np.maximum.at(out, self.of_row, values)
        return out
