"""Python sampling (``python_samples``): when each sampling mark was taken, on which thread,
and its stack as frames of names.

The marks are NVTX marks of the sampling domains (``payloads.SAMPLING_DOMAINS``), their
frames read from the payload in whichever form the export holds it (``trace.payloads``): JSON
(``--include-json``) or binary (``--include-blobs``); a plain export holds the marks without
their frames, which ``PythonSamples.form`` tells. Each reader is a function of the open
``Trace``, which offers it as a method (``trace.python_samples()``).
"""

from __future__ import annotations

import html
import sqlite3
from dataclasses import dataclass

import numpy as np

from nsysprobe.common.safetext import NAME_CHARS
from nsysprobe.common.safetext import name as _name
from nsysprobe.errors import TraceError
from nsysprobe.trace.metadata import NAMES_PER_QUERY
from nsysprobe.trace.payloads import (
    NVTX_MARK,
    SAMPLING_DOMAINS,
    blob_frames,
    blob_layouts,
    json_frames,
)
from nsysprobe.trace.schema import STRING_TABLE
from nsysprobe.trace.values import INT64_MAX, INT64_MIN, MAX_TIME_NS, as_int, as_text

# Python sampling marks fetched at once (``python_samples``), and their payload columns.
_SAMPLE_ROWS = 1 << 14
_PAYLOADS = ("jsonText", "binaryData")


@dataclass(frozen=True)
class Frame:
    function: str  # as Python names it (``step``, ``<module>``)
    file: str  # the path as exported, its last ``NAME_CHARS`` characters
    line: int


@dataclass(frozen=True)
class PythonSamples:
    """Every Python sampling mark of the export (``trace.payloads``), in time order: when,
    which thread it sampled, and its stack (an index into ``stacks``, -1 where the export
    holds no readable frames for it)."""

    start_ns: np.ndarray  # int64
    thread: np.ndarray  # globalTid, int64
    stack: np.ndarray  # int32
    stacks: tuple[tuple[Frame, ...], ...]  # each innermost frame first
    form: str  # "json", "blobs", or "" where no mark has a payload

    def __len__(self) -> int:
        return int(self.start_ns.size)

    @property
    def readable(self) -> int:
        return int(np.count_nonzero(self.stack >= 0))

    @classmethod
    def empty(cls) -> PythonSamples:
        none = np.empty(0, dtype=np.int64)
        return cls(none, none, none.astype(np.int32), (), "")


def python_samples(trace, thread: int | None = None) -> PythonSamples:
    """The Python sampling marks (``PythonSamples``) of the sampling domains
    (``payloads.SAMPLING_DOMAINS``, per process), of one ``thread`` (a ``globalTid``) or
    of all; each distinct payload decoded once (a sampler repeats a few hundred stacks).
    Read once per thread asked for.

    nsys samples every Python thread of the process tree (DataLoader workers too), 60,000
    marks a minute each at 1 kHz: the analyses ask for the one thread they explain. Read
    row by row (Python builds each row's payload: 604,233 marks took 1.3 s; joining a
    block's payloads in SQLite, as ``nvtx_ranges`` joins names, took longer)."""
    if thread not in trace._python_samples:
        trace._python_samples[thread] = _read_python_samples(trace, thread)
    return trace._python_samples[thread]


def _read_python_samples(trace, thread: int | None) -> PythonSamples:
    table = "NVTX_EVENTS"
    pairs = {key for key, name in trace.nvtx_domains.items() if name in SAMPLING_DOMAINS}
    columns = set(trace.columns(table))
    if not pairs or not {"start", "eventType", "domainId", "globalTid"} <= columns:
        return PythonSamples.empty()
    if thread is not None:
        pairs = {(pid, d) for pid, d in pairs if pid == (thread >> 24) & 0xFFFFFF}
        if not pairs or as_int(thread) is None:
            return PythonSamples.empty()
    json_col, blob_col = (f'"{c}"' if c in columns else "NULL" for c in _PAYLOADS)
    marks = " OR ".join(
        f'((("globalTid" >> 24) & {0xFFFFFF}) = {pid} AND "domainId" = {domain})'
        for pid, domain in sorted(pairs)
    )
    one = "" if thread is None else f' AND "globalTid" = {int(thread)}'
    sql = (
        f'SELECT "start", "globalTid", "domainId", {json_col}, {blob_col} FROM "{table}" '
        f'WHERE "eventType" = {NVTX_MARK} AND typeof("start") = \'integer\' '
        f"AND typeof(\"globalTid\") = 'integer' AND typeof(\"domainId\") = 'integer' "
        f'AND "start" BETWEEN {-MAX_TIME_NS} AND {MAX_TIME_NS} AND "globalTid" >= 0 '
        f"AND ({marks}){one}"
    )
    reader = _Samples(trace)
    try:
        reader.take_rows(trace._raw.execute(sql))
    except (sqlite3.DatabaseError, OverflowError, ValueError) as exc:
        raise TraceError(trace._read_failed(table, exc)) from exc
    return reader.result()


