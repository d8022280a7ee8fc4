"""The fast query of ``nsysprobe/trace/intervals.py`` reads real exports through ADBC's SQLite
driver, and a table it cannot read exactly is read by the per-value query instead: the values
are those of a row-by-row read with Python's sqlite3 and the rules of ``intervals.intervals``,
damaged or not, whichever batch the damage is in."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from independent import query
from reliability.hostile import crafted, patch_rowid

from nsysprobe.trace import arrow, intervals
from nsysprobe.trace.nvtx import _split_rows
from nsysprobe.trace.reader import Trace

from conftest import SAMPLE_TRACES, shared_trace

MAX_TIME = 1 << 61
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
# table -> (the reader's method, its integer columns after start and end)
READS = {
    KERNEL: ("kernels", ["deviceId", "streamId", "correlationId", "globalPid"]),
    MEMCPY: ("memcpy", ["deviceId", "streamId", "correlationId", "globalPid", "bytes"]),
    RUNTIME: ("runtime", ["globalTid", "correlationId", "nameId"]),
}
BYTES_MAX = 1 << 40


def expected_rows(path, table: str, cols: list[str]) -> dict[str, list[int]]:
    """Row by row: rows with integer start and end within 2^61 of the origin, end not before
    start, in rowid order; a value that is not an integer (or ``bytes`` out of [0, 2^40]) -1."""
    rows = query(path, f"SELECT start, end, {', '.join(cols)} FROM {table} ORDER BY rowid")
    out: dict[str, list[int]] = {c: [] for c in ["start", "end", *cols]}
    for start, end, *values in rows:
        if not (isinstance(start, int) and isinstance(end, int)):
            continue
        if not (-MAX_TIME <= start <= end <= MAX_TIME):
            continue
        out["start"].append(start)
        out["end"].append(end)
        for c, v in zip(cols, values):
            ok = isinstance(v, int) and (c != "bytes" or 0 <= v <= BYTES_MAX)
            out[c].append(v if ok else -1)
    return out


def read_table(path, table: str) -> dict[str, list[int]]:
    method, cols = READS[table]
    with Trace(path) as t:
        df = getattr(t, method)()
    return {c: df[c].astype("int64").tolist() for c in ["start", "end", *cols]}


@pytest.fixture
def count_reads(monkeypatch):
    """{'fast': tables read by the fast query, 'exact': tables read per value}."""
    seen = {"fast": 0, "exact": 0}
    gather = intervals._Reader._gather

    def counted(self, exprs, where, exact=False):
        got = gather(self, exprs, where, exact)
        seen["exact" if exact else "fast"] += 1
        return got

    monkeypatch.setattr(intervals._Reader, "_gather", counted)
    return seen


@pytest.mark.parametrize(
    "path",
    [
        SAMPLE_TRACES / "h200_pinned.sqlite",
        # (``nsysprobe scrub`` declares no column types: the driver's types decide)
        SAMPLE_TRACES / "h200_tiny_layers.sqlite",
        "cs336_h100_train_nsys2023.4.sqlite",
        "nsysai_mfu_2gpu_before_nsys2026.2.sqlite",
    ],
)
def test_real_exports_are_read_by_the_fast_query(path, count_reads, monkeypatch):
    # Small batches: many of them; names from text and textId mixed.
    monkeypatch.setattr(arrow, "BATCH_ROWS", 512)
    path = path if not isinstance(path, str) else shared_trace(path)
    with Trace(path) as t:
        for table in (KERNEL, RUNTIME):
            assert read_table(path, table) == expected_rows(path, table, READS[table][1])
        t.nvtx_ranges()
    assert count_reads["fast"] >= 2 and count_reads["exact"] == 0


DAMAGE = {
    # a NULL start: the row is dropped; a NULL id reads -1
    "null-start": (KERNEL, "UPDATE {t} SET start = NULL WHERE rowid = 700"),
    "null-id": (KERNEL, "UPDATE {t} SET streamId = NULL WHERE rowid = 700"),
    # a REAL, whole or not, and one past int64, where an integer belongs
    "real": (KERNEL, "UPDATE {t} SET correlationId = 12.5 WHERE rowid = 700"),
    "real-huge": (RUNTIME, "UPDATE {t} SET nameId = 1e30 WHERE rowid = 700"),
    "real-end": (RUNTIME, "UPDATE {t} SET end = end + 0.5 WHERE rowid = 700"),
    # text and BLOBs: of digits and commas (one token more), of digits only, of a minus sign
    "text-commas": (KERNEL, "UPDATE {t} SET streamId = '1,2' WHERE rowid = 700"),
    "text-commas-and-null": (
        KERNEL,
        "UPDATE {t} SET streamId = CASE rowid WHEN 700 THEN '1,2' ELSE NULL END "
        "WHERE rowid IN (700, 701)",
    ),
    "blob-digits": (KERNEL, "UPDATE {t} SET deviceId = x'3132' WHERE rowid = 700"),
    "blob-commas": (RUNTIME, "UPDATE {t} SET correlationId = CAST('5,6' AS BLOB) WHERE rowid = 9"),
    "text-minus": (RUNTIME, "UPDATE {t} SET globalTid = '-' WHERE rowid = 700"),
    "text-empty": (RUNTIME, "UPDATE {t} SET globalTid = '' WHERE rowid = 700"),
    # reversed, too far from the origin, bytes out of bounds
    "reversed": (KERNEL, "UPDATE {t} SET end = start - 1 WHERE rowid = 700"),
    "far": (RUNTIME, f"UPDATE {{t}} SET end = {MAX_TIME + 1} WHERE rowid = 700"),
    "bytes": (MEMCPY, f"UPDATE {{t}} SET bytes = {BYTES_MAX + 1} WHERE rowid = 5"),
    "bytes-negative": (MEMCPY, "UPDATE {t} SET bytes = -4 WHERE rowid = 6"),
}


@pytest.mark.parametrize("case", list(DAMAGE))
def test_a_damaged_table_reads_as_row_by_row(case, tmp_path, monkeypatch):
    table, sql = DAMAGE[case]
    path = crafted(
        tmp_path,
        # The same table without its NOT NULL constraints (CREATE ... AS keeps the types).
        f"CREATE TABLE copied AS SELECT * FROM {table} ORDER BY rowid",
        f"DROP TABLE {table}",
        f"ALTER TABLE copied RENAME TO {table}",
        sql.format(t=table),
    )
    # The damage in the first batch (the driver infers the column's type from it), in one
    # batch of many, or in the only one.
    for rows in (1024, 256, 1 << 18):
        monkeypatch.setattr(arrow, "BATCH_ROWS", rows)
        assert read_table(path, table) == expected_rows(path, table, READS[table][1])


def test_names_from_text_and_text_id_mixed_in_a_block_and_a_text_like_null(tmp_path, count_reads):
    path = crafted(tmp_path, "UPDATE NVTX_EVENTS SET text = 'Batch ' || rowid WHERE rowid % 3 = 0")
    strings = dict(query(path, "SELECT id, value FROM StringIds"))
    by_id = [
        (r, strings[i])
        for r, i in query(path, "SELECT rowid, textId FROM NVTX_EVENTS WHERE text IS NULL")
    ]
    with Trace(path) as t:
        ranges = t.nvtx_ranges()
    patterns = dict(zip(ranges["row"].tolist(), ranges["pattern"].values().tolist()))
    assert all(patterns[r] == "Batch #" for r in patterns if r % 3 == 0)
    assert by_id and all(patterns[r] == re.sub(r"\d+", "#", name) for r, name in by_id)
    assert count_reads == {"fast": 1, "exact": 0}
    # A text of a control character (the block reader's mark of NULL once): its name.
    path = crafted(
        tmp_path,
        "UPDATE NVTX_EVENTS SET text = char(1) WHERE rowid = 1",
        base=path,
        name="null_mark.sqlite",
    )
    with Trace(path) as t:
        ranges = t.nvtx_ranges()
        (name,) = t.nvtx_names(ranges["row"][ranges["row"] == 1])
    assert name == "\\u0001"
    assert ranges["pattern"].take(ranges["row"] == 1).values().tolist() == ["\\u#"]
    assert count_reads == {"fast": 2, "exact": 0}


def test_rows_dropped_from_a_fast_block_leave_no_pattern(tmp_path, count_reads):
    path = crafted(
        tmp_path,
        "UPDATE NVTX_EVENTS SET text = 'Only a reversed range' WHERE rowid = 2",
        "UPDATE NVTX_EVENTS SET end = start - 1 WHERE rowid = 2",
    )
    with Trace(path) as t:
        ranges = t.nvtx_ranges()
    assert 2 not in ranges["row"].tolist() and len(ranges) == 79
    assert "Only a reversed range" not in ranges["pattern"].categories.tolist()
    assert ranges.dropped == 1
    assert count_reads == {"fast": 1, "exact": 0}


def _nvtx_read(path):
    with Trace(path) as t:
        ranges = t.nvtx_ranges()
        names = t.nvtx_names(ranges["row"])
    return ranges["row"].tolist(), names, ranges.dropped


def test_what_only_dropped_rows_hold_does_not_change_how_the_rest_is_read(tmp_path, monkeypatch):
    # Rows the interval test drops are in the fast query's batches, not the exact one's: a
    # NUL in their name, or long names, change neither the rows kept nor their names.
    kept = [r for (r,) in query(SAMPLE_TRACES / "h200_pinned.sqlite", NVTX_ROWIDS)]
    nul = crafted(
        tmp_path, "UPDATE NVTX_EVENTS SET text = 'x' || char(0), end = start - 1 WHERE rowid = 5"
    )
    assert _nvtx_read(nul)[0] == [r for r in kept if r != 5]
    long = crafted(
        tmp_path,
        "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) SELECT 100, 50, 59, "
        "printf('%.*c', 5000, 'a'), globalTid FROM NVTX_EVENTS LIMIT 3",
        name="long.sqlite",
    )
    rows, names, dropped = _nvtx_read(long)
    assert rows == kept and dropped == 3
    assert names == [n for r, n in sorted(_names_by_hand(long).items()) if r in kept]


NVTX_ROWIDS = "SELECT rowid FROM NVTX_EVENTS WHERE eventType IN (59, 60) ORDER BY rowid"


def _names_by_hand(path) -> dict[int, str]:
    strings = dict(query(path, "SELECT id, value FROM StringIds"))
    rows = query(path, "SELECT rowid, text, textId FROM NVTX_EVENTS")
    return {r: text if text is not None else strings[i] for r, text, i in rows}


def _ranges_as_sql_has_them(path):
    """The NVTX ranges read, checked against SQL: the rows of ``NVTX_ROWIDS``, each with its
    name (``_names_by_hand``) and that name's pattern."""
    rows = [r for (r,) in query(path, NVTX_ROWIDS)]
    names = _names_by_hand(path)
    with Trace(path) as t:
        ranges = t.nvtx_ranges()
        got = t.nvtx_names(ranges["row"])
    assert ranges["row"].tolist() == rows
    assert got == [names[r] for r in rows]
    assert ranges["pattern"].values().tolist() == [re.sub(r"\d+", "#", names[r]) for r in rows]
    return ranges


