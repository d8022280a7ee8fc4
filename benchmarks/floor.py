"""The raw-read floor: the least any analysis of an export must do, done plainly.

For every event table ``nsysprobe analyze`` reads, fetch the integer columns it reads (the
lists below) with Python's sqlite3 into numpy (``np.fromiter`` over the cursor into one
structured array per table, no per-row objects kept), then the union of the GPU work
(kernels, copies, memsets, graph replays) on the report's clock: sort by start, merge with a
running maximum of the ends. NVTX names are not read (nsysprobe reads them as text; the
floor stops at their ids). Prints the row count, the GPU busy time and the union's interval
count as JSON, so a run can be checked.

    python benchmarks/floor.py EXPORT.sqlite            # Python's sqlite3, row by row
    python benchmarks/floor.py --arrow EXPORT.sqlite    # ADBC's SQLite driver, as Arrow

``--arrow`` is the second floor: the same queries read by ADBC's SQLite driver into Arrow
record batches (one stream per table, one thread, 65,536 rows a batch as nsysprobe reads), and
each column to numpy from its buffers (one copy, joining the batches). Not ``to_numpy``: it
imports pandas where pandas is installed, ~50 MB of the peak that is no part of the read
(the figures of 2026-12-05 10:53 UTC in ``benchmarks/README.md`` were measured with it).

``scale.py`` runs it in a fresh process beside each ``nsysprobe analyze`` and reports both.
"""

from __future__ import annotations

import json
import sqlite3
import sys

import numpy as np

GPU_OP = ["start", "end", "deviceId", "streamId", "correlationId", "globalPid"]
# table -> the columns nsysprobe's reader takes from it (nsysprobe/trace/)
TABLES = {
    "CUPTI_ACTIVITY_KIND_KERNEL": [*GPU_OP, "shortName"],
    "CUPTI_ACTIVITY_KIND_MEMCPY": [*GPU_OP, "bytes", "copyKind", "srcKind", "dstKind"],
    "CUPTI_ACTIVITY_KIND_MEMSET": [*GPU_OP, "bytes", "memKind"],
    "CUPTI_ACTIVITY_KIND_GRAPH_TRACE": GPU_OP,
    "CUPTI_ACTIVITY_KIND_RUNTIME": ["start", "end", "globalTid", "correlationId", "nameId"],
    "CUPTI_ACTIVITY_KIND_DRIVER": ["start", "end", "globalTid", "correlationId", "nameId"],
    "OSRT_API": ["start", "end", "globalTid", "nameId"],
    "NVTX_EVENTS": ["start", "end", "globalTid", "domainId", "textId"],
    "PROFILER_OVERHEAD": ["start", "end", "globalTid"],
}
GPU = list(TABLES)[:4]


def _sqlite3_read(db, sql: str, cols: list[str]) -> dict[str, np.ndarray]:
    dtype = np.dtype([(c, np.int64) for c in cols])
    pairs = np.fromiter(db.execute(sql), dtype=dtype)
    return {c: pairs[c] for c in cols}


def _arrow_reader(path: str):
    import adbc_driver_manager
    import adbc_driver_sqlite
    import pyarrow as pa

    conn = adbc_driver_manager.AdbcConnection(adbc_driver_sqlite.connect(f"file:{path}?mode=ro"))

    def read(sql: str, cols: list[str]) -> dict[str, np.ndarray]:
        statement = adbc_driver_manager.AdbcStatement(conn)
        statement.set_options(**{"adbc.sqlite.query.batch_rows": str(1 << 16)})
        statement.set_sql_query(sql)
        handle, _ = statement.execute_query()
        table = pa.RecordBatchReader._import_from_c(handle.address).read_all()
        statement.close()
        return {c: _int64(table.column(k)) for k, c in enumerate(cols)}

    return read


def _int64(column) -> np.ndarray:
    """An Arrow int64 column without nulls (every value is ``ifnull``-ed) as one array."""
    parts = [
        np.frombuffer(c.buffers()[1], np.int64, count=c.offset + len(c))[c.offset :]
        for c in column.chunks
        if len(c)
    ]
    return np.concatenate(parts) if parts else np.empty(0, np.int64)


def read(path: str, arrow: bool = False) -> dict[str, object]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    fetch = _arrow_reader(path) if arrow else lambda sql, cols: _sqlite3_read(db, sql, cols)
    present = {n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    rows = 0
    gpu = []
    for table, wanted in TABLES.items():
        if table not in present:
            continue
        have = {r[1] for r in db.execute(f"PRAGMA table_info({table})")}
        cols = [c for c in wanted if c in have]
        where = " WHERE eventType IN (59, 60) AND end IS NOT NULL" if table == "NVTX_EVENTS" else ""
        # NULL ids read as -1, as nsysprobe reads them.
        sql = f"SELECT {', '.join(f'ifnull({c}, -1)' for c in cols)} FROM {table}{where}"
        pairs = fetch(sql, cols)
        rows += pairs["start"].size
        if table in GPU:
            gpu.append(pairs)
    db.close()
    busy, intervals = 0, 0
    if gpu:
        s = np.concatenate([p["start"] for p in gpu])
        e = np.concatenate([p["end"] for p in gpu])
        order = np.argsort(s, kind="stable")
        s, e = s[order], e[order]
        reach = np.maximum.accumulate(e)
        new = np.ones(s.size, dtype=bool)
        new[1:] = s[1:] > reach[:-1]
        first = np.flatnonzero(new)
        last = np.r_[first[1:] - 1, s.size - 1]
        busy = int((reach[last] - s[first]).sum())
        intervals = int(first.size)
    return {"rows": rows, "gpu_busy_ns": busy, "busy_intervals": intervals}


if __name__ == "__main__":
    args = sys.argv[1:]
    print(json.dumps(read(args[-1], arrow="--arrow" in args)))
