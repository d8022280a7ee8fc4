"""Reading a query's rows as Arrow record batches, through ADBC's SQLite driver.

The Apache Arrow project's ADBC driver for SQLite (``adbc-driver-sqlite``) steps the query in C
and appends each value to Arrow buffers: no Python object per row or value. The batches come
through the Arrow C stream interface, and each column's buffers are viewed as numpy arrays
(``Column``, a nanoarrow array). A table of up to ``PYARROW_ROWS`` rows is streamed by
nanoarrow (the Arrow project's small C library, 4 MB, imported in ~15 ms; pyarrow takes ~90
ms, which was a quarter of the analysis of the smallest sample trace); a larger one by
pyarrow, which lets go of Python's lock while the driver fills a batch, so two tables are
read at once on two cores (nanoarrow keeps the lock: two reads of 16 M NVTX rows at once
took 8.9 s against 4.4 s for one, and 4.4 s through pyarrow). Its types are
inferred from the first batch (``BATCH_ROWS`` rows): a later value of another type fails the
read ("Type mismatch"), and a first batch mixing integers and REALs reads as double. The
caller checks each batch's column types and reads again exactly when a column comes back as
another (``intervals``).

What the driver does not do, done here between batches (``Driver``'s ``charge``):

- the work budget: the driver runs no progress handler, so each batch is charged to the
  export's budget (``connection.WorkBudget.charge``: ``OPS_PER_VALUE`` VM steps a value read,
  about what SQLite's own steps of a plain scan are), and a read may return at most ``rows``
  rows (the table's row count, which the budgeted ``sqlite3`` connection counted): a damaged
  file whose pages loop returns more, and is stopped;
- signals: Python runs Ctrl-C's handler between two batches (one batch is milliseconds), and a
  signal the budget kept while ``sqlite3`` worked stops the read there too.

The driver opens the same read-only URI as ``sqlite3`` (``mode=ro``, ``immutable=1`` or the
private copy of a WAL export) and reads only the SQL the reader builds: plain tables by name.
nanoarrow and the driver are imported on the first read (pyarrow on that of a large table), so
``nsysprobe --version`` and the command line's help never load them.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator

import numpy as np

# Rows per batch: large enough that the driver's per-batch work is negligible, small enough
# that a signal waits milliseconds and a batch's buffers stay small beside the columns read.
BATCH_ROWS = 1 << 16
# Tables of more rows than this are streamed by pyarrow, and their NVTX names
# dictionary-encoded by it (``intervals._masked``); smaller ones never import it.
PYARROW_ROWS = 1 << 17
# Reads at once, each on a core of its own (``Trace.read_together``; a large table's two
# halves, ``intervals``): pyarrow lets go of Python's lock while the driver fills a batch.
READERS = max(1, min(2, os.cpu_count() or 1))
# Arrow format strings of the column types the readers take (the C data interface's).
INT64, NULL, BINARY = "l", "n", "z"
# VM steps charged to the work budget for each value a batch holds (a column of a plain
# scan is one step; a row's own steps are counted as one more value).
OPS_PER_VALUE = 1


class ArrowReadError(Exception):
    """The driver could not read the query (the export is damaged, or a column holds a type
    the caller did not ask for)."""


class TooManyRows(ArrowReadError):
    """The query returned more rows than the table holds: the file's pages loop."""


class BudgetSpent(ArrowReadError):
    """The export's work budget is spent (``connection.WorkBudget``)."""