def test_an_index_the_file_brings_does_not_reorder_the_rows(tmp_path):
    # Sparse rowids: the table is read in one query, which an index on end would order; a
    # REAL where an id belongs leaves it to the exact query.
    path = crafted(
        tmp_path,
        f"UPDATE {KERNEL} SET rowid = 1000000000 WHERE rowid = 7780",
        f"UPDATE {KERNEL} SET correlationId = 1.5 WHERE rowid = 3",
        f"CREATE INDEX by_end ON {KERNEL}(end DESC)",
        "ANALYZE",
    )
    assert read_table(path, KERNEL) == expected_rows(path, KERNEL, READS[KERNEL][1])


def test_a_number_in_a_text_column_is_read_as_the_exact_query_reads_it(tmp_path, monkeypatch):
    # A schema edited after the rows were written: ``text`` declared TEXT holds a number.
    path = crafted(
        tmp_path,
        "PRAGMA writable_schema = ON",
        "UPDATE sqlite_master SET sql = replace(sql, 'text                        TEXT', "
        "'text                        BLOB') WHERE name = 'NVTX_EVENTS'",
    )
    # Each step on a fresh connection: SQLite reads the edited schema when it opens the file.
    path = crafted(
        tmp_path, "UPDATE NVTX_EVENTS SET text = 12345 WHERE rowid = 3", base=path, name="b.sqlite"
    )
    path = crafted(
        tmp_path,
        "PRAGMA writable_schema = ON",
        "UPDATE sqlite_master SET sql = replace(sql, 'text                        BLOB', "
        "'text                        TEXT') WHERE name = 'NVTX_EVENTS'",
        base=path,
        name="c.sqlite",
    )
    assert [r[2] for r in query(path, "PRAGMA table_info(NVTX_EVENTS)") if r[1] == "text"] == [
        "TEXT"
    ]
    got = _nvtx_read(path)
    monkeypatch.setattr(intervals._Reader, "fast_first", False)
    assert got == _nvtx_read(path)
    assert any(n.startswith("12345") for n in got[1])  # the number, as its text