def _named_stacks(trace, raw: list[tuple]) -> tuple[tuple[tuple[Frame, ...], ...], np.ndarray]:
    """The stacks of string ids as frames of names, equal stacks once; and each raw
    stack's index among them."""
    strings = trace.strings
    strings.load(f for stack in raw for f, _, _ in stack)
    files = {
        i: _name(html.unescape(text))
        for i, text in _string_tails(trace, {p for stack in raw for _, p, _ in stack}).items()
    }
    functions: dict[int, str] = {}
    named: dict[tuple[Frame, ...], int] = {}
    renumber = np.empty(len(raw), dtype=np.int64)
    for i, stack in enumerate(raw):
        frames = []
        for f, p, line in stack:
            if f not in functions:
                # The export writes a function's < and > as entities (``&lt;module&gt;``).
                functions[f] = _name(html.unescape(strings.get(f, "<unknown>")))
            frames.append(Frame(functions[f], files.get(p, "<unknown>"), int(line)))
        renumber[i] = named.setdefault(tuple(frames), len(named))
    return tuple(named), renumber


def _string_tails(trace, ids: set[int]) -> dict[int, str]:
    """id -> the last ``NAME_CHARS`` characters of its ``StringIds`` text (a frame's file:
    its base name, and the library folder before it, are at the end)."""
    if not ids or STRING_TABLE not in trace.tables:
        return {}
    out: dict[int, str] = {}
    wanted = sorted(i for i in ids if INT64_MIN <= i <= INT64_MAX)
    for lo in range(0, len(wanted), NAMES_PER_QUERY):
        chunk = wanted[lo : lo + NAMES_PER_QUERY]
        sql = (
            f"SELECT id, CASE WHEN length(value) > {NAME_CHARS} THEN "
            f"substr(value, -{NAME_CHARS}) ELSE value END FROM {STRING_TABLE} "
            f"WHERE id IN ({', '.join('?' * len(chunk))})"
        )
        for i, value in trace._fetch(STRING_TABLE, sql, tuple(chunk)):
            if isinstance(i, int) and value is not None:
                out[i] = as_text(value)
    return out


def payload_layouts(trace) -> dict:
    """The layouts of the sampling schemas the export describes (``payloads.blob_layouts``)."""
    tables = ("NVTX_PAYLOAD_SCHEMAS", "NVTX_PAYLOAD_SCHEMA_ENTRIES")
    if not all(t in trace.tables for t in tables):
        return {}
    schemas = trace._select(tables[0], ["domainId", "schemaId", "payloadSize"])
    entries = trace._select(tables[1], ["domainId", "schemaId", "name", "type", "offset"])

    def rows(df: dict, names: list[str]) -> list[tuple]:
        return [
            tuple(as_text(v) if c == "name" and v is not None else as_int(v) for c, v in row)
            for row in zip(*([(c, v) for v in df[c]] for c in names))
        ]

    return blob_layouts(
        rows(schemas, ["domainId", "schemaId", "payloadSize"]),
        rows(entries, ["domainId", "schemaId", "name", "type", "offset"]),
    )


class _Samples:
    """The Python sampling marks as ``Trace.python_samples`` reads them, a block of rows at
    a time, each distinct payload decoded once."""

    def __init__(self, trace):
        self.trace = trace
        self.starts: list[np.ndarray] = []
        self.threads: list[np.ndarray] = []
        self.stacks: list[np.ndarray] = []
        self.texts: dict[bytes, int] = {}  # JSON payload -> raw stack index (-1: none)
        self.blobs: dict[tuple[int, bytes], int] = {}  # (domain, binary payload) -> the same
        self.raw: list[tuple] = []
        self.forms: set[str] = set()
        self.layouts: dict | None = None

    def take_rows(self, cursor) -> None:
        known = self.texts.get
        while rows := cursor.fetchmany(_SAMPLE_ROWS):
            n = len(rows)
            self.starts.append(np.fromiter((r[0] for r in rows), np.int64, n))
            self.threads.append(np.fromiter((r[1] for r in rows), np.int64, n))
            self.stacks.append(
                np.fromiter(
                    (
                        i if (i := known(r[3])) is not None else self._stack(r[3], r[4], r[2])
                        for r in rows
                    ),
                    np.int64,
                    n,
                )
            )

    def _stack(self, text, blob, domain: int) -> int:
        """The raw stack index of a payload not seen yet (JSON ``text``, else the ``blob``),
        -1 for none."""
        if isinstance(text, bytes) and text:
            self.forms.add("json")
            frames = json_frames(text)
            cache, key = self.texts, text
        elif isinstance(blob, bytes) and blob:
            if (domain, blob) in self.blobs:
                return self.blobs[domain, blob]
            self.forms.add("blobs")
            if self.layouts is None:
                self.layouts = self.trace.payload_layouts()
            frames = blob_frames(blob, domain, self.layouts)
            cache, key = self.blobs, (domain, blob)
        else:
            return -1
        index = -1 if frames is None else len(self.raw)
        if frames is not None:
            self.raw.append(tuple(frames))
        cache[key] = index
        return index

    def result(self) -> PythonSamples:
        if not self.starts:
            return PythonSamples.empty()
        start = np.concatenate(self.starts)
        stack = np.concatenate(self.stacks)
        stacks, renumber = _named_stacks(self.trace, self.raw)
        if self.raw:
            stack = np.where(stack >= 0, renumber[np.maximum(stack, 0)], -1)
        order = np.argsort(start, kind="stable")  # 2025.6+: rows in no guaranteed order
        return PythonSamples(
            start_ns=start[order],
            thread=np.concatenate(self.threads)[order],
            stack=stack[order].astype(np.int32),
            stacks=stacks,
            form="json" if "json" in self.forms else "blobs" if self.forms else "",
        )
