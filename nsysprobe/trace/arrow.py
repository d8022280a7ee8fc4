"""Reading a query's rows as Arrow record batches, through ADBC's SQLite driver.

The Apache Arrow project's ADBC driver for SQLite (``adbc-driver-sqlite``) steps the query in C
and appends each value to Arrow buffers: no Python object per row or value. The batches come
through the Arrow C stream interface, read here through ctypes (the interface's structs are a
stable ABI, https://arrow.apache.org/docs/format/CDataInterface.html), and each column's
buffers are viewed as numpy arrays (``Column``). A call through ctypes lets go of Python's lock
while the driver fills a batch, so two tables are read at once on two cores, and no Arrow
library is imported for it: pyarrow took ~30 ms and ~35 MB of the analysis of a 100 k-kernel
export, nanoarrow (which kept the lock) ~8 ms (2026-12-06, about 11:30 UTC). Its types are
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
The driver is imported on the first read, so ``nsysprobe --version`` and the command line's
help never load it; pyarrow only dictionary-encodes a large table's NVTX names
(``PYARROW_ROWS``, ``intervals``).
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Callable, Iterator

import numpy as np

# Rows per batch: large enough that the driver's per-batch work is negligible, small enough
# that a signal waits milliseconds and a batch's buffers stay small beside the columns read.
BATCH_ROWS = 1 << 16
# Tables of more rows than this have their NVTX names dictionary-encoded by pyarrow
# (``intervals._masked``); smaller ones never import it.
PYARROW_ROWS = 1 << 17
# Reads at once, each on a core of its own (``Trace.read_together``; a large table's two
# halves, ``intervals``): Python's lock is let go while the driver fills a batch.
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
        (the table's row count). Each batch is released when the next is asked for."""
        import adbc_driver_manager

        statement = adbc_driver_manager.AdbcStatement(self._connection())
        handle = None
        try:
            statement.set_options(**{"adbc.sqlite.query.batch_rows": str(BATCH_ROWS)})
            statement.set_sql_query(sql)
            handle, _ = statement.execute_query()
            stream = _Stream.from_address(handle.address)
            formats = _formats(stream)
            seen = 0
            while True:
                batch = _Array()
                _check(stream, stream.get_next(handle.address, ctypes.byref(batch)))
                if not batch.release:  # the end of the stream
                    return
                try:
                    columns = _columns(batch, formats)
                    n = batch.length
                    if not self._charge(n * (len(columns) + 1) * OPS_PER_VALUE):
                        raise BudgetSpent("the work budget is spent")
                    seen += n
                    if seen > rows:
                        raise TooManyRows(f"more rows than the table's {rows}")
                    yield columns
                finally:
                    batch.release(ctypes.byref(batch))
        except adbc_driver_manager.Error as exc:
            raise ArrowReadError(_one_line(exc)) from None
        finally:
            # The stream before its statement.
            if handle is not None:
                handle.release()
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
        """Close every connection (the threads that read are done: ``ahead.waited``)."""
        with self._lock:
            opened, self._opened = self._opened, []
        for conn in opened:
            conn.close()
        if self._db is not None:
            self._db.close()
            self._db = None