@pytest.mark.parametrize("keep_every", [1, 3, 10])
def test_rowids_with_holes_read_as_row_by_row(keep_every, tmp_path, monkeypatch):
    # The batches' columns go into arrays sized by the table's row count: with most rowids
    # missing, the rows read must still be the table's, in order, and no more.
    path = crafted(
        tmp_path,
        *(f"DELETE FROM {t} WHERE rowid % {keep_every} != 1 % {keep_every}" for t in READS),
        "DELETE FROM NVTX_EVENTS WHERE rowid % 7 != 0",
    )
    monkeypatch.setattr(arrow, "BATCH_ROWS", 64)
    for table in READS:
        assert read_table(path, table) == expected_rows(path, table, READS[table][1])
    rows = query(
        path,
        "SELECT rowid FROM NVTX_EVENTS WHERE eventType IN (59, 60) AND typeof(start) = 'integer'"
        " AND typeof(end) = 'integer' AND end >= start ORDER BY rowid",
    )
    with Trace(path) as t:
        ranges = t.nvtx_ranges()
        assert ranges["row"].tolist() == [r for (r,) in rows]
        names = t.nvtx_names(ranges["row"].tolist())
    assert ranges["pattern"].values().tolist() == [re.sub(r"\d+", "#", n) for n in names]


def _recorded_reads(monkeypatch, batch_rows: int) -> list[str]:
    """Reads on two cores, in batches of ``batch_rows``; the SQL of every read, in order."""
    monkeypatch.setattr(arrow, "READERS", 2)
    monkeypatch.setattr(arrow, "BATCH_ROWS", batch_rows)
    seen: list[str] = []
    batches = arrow.Driver.batches

    def recorded(self, sql, rows):
        seen.append(sql)
        return batches(self, sql, rows)

    monkeypatch.setattr(arrow.Driver, "batches", recorded)
    return seen


@pytest.fixture
def halves(monkeypatch):
    """Tables of more than 64 rows read in two halves (``intervals._Reader._halves``); the
    SQL of every read, in order."""
    monkeypatch.setattr(intervals, "SPLIT_ROWS", 64)
    return _recorded_reads(monkeypatch, 128)


