"""Every table and column of an export that nsysprobe reads, in one place.

The reader (``nsysprobe.trace.reader``) selects these and no others; ``nsysprobe scrub``
(``nsysprobe.trace.scrub``) copies these and no others into a new database, so a shared copy
holds what the analyses need and nothing more. ``tests/reliability/test_scrub_secrets.py``
records every column the reader reads on real exports (through SQLite's authorizer) and fails
when one is missing here or from a scrubbed copy.

Each column is one of six kinds, and scrub copies it by its kind:

- ``numbers``: integers and reals, copied as they are (text or a BLOB stored there is not);
- ``string_ids``: integers naming a ``StringIds`` row whose text the analyses show (kernel, API,
  OS-call and thread names); only the rows they name are copied, their text scrubbed;
- ``texts``: text the analyses show or match (NVTX range and domain names, GPU names, enum
  labels, the nsys version), copied through the scrubber;
- ``keys``: texts of which only the part after the last ``:`` is read
  (``PROCESS_0:COLLECT_CUDA_TRACE`` is read as ``COLLECT_CUDA_TRACE``), copied as that part;
- ``known``: texts of which the reader looks for a few values only (the names of a payload
  schema's entries, ``payloads.SCHEMA_NAMES``), copied when they are one of those, else NULL;
- ``payloads``: an NVTX mark's extended payload, read only on the marks of Python sampling
  (``trace.payloads``): copied only there, rewritten to hold the frames read and nothing
  else; the ``StringIds`` rows the frames name are copied too, a frame's file kept as a
  placeholder for its folders and its base name (a library's: from its library folder on).

Where a version renamed a column every name it had is listed; the reader takes the first one
present. Some tables are read in part: ``rows`` selects the rows read (the others are not
copied) and ``named_rows`` the rows whose texts and string ids are read (the others keep
their numbers only).
"""

from __future__ import annotations

from dataclasses import dataclass

# The first bytes of every SQLite database file.
SQLITE_MAGIC = b"SQLite format 3\x00"

STRING_TABLE = "StringIds"

# NVTX eventType values as exported (ENUM_NSYS_EVENT_TYPE).
NVTX_PUSH_POP = 59
NVTX_START_END = 60
NVTX_DOMAIN_CREATE = 75
NVTX_DOMAIN_DESTROY = 76
NVTX_RANGE_TYPES = (NVTX_PUSH_POP, NVTX_START_END)
# Rows whose name is read: ranges, and domain creations (the domain's name).
NVTX_NAMED_TYPES = (*NVTX_RANGE_TYPES, NVTX_DOMAIN_CREATE)

# The export metadata read (names in ``META_DATA_EXPORT``, ``EXPORT_META_DATA``): the nsys
# version and the export schema version.
EXPORT_META_KEYS = ("EXPORT_PRODUCT_VERSION", "EXPORT_SCHEMA_VERSION")

# Capture options read from ``META_DATA_CAPTURE`` (names only, never the environment): the
# per-process ``PROCESS_n:COLLECT_*_TRACE`` flags and the ``CAPTURE_EVENT_TYPE`` rows.
CAPTURE_FLAGS = {"COLLECT_NVTX_TRACE": "nvtx", "COLLECT_CUDA_TRACE": "cuda"}
CAPTURE_EVENT_TYPE = "CAPTURE_EVENT_TYPE"
CAPTURE_EVENT_TYPES = {"NvtxEvents": "nvtx", "Cuda": "cuda", "OSRuntime": "osrt"}
CAPTURE_KEYS = frozenset({CAPTURE_EVENT_TYPE, *CAPTURE_FLAGS})

# ``DIAGNOSTIC_EVENT`` texts read (SQL LIKE patterns): nsys's notes that it dropped records.
DIAGNOSTIC_PATTERNS = ("%ardware tracing%", "%events dropped%", "%records dropped%")


@dataclass(frozen=True)
class Rows:
    """An SQL condition on a table's rows and the columns it reads."""

    sql: str
    columns: tuple[str, ...]


@dataclass(frozen=True)
class Table:
    numbers: tuple[str, ...] = ()
    string_ids: tuple[str, ...] = ()
    texts: tuple[str, ...] = ()
    keys: tuple[str, ...] = ()
    known: tuple[str, ...] = ()
    payloads: tuple[str, ...] = ()
    rows: Rows | None = None
    named_rows: Rows | None = None

    @property
    def columns(self) -> tuple[str, ...]:
        return (
            *self.numbers,
            *self.string_ids,
            *self.texts,
            *self.keys,
            *self.known,
            *self.payloads,
        )


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _key_is(key: str) -> str:
    """SQL: the ``name`` column's last ``:`` part is ``key`` (``PROCESS_0:COLLECT_CUDA_TRACE``)."""
    return f'("name" = {_quoted(key)} OR "name" GLOB {_quoted("*:" + key)})'


