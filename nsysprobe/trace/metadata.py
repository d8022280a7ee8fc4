"""What the export says about itself and names by id: ``StringIds`` (``Strings``, read by id,
only for the ids the analyses name: an export may hold millions of strings nothing refers to),
the export's metadata (nsys version, schema version, what the capture asked to trace, the
session's start), the GPUs, the threads' and processes' names, and the labels of the memory and
copy kinds.

Metadata lives in ``META_DATA_EXPORT``/``META_DATA_CAPTURE`` (2023.4+), ``EXPORT_META_DATA``
(2022.4) or nowhere (older). The environment nsys stores in a report
(``TARGET_INFO_SYSTEM_ENV``, parts of ``META_DATA_CAPTURE``) is never read here, so nothing
downstream can copy it. Each reader is a function of the open ``Trace``, which offers it as a
method or property (``trace.gpus()``, ``trace.nsys_version``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from nsysprobe.errors import TraceError
from nsysprobe.trace.schema import (
    CAPTURE_EVENT_TYPE,
    CAPTURE_EVENT_TYPES,
    CAPTURE_FLAGS,
    STRING_TABLE,
)
from nsysprobe.trace.values import as_int, as_text, number, present

# Memory kinds as exported (ENUM_CUDA_MEM_KIND); raw CUPTI numbers them differently.
MEM_KIND_LABELS = {
    0: "Pageable",
    1: "Pinned",
    2: "Device",
    3: "Array",
    4: "Managed",
    5: "Device Static",
    6: "Managed Static",
    7: "Unknown",
}
COPY_KIND_LABELS = {
    0: "Unknown",
    1: "HtoD",
    2: "DtoH",
    3: "HtoA",
    4: "AtoH",
    5: "AtoA",
    6: "AtoD",
    7: "DtoA",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
    11: "UVM HtoD",
    12: "UVM DtoH",
    13: "UVM DtoD",
}

# Rowids per query when looking NVTX names up, and string ids per query (``Strings``).
NAMES_PER_QUERY = 900  # under SQLite's oldest limit of 999 bound values
# Rows of (id, rowid) read at once when ``StringIds`` has no index on ``id``.
_ID_ROWS = 1 << 16


@dataclass(frozen=True)
class GpuInfo:
    device_id: int
    name: str
    bus_id: str


def names(trace, ids: Iterable) -> list[str]:
    """Map string ids (values of a ``textId`` column, as ``number`` reads them) to text;
    unknown ids and values that are no number give ``"<unknown>"``."""
    numbers = [number(i) for i in ids]
    keys = [None if n is None else int(n) for n in numbers]
    strings = trace.strings
    strings.load(k for k in keys if k is not None)
    return ["<unknown>" if k is None else strings.get(k, "<unknown>") for k in keys]


def export_meta(trace) -> dict[str, str]:
    for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
        if table in trace.tables:
            df = trace._select(table, ["name", "value"])
            return {
                as_text(k): as_text(v)
                for k, v in zip(df["name"], df["value"])
                if k is not None and v is not None
            }
    return {}


def nsys_version(trace) -> str | None:
    return trace.export_meta.get("EXPORT_PRODUCT_VERSION")


def schema_version(trace) -> str | None:
    return trace.export_meta.get("EXPORT_SCHEMA_VERSION")


def requested_traces(trace) -> frozenset[str] | None:
    """What the capture asked to trace (``cuda``, ``nvtx``, ``osrt``), or None if unknown.

    Read from the capture options only (``CAPTURE_EVENT_TYPE`` and the per-process
    ``COLLECT_*_TRACE`` flags); old exports do not record them.
    """
    if "META_DATA_CAPTURE" not in trace.tables:
        return None
    found: set[str] = set()
    df = trace._select("META_DATA_CAPTURE", ["name", "value"])
    for name, value in zip(df["name"], df["value"]):
        key = as_text(name).rsplit(":", 1)[-1]
        if key == CAPTURE_EVENT_TYPE and isinstance(value, str) and (value in CAPTURE_EVENT_TYPES):
            found.add(CAPTURE_EVENT_TYPES[value])
        elif key in CAPTURE_FLAGS and str(value).lower() == "true":
            found.add(CAPTURE_FLAGS[key])
    return frozenset(found)


def session_start_utc_ns(trace) -> int | None:
    if "TARGET_INFO_SESSION_START_TIME" not in trace.tables:
        return None
    df = trace._select("TARGET_INFO_SESSION_START_TIME", ["utcEpochNs"], where="LIMIT 1")
    return as_int(df["utcEpochNs"][0]) if df["utcEpochNs"] else None


def gpus(trace) -> list[GpuInfo]:
    """GPUs the report describes: ``TARGET_INFO_GPU`` (2021.3+), ``TARGET_INFO_CUDA_GPU``
    (2020.3) or ``TARGET_INFO_CUDA_DEVICE`` (2025.1+)."""
    for table, id_cols, bus_cols in (
        ("TARGET_INFO_GPU", ("cuDevice", "id"), ("busLocation",)),
        ("TARGET_INFO_CUDA_DEVICE", ("cudaId", "id"), ("busLocation", "pciBusId")),
        ("TARGET_INFO_CUDA_GPU", ("cudaId", "id"), ("busLocation", "pciBusId")),
    ):
        if table not in trace.tables or trace.count(table) == 0:
            continue
        df = trace._select(
            table,
            ["device_id", "name", "bus_id"],
            aliases={"device_id": id_cols, "name": ("name",), "bus_id": bus_cols},
        )
        return [
            GpuInfo(
                device_id=i if as_int(device) is None else as_int(device),
                name=as_text(name) if present(name) else "unknown GPU",
                bus_id=as_text(bus) if present(bus) else "",
            )
            for i, (device, name, bus) in enumerate(zip(df["device_id"], df["name"], df["bus_id"]))
        ]
    return []


def thread_names(trace) -> dict[int, str]:
    """globalTid -> thread name, where the export recorded one."""
    if "ThreadNames" not in trace.tables:
        return {}
    df = trace._select("ThreadNames", ["globalTid", "nameId"])
    pairs = list(zip(map(as_int, df["globalTid"]), map(as_int, df["nameId"])))
    strings = trace.strings
    strings.load(n for _, n in pairs if n is not None)
    return {t: strings.get(n, "") for t, n in pairs if t is not None and n is not None}


def process_names(trace) -> dict[int, str]:
    """pid -> process name."""
    if "PROCESSES" not in trace.tables:
        return {}
    df = trace._select("PROCESSES", ["pid", "name"])
    pairs = zip(map(as_int, df["pid"]), df["name"])
    return {p: as_text(n) for p, n in pairs if p is not None}


def mem_kind_labels(trace) -> dict[int, str]:
    return _enum_labels(trace, "ENUM_CUDA_MEM_KIND", MEM_KIND_LABELS)


def copy_kind_labels(trace) -> dict[int, str]:
    """copyKind -> ``HtoD``, ``DtoH``, ... from ``ENUM_CUDA_MEMCPY_OPER`` when the export
    has it (its names, ``CUDA_MEMCPY_KIND_HTOD``, shortened), else the documented
    numbering."""
    return _enum_labels(
        trace, "ENUM_CUDA_MEMCPY_OPER", COPY_KIND_LABELS, column="name", label=_copy_kind_label
    )


def _enum_labels(
    trace, table: str, default: dict[int, str], column: str = "label", label=None
) -> dict[int, str]:
    """id -> the text of ``column`` in an ``ENUM_*`` table (through ``label`` when given),
    over ``default`` for ids the table lacks or when the export has no such table."""
    if table not in trace.tables:
        return dict(default)
    df = trace._select(table, ["id", column])
    labels = dict(default)
    convert = label or (lambda text: text)
    pairs = zip(map(as_int, df["id"]), df[column])
    labels.update({i: convert(as_text(v)) for i, v in pairs if i is not None and v is not None})
    return labels


def _copy_kind_label(enum_name: str) -> str:
    """``CUDA_MEMCPY_KIND_HTOD`` -> ``HtoD``, ``..._UVM_DTOH`` -> ``UVM DtoH``."""
    parts = enum_name.removeprefix("CUDA_MEMCPY_KIND_").split("_")
    out = []
    for part in parts:
        if len(part) == 4 and part[1:3] == "TO":
            out.append(f"{part[0]}to{part[3]}")
        elif part == "UVM":
            out.append(part)
        else:
            out.append(part.capitalize())
    return " ".join(out)


class Strings:
    """``StringIds`` by id, read as the analyses ask: only the ids their columns name (kernels,
    CUDA and OS calls, NVTX ranges and domains, threads) are read and kept, at most
    ``NAMES_PER_QUERY`` ids a query, with the ids found missing: what is held grows with the
    names shown, not with the table. An export may hold millions of strings nothing refers
    to: 5 M of them added to a 1.6 MB sample took its analysis from 41 MiB and 0.3 s to
    1.2 GiB and 13 s (2026-12-04, this project's 2-core machine) when the whole table was read.

    nsys makes ``id`` the table's INTEGER PRIMARY KEY, so each id is one lookup. Where a
    rebuilt table has no index on it, its ids and rowids are read once, ``_ID_ROWS`` rows at
    a time, into two arrays of 8 bytes a row each (no text), and each name is then read by its
    rowid: 5 M such rows took 2.8 s and 280 MiB. An id held by several rows names the last
    one's text, as it did when the table was read whole."""

    def __init__(self, trace):
        self._trace = trace
        self._known: dict[int, str] = {}
        self._missing: set[int] = set()
        self._indexed: bool | None = None
        self._rowids: tuple[np.ndarray, np.ndarray] | None = None  # ids sorted, their rowids

    def load(self, ids: Iterable) -> None:
        """Read the text of those of ``ids`` not read yet (a value that is no int64 is
        skipped)."""
        wanted = {as_int(i) for i in ids}
        wanted.discard(None)
        wanted.difference_update(self._known, self._missing)
        if not wanted:
            return
        found = self._read(sorted(wanted)) if self._trace.has(STRING_TABLE) else {}
        self._known.update(found)
        self._missing.update(wanted.difference(found))

    def get(self, key, default=None):
        i = as_int(key)
        if i is None:
            return default
        if i not in self._known and i not in self._missing:
            self.load([i])
        return self._known.get(i, default)

    def __getitem__(self, key) -> str:
        text = self.get(key)
        if text is None:
            raise KeyError(key)
        return text

    def __contains__(self, key) -> bool:
        return self.get(key) is not None

    def _read(self, ids: list[int]) -> dict[int, str]:
        trace, table = self._trace, STRING_TABLE
        if self._indexed is None:
            plan = trace._fetch(table, f"EXPLAIN QUERY PLAN SELECT value FROM {table} WHERE id = 0")
            self._indexed = any(str(row[-1]).startswith("SEARCH") for row in plan)
        rowid = None if self._indexed else trace._rowid_name(table)
        key = "id"
        if rowid is not None:
            ids = self._rowids_of(rowid, ids)
            key = rowid
        out: dict[int, str] = {}
        for lo in range(0, len(ids), NAMES_PER_QUERY):
            chunk = ids[lo : lo + NAMES_PER_QUERY]
            marks = ", ".join("?" * len(chunk))
            sql = f"SELECT id, value FROM {table} WHERE {key} IN ({marks})"
            for i, value in trace._fetch(table, sql, tuple(chunk)):
                if isinstance(i, int):
                    out[i] = as_text(value)
        return out

    def _rowids_of(self, rowid: str, ids: list[int]) -> list[int]:
        """The rowid of the last row holding each of ``ids`` that a row holds."""
        if self._rowids is None:
            self._rowids = self._index(rowid)
        keys, rows = self._rowids
        want = np.asarray(ids, dtype=np.int64)
        at = np.minimum(np.searchsorted(keys, want), max(keys.size - 1, 0))
        hit = keys[at] == want if keys.size else np.zeros(want.size, dtype=bool)
        return rows[at[hit]].tolist()

    def _index(self, rowid: str) -> tuple[np.ndarray, np.ndarray]:
        """Every integer id of the table, sorted, and the rowid of its last row (the scan
        goes in rowid order; a stable sort keeps that order within an id)."""
        trace, table = self._trace, STRING_TABLE
        size = trace.count(table)
        keys, rowids = np.empty(size, np.int64), np.empty(size, np.int64)
        n = 0
        try:
            cur = trace._raw.execute(
                f"SELECT id, {rowid} FROM {table} NOT INDEXED WHERE typeof(id) = 'integer'"
            )
            while rows := cur.fetchmany(_ID_ROWS):
                block = np.array(rows, dtype=np.int64).reshape(-1, 2)
                keys[n : n + len(block)] = block[:, 0]  # more rows than counted: ValueError
                rowids[n : n + len(block)] = block[:, 1]
                n += len(block)
        except (sqlite3.DatabaseError, OverflowError, ValueError) as exc:
            raise TraceError(trace._read_failed(table, exc)) from exc
        order = np.argsort(keys[:n], kind="stable")
        keys = keys[order]
        last = np.append(keys[1:] != keys[:-1], True) if n else np.zeros(0, dtype=bool)
        return keys[last], rowids[order[last]]