@pytest.mark.parametrize("damage", [None, 100, 5000], ids=["whole", "first-half", "second-half"])
@pytest.mark.parametrize("table", [KERNEL, RUNTIME])
def test_a_table_read_in_two_halves_reads_as_row_by_row(table, damage, tmp_path, halves):
    # A REAL where an id belongs, in either half, leaves the table to the exact query; a hole
    # in the rowids puts more rows in one half than in the other.
    sql = [f"DELETE FROM {table} WHERE rowid BETWEEN 300 AND 2000"]
    if damage:
        sql.append(f"UPDATE {table} SET correlationId = 12.5 WHERE rowid = {damage}")
    path = crafted(tmp_path, *sql)
    assert read_table(path, table) == expected_rows(path, table, READS[table][1])
    read = [q for q in halves if f'FROM "{table}"' in q]
    assert any("rowid >=" in q for q in read)
    # Undamaged, the halves are the only read; damaged, the exact query reads it whole.
    assert ("typeof" in read[-1]) == bool(damage) and ("rowid" in read[-1]) != bool(damage)


def test_the_first_half_failing_stops_the_second(tmp_path, halves, monkeypatch):
    # 250,000 kernels in batches of 64: a REAL in the first row fails the first half at once;
    # the second stops at its next batch instead of reading its ~1,900 batches.
    monkeypatch.setattr(arrow, "BATCH_ROWS", 64)
    path = crafted(
        tmp_path,
        *[f"INSERT INTO {KERNEL} SELECT * FROM {KERNEL}"] * 5,
        f"UPDATE {KERNEL} SET correlationId = 0.5 WHERE rowid = 1",
    )
    yielded: dict[str, int] = {}
    batches = arrow.Driver.batches

    def counted(self, sql, rows):
        for batch in batches(self, sql, rows):
            yielded[sql] = yielded.get(sql, 0) + 1
            yield batch

    monkeypatch.setattr(arrow.Driver, "batches", counted)
    assert read_table(path, KERNEL) == expected_rows(path, KERNEL, READS[KERNEL][1])
    (second,) = [n for q, n in yielded.items() if "rowid >=" in q]
    assert second < 1900 / 4, second


@pytest.mark.parametrize("holes", [False, True], ids=["rowids-in-a-run", "rowids-with-holes"])
def test_a_tree_whose_halves_miss_rows_is_read_whole(tmp_path, halves, holes):
    # A rowid of the first half's leaves made larger than the middle: a whole scan walks every
    # leaf, but the first half's seek stops at it. Rowids in a run (the least and the largest
    # are found by seeks, which miss the damage): the halves are read, and the first reads
    # fewer rows than it holds. With holes: SQLite counts each half's rows, and the counts do
    # not add up to the table's. Either way it is read whole, the rows of a whole read.
    path = crafted(tmp_path, *([f"DELETE FROM {KERNEL} WHERE rowid = 1000"] if holes else []))
    patch_rowid(path, KERNEL, 190, 5000)
    assert query(path, f"SELECT min(rowid), max(rowid) FROM {KERNEL}")[0] == (1, 7780)
    assert read_table(path, KERNEL) == expected_rows(path, KERNEL, READS[KERNEL][1])
    read = [q for q in halves if f'FROM "{KERNEL}"' in q]
    assert "rowid" not in read[-1]  # the last read is whole
    assert any("rowid <" in q for q in read) != holes


def test_an_nvtx_tree_whose_halves_miss_rows_is_read_whole(tmp_path, halves):
    # The same damage in the NVTX ranges, whose read leaves out marks (eventType 34): the
    # halves read every row (the marks named apart), so a half that reads fewer rows than it
    # holds is seen, and the table is read whole.
    path = crafted(
        tmp_path,
        *["INSERT INTO NVTX_EVENTS SELECT * FROM NVTX_EVENTS"] * 3,  # 640 rows
        "UPDATE NVTX_EVENTS SET eventType = 34 WHERE rowid % 4 = 0",
    )
    patch_rowid(path, "NVTX_EVENTS", 190, 600)
    # (A whole scan, in the tree's order; two rows now hold rowid 600: names by scan.)
    scan = query(
        path,
        "SELECT e.rowid, coalesce(e.text, s.value) FROM NVTX_EVENTS AS e "
        "LEFT JOIN StringIds AS s ON s.id = e.textId WHERE e.eventType IN (59, 60)",
    )
    with Trace(path) as t:
        ranges = t.nvtx_ranges()
    assert ranges["row"].tolist() == [r for r, _ in scan] and len(scan) > 64
    patterns = [re.sub(r"\d+", "#", text) for _, text in scan]
    assert ranges["pattern"].values().tolist() == patterns
    read = [q for q in halves if "NVTX_EVENTS" in q]
    assert any("rowid <" in q for q in read) and "rowid" not in read[-1].split("WHERE")[-1]


