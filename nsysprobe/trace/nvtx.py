"""NVTX: the ranges the analyses group by name (``nvtx_ranges``, each name's numbers masked:
``Batch #``), the names and colours of the few ranges shown (``nvtx_details``), the row counts
by event type (no ranges, or no NVTX at all) and the domains' names (``nvtx_domains``).

NVTX text sits in ``text`` or in ``textId`` (-> ``StringIds``), both within one file. Each
reader is a function of the open ``Trace``, which offers it as a method (``trace.nvtx_ranges()``).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from nsysprobe.common.safetext import name as _name
from nsysprobe.common.table import Labels, Table, first_seen
from nsysprobe.errors import TraceError
from nsysprobe.trace import arrow
from nsysprobe.trace.intervals import TEXT_KINDS, intervals
from nsysprobe.trace.metadata import NAMES_PER_QUERY
from nsysprobe.trace.schema import NVTX_DOMAIN_CREATE, NVTX_PUSH_POP, NVTX_START_END
from nsysprobe.trace.tables import READ_BESIDE_NVTX
from nsysprobe.trace.values import (
    NO_ID,
    as_int,
    as_text,
    interval_where,
    lenient_int,
    lenient_text,
    narrow,
    range_pattern,
)


def nvtx_counts(trace) -> dict[int, int]:
    """eventType -> row count in NVTX_EVENTS (to tell "no ranges" from "no NVTX")."""
    if "NVTX_EVENTS" not in trace.tables:
        return {}
    if "eventType" not in trace.columns("NVTX_EVENTS"):
        return {}
    rows = trace._fetch(
        "NVTX_EVENTS", "SELECT eventType, count(*) FROM NVTX_EVENTS GROUP BY eventType"
    )
    counts: dict[int, int] = {}
    for event_type, n in rows:
        key = as_int(event_type)
        if key is not None:
            counts[key] = counts.get(key, 0) + int(n)
    return counts


def nvtx_domains(trace) -> dict[tuple[int, int], str]:
    """(pid, domainId) -> the domain's name, from the domain-creation rows (eventType 75;
    domain ids are per process)."""
    if "NVTX_EVENTS" not in trace.tables or "domainId" not in trace.columns("NVTX_EVENTS"):
        return {}
    df = trace._select(
        "NVTX_EVENTS",
        ["globalTid", "domainId", "text", "textId"],
        where=f"WHERE eventType = {NVTX_DOMAIN_CREATE} LIMIT 10000",
    )
    out: dict[tuple[int, int], str] = {}
    names = trace.names(df["textId"])
    for tid, dom, text, name in zip(df["globalTid"], df["domainId"], df["text"], names):
        tid, dom = as_int(tid), as_int(dom)
        label = as_text(text) if text is not None else name
        if tid is not None and dom is not None and isinstance(label, str):
            out[((tid >> 24) & 0xFFFFFF, dom)] = label
    return out


def nvtx_ranges(trace) -> Table:
    """Closed NVTX push/pop and start/end ranges.

    Columns: start, end, globalTid, domainId, ``pattern`` (the name with its numbers
    masked, ``Batch #``: ``Labels``, its categories sorted) and ``row`` (what
    :meth:`nvtx_names` and :meth:`nvtx_details` take). The name comes from ``text`` or,
    when that is NULL, from ``textId``.

    A PyTorch trace holds millions of ranges with a name each (``aten::add, seq = 12,
    op_id = 3401``), nearly all distinct: no per-row name is built. The names come as one
    Arrow buffer per batch, whose digits are masked at once; only the distinct masked names
    become strings.
    """
    table = "NVTX_EVENTS"
    where = f"eventType IN ({NVTX_PUSH_POP}, {NVTX_START_END})"
    if table not in trace.tables or "text" not in trace.columns(table):
        return _nvtx_by_rows(trace, where)
    if not _has_rowid(trace, table) or not trace._utf8:
        # (a UTF-16 database: its text read as a BLOB is UTF-16)
        return _nvtx_by_rows(trace, where)
    text_id = "textId" if "textId" in trace.columns(table) else None
    try:
        df, names = intervals(
            trace,
            table,
            ["globalTid", "domainId", "rowid", "textId"],
            where=where,
            raw={"rowid": trace._rowid_name(table)},
            named_by=("text", text_id),
            split_rows=_split_rows(trace),
        )
    except TraceError:
        # Row by row: an export that is damaged fails there with its own one-line error.
        return _nvtx_by_rows(trace, where)
    text_ids = df.pop("textId")
    codes, seen, source = names  # each row's code into the distinct masked names
    has_text = source == TEXT_KINDS.index("text")
    if (source == TEXT_KINDS.index("number")).any():  # read by rows, as its text
        return _nvtx_by_rows(trace, where)
    # The pattern of the name as every output shows it (cut, escaped), as for textId.
    text_patterns = [range_pattern(_name(lenient_text(m))) for m in seen]
    id_values, id_codes = first_seen(text_ids[~has_text])
    strings = trace.strings
    strings.load(id_values.tolist())
    id_patterns = [range_pattern(strings.get(int(i), "<unknown>")) for i in id_values]
    codes[~has_text] = id_codes + len(text_patterns)
    df["pattern"] = _sorted_labels(codes, text_patterns + id_patterns)
    df["row"] = df.pop("rowid")
    return df


def _split_rows(trace) -> int | None:
    """Above how many rows the ranges are read in two halves at once (``intervals``'
    ``split_rows``; None: above ``SPLIT_ROWS`` only).

    They are read first, two tables at a time, beside the tables of ``READ_BESIDE_NVTX``
    (``Events.load``), and a range with its name is the dearest row to read. More ranges
    than those tables' rows together (and more than one batch), and one core would go on
    reading them alone after the other has read the rest: then they are read in halves. The
    rows of a table are its span of rowids (a seek at each end of its tree, no scan; a table
    without rowids is counted). Measured, ``Events.load`` alone, three runs each alternating
    with 965b705 (2026-12-06, about 11:36 UTC, medians): a replica of 100 k nested ranges
    beside 23 k other rows, 66 -> 55 ms; one of 3.6 M ranges beside 2.4 M, 1.95 -> 1.55 s. A
    table read beside others as long is not split: the kernel-heavy 1e5 replica's 175 k
    runtime calls, beside its 93 k kernels, took 51 -> 57 ms in halves (about 11:33 UTC)."""
    if trace.count("NVTX_EVENTS") <= arrow.BATCH_ROWS:
        return None
    others = 0
    for table in READ_BESIDE_NVTX:
        if table not in trace.tables:
            continue
        try:
            bounds = trace.rowid_bounds(table)
            if bounds is not None:
                others += bounds[1] - bounds[0] + 1
            elif trace._rowid_name(table) is None:
                others += trace.count(table)
        except TraceError:
            return None  # (its own read says what is wrong with it)
    return max(others, arrow.BATCH_ROWS)


def nvtx_names(trace, rows: Iterable[int]) -> list[str]:
    """The names of the NVTX ranges whose ``row`` (from :meth:`nvtx_ranges`) is given, in
    that order."""
    return [name for name, _ in trace.nvtx_details(rows)]


def nvtx_details(trace, rows: Iterable[int]) -> list[tuple[str, int]]:
    """(name, color) of the NVTX ranges whose ``row`` is given, in that order; the color
    is ARGB, -1 when none."""
    rows = [int(r) for r in rows]
    if trace._nvtx_row_names is not None:
        return [trace._nvtx_row_names[r] for r in rows]
    got: list[tuple] = []
    wanted = sorted(set(rows))
    columns = trace.columns("NVTX_EVENTS")
    color = "color" if "color" in columns else "NULL"
    text_id = "textId" if "textId" in columns else "NULL"
    rowid = trace._rowid_name("NVTX_EVENTS")
    for lo in range(0, len(wanted), NAMES_PER_QUERY):
        chunk = wanted[lo : lo + NAMES_PER_QUERY]
        marks = ", ".join("?" * len(chunk))
        sql = (
            f"SELECT {rowid}, text, {text_id}, {color} FROM NVTX_EVENTS WHERE {rowid} IN ({marks})"
        )
        got += trace._fetch("NVTX_EVENTS", sql, tuple(chunk))
    strings = trace.strings
    strings.load(sid for _, text, sid, _ in got if text is None and isinstance(sid, int))
    found: dict[int, tuple[str, int]] = {}
    for row, text, sid, argb in got:
        if text is not None:
            name = as_text(text)
        elif isinstance(sid, int):
            name = strings.get(sid, "<unknown>")
        else:
            name = "<unknown>"
        argb = as_int(argb)
        found[row] = (name, -1 if argb is None else argb)
    return [found.get(r, ("<unknown>", -1)) for r in rows]


def _nvtx_by_rows(trace, where: str) -> Table:
    """The NVTX ranges read row by row: for exports the Arrow reader cannot take (no
    ``text`` column, no rowids, text that is a number, a damaged table). Slow, and exact."""
    ints = ["start", "end", "globalTid", "color", "domainId"]
    df = trace._select("NVTX_EVENTS", [*ints, "text", "textId"], where=interval_where(where))
    dropped = trace.count_where("NVTX_EVENTS", where) - len(df["start"])
    ints = {c: np.array([lenient_int(v) for v in df[c]], dtype=np.int64) for c in ints}
    tids = ints["globalTid"]
    tids[tids < 0] = NO_ID
    absent = "globalTid" not in trace.columns("NVTX_EVENTS")
    trace._note_ids("NVTX_EVENTS", "globalTid", tids, absent=absent)
    by_id = trace.names(df["textId"])
    names = [as_text(t) if t is not None else n for t, n in zip(df["text"], by_id)]
    trace._nvtx_row_names = list(zip(names, ints["color"].tolist()))
    distinct: dict[str, int] = {}
    codes = np.array([distinct.setdefault(n, len(distinct)) for n in names], dtype=np.int64)
    out = Table({c: ints[c] for c in ("start", "end", "globalTid", "domainId")})
    out["pattern"] = _sorted_labels(codes, [range_pattern(str(n)) for n in distinct])
    out["row"] = np.arange(len(out), dtype=np.int64)
    for col in ("domainId", "row"):
        out[col] = narrow(out[col])
    out.dropped = int(dropped)
    return out


def _has_rowid(trace, table: str) -> bool:
    return trace._rowid_name(table) is not None


def _sorted_labels(codes: np.ndarray, values: list[str]) -> Labels:
    """The labels ``values[codes]`` whose categories are the distinct values, sorted."""
    categories = sorted(set(values))
    where = {v: i for i, v in enumerate(categories)}
    remap = np.array([where[v] for v in values], dtype=np.int32)
    return Labels(remap[codes] if remap.size else codes.astype(np.int32), categories)