_CAPTURE_ROWS = " OR ".join(
    [
        f'({_key_is(CAPTURE_EVENT_TYPE)} AND "value" IN '
        f"({', '.join(map(_quoted, CAPTURE_EVENT_TYPES))}))",
        *(
            f"({_key_is(flag)} AND typeof(\"value\") = 'text' AND lower(\"value\") = 'true')"
            for flag in CAPTURE_FLAGS
        ),
    ]
)

_GPU_OP = ("start", "end", "deviceId", "streamId", "correlationId", "globalPid", "processId")
_API = Table(numbers=("start", "end", "globalTid", "correlationId"), string_ids=("nameId",))
_GPU_INFO = Table(numbers=("cudaId", "id"), texts=("name", "busLocation", "pciBusId"))
_EXPORT_META = Table(
    texts=("name", "value"),
    rows=Rows(f'"name" IN ({", ".join(map(_quoted, EXPORT_META_KEYS))})', ("name",)),
)

TABLES: dict[str, Table] = {
    "CUPTI_ACTIVITY_KIND_KERNEL": Table(numbers=_GPU_OP, string_ids=("shortName", "demangledName")),
    "CUPTI_ACTIVITY_KIND_MEMCPY": Table(
        numbers=(*_GPU_OP, "bytes", "copyKind", "srcKind", "dstKind")
    ),
    "CUPTI_ACTIVITY_KIND_MEMSET": Table(numbers=(*_GPU_OP, "bytes", "memKind")),
    "CUPTI_ACTIVITY_KIND_GRAPH_TRACE": Table(numbers=_GPU_OP),
    "CUPTI_ACTIVITY_KIND_RUNTIME": _API,
    "CUPTI_ACTIVITY_KIND_DRIVER": _API,
    "OSRT_API": Table(numbers=("start", "end", "globalTid"), string_ids=("nameId",)),
    "PROFILER_OVERHEAD": Table(numbers=("start", "end", "globalTid")),
    "SCHED_EVENTS": Table(numbers=("start", "cpu", "isSchedIn", "globalTid")),
    "NVTX_EVENTS": Table(
        numbers=("start", "end", "eventType", "globalTid", "domainId", "color"),
        string_ids=("textId",),
        texts=("text",),
        payloads=("jsonText", "binaryData"),
        named_rows=Rows(
            f'"eventType" IN ({", ".join(map(str, NVTX_NAMED_TYPES))})', ("eventType",)
        ),
    ),
    # The layout of binary payloads (``payloads.blob_layouts``).
    "NVTX_PAYLOAD_SCHEMAS": Table(numbers=("domainId", "schemaId", "payloadSize")),
    "NVTX_PAYLOAD_SCHEMA_ENTRIES": Table(
        numbers=("domainId", "schemaId", "type", "offset"), known=("name",)
    ),
    "ThreadNames": Table(numbers=("globalTid",), string_ids=("nameId",)),
    "PROCESSES": Table(numbers=("pid",), texts=("name",)),
    "TARGET_INFO_GPU": Table(numbers=("cuDevice", "id"), texts=("name", "busLocation")),
    "TARGET_INFO_CUDA_DEVICE": _GPU_INFO,
    "TARGET_INFO_CUDA_GPU": _GPU_INFO,
    "TARGET_INFO_SESSION_START_TIME": Table(numbers=("utcEpochNs",)),
    "ENUM_CUDA_MEM_KIND": Table(numbers=("id",), texts=("label",)),
    "ENUM_CUDA_MEMCPY_OPER": Table(numbers=("id",), texts=("name",)),
    "DIAGNOSTIC_EVENT": Table(
        texts=("text",),
        rows=Rows(" OR ".join(f'"text" LIKE {_quoted(p)}' for p in DIAGNOSTIC_PATTERNS), ("text",)),
    ),
    "META_DATA_EXPORT": _EXPORT_META,
    "EXPORT_META_DATA": _EXPORT_META,
    "META_DATA_CAPTURE": Table(
        texts=("value",), keys=("name",), rows=Rows(_CAPTURE_ROWS, ("name", "value"))
    ),
    STRING_TABLE: Table(numbers=("id",), texts=("value",)),
}
"""Table name -> what the reader reads of it."""