def test_a_table_without_rowids_is_read_whole(tmp_path, halves):
    path = crafted(
        tmp_path,
        "CREATE TABLE copied (start INTEGER, end INTEGER, deviceId INTEGER, streamId INTEGER, "
        "correlationId INTEGER PRIMARY KEY, globalPid INTEGER, shortName INTEGER) WITHOUT ROWID",
        f"INSERT INTO copied SELECT start, end, deviceId, streamId, correlationId, globalPid, "
        f"shortName FROM {KERNEL}",
        f"DROP TABLE {KERNEL}",
        f"ALTER TABLE copied RENAME TO {KERNEL}",
    )
    got = read_table(path, KERNEL)
    rows = query(path, f"SELECT start, end, correlationId FROM {KERNEL}")
    assert len(got["start"]) == len(rows) > 64
    assert sorted(zip(got["start"], got["end"], got["correlationId"])) == sorted(rows)


def test_split_reads_keep_one_connection(tmp_path, halves):
    # The second half's thread closes its connection: an open export read again and again
    # holds the reading thread's connection only.
    with Trace(SAMPLE_TRACES / "h200_pinned.sqlite") as t:
        for _ in range(5):
            t.kernels()
        assert len(t._arrow._opened) == 1
    assert sum("rowid >=" in q for q in halves) == 5


def test_nvtx_read_in_two_halves_keeps_each_rows_name(tmp_path, halves):
    # Rows of the first half that are not ranges (marks) are read, named apart, and left out
    # after. Names from text and from textId in both halves; a name first seen in the second
    # half.
    (count,) = query(SAMPLE_TRACES / "h200_pinned.sqlite", "SELECT max(rowid) FROM NVTX_EVENTS")[0]
    middle = count // 2
    path = crafted(
        tmp_path,
        f"UPDATE NVTX_EVENTS SET eventType = 34 WHERE rowid % 4 = 0 AND rowid < {middle}",
        "UPDATE NVTX_EVENTS SET text = 'Batch ' || rowid WHERE rowid % 3 = 0",
        f"UPDATE NVTX_EVENTS SET text = 'Late ' || rowid WHERE rowid > {middle + 5}",
    )
    ranges = _ranges_as_sql_has_them(path)
    assert "Late #" in ranges["pattern"].values().tolist()
    assert sum("rowid >=" in q for q in halves if "NVTX_EVENTS" in q) == 1


# The tables read beside the NVTX ranges, each cut to its first rows (h200_pinned: 80 ranges).
BESIDE = [
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "OSRT_API",
    "PROFILER_OVERHEAD",
]


@pytest.mark.parametrize(
    ("kept", "split"),
    [(10, True), (13, True), (14, False), (None, False)],
    ids=["60-beside", "78-beside", "84-beside", "all-beside"],
)
def test_nvtx_ranges_outnumbering_the_other_tables_are_read_in_halves(
    kept, split, tmp_path, monkeypatch
):
    # Batches of 16 rows. The 80 ranges are read in halves where the six other event tables
    # hold fewer rows together (6 x 13 = 78), and whole where they hold as many or more (5 x 14
    # and the 13 of PROFILER_OVERHEAD = 83, or the whole export's 23,803); the rows and names
    # read are those SQL has either way.
    seen = _recorded_reads(monkeypatch, 16)
    cut = [f"DELETE FROM {t} WHERE rowid > {kept}" for t in BESIDE] if kept else []
    path = crafted(tmp_path, *cut)
    beside = sum(query(path, f"SELECT count(*) FROM {t}")[0][0] for t in BESIDE)
    (ranges,) = query(path, "SELECT count(*) FROM NVTX_EVENTS")[0]
    assert ranges == 80 and (beside < ranges) == split
    _ranges_as_sql_has_them(path)
    read = [q for q in seen if '"NVTX_EVENTS"' in q]
    assert sum("rowid >=" in q for q in read) == int(split)


def test_a_table_beside_the_nvtx_ranges_counts_its_span_of_rowids(tmp_path, monkeypatch):
    # Rows are counted by the span of their rowids (no scan): 10 kernels with rowids 1-5 and
    # 7,776-7,780 count as 7,780, and the ranges are read whole.
    monkeypatch.setattr(arrow, "READERS", 2)
    monkeypatch.setattr(arrow, "BATCH_ROWS", 16)
    cut = [f"DELETE FROM {t} WHERE rowid > 10" for t in BESIDE[1:]]
    path = crafted(tmp_path, *cut, f"DELETE FROM {BESIDE[0]} WHERE rowid BETWEEN 6 AND 7775")
    with Trace(path) as t:
        assert _split_rows(t) == 7780 + 5 * 10


def test_more_rows_than_the_table_counts_is_a_one_line_error(tmp_path, monkeypatch):
    # The driver runs no progress handler: a file whose pages loop would return rows without
    # end. A read stops past the table's row count (counted on the budgeted sqlite3
    # connection); here the count is made one short of the kernels' rows.
    from nsysprobe.errors import TraceError

    path = SAMPLE_TRACES / "h200_pinned.sqlite"
    (rows,) = query(path, f"SELECT count(*) FROM {KERNEL}")[0]
    counted = Trace.count
    monkeypatch.setattr(Trace, "count", lambda self, t: counted(self, t) - (t == KERNEL))
    with Trace(path) as t, pytest.raises(TraceError) as error:
        t.kernels()
    message = str(error.value)
    assert "\n" not in message and f"reading {KERNEL} failed" in message
    assert f"more rows than the table's {rows - 1}" in message


