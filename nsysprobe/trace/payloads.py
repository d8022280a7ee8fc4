"""The Python stacks nsys samples, as an export holds them: decoded, checked, and rewritten
for ``scrub``. No SQLite here: the reader (``sampling.python_samples``) reads the rows.

``nsys profile --python-sampling=true`` (``nsysprobe run --python``) records every sample as
an NVTX mark (``eventType`` 34) in a domain of its own, named ``Python Periodic Sampling``
(2025.3; ``Python Backtrace`` in 2023.4), on the thread it sampled. The frames are the mark's
extended payload, laid out by a schema of that name in ``NVTX_PAYLOAD_SCHEMAS`` and
``NVTX_PAYLOAD_SCHEMA_ENTRIES``: thread state, frame count, then frames of (Function, File,
Line), innermost first; Function and File are ``StringIds`` ids. Where the export puts them
(read on this project's machines, 2026-12-04):

- ``nsys export --type sqlite --include-json=true`` (2025.3): ``NVTX_EVENTS.jsonText``, e.g.
  ``{"Python Periodic Sampling": {"Thread state": "Running", "Frames count": 2, "Frames":
  [{"Function": 349, "File": 350, "Line": 134}, ...]}}``;
- ``--include-blobs=true`` (2025.3): ``NVTX_EVENTS.binaryData``, the payload as the workload
  gave it to NVTX (``nvtxPayloadData_t``): a uint64 count, then per payload its schema id,
  size and offset in the blob (uint64 each), then the payloads, each laid out by its schema
  (entry offsets, types and the frame schema's ``payloadSize``); string handles are written
  as ``StringIds`` ids;
- a plain export (2025.3): the marks, with neither column filled;
- nsys 2023.4.4: the marks in domain ``Python Backtrace``, and no payload column at all (its
  JSON export carries the blob; its SQLite export cannot).

Frame files are paths. A library's file is told by the folder it sits in
(``LIBRARY_FOLDER``: ``site-packages``, ``dist-packages``, ``lib/pythonX.Y``); what follows
that folder names its module (``torch/serialization.py``: ``torch.serialization``), and is
all ``scrub`` keeps of the path besides a placeholder for the folders before it. A user's file
keeps its base name the same way.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass

# The NVTX domains whose marks are Python samples (by name; domain ids are per process).
SAMPLING_DOMAINS = frozenset({"Python Periodic Sampling", "Python Backtrace"})
# The payload schema of a sample, and the names of the entries read.
SAMPLING_SCHEMA = "Python Periodic Sampling"
FRAMES, FRAME_COUNT = "Frames", "Frames count"
FUNCTION, FILE, LINE = "Function", "File", "Line"
NVTX_MARK = 34
# The names of the schema entries the reader looks for: all ``scrub`` keeps of such names.
SCHEMA_NAMES = frozenset({FRAMES, FRAME_COUNT, FUNCTION, FILE, LINE})
# Frames read of one sample at most (Python's default recursion limit is 1,000).
MAX_FRAMES = 1024

# (function string id, file string id, line), innermost frame first.
RawFrame = tuple[int, int, int]

# NVTX payload entry types (``nvToolsExtPayload.h``) read as integers: type -> (size, signed).
# 1-10 are C's char .. unsigned long long, 11-18 the sized integers, 22 size_t, 23 an address,
# 80 a registered string handle (written by the export as a ``StringIds`` id).
_INTEGER_TYPES = {
    1: (1, True), 2: (1, False), 3: (2, True), 4: (2, False), 5: (4, True), 6: (4, False),
    7: (8, True), 8: (8, False), 9: (8, True), 10: (8, False), 11: (1, True), 12: (1, False),
    13: (2, True), 14: (2, False), 15: (4, True), 16: (4, False), 17: (8, True), 18: (8, False),
    22: (8, False), 23: (8, False), 80: (8, False),
}  # fmt: skip
_FORMATS = {
    (1, True): "<b", (1, False): "<B", (2, True): "<h", (2, False): "<H",
    (4, True): "<i", (4, False): "<I", (8, True): "<q", (8, False): "<Q",
}  # fmt: skip
_U64 = struct.Struct("<Q")
_DESCRIPTOR = struct.Struct("<QQQ")  # schema id, size, offset in the blob


@dataclass(frozen=True)
class Field:
    offset: int
    size: int
    fmt: str

    def read(self, raw: bytes, at: int) -> int | None:
        end = at + self.offset + self.size
        if at < 0 or end > len(raw):
            return None
        return struct.unpack_from(self.fmt, raw, at + self.offset)[0]


@dataclass(frozen=True)
class BlobLayout:
    """Where a sample's fields sit in its payload (one schema of one domain)."""

    count: Field  # "Frames count", from the payload's start
    frames: int  # offset of the first frame
    stride: int  # bytes per frame (the frame schema's payloadSize)
    function: Field  # from a frame's start
    file: Field
    line: Field

    def spans(self, count: int) -> list[tuple[int, int]]:
        """The byte ranges read of a payload holding ``count`` frames (from its start)."""
        out = [(self.count.offset, self.count.size)]
        for k in range(count):
            base = self.frames + k * self.stride
            out += [(base + f.offset, f.size) for f in (self.function, self.file, self.line)]
        return out


