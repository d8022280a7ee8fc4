"""Python sampling as the reader reads it (``Trace.python_samples``) and as ``nsysprobe scrub``
keeps it, on the H200 gc_collect capture exported twice: with ``--include-json=true`` (the
frames in ``jsonText``) and with ``--include-blobs=true`` (in ``binaryData``)."""

from __future__ import annotations

import html
import json
import re
import shutil
import sqlite3
import struct
from pathlib import Path

from click.testing import CliRunner

from nsysprobe.cli import main
from nsysprobe.trace.reader import Trace
from nsysprobe.trace.secrets.placeholders import PLACEHOLDER

from conftest import SAMPLE_TRACES

JSON_FORM = SAMPLE_TRACES / "h200_gc_collect_python.sqlite"
BLOB_FORM = SAMPLE_TRACES / "h200_gc_collect_python_blobs.sqlite"
MARK = 34
TOKEN = "hf_QpLkWzXcVbNmAsDfGhJkLqWeRtYuIoP"


def rows(path: Path, column: str) -> list[tuple]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return db.execute(
            f"SELECT start, globalTid, {column} FROM NVTX_EVENTS WHERE eventType = {MARK} "
            "ORDER BY start"
        ).fetchall()
    finally:
        db.close()


def names(path: Path) -> dict[int, str]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {i: html.unescape(v) for i, v in db.execute("SELECT id, value FROM StringIds")}
    finally:
        db.close()


def by_json(path: Path) -> list[tuple[int, int, tuple]]:
    """Every mark's (start, thread, frames innermost first), json parsed here."""
    strings = names(path)
    out = []
    for start, tid, text in rows(path, "jsonText"):
        frames = json.loads(text)["Python Periodic Sampling"]["Frames"]
        stack = tuple((strings[f["Function"]], strings[f["File"]], f["Line"]) for f in frames)
        out.append((start, tid, stack))
    return out


def by_blob(path: Path) -> list[tuple[int, int, tuple]]:
    """The same from the binary payloads, decoded here by the schema's numbers as 2025.3
    exports them: a count, then (schema id, size, offset) per payload; in the payload the
    frame count (uint32 at 12) and frames of 24 bytes from 16: function and file (string
    ids, uint64), line (int32)."""
    strings = names(path)
    out = []
    for start, tid, blob in rows(path, "binaryData"):
        (n, _schema, _size, at) = struct.unpack_from("<QQQQ", blob, 0)
        assert n == 1
        (count,) = struct.unpack_from("<I", blob, at + 12)
        stack = []
        for k in range(count):
            function, file, line = struct.unpack_from("<QQi", blob, at + 16 + 24 * k)
            stack.append((strings[function], strings[file], line))
        out.append((start, tid, tuple(stack)))
    return out


def unkeyed(samples: list[tuple[int, int, tuple]]) -> list[tuple[int, int, tuple]]:
    """Samples with each placeholder as its kind: each scrub hashes with a key of its own."""
    return [
        (t, tid, tuple((f, PLACEHOLDER.sub(r"<\1>", p), n) for f, p, n in stack))
        for t, tid, stack in samples
    ]


def by_reader(path: Path) -> list[tuple[int, int, tuple]]:
    with Trace(path) as trace:
        s = trace.python_samples()
        assert s.readable == len(s)
        return [
            (t, tid, tuple((f.function, f.file, f.line) for f in s.stacks[k]))
            for t, tid, k in zip(s.start_ns.tolist(), s.thread.tolist(), s.stack.tolist())
        ]


def test_the_json_and_the_blob_exports_read_as_the_same_samples():
    from_json = by_json(JSON_FORM)
    assert len(from_json) == 3753
    assert by_reader(JSON_FORM) == from_json
    assert by_reader(BLOB_FORM) == by_blob(BLOB_FORM)
    # The two exports were scrubbed apart: equal up to the placeholders' keys.
    assert unkeyed(by_blob(BLOB_FORM)) == unkeyed(from_json)
    with Trace(JSON_FORM) as a, Trace(BLOB_FORM) as b:
        assert (a.python_samples().form, b.python_samples().form) == ("json", "blobs")
        # One thread's marks are the whole export's here: nsys sampled the main thread only.
        tid = int(a.python_samples().thread[0])
        assert len(a.python_samples(tid)) == len(a.python_samples())


