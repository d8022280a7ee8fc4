"""Integer interval rows of one event table, as every event reader takes them (``intervals``).

Which rows and values are kept is the reader's one rule for event tables: a row whose start or
end is not a valid time is left out and counted, an id that is not usable reads as ``NO_ID``
(``values``). How it is read fast: the table's rowids are cut into blocks of ``_BLOCK_ROWS``
(``rowid_blocks``), each block read as joined text (``blocks.BlockQuery``) on one connection
per core (``_read_blocks``).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from nsysprobe.common.table import Table
from nsysprobe.errors import TraceError
from nsysprobe.trace.blocks import NULL_TIME, BlockQuery, Gathered
from nsysprobe.trace.connection import MAX_BLOCK_TEXT
from nsysprobe.trace.values import (
    BOUNDS,
    ID_BOUNDS,
    IDS,
    MAX_TIME_NS,
    int_expr,
    narrow,
    text_affinity,
    valid_interval,
)

# Rows per block when reading integer columns (each column's text is ~20 bytes a row). Small
# enough that the C heap serves each block's buffers from the last one's memory, below the
# threshold of ``common.heap``. Measured on this project's 2-core machine (2026-12-02, 09:40
# UTC, two runs each of ``nsysprobe analyze`` on the NVTX-heavy 1e6 replica of
# ``benchmarks/README.md``): 7.1-7.4 s and 514-517 MiB at 1 << 18 rows, 6.9-7.0 s and
# 458-467 MiB at 1 << 15. Smaller still, the two readers share a small table's blocks more
# evenly (Python parses a block holding the GIL): the 100,080 NVTX ranges of the deep-nesting
# export read in 87 ms at 1 << 15, 71 ms at 1 << 13 (best of five, 14:10 UTC), and loading
# the NVTX-heavy 1e6 replica took 3.78 s and 3.81 s.
_BLOCK_ROWS = 1 << 13
# Up to this many blocks (4 M rowids), a table's rowids are taken as dense without counting
# its rows.
_DENSE_SPANS = 512
# Connections reading blocks at once.
_READERS = max(1, min(4, os.cpu_count() or 1))


def intervals(
    trace,
    table: str,
    wanted: Iterable[str],
    aliases: dict[str, Iterable[str]] | None = None,
    where: str = "",
    raw: dict[str, str] | None = None,
    named_by: tuple[str, str | None] | None = None,
):
    """Integer interval rows: ``start``, ``end`` and ``wanted`` integer columns as int64
    (the ids of ``IDS`` as int32 when every value fits).

    Rows whose start or end is NULL, not an integer or out of range, or whose interval is
    reversed, are left out and counted in the table's ``dropped``; a NULL or a value that is
    not an integer in another column reads as -1, a column this version lacks as -1 too,
    and so does an id out of ``ID_BOUNDS`` (those rows are counted: ``unusable_ids``).

    ``raw`` gives some of ``wanted`` as SQL expressions of integers (``rowid``). With
    ``named_by`` (the columns ``text`` and ``textId``, or None where it has none), the
    result is ``(table, (codes, names))``: the table's ``textId`` is -2 where the row's
    name is in ``text``; ``names`` are the distinct texts, digits masked (see
    ``blocks.masked``), and ``codes`` each row's index into them.
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
    try:
        blocks = rowid_blocks(trace, table)
        query = _block_query(trace, table, read, found, raw, where, named_by, bool(blocks))
        gathered = _int_columns(trace, query, blocks)
        arrays, total = gathered.columns_read(), gathered.total
        if total is None:
            total = trace.count_where(table, where) if where else trace.count(table)
    except (sqlite3.DatabaseError, OverflowError, ValueError) as exc:
        raise TraceError(trace._read_failed(table, exc)) from exc
    got = dict(zip(read, arrays))  # with ``named_by``, the names' codes come after
    rows = len(arrays[0])
    data = {c: got[c] if c in got else np.full(rows, -1, dtype=np.int64) for c in cols}
    for c in ID_BOUNDS.keys() & data.keys():
        trace._note_ids(table, c, data[c], absent=c not in got)
    data = {c: narrow(v) if c in IDS else v for c, v in data.items()}
    df = Table(data, dropped=int(total - rows))
    return (df, (arrays[-1], gathered.names)) if named_by else df