@pytest.mark.parametrize("split_rows", [1 << 40, 1000], ids=["whole", "halves"])
def test_a_signal_stops_every_table_read_at_once(split_rows, tmp_path, monkeypatch):
    # Two tables of 250,000 rows read together in batches of 64 rows (each in two halves at
    # once, or whole); a SIGALRM raising KeyboardInterrupt lands while the driver reads: the
    # call raises it, each reader stops at its next batch (far sooner than the whole read),
    # and none is left running.
    import time

    monkeypatch.setattr(arrow, "BATCH_ROWS", 64)
    monkeypatch.setattr(arrow, "READERS", 2)
    monkeypatch.setattr(intervals, "SPLIT_ROWS", split_rows)
    path = crafted(
        tmp_path,
        *[f"INSERT INTO {KERNEL} SELECT * FROM {KERNEL}"] * 5,
        *[f"INSERT INTO {RUNTIME} SELECT * FROM {RUNTIME}"] * 4,
    )

    began = time.monotonic()
    with Trace(path) as t:
        whole = t.read_together({"kernels": t.kernels, "runtime": t.runtime})
    whole_s = time.monotonic() - began
    assert len(whole["kernels"]) == 7780 * 32

    took = _interrupted(
        path, lambda t: t.read_together({"kernels": t.kernels, "runtime": t.runtime}), whole_s / 10
    )
    assert took < whole_s / 2, whole_s


def _interrupted(path, read, after_s: float) -> float:
    """Seconds ``read(trace)`` of ``path`` took to raise the KeyboardInterrupt a SIGALRM
    raises ``after_s`` into it; no reading thread left after."""
    import signal
    import threading
    import time

    def ring(*_):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, after_s)
    began = time.monotonic()
    try:
        with Trace(path) as t, pytest.raises(KeyboardInterrupt):
            read(t)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert not [th for th in threading.enumerate() if th.name.startswith("nsysprobe-read")]
    return time.monotonic() - began


@pytest.mark.parametrize("split_rows", [1 << 40, 1000], ids=["tables", "halves"])
def test_a_second_signal_while_the_reads_stop_waits_for_them(split_rows, tmp_path, monkeypatch):
    # Ctrl-C twice: the first stops the reads (each at its next batch), the second lands in
    # each wait for them (the tables', the halves', and the pool's shutdown after). The export
    # is closed only after its reads (with a statement still open, closing it was an internal
    # error, exit 70: RuntimeError here), and the call ends as interrupted. Batches of 64
    # rows, 10 ms apart.
    import signal
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor

    from nsysprobe.common import ahead

    monkeypatch.setattr(arrow, "BATCH_ROWS", 64)
    monkeypatch.setattr(arrow, "READERS", 2)
    monkeypatch.setattr(intervals, "SPLIT_ROWS", split_rows)
    batches = arrow.Driver.batches

    def slow(self, sql, rows):
        for batch in batches(self, sql, rows):
            yield batch
            time.sleep(0.01)

    monkeypatch.setattr(arrow.Driver, "batches", slow)
    signalled: list[str] = []

    def interrupted_once(name, wait, before=None):
        def wait_or_raise(*args, **kwargs):
            if name not in signalled:
                signalled.append(name)
                if before is not None:
                    before(*args)  # (the shutdown's own start: its workers told to end)
                raise KeyboardInterrupt
            return wait(*args, **kwargs)

        return wait_or_raise

    wait = interrupted_once("wait", getattr(ahead, "wait_for", None))  # (None before it)
    monkeypatch.setattr(ahead, "wait_for", wait, raising=False)
    real = ThreadPoolExecutor.shutdown
    shutdown = interrupted_once("shutdown", real, lambda pool: real(pool, wait=False))
    monkeypatch.setattr(ThreadPoolExecutor, "shutdown", shutdown)
    path = crafted(tmp_path, *[f"INSERT INTO {RUNTIME} SELECT * FROM {RUNTIME}"] * 2)

    def ring(*_):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, 0.1)
    try:
        with Trace(path) as t, pytest.raises(KeyboardInterrupt):
            t.read_together({"kernels": t.kernels, "runtime": t.runtime})
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert "shutdown" in signalled
    for thread in threading.enumerate():
        if thread.name.startswith("nsysprobe-read"):
            thread.join(5)
            assert not thread.is_alive()


def test_a_read_near_the_budgets_end_ends_as_a_whole_read(halves, monkeypatch):
    # The halves' counts are work too: a read is split only where the budget left holds
    # several times the read and the counts, so whatever the budget, the read ends as a whole
    # read does (its rows, or the one-line error), and with room it is split.
    from nsysprobe.errors import TraceError
    from nsysprobe.trace import connection

    monkeypatch.setattr(connection, "OPS_PER_CHECK", 1)
    monkeypatch.setattr(connection, "_OPS_PER_BYTE", 0)

    def outcome(split_rows: int, ops: int):
        monkeypatch.setattr(intervals, "SPLIT_ROWS", split_rows)
        monkeypatch.setattr(connection, "_MIN_OPS", ops)
        try:
            with Trace(SAMPLE_TRACES / "h200_pinned.sqlite") as t:
                return t.kernels()["start"].tolist()
        except TraceError as error:
            return str(error)

    budgets = range(0, 800_000, 20_000)
    whole = [outcome(1 << 60, ops) for ops in budgets]
    assert [outcome(64, ops) for ops in budgets] == whole
    assert isinstance(whole[0], str) and isinstance(whole[-1], list)
    assert any("rowid >=" in q for q in halves)  # (split where the budget had room)