def test_marks_without_a_payload_are_counted_and_hold_no_stack():
    """The earlier export of a sampled capture (``h200_gc_collect``: no payload columns)."""
    path = SAMPLE_TRACES / "h200_gc_collect.sqlite"
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    (n,) = db.execute(f"SELECT count(*) FROM NVTX_EVENTS WHERE eventType = {MARK}").fetchone()
    db.close()
    with Trace(path) as trace:
        s = trace.python_samples()
    assert len(s) == n == 4164 and s.readable == 0 and s.form == "" and s.stacks == ()


def _plant(path: Path) -> None:
    """Secrets where an export may hold them near the samples: a frame file under a home
    folder named with a token, a token beside the frames in a JSON payload and in a sample's
    unread bytes, and a JSON payload on a mark of another domain."""
    db = sqlite3.connect(path)
    (file_id,) = db.execute(
        "SELECT id FROM StringIds WHERE value LIKE '%gc_collect.py' ORDER BY id LIMIT 1"
    ).fetchone()
    db.execute(
        "UPDATE StringIds SET value = ? WHERE id = ?",
        (f"/home/alice/{TOKEN}/gc_collect.py", file_id),
    )
    columns = {r[1] for r in db.execute("PRAGMA table_info(NVTX_EVENTS)")}
    for rowid, text in db.execute(
        f"SELECT rowid, jsonText FROM NVTX_EVENTS WHERE eventType = {MARK} "
        "AND jsonText IS NOT NULL LIMIT 1"
    ).fetchall():
        data = json.loads(text)
        data["Python Periodic Sampling"]["Thread state"] = f"HF_TOKEN={TOKEN}"
        data["env"] = TOKEN
        db.execute("UPDATE NVTX_EVENTS SET jsonText = ? WHERE rowid = ?", (json.dumps(data), rowid))
        db.execute(
            "INSERT INTO NVTX_EVENTS (start, eventType, globalTid, domainId, jsonText) "
            "SELECT start + 1, eventType, globalTid, 77, ? FROM NVTX_EVENTS WHERE rowid = ?",
            (json.dumps({"Python Periodic Sampling": {"Frames": [], "x": TOKEN}}), rowid),
        )
    if "binaryData" in columns:  # a binary form holds both columns, its JSON empty
        for rowid, blob in db.execute(
            f"SELECT rowid, binaryData FROM NVTX_EVENTS WHERE eventType = {MARK} "
            "AND binaryData IS NOT NULL LIMIT 3"
        ).fetchall():
            # the thread state and its padding (bytes 32-43) are not read
            planted = blob[:32] + TOKEN.encode()[:12] + blob[44:]
            db.execute("UPDATE NVTX_EVENTS SET binaryData = ? WHERE rowid = ?", (planted, rowid))
    db.commit()
    db.close()


def test_scrub_keeps_the_frames_and_drops_what_is_not_read(tmp_path):
    for source in (JSON_FORM, BLOB_FORM):
        planted = tmp_path / f"planted-{source.name}"
        shutil.copyfile(source, planted)
        _plant(planted)
        before = by_reader(planted)
        out = tmp_path / f"shared-{source.name}"
        result = CliRunner().invoke(main, ["scrub", str(planted), "-o", str(out)])
        assert result.exit_code == 0, result.output
        raw = out.read_bytes()
        assert TOKEN.encode() not in raw and TOKEN.encode()[:12] not in raw
        assert b"alice" not in raw and b"/home/" not in raw
        after = by_reader(out)
        assert len(after) == len(before) == 3753
        # The same samples and lines, functions as they were, files by their base name; the
        # folders before it are one placeholder.
        for (t0, tid0, s0), (t1, tid1, s1) in zip(before, after):
            assert (t0, tid0) == (t1, tid1)
            assert [(f, p.rsplit("/", 1)[-1], n) for f, p, n in s0] == [
                (f, p.rsplit("/", 1)[-1], n) for f, p, n in s1
            ]
        files = {p for _, _, stack in after for _, p, _ in stack}
        folders = re.compile(f"(?:{PLACEHOLDER.pattern})+")
        assert all(folders.fullmatch(p.split("/", 1)[0]) for p in files)
        assert any(p.endswith("/site-packages/torch/nn/modules/module.py") for p in files)
        db = sqlite3.connect(out)
        payload = "jsonText" if source is JSON_FORM else "binaryData"
        (kept,) = db.execute(f"SELECT count({payload}) FROM NVTX_EVENTS").fetchone()
        db.close()
        assert kept == 3753  # the samples' payloads only: not the planted mark of domain 77