class Column:
    """One column of a batch: its Arrow ``format`` (``INT64``, ``NULL``, ``BINARY``, ...) and
    its buffers as numpy views, valid while the batch is (the reader copies what it keeps)."""

    def __init__(self, array: _Array, format: str, offset: int, length: int):
        self.format = format
        self.length = length
        self._offset = offset + array.offset
        self._buffers = [array.buffers[i] for i in range(array.n_buffers)]

    def _buffer(self, i: int, dtype, count: int) -> np.ndarray:
        address = self._buffers[i] if i < len(self._buffers) else None
        if not count:
            return np.empty(0, dtype)
        if not address:
            raise ArrowReadError(f"a column of format {self.format} without its buffer {i}")
        return np.asarray(_Memory(address, count, np.dtype(dtype).str))

    def values(self) -> np.ndarray:
        """A fixed-width column's int64 values (whatever its nulls hold)."""
        return self._buffer(1, np.int64, self._offset + self.length)[self._offset :]

    def valid(self) -> np.ndarray | None:
        """Which values are not null; None where every one is (no validity bitmap)."""
        if not self._buffers or not self._buffers[0]:
            return None
        bitmap = self._buffer(0, np.uint8, (self._offset + self.length + 7) // 8)
        bits = np.unpackbits(bitmap, bitorder="little")
        valid = bits[self._offset : self._offset + self.length].view(bool)
        return None if valid.all() else valid

    def binary(self) -> tuple[np.ndarray, np.ndarray]:
        """A binary column's (``length + 1`` int32 offsets into ``data``, ``data``).

        Offsets that fall are an ArrowReadError: the driver (1.13) lets its 32-bit offsets
        wrap past 2 GiB of values in one batch, and past 4 GiB they read as positive again,
        so the data would be read out of its bounds."""
        offsets = self._buffer(1, np.int32, self._offset + self.length + 1)[self._offset :]
        if offsets[0] < 0 or np.any(offsets[1:] < offsets[:-1]):
            raise ArrowReadError(
                f"a batch of {self.length} values whose offsets fall: over 2 GiB of them"
            )
        return offsets, self._buffer(2, np.uint8, int(offsets[-1]))


class _Memory:
    """``count`` values of the numpy type ``typestr`` at ``address``, for ``np.asarray``."""

    def __init__(self, address: int, count: int, typestr: str):
        self.__array_interface__ = {
            "data": (address, True),
            "shape": (count,),
            "typestr": typestr,
            "version": 3,
        }


# The Arrow C data and C stream interfaces' structs
# (https://arrow.apache.org/docs/format/CDataInterface.html), read through ctypes: a call
# through a C function pointer lets go of Python's lock while the driver fills a batch.
class _Schema(ctypes.Structure):
    pass


_Schema._fields_ = [
    ("format", ctypes.c_char_p),
    ("name", ctypes.c_char_p),
    ("metadata", ctypes.c_char_p),
    ("flags", ctypes.c_int64),
    ("n_children", ctypes.c_int64),
    ("children", ctypes.POINTER(ctypes.POINTER(_Schema))),
    ("dictionary", ctypes.POINTER(_Schema)),
    ("release", ctypes.CFUNCTYPE(None, ctypes.POINTER(_Schema))),
    ("private_data", ctypes.c_void_p),
]


class _Array(ctypes.Structure):
    pass


_Array._fields_ = [
    ("length", ctypes.c_int64),
    ("null_count", ctypes.c_int64),
    ("offset", ctypes.c_int64),
    ("n_buffers", ctypes.c_int64),
    ("n_children", ctypes.c_int64),
    ("buffers", ctypes.POINTER(ctypes.c_void_p)),
    ("children", ctypes.POINTER(ctypes.POINTER(_Array))),
    ("dictionary", ctypes.POINTER(_Array)),
    ("release", ctypes.CFUNCTYPE(None, ctypes.POINTER(_Array))),
    ("private_data", ctypes.c_void_p),
]


class _Stream(ctypes.Structure):
    _fields_ = [
        ("get_schema", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(_Schema))),
        ("get_next", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(_Array))),
        ("get_last_error", ctypes.CFUNCTYPE(ctypes.c_char_p, ctypes.c_void_p)),
        ("release", ctypes.CFUNCTYPE(None, ctypes.c_void_p)),
        ("private_data", ctypes.c_void_p),
    ]


def _check(stream: _Stream, status: int) -> None:
    """ArrowReadError with the stream's own message where a call of it failed."""
    if status:
        message = stream.get_last_error(ctypes.addressof(stream))
        text = message.decode("utf-8", "replace") if message else f"error {status}"
        raise ArrowReadError(_one_line(text))


def _formats(stream: _Stream) -> list[str]:
    """The format of each column of the stream's rows (a struct's children)."""
    schema = _Schema()
    _check(stream, stream.get_schema(ctypes.addressof(stream), ctypes.byref(schema)))
    try:
        if schema.format != b"+s":
            raise ArrowReadError(f"the rows read as {schema.format!r}, not a struct")
        return [
            schema.children[k].contents.format.decode("ascii", "replace")
            for k in range(schema.n_children)
        ]
    finally:
        schema.release(ctypes.byref(schema))


def _columns(batch: _Array, formats: list[str]) -> list[Column]:
    """A batch (a struct of the stream's columns) as its ``Column``s."""
    if batch.n_children != len(formats):
        raise ArrowReadError(f"a batch of {batch.n_children} columns, not {len(formats)}")
    return [
        Column(batch.children[k].contents, f, batch.offset, batch.length)
        for k, f in enumerate(formats)
    ]


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