class Driver:
    """One ADBC database over an export's read-only URI, a connection per thread."""

    def __init__(self, uri: str, charge: Callable[[int], bool]):
        self._uri = uri
        # Counts VM steps against the budget, False once spent; raises a signal it kept.
        self._charge = charge
        self._db = None
        self._local = threading.local()
        self._opened: list = []
        self._lock = threading.Lock()

    def _connection(self):
        import adbc_driver_manager

        with self._lock:
            if self._db is None:
                self._db = _database(self._uri)
            if not hasattr(self._local, "conn"):
                self._local.conn = adbc_driver_manager.AdbcConnection(self._db)
                self._opened.append(self._local.conn)
        return self._local.conn

    def batches(self, sql: str, rows: int) -> Iterator[list[Column]]:
        """The query's record batches, each as its columns, at most ``rows`` rows in all
        (``rows``, the table's row count, also picks the stream's reader)."""
        import adbc_driver_manager
        import nanoarrow

        # nanoarrow raises a stream's error as NanoarrowException, a RuntimeError it does not
        # export; pyarrow as an ArrowException.
        errors: tuple = (adbc_driver_manager.Error, RuntimeError, OSError)
        large = rows > PYARROW_ROWS
        if large:
            import pyarrow as pa

            errors += (pa.ArrowException,)
        statement = adbc_driver_manager.AdbcStatement(self._connection())
        stream = None
        try:
            statement.set_options(**{"adbc.sqlite.query.batch_rows": str(BATCH_ROWS)})
            statement.set_sql_query(sql)
            handle, _ = statement.execute_query()
            if large:
                stream = pa.RecordBatchReader._import_from_c(handle.address)
                arrays = ([nanoarrow.c_array(c) for c in b.columns] for b in stream)
            else:
                stream = nanoarrow.c_array_stream(handle)
                arrays = ([b.child(k) for k in range(b.n_children)] for b in stream)
            seen = 0
            for batch in arrays:
                n = batch[0].length if batch else 0
                if not self._charge(n * (len(batch) + 1) * OPS_PER_VALUE):
                    raise BudgetSpent("the work budget is spent")
                seen += n
                if seen > rows:
                    raise TooManyRows(f"more rows than the table's {rows}")
                yield [Column(array) for array in batch]
        except errors as exc:
            raise ArrowReadError(_one_line(exc)) from None
        finally:
            # The stream before its statement.
            if stream is not None and large:
                stream.close()
            elif stream is not None:
                stream.release()
            statement.close()

    def release(self) -> None:
        """Close this thread's connection (a thread that reads once: ``intervals``' second
        half), so an open export does not keep one per read."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            with self._lock:
                if conn in self._opened:  # (not closed already with the export)
                    self._opened.remove(conn)
            del self._local.conn
            conn.close()

    def close(self) -> None:
        for conn in self._opened:
            conn.close()
        self._opened.clear()
        if self._db is not None:
            self._db.close()
            self._db = None


class Column:
    """One column of a batch: its Arrow ``format`` (``INT64``, ``NULL``, ``BINARY``, ...) and
    its buffers as numpy views, valid while the batch is (the reader copies what it keeps)."""

    def __init__(self, array):
        self.format = array.schema.format
        self.length = array.length
        self._offset = array.offset
        self._view = array.view()

    def _buffer(self, i: int, dtype, count: int) -> np.ndarray:
        data = self._view.buffer(i)
        return np.frombuffer(data, dtype, count=count) if count else np.empty(0, dtype)

    def values(self) -> np.ndarray:
        """A fixed-width column's int64 values (whatever its nulls hold)."""
        return self._buffer(1, np.int64, self._offset + self.length)[self._offset :]

    def valid(self) -> np.ndarray | None:
        """Which values are not null; None where every one is (no validity bitmap)."""
        if len(self._view.buffer(0)) == 0:
            return None
        bitmap = self._buffer(0, np.uint8, (self._offset + self.length + 7) // 8)
        bits = np.unpackbits(bitmap, bitorder="little")
        valid = bits[self._offset : self._offset + self.length].view(bool)
        return None if valid.all() else valid

    def binary(self) -> tuple[np.ndarray, np.ndarray]:
        """A binary column's (``length + 1`` int32 offsets into ``data``, ``data``)."""
        offsets = self._buffer(1, np.int32, self._offset + self.length + 1)[self._offset :]
        end = int(offsets[-1])
        return offsets, self._buffer(2, np.uint8, end)


def _database(uri: str):
    """An ADBC database of the SQLite driver over ``uri``: the driver's library found beside
    its package, else as ``adbc_driver_sqlite`` finds it (through ``importlib.resources``, 5
    ms of the smallest analysis)."""
    import adbc_driver_manager
    import adbc_driver_sqlite

    beside = os.path.join(os.path.dirname(adbc_driver_sqlite.__file__), "libadbc_driver_sqlite.so")
    if os.path.isfile(beside):
        return adbc_driver_manager.AdbcDatabase(driver=beside, uri=uri)
    return adbc_driver_sqlite.connect(uri)


def _one_line(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    return text.removeprefix("[SQLite] ")[:300]