def test_a_signal_while_waiting_for_the_second_half_stops_it(tmp_path, monkeypatch):
    # Read on the main thread (a library call): the first half is one row (its rowid moved far
    # below the rest), so the signal lands while the second half's 250,000 rows are read, in
    # batches of 64. It is raised at once, the second half stops at its next batch.
    import time

    monkeypatch.setattr(arrow, "BATCH_ROWS", 64)
    monkeypatch.setattr(arrow, "READERS", 2)
    monkeypatch.setattr(intervals, "SPLIT_ROWS", 1000)
    path = crafted(
        tmp_path,
        *[f"INSERT INTO {KERNEL} SELECT * FROM {KERNEL}"] * 5,
        f"UPDATE {KERNEL} SET rowid = -4611686018427387904 WHERE rowid = 1",
    )
    began = time.monotonic()
    with Trace(path) as t:
        assert len(t.kernels()) == 7780 * 32
    whole_s = time.monotonic() - began

    assert _interrupted(path, lambda t: t.kernels(), whole_s / 10) < whole_s / 2, whole_s


@pytest.mark.parametrize("fast_first", [True, False])
def test_a_text_id_of_any_value_is_an_id(tmp_path, monkeypatch, fast_first):
    # Where a name is (``text`` or ``textId``) is a column of its own: a stored textId of -2
    # or -3, once the reader's marks of "name in text", is an id like any other, and the
    # pattern agrees with the name.
    monkeypatch.setattr(intervals._Reader, "fast_first", fast_first)
    path = crafted(
        tmp_path,
        "UPDATE NVTX_EVENTS SET textId = -2 WHERE rowid = 5",
        "UPDATE NVTX_EVENTS SET textId = -3 WHERE rowid = 6",
        "INSERT INTO StringIds (id, value) VALUES (-3, 'Negative 3')",
    )
    assert query(path, "SELECT count(*) FROM NVTX_EVENTS WHERE rowid IN (5, 6) AND text IS NULL")[
        0
    ] == (2,)
    with Trace(path) as t:
        ranges = t.nvtx_ranges()
        rows = ranges["row"].tolist()
        names = dict(zip(rows, t.nvtx_names(rows)))
        patterns = dict(zip(rows, ranges["pattern"].values().tolist()))
    assert (names[5], patterns[5]) == ("<unknown>", "<unknown>")
    assert (names[6], patterns[6]) == ("Negative 3", "Negative #")


@pytest.mark.parametrize(
    ("offsets", "falls"),
    [
        ([0, 5, 2_000_000_000, -2_044_967_296, 205_032_704], True),  # past 4 GiB: positive
        ([0, 5, 2_000_000_000, -2_044_967_296, -2_000_000_000], True),  # past 2 GiB
        ([-4, 0, 2, 2, 7], True),
        ([0, 3, 3, 7, 12], False),
    ],
    ids=["wrapped-twice", "wrapped", "negative-start", "rising"],
)
def test_a_batch_of_names_whose_offsets_fall_is_a_read_error(offsets, falls):
    # The driver (1.13) lets a batch's 32-bit binary offsets wrap past 2 GiB of names (the
    # offsets a hostile review read back from 18 names of 250 MB); past 4 GiB they are
    # positive again, and the names would be read out of their buffer. Offsets that fall
    # fail the read (the reader then reads the table another way); rising ones are the names.
    # (Buffers made here: 4 GiB of names is no test for this machine.)
    import ctypes

    import numpy as np

    values = np.array(offsets, np.int32)
    data = np.frombuffer(b"abcdefghijkl", np.uint8)
    pointers = (ctypes.c_void_p * 3)(None, values.ctypes.data, data.ctypes.data)
    array = arrow._Array(length=4, offset=0, n_buffers=3)
    array.buffers = ctypes.cast(pointers, ctypes.POINTER(ctypes.c_void_p))
    column = arrow.Column(array, arrow.BINARY, 0, 4)
    if falls:
        with pytest.raises(arrow.ArrowReadError, match="over 2 GiB"):
            column.binary()
        return
    got, text = column.binary()
    assert got.tolist() == offsets and text.tobytes() == b"abcdefghijkl"