def _field(offset, kind) -> Field | None:
    spec = _INTEGER_TYPES.get(kind) if isinstance(kind, int) else None
    if spec is None or not isinstance(offset, (int, type(None))):
        return None
    return Field(offset or 0, spec[0], _FORMATS[spec])


def blob_layouts(schemas: list[tuple], entries: list[tuple]) -> dict[tuple[int, int], BlobLayout]:
    """(domainId, schemaId) -> the layout of each sample schema the export describes: a schema
    with the entries ``Frames count`` and ``Frames``, whose frame schema has ``Function``,
    ``File`` and ``Line`` (by what it holds, not by its name, which nsys may change).

    ``schemas``: rows of (domainId, schemaId, payloadSize); ``entries``: rows of (domainId,
    schemaId, name, type, offset). A schema whose entries are not integers of a known size
    has no layout: its samples read as unreadable."""
    sizes = {(d, s): size for d, s, size in schemas}
    fields: dict[tuple[int, int], dict[str, tuple]] = {}
    for d, s, name, kind, offset in entries:
        fields.setdefault((d, s), {})[name] = (kind, offset)
    out = {}
    for (d, s), top in fields.items():
        if FRAMES not in top or FRAME_COUNT not in top:
            continue
        frame_type, frames_at = top[FRAMES]
        inner = fields.get((d, frame_type), {})
        stride = sizes.get((d, frame_type))
        count = _field(top[FRAME_COUNT][1], top[FRAME_COUNT][0])
        parts = [_field(inner[k][1], inner[k][0]) if k in inner else None for k in _FRAME_KEYS]
        if (
            count is None
            or None in parts
            or not isinstance(stride, int)
            or not isinstance(frames_at, (int, type(None)))
            or stride < max(p.offset + p.size for p in parts)  # type: ignore[union-attr]
        ):
            continue
        out[d, s] = BlobLayout(count, frames_at or 0, stride, *parts)  # type: ignore[arg-type]
    return out


_FRAME_KEYS = (FUNCTION, FILE, LINE)