def _block_query(
    trace,
    table: str,
    read: list[str],
    found: dict[str, str | None],
    raw: dict[str, str],
    where: str,
    named_by: tuple[str, str | None] | None,
    in_blocks: bool,
) -> BlockQuery:
    """The exact and the fast query of ``read`` (``blocks.BlockQuery``), over a range of
    rowids when ``in_blocks``; ``textId`` is the name's source when ``named_by`` is given.
    The fast query is built only where the declared types keep SQLite from storing a
    number as text: INTEGER affinity for every integer column, TEXT affinity for
    ``text``."""
    declared = _declared(trace, table)
    text_col, id_col = named_by or (None, None)
    exact, fast = [], []
    for c in read:
        if c == "textId" and named_by:
            id_expr = int_expr(id_col) if id_col else "-1"
            exact.append(
                f"CASE typeof(\"{text_col}\") WHEN 'null' THEN {id_expr} "
                "WHEN 'text' THEN -2 WHEN 'blob' THEN -2 ELSE -3 END"
            )
            fast.append(f'ifnull("{id_col}", -1)' if id_col else "-1")
        elif c in raw:
            exact.append(raw[c])
            fast.append(raw[c])
        else:
            exact.append(int_expr(found[c], *BOUNDS.get(c, ())))
            null = NULL_TIME if c in ("start", "end") else -1
            fast.append(f'ifnull("{found[c]}", {null})')
    checked = [f for c, f in zip(read, fast) if c not in raw]
    typed = [found[c] for c in read if c not in raw and found.get(c)]  # textId's included
    fast_ok = all("INT" in declared.get(c, "") for c in typed) and (
        not named_by or text_affinity(declared.get(text_col, ""))
    )
    aggs = [f"group_concat({e})" for e in exact]
    fast_aggs = ["count(*)", f"max(max({', '.join(checked)}))"]
    if named_by:
        aggs.append(f"group_concat(coalesce(\"{text_col}\", ''), char(0))")
        fast_aggs += [f'count("{text_col}")', f'min("{text_col}")']
    fast_aggs += [f"group_concat({e})" for e in fast]
    if named_by:
        fast_aggs.append(f'group_concat(coalesce("{text_col}", char(1)), char(0))')
    valid = valid_interval(found["start"], found["end"])
    ranged = f" AND {trace._rowid_name(table)} BETWEEN ? AND ?" if in_blocks else ""
    exact_where = valid + (f" AND ({where})" if where else "")
    return BlockQuery(
        # NOT INDEXED: rows in rowid order, whatever index the file brings (an index on
        # start or end would let SQLite order the exact query's rows by it).
        exact=(f'SELECT {", ".join(aggs)} FROM "{table}" NOT INDEXED WHERE {exact_where}{ranged}'),
        fast=(
            f'SELECT {", ".join(fast_aggs)} FROM "{table}" NOT INDEXED WHERE ({where or 1}){ranged}'
            if fast_ok
            else None
        ),
        columns=len(read),
        text=bool(named_by),
        max_time=MAX_TIME_NS,
        bounds={k: BOUNDS[c] for k, c in enumerate(read) if c in BOUNDS},
        text_id=read.index("textId") if named_by else None,
    )


def _declared(trace, table: str) -> dict[str, str]:
    """column -> its declared type, upper case."""
    rows = trace._fetch(table, f'PRAGMA table_info("{table}")')
    return {str(r[1]): str(r[2] or "").upper() for r in rows}


def _int_columns(trace, query: BlockQuery, blocks: list[tuple[int, int]] | None) -> Gathered:
    """The columns of ``query`` (``blocks.Gathered``), read a block of ``blocks`` (rowid
    ranges, ``_rowid_blocks``) at a time or, with None, in one query; with its ``text``,
    also each row's masked name (``blocks.masked``); and the rows of the table (matching
    the caller's ``where``) before the interval test, None if a block was read exactly.

    Python's sqlite3 builds a tuple of integer objects per row, which costs more than the
    reading itself on tables of millions of rows. Instead SQLite formats each column of a
    block of rows as one comma-separated text (``group_concat`` in a single scan, so the
    columns stay aligned) that numpy parses. Blocks of rowids bound the text's size, and
    are read on one connection per core: SQLite runs without Python's lock.
    """
    capacity = None if blocks is None else sum(hi - lo + 1 for lo, hi in blocks)
    gathered = Gathered(query.columns, query.text, capacity)
    if blocks is None:
        gathered.take(query.run(trace._raw))
    elif len(blocks) <= 1 and not query.text:
        for b in blocks:
            gathered.take(query.run(trace._raw, b))
    else:
        _read_blocks(trace, query, blocks, gathered.take)
    return gathered


def _read_blocks(trace, query: BlockQuery, blocks: list[tuple[int, int]], take) -> None:
    """``take`` each block's result, in the order of ``blocks``, as it is read."""
    local = threading.local()
    opened: list[sqlite3.Connection] = []

    def read(block: tuple[int, int]) -> tuple[list, int | None]:
        if not hasattr(local, "db"):
            local.db = trace._connect(bytes)
            if hasattr(local.db, "setlimit"):  # Python 3.11+
                # A block's joined names stay under this; past it the caller reads by rows.
                local.db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_BLOCK_TEXT)
            opened.append(local.db)
        return query.run(local.db, block)

    workers = max(1, min(_READERS, len(blocks)))
    try:
        with ThreadPoolExecutor(workers, thread_name_prefix="nsysprobe-read") as pool:
            results = pool.map(read, blocks)
            try:
                for result in results:
                    take(result)
            except (KeyboardInterrupt, SystemExit) as exc:  # a signal: stop every reader
                trace._budget.interrupted = trace._budget.interrupted or exc
                raise
            finally:
                results.close()  # the blocks not yet read are not read
    finally:
        for db in opened:
            db.close()


def rowid_blocks(trace, table: str) -> list[tuple[int, int]] | None:
    """Rowid ranges of about ``_BLOCK_ROWS`` rows, or None for a table read in one query:
    no rowids, or rowids so sparse that blocks would be mostly empty."""
    rowid = trace._rowid_name(table)
    if rowid is None:
        return None
    # Two queries: SQLite answers a lone min() or max() of the rowid without a scan.
    try:
        (lo,) = trace._db.execute(f'SELECT min({rowid}) FROM "{table}"').fetchone()
        (hi,) = trace._db.execute(f'SELECT max({rowid}) FROM "{table}"').fetchone()
    except sqlite3.DatabaseError as exc:
        trace._budget.resume(exc)
        return None
    if lo is None:
        return []
    if not isinstance(lo, int) or not isinstance(hi, int):
        return None
    spans = (hi - lo) // _BLOCK_ROWS + 1
    if spans > _DENSE_SPANS and spans > 4 * (trace.count(table) // _BLOCK_ROWS + 1):
        return None
    return [(b, min(b + _BLOCK_ROWS - 1, hi)) for b in range(lo, hi + 1, _BLOCK_ROWS)]