def test_the_batches_are_read_without_pyarrow_or_nanoarrow():
    # The driver's C stream is read through ctypes: a table of more rows than PYARROW_ROWS
    # imports neither (pyarrow is ~30 ms and ~35 MB of a small analysis), and reads every row;
    # only its NVTX names, dictionary-encoded, import pyarrow.
    path = SAMPLE_TRACES / "h200_baseline.sqlite"
    script = (
        "import sys\n"
        "from nsysprobe.trace import arrow\n"
        "from nsysprobe.trace.reader import Trace\n"
        "arrow.PYARROW_ROWS = 4\n"
        "with Trace(sys.argv[1]) as t:\n"
        "    kernels = t.kernels()\n"
        "    print(len(kernels), [m for m in ('pyarrow', 'nanoarrow') if m in sys.modules])\n"
        "    t.nvtx_ranges()\n"
        "    print('pyarrow' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, check=True
    )
    (n,) = query(path, f"SELECT count(*) FROM {KERNEL} WHERE end >= start")[0]
    assert n > 4
    assert done.stdout.splitlines() == [f"{n} []", "True"]


@pytest.mark.parametrize("encode_rows", [0, 1 << 40], ids=["pyarrow", "dict"])
def test_names_are_encoded_alike_by_pyarrow_and_by_a_dict(encode_rows, tmp_path, monkeypatch):
    # A large table's names are dictionary-encoded by pyarrow, a small one's by a dict: each
    # row's name and the order of
    # the distinct names are those of a row-by-row read, in every batch (8 rows a batch),
    # whatever bytes a name holds.
    monkeypatch.setattr(arrow, "BATCH_ROWS", 8)
    monkeypatch.setattr(arrow, "PYARROW_ROWS", encode_rows)
    path = crafted(
        tmp_path,
        "UPDATE NVTX_EVENTS SET text = 'Batch ' || rowid || char(233) WHERE rowid % 3 = 0",
        "UPDATE NVTX_EVENTS SET text = CAST(x'ff00' AS TEXT) || rowid WHERE rowid % 7 = 0",
        "UPDATE NVTX_EVENTS SET text = '' WHERE rowid = 11",
    )
    rows = query(
        path,
        "SELECT typeof(text), CAST(text AS BLOB) FROM NVTX_EVENTS "
        "WHERE eventType IN (59, 60) AND end >= start ORDER BY rowid",
    )
    digits = bytes.maketrans(b"123456789", b"000000000")
    expected = [(b if kind in ("text", "blob") else b"").translate(digits) for kind, b in rows]
    with Trace(path) as t:
        _, (codes, names, _) = intervals.intervals(
            t,
            "NVTX_EVENTS",
            ["globalTid"],
            where="eventType IN (59, 60)",
            named_by=("text", "textId"),
        )
    assert [names[c] for c in codes.tolist()] == expected
    assert names == list(dict.fromkeys(expected))
    assert len(names) == 5 and len(expected) > 3 * 8


@pytest.mark.parametrize("rowid", [7000, 20], ids=["second-half", "first-half"])
def test_one_id_beyond_32_bits_in_either_half_reads_the_column_wide(tmp_path, halves, rowid):
    # Ids are read into int32 arrays; one that does not fit, in a late batch of either half,
    # has the table read again in int64: every value as SQLite holds it, none cut to 32 bits.
    path = crafted(
        tmp_path, f"UPDATE {KERNEL} SET correlationId = {(1 << 40) + 7} WHERE rowid = {rowid}"
    )
    assert read_table(path, KERNEL) == expected_rows(path, KERNEL, READS[KERNEL][1])
    with Trace(path) as t:
        kernels = t.kernels()
    assert kernels["correlationId"].dtype == "int64" and kernels["streamId"].dtype == "int32"
    assert (1 << 40) + 7 in kernels["correlationId"].tolist()


@pytest.mark.parametrize("split_rows", [1 << 40, 64], ids=["whole", "halves"])
@pytest.mark.parametrize(
    "damage",
    [
        ["UPDATE NVTX_EVENTS SET domainId = 'x' WHERE eventType = 34"],
        ["UPDATE NVTX_EVENTS SET start = 1.5, end = NULL WHERE eventType = 34"],
        ["UPDATE NVTX_EVENTS SET text = 12 WHERE eventType = 34"],
        ["UPDATE NVTX_EVENTS SET text = '-' WHERE rowid % 3 = 0"],
        ["UPDATE NVTX_EVENTS SET eventType = 'abc' WHERE rowid % 5 = 2"],
    ],
    ids=["text-domain", "real-start", "number-name", "dash-name", "text-type"],
)
def test_rows_the_nvtx_condition_leaves_out_never_change_the_ranges(
    tmp_path, monkeypatch, damage, split_rows
):
    # The fast NVTX read takes every row and leaves out those that are not ranges itself
    # (marks here, every fourth row): whatever those rows hold (a TEXT id, a REAL start, a
    # number for a name) and whatever names the ranges have ("-", the name the left-out
    # rows are given inside the read), the ranges are those SQL selects, with their names.
    monkeypatch.setattr(arrow, "READERS", 2)
    monkeypatch.setattr(intervals, "SPLIT_ROWS", split_rows)
    path = crafted(
        tmp_path,
        *["INSERT INTO NVTX_EVENTS SELECT * FROM NVTX_EVENTS"] * 3,  # 640 rows
        "UPDATE NVTX_EVENTS SET eventType = 34 WHERE rowid % 4 = 0",
        *damage,
    )
    ranges = _ranges_as_sql_has_them(path)
    assert 100 < len(ranges) < 640 and ranges.dropped == 0
