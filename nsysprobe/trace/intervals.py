"""Integer interval rows of one event table, as every event reader takes them (``intervals``).

Which rows and values are kept is the reader's one rule for event tables: a row whose start or
end is not a valid time is left out and counted, an id that is not usable reads as ``NO_ID``
(``values``). How it is read: one query per table through ADBC's SQLite driver (``arrow``),
its Arrow batches copied into one numpy array per column as they arrive; a table of more than
``SPLIT_ROWS`` rows in two queries, each of half its rowids, read at once on two cores.

Two queries read the same rows. The fast one selects the columns as they are and checks them
in numpy; the driver gives a column as int64 only when every value in it is an INTEGER or NULL
(NULL reads as -1; a NULL start or end drops the row), so a column of any other type, whatever
the table declares, fails it: a TEXT, a BLOB or a REAL after the first batch is a type
mismatch, one in the first batch makes the column another type. Then the exact one reads the
table, every value through ``CASE typeof(...)`` and every row through the interval test in SQL.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing

import numpy as np

from nsysprobe.common.ahead import shut_down
from nsysprobe.common.table import Table
from nsysprobe.errors import TraceError
from nsysprobe.trace import arrow
from nsysprobe.trace.arrow import BINARY, INT64, NULL, ArrowReadError
from nsysprobe.trace.values import (
    BOUNDS,
    ID_BOUNDS,
    IDS,
    MAX_TIME_NS,
    int_expr,
    narrow,
    valid_interval,
)

# A NULL start or end reads as this in the fast query: below any valid time, so the row is
# dropped as the exact query drops it.
NULL_TIME = -(1 << 62)
# A table of more rows than this is read in two halves at once, where the machine has two cores
# (``_Reader._halves``).
SPLIT_ROWS = 1 << 22
# VM steps of a count of a rowid range, per row (``SELECT count(*) ... WHERE rowid < m``: 2-4
# measured), and how many times the read and the counts the budget left must hold for a split.
COUNT_OPS_PER_ROW = 4
SPLIT_BUDGET_MARGIN = 4


# Where a row's NVTX name is, by ``typeof(text)``: in ``textId`` (``text`` NULL), in ``text``,
# or ``text`` holds a number (read by rows). A column of its own: any ``textId`` value, -2
# included, is an id.
TEXT_KINDS = ("textId", "text", "number")
_SOURCE = "name source"
# The fast query's name of a row its condition leaves out: no SQLite type begins so
# (``_unfolded``), and its source.
SKIPPED = b"-"
SKIPPED_KIND = -1
# The name source of a name the fast query reads, by the type it begins with (``_unfolded``).
_TYPES = {
    b"text": TEXT_KINDS.index("text"),
    b"blob": TEXT_KINDS.index("text"),
    b"integer": TEXT_KINDS.index("number"),
    b"real": TEXT_KINDS.index("number"),
}


class _OtherType(Exception):
    """A column of the fast query came back as another type than int64."""


class _Stopped(Exception):
    """The other half of the table failed to read (``_Reader._together``)."""


def intervals(
    trace,
    table: str,
    wanted: Iterable[str],
    aliases: dict[str, Iterable[str]] | None = None,
    where: str = "",
    raw: dict[str, str] | None = None,
    named_by: tuple[str, str | None] | None = None,
    split_rows: int | None = None,
):
    """Integer interval rows: ``start``, ``end`` and ``wanted`` integer columns as int64
    (the ids of ``IDS`` as int32 when every value fits).

    Rows whose start or end is NULL, not an integer or out of range, or whose interval is
    reversed, are left out and counted in the table's ``dropped``; a NULL or a value that is
    not an integer in another column reads as -1, a column this version lacks as -1 too,
    and so does an id out of ``ID_BOUNDS`` (those rows are counted: ``unusable_ids``).

    ``raw`` gives some of ``wanted`` as SQL expressions of integers (``rowid``). With
    ``named_by`` (the columns ``text`` and ``textId``, or None where it has none), the
    result is ``(table, (codes, names, source))``: ``source`` is each row's ``TEXT_KINDS``
    (its name in ``textId``, in ``text``, or ``text`` holding a number); ``names`` are the distinct
    texts of the rows kept, digits masked (``_masked``), and ``codes`` each row's index
    into them.

    A table of more rows than ``split_rows`` (at most ``SPLIT_ROWS``, the default) is read in
    two halves at once, where the machine has two cores (``_Reader._halves``).
    """
    cols = ["start", "end", *wanted]
    raw = raw or {}
    if table not in trace.tables:
        df = Table.empty(cols)
        return (df, (np.empty(0, np.int64), [])) if named_by else df
    named = [c for c in cols if c not in raw]
    found = dict(zip(named, trace._resolve(table, named, aliases)))
    if found["start"] is None or found["end"] is None:
        raise TraceError(
            f"{trace.path}: table {table} has no start/end columns; this is not an "
            f"Nsight Systems export nsysprobe can read: re-export the report with "
            f"`nsys export --type sqlite`"
        )
    read = [c for c in cols if c in raw or found[c] or (named_by and c == "textId")]
    if named_by:
        read.append(_SOURCE)
    split = SPLIT_ROWS if split_rows is None else min(split_rows, SPLIT_ROWS)
    reader = _Reader(trace, table, read, found, raw, where, named_by, split)
    try:
        arrays, names, total = reader.read()
    except (ArrowReadError, OverflowError, ValueError) as exc:
        raise TraceError(trace._read_failed(table, exc)) from exc
    got = dict(zip(read, arrays))
    rows = len(arrays[0])
    data = {c: got[c] if c in got else np.full(rows, -1, dtype=np.int64) for c in cols}
    for c in ID_BOUNDS.keys() & data.keys():
        trace._note_ids(table, c, data[c], absent=c not in got)
    data = {c: narrow(v) if c in IDS else v for c, v in data.items()}
    df = Table(data, dropped=int(total - rows))
    return (df, (*names, got[_SOURCE])) if named_by else df


class _Reader:
    """The two queries of ``read`` (and with ``named_by``, the row's text last), and the
    reading of their batches into numpy."""

    # Whether the fast query is tried first (the tests turn it off to compare the two).
    fast_first = True

    def __init__(self, trace, table, read, found, raw, where, named_by, split_rows):
        self.trace, self.table, self.read_cols, self.where = trace, table, read, where
        self.named_by, self.split_rows = named_by, split_rows
        # The id columns (``IDS``) and the name source are read into int32 and int8 arrays,
        # so those columns are not made twice (in int64, then narrowed); one is widened to
        # int64 once a value does not fit (``_narrowed``), and ``intervals`` narrows it after its
        # checks where it can, as before. Under this lock: the halves write the same arrays.
        self.narrow = {c: np.int32 for c in read if c in IDS}
        if named_by:
            self.narrow[_SOURCE] = np.int8
        self._widening = threading.Lock()
        text_col, id_col = named_by or (None, None)
        self.exact, self.fast = [], []
        for c in read:
            if c == "textId" and named_by:
                self.exact.append(int_expr(id_col) if id_col else "-1")
                self.fast.append(f'"{id_col}"' if id_col else "-1")
            elif c == _SOURCE:
                kind = (
                    f"CASE typeof(\"{text_col}\") WHEN 'null' THEN 0 WHEN 'text' THEN 1 "
                    "WHEN 'blob' THEN 1 ELSE 2 END"
                )
                self.exact.append(kind)  # (the fast query reads it with the name)
            elif c in raw:
                self.exact.append(raw[c])
                self.fast.append(raw[c])
            else:
                self.exact.append(int_expr(found[c], *BOUNDS.get(c, ())))
                self.fast.append(f'"{found[c]}"')
        self.fills = [NULL_TIME if c in ("start", "end") else -1 for c in read]
        # The condition of the fast query's SQL (else it reads every row).
        self.fast_where = where
        if named_by:
            # A BLOB in every row (NULL as empty: the name source tells those rows), so the driver
            # never infers the column's type from a batch of NULLs.
            text = f"coalesce(CAST(\"{text_col}\" AS BLOB), x'')"
            self.exact.append(text)
            # The fast query's name begins with its type (``_unfolded``): a column less, 16 M
            # NVTX ranges read by the driver in 7.1 s against 7.7 s.
            typed = f'typeof("{text_col}") || CAST("{text_col}" AS BLOB)'
            typed = f"coalesce({typed}, x'')"
            if where:
                # Every row is read, those ``where`` leaves out named ``SKIPPED`` (``_checked``
                # drops them): the halves of a table are then checked by their row counts
                # (``_halves``), and the driver's time is that of the SQL condition.
                typed = f"CASE WHEN {where} THEN {typed} ELSE x'{SKIPPED.hex()}' END"
                self.fast_where = ""
            self.fast.append(f"CAST({typed} AS BLOB)")
        self.valid = valid_interval(found["start"], found["end"])

    def read(self) -> tuple[list[np.ndarray], tuple | None, int]:
        """(one array per column of ``read``, (codes, names) with ``named_by``, the rows
        before the interval test)."""
        if self.fast_first:
            try:
                arrays, names, total = self._gather(self.fast, f"({self.fast_where or 1})")
                return self._checked(arrays, names, total)
            except (_OtherType, ArrowReadError):
                pass  # a value of another type: the exact query reads every value
        where = self.valid + (f" AND ({self.where})" if self.where else "")
        arrays, names, _ = self._gather(self.exact, where, exact=True)
        if self.where:
            total = self.trace.count_where(self.table, self.where)
        else:
            total = self.trace.count(self.table)
        return arrays, names, total

    def _sql(self, exprs: list[str], where: str) -> str:
        # NOT INDEXED: rows in rowid order, whatever index the file brings.
        return f'SELECT {", ".join(exprs)} FROM "{self.table}" NOT INDEXED WHERE {where}'

    def _gather(self, exprs: list[str], where: str, exact: bool = False):
        """The query's columns, copied batch by batch into arrays of the table's row count
        (the fast query of a large table: its two halves at once, ``_halves``)."""
        capacity = self.trace.count(self.table)
        arrays = [np.empty(capacity, self.narrow.get(c, np.int64)) for c in self.read_cols]
        if self.named_by:  # each row's code into its names
            arrays.append(np.empty(capacity, np.int32 if capacity < 1 << 31 else np.int64))
        halves = None if exact else self._halves(where, capacity)
        got = self._together(exprs, halves, arrays) if halves else None
        rows, distinct = got or self._fill(self._sql(exprs, where), arrays, 0, capacity, exact)
        # Rows never written leave their pages unused in a view, unless most of the room is
        # left (then a copy lets it go).
        arrays = [a[:rows] if rows * 2 >= a.size else a[:rows].copy() for a in arrays]
        names = None
        if self.named_by:
            names = (arrays.pop(), list(distinct))
            if not exact:
                names = _unfolded(arrays[-1], *names)
        return arrays, names, rows

    def _fill(self, sql, arrays, at, limit, exact, stop=None) -> tuple[int, dict[bytes, int]]:
        """The query's rows (``limit`` at most) copied into ``arrays`` from row ``at``: (how
        many, their distinct names in the order they first occur -> their codes). Stops at a
        batch once ``stop`` is set. The stream is closed on leaving, error or not (its
        statement before the thread's connection is)."""
        # The fast query reads no name source (the last of ``read_cols``): ``_unfolded``.
        n_int = len(self.read_cols) - (bool(self.named_by) and not exact)
        distinct: dict[bytes, int] = {}
        rows = at
        with closing(self.trace._arrow.batches(sql, limit)) as batches:
            for batch in batches:
                if stop is not None and stop.is_set():
                    raise _Stopped
                n = batch[0].length
                for k in range(n_int):
                    column = batch[k]
                    if column.format in (INT64, NULL) and arrays[k].dtype != np.int64:
                        self._narrowed(arrays, k, rows, n, column)
                    elif column.format == INT64:
                        into = arrays[k][rows : rows + n]
                        into[:] = column.values()
                        valid = column.valid()
                        if valid is not None:
                            into[~valid] = self.fills[k]
                    elif column.format == NULL:
                        arrays[k][rows : rows + n] = self.fills[k]
                    elif exact:
                        raise ArrowReadError(f"column {self.read_cols[k]} read as {column.format}")
                    else:
                        raise _OtherType(self.read_cols[k])
                if self.named_by:
                    if batch[n_int].format != BINARY:
                        raise ArrowReadError(f"the names read as {batch[n_int].format}")
                    large = limit > arrow.PYARROW_ROWS
                    codes, values = _masked(*batch[n_int].binary(), large)
                    mapping = _coded(distinct, values)
                    arrays[-1][rows : rows + n] = mapping[codes] if mapping.size else codes
                rows += n
        return rows - at, distinct

    def _narrowed(self, arrays, k, rows, n, column) -> None:
        """A batch's ``n`` values of ``column`` (int64 or all NULL) written into the narrow
        column ``k`` from row ``rows``, the column first widened to int64 (all it holds
        copied) where a value does not fit."""
        with self._widening:
            into = arrays[k][rows : rows + n]
            if column.format == NULL:
                into[:] = self.fills[k]
                return
            values, valid = column.values(), column.valid()
            if not _fits(values if valid is None else values[valid], into.dtype):
                arrays[k] = arrays[k].astype(np.int64)
                into = arrays[k][rows : rows + n]
            into[:] = values
            if valid is not None:
                into[~valid] = self.fills[k]

    def _halves(self, where: str, capacity: int) -> list[tuple[str, int, int]] | None:
        """A table of more than ``split_rows`` rows, on a machine of two cores, in two parts
        by rowid: for each, (its condition, the row its rows go from, its rows). None, and the
        table is read whole, where it has no rowid, where the fast query leaves rows out in
        SQL (its parts' rows could not be checked), where the parts' rows do not add up to the
        table's, or where the budget left is near what the read and the counts take (so a read
        the budget allows whole is never stopped because it was split).

        The rows of each part are known without a scan where the rowids run from the least to
        the largest, one for each row (the table's count: 16 M NVTX ranges counted in two
        parts took 3.3 s), else counted by SQLite. ``_together`` checks the rows each part
        read against them: a damaged tree whose seeks miss rows a whole read walks is read
        whole."""
        rowid = self.trace._rowid_name(self.table)
        if capacity <= self.split_rows or arrow.READERS < 2 or rowid is None or self.fast_where:
            return None
        cost = capacity * ((len(self.read_cols) + 2) * arrow.OPS_PER_VALUE + COUNT_OPS_PER_ROW)
        if self.trace._budget.left() < SPLIT_BUDGET_MARGIN * cost:
            return None
        table = f'"{self.table}"'
        try:
            bounds = self.trace.rowid_bounds(self.table)
            if bounds is None:
                return None
            low, high = bounds
            middle = low + (high - low) // 2 + 1
            parts = [f"{rowid} < {middle}", f"{rowid} >= {middle}"]
            if high - low + 1 == capacity:
                counts = [middle - low, high - middle + 1]
            else:
                sql = f"SELECT count(*) FROM {table} WHERE "
                counts = [int(self.trace._fetch(self.table, sql + p)[0][0]) for p in parts]
        except TraceError:
            return None  # no rowid after all (WITHOUT ROWID), or a damaged tree: read whole
        first, second = counts
        if first + second != capacity or not first or not second:
            return None
        return [(f"{where} AND {parts[0]}", 0, first), (f"{where} AND {parts[1]}", first, second)]

    def _together(self, exprs, halves, arrays) -> tuple[int, dict[bytes, int]]:
        """The two parts of ``halves`` read at once, the second on a thread of its own (its
        connection closed after), into ``arrays``, and the second's names' codes made those
        of the names of both. The first error, or a signal, stops both at their next batch.
        None (read it whole) where a part read other rows than it holds."""
        stop = threading.Event()

        def fill(part):
            where, at, limit = part
            try:
                return self._fill(self._sql(exprs, where), arrays, at, limit, False, stop)
            except BaseException:
                stop.set()
                raise

        def fill_second():
            try:
                return fill(halves[1])
            finally:
                self.trace._arrow.release()

        pool = ThreadPoolExecutor(1, thread_name_prefix="nsysprobe-read")
        second = pool.submit(fill_second)
        try:
            rows, distinct = fill(halves[0])
            more, names = second.result()
        except _Stopped:
            second.result()  # raises the error that stopped the first half
            raise
        except BaseException:
            stop.set()  # (a signal while waiting for the second half)
            raise
        finally:
            shut_down(pool, [second])
        if (rows, more) != (halves[0][2], halves[1][2]):
            return None
        if self.named_by and names:
            codes = arrays[-1][rows : rows + more]
            codes[:] = _coded(distinct, names)[codes]
        return rows + more, distinct

    def _checked(self, arrays, names, total):
        """The fast query's columns as the exact query returns them: out-of-bounds values -1,
        rows ``where`` leaves out (``SKIPPED``) gone, rows failing the interval test dropped
        (counted in ``total``, the rows before it)."""
        for k, c in enumerate(self.read_cols):
            if c in BOUNDS:
                low, high = BOUNDS[c]
                v = arrays[k]
                v[(v < low) | (v > high)] = -1
        s, e = arrays[0], arrays[1]
        keep = (e >= s) & (s >= -MAX_TIME_NS) & (e <= MAX_TIME_NS)
        if self.named_by and self.where:
            wanted = arrays[self.read_cols.index(_SOURCE)] != SKIPPED_KIND
            total = int(np.count_nonzero(wanted))
            if total < wanted.size:
                keep &= wanted
            del wanted
        if not keep.all():
            arrays = [a[keep] for a in arrays]
            if names is not None:  # only the names of the rows kept
                names = _used(names[0][keep], names[1])
        return arrays, names, total


def _masked(offsets: np.ndarray, data: np.ndarray, large: bool) -> tuple[np.ndarray, list[bytes]]:
    """A batch's texts (Arrow binary: offsets into data) with every ASCII digit made ``0``:
    (code per row, distinct masked values in the order they first occur). ``range_pattern``
    of a masked value is that of the value (digits stay digits; ASCII bytes never fall inside
    a UTF-8 sequence, valid or not), and far fewer values are distinct. ``large`` (a table of
    more than ``arrow.PYARROW_ROWS`` rows): encoded by pyarrow, in C, ~10x the speed of a
    dict; else by a dict (the same codes and values), which needs no pyarrow."""
    # Every ASCII digit 1-9 made 0 (the byte less itself less "0" where it is one): six times
    # the speed of a table lookup per byte.
    digit = (data - np.uint8(ord("1")) < 9).view(np.uint8)
    masked = data - digit * (data - np.uint8(ord("0")))
    del digit
    if large:
        import pyarrow as pa

        column = pa.Array.from_buffers(
            pa.binary(), len(offsets) - 1, [None, pa.py_buffer(offsets), pa.py_buffer(masked)]
        ).dictionary_encode()
        indices = column.indices.buffers()[1]
        codes = np.frombuffer(indices, np.int32, count=len(column)).astype(np.int64)
        return codes, column.dictionary.to_pylist()
    text, cuts = masked.tobytes(), offsets.tolist()
    distinct: dict[bytes, int] = {}
    codes = [distinct.setdefault(text[a:b], len(distinct)) for a, b in zip(cuts, cuts[1:])]
    return np.array(codes, dtype=np.int64), list(distinct)


def _unfolded(source: np.ndarray, codes: np.ndarray, names: list[bytes]):
    """The fast query's names, each after its SQLite type (an empty BLOB for NULL), as the
    exact query reads them: each row's ``TEXT_KINDS`` into ``source`` (``SKIPPED_KIND``
    for a row its condition leaves out), and (codes, names) of the names without their
    type (an empty text and a NULL one name; the rows left out name the last)."""
    kinds, bare = [], []
    for name in names:
        typed = next((t for t in _TYPES if name.startswith(t)), b"")
        skipped = name == SKIPPED
        kinds.append(SKIPPED_KIND if skipped else _TYPES.get(typed, TEXT_KINDS.index("textId")))
        bare.append(None if skipped else name[len(typed) :])
    source[:] = np.array(kinds + [0], dtype=np.int64)[codes]
    distinct = dict.fromkeys(b for b in bare if b is not None)
    if len(distinct) < len(bare):  # names merged, or rows left out (coded last)
        keyed = {n: k for k, n in enumerate(distinct)}
        codes = np.array([keyed.get(b, len(keyed)) for b in bare], dtype=codes.dtype)[codes]
    return codes, [*distinct, *([SKIPPED] if None in bare else [])]


def _fits(values: np.ndarray, dtype) -> bool:
    """Whether every value of ``values`` fits ``dtype``."""
    bounds = np.iinfo(dtype)
    return not values.size or (values.min() >= bounds.min and values.max() <= bounds.max)


def _coded(distinct: dict[bytes, int], values) -> np.ndarray:
    """The codes of ``values`` among ``distinct`` (name -> code), those not in it added."""
    return np.array([distinct.setdefault(v, len(distinct)) for v in values], dtype=np.int64)


def _used(codes: np.ndarray, names: list[bytes]) -> tuple[np.ndarray, list[bytes]]:
    """Only the names some row has, in the order of their codes (one pass, no sort)."""
    used = np.flatnonzero(np.bincount(codes, minlength=len(names)))
    remap = np.full(len(names), -1, dtype=np.int64)
    remap[used] = np.arange(used.size)
    return remap[codes], [names[i] for i in used.tolist()]