def _payload_at(raw: bytes, domain: int, layouts: dict) -> tuple[int, BlobLayout] | None:
    """The offset in ``raw`` and the layout of its sampling payload, if it holds one."""
    if len(raw) < _U64.size:
        return None
    (n,) = _U64.unpack_from(raw, 0)
    for i in range(min(n, (len(raw) - _U64.size) // _DESCRIPTOR.size)):
        schema, size, at = _DESCRIPTOR.unpack_from(raw, _U64.size + i * _DESCRIPTOR.size)
        layout = layouts.get((domain, schema))
        if layout is not None and at + size <= len(raw):
            return at, layout
    return None


def blob_frames(raw: bytes, domain: int, layouts: dict) -> list[RawFrame] | None:
    """The frames of a ``binaryData`` payload, innermost first; None when it is none."""
    found = _payload_at(raw, domain, layouts)
    if found is None:
        return None
    at, layout = found
    count = layout.count.read(raw, at)
    if count is None or not 0 <= count <= MAX_FRAMES:
        return None
    frames = []
    for k in range(count):
        base = at + layout.frames + k * layout.stride
        values = [f.read(raw, base) for f in (layout.function, layout.file, layout.line)]
        if None in values:
            return None
        frames.append(tuple(values))
    return frames  # type: ignore[return-value]


def json_frames(raw: bytes | str) -> list[RawFrame] | None:
    """The frames of a ``jsonText`` payload, innermost first; None when it is none."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    # The sample's schema is the key: ``Python Periodic Sampling`` in 2025.3, else the one key.
    bodies = list(data.values()) if isinstance(data, dict) else []
    body = data.get(SAMPLING_SCHEMA) if bodies else None
    if body is None and len(bodies) == 1:
        body = bodies[0]
    frames = body.get(FRAMES) if isinstance(body, dict) else None
    if not isinstance(frames, list) or len(frames) > MAX_FRAMES:
        return None
    out = []
    for frame in frames:
        values = [frame.get(k) if isinstance(frame, dict) else None for k in _FRAME_KEYS]
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            return None
        out.append(tuple(values))
    return out  # type: ignore[return-value]


# -- for scrub: payloads holding nothing but what is read ---------------------------------


def clean_json(raw: bytes | str) -> tuple[str, list[RawFrame]] | None:
    """A ``jsonText`` sample rewritten to hold its frames only, and the frames; None when it
    is no sample."""
    frames = json_frames(raw)
    if frames is None:
        return None
    body = [{FUNCTION: f, FILE: p, LINE: n} for f, p, n in frames]
    return json.dumps({SAMPLING_SCHEMA: {FRAMES: body}}, separators=(",", ":")), frames


def clean_blob(raw: bytes, domain: int, layouts: dict) -> tuple[bytes, list[RawFrame]] | None:
    """A ``binaryData`` sample with every byte the reader does not read set to zero, and the
    frames; None when it is no sample."""
    frames = blob_frames(raw, domain, layouts)
    found = _payload_at(raw, domain, layouts)
    if frames is None or found is None:
        return None
    at, layout = found
    out = bytearray(len(raw))
    keep = [(0, _U64.size)]
    (n,) = _U64.unpack_from(raw, 0)
    keep += [(_U64.size + i * _DESCRIPTOR.size, _DESCRIPTOR.size) for i in range(n)]
    keep += [(at + offset, size) for offset, size in layout.spans(len(frames))]
    for start, size in keep:
        out[start : start + size] = raw[start : start + size]
    return bytes(out), frames


# -- frame files --------------------------------------------------------------------------

# The folder a library's file sits in: the last one of a path wins (site-packages inside
# lib/python3.12), and what follows it names the module.
LIBRARY_FOLDER = re.compile(r"(?<![^/])(site-packages|dist-packages|lib/python\d+(?:\.\d+)*t?)/")


def library_tail(path: str) -> str | None:
    """``site-packages/torch/serialization.py`` of a library's file; None for other files."""
    starts = [m.start(1) for m in LIBRARY_FOLDER.finditer(path)]
    return path[starts[-1] :] if starts else None


def module_of(path: str) -> str | None:
    """``torch.serialization`` for a library's file, None for other files."""
    tail = library_tail(path)
    if tail is None:
        return None
    found = LIBRARY_FOLDER.match(tail)
    rest = tail[found.end() :] if found else tail
    parts = [p for p in rest.removesuffix(".py").split("/") if p]
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts) or None


def short_file(path: str) -> str:
    """What a report shows of a frame's file: the base name."""
    return path.rstrip("/").rsplit("/", 1)[-1] or path


def scrubbed_file(path: str, scrub: Callable[[str], str]) -> str:
    """``path`` as ``scrub`` keeps a frame's file: the folders before the library folder (or
    before the base name) scrubbed as a path (``<path:...>``), the rest scrubbed as text, which
    leaves names as they are."""
    tail = library_tail(path)
    if tail is None:
        head, sep, base = path.rpartition("/")
        tail = base if sep else path
    head = path[: len(path) - len(tail)].rstrip("/")
    if not head:
        return scrub(tail)
    return f"{scrub(head)}/{scrub(tail)}"
