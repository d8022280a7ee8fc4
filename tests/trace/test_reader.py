"""The reader on real exports of three nsys versions, on built exports of each schema, and on
files that are not exports."""

from __future__ import annotations

import hashlib
import re
import sqlite3

import numpy as np
import pytest

from nsysprobe.errors import InputError, TraceError
from nsysprobe.trace import arrow
from nsysprobe.trace.reader import Trace
from nsysprobe.trace.values import pid_of, tid_of

from conftest import shared_trace
from exports import MAIN_TID, PID, Export, gtid


def query(path, sql):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    db.text_factory = bytes
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


@pytest.mark.parametrize(
    "name, version, kernels, memcpy, osrt, nvtx",
    [
        ("cs336_h100_train_nsys2023.4.sqlite", "2023.4.4.54", 9700, 260, 100913, 0),
        ("nsysai_mfu_2gpu_before_nsys2026.2.sqlite", "2026.2.1.210", 4010, 1020, 0, 19118),
        ("centerformer_titanrtx_nsys2022.4.sqlite", "2022.4.2.1", 0, 0, 0, 1824),
    ],
)
def test_real_exports_read_in_full(name, version, kernels, memcpy, osrt, nvtx):
    path = shared_trace(name)
    with Trace(path) as t:
        assert t.nsys_version == version
        assert len(t.kernels()) == kernels
        assert len(t.memcpy()) == memcpy
        assert len(t.osrt()) == osrt
        assert len(t.nvtx_ranges()) == nvtx


def test_nvtx_names_come_from_text_or_text_id_in_one_file():
    path = shared_trace("nsysai_mfu_2gpu_before_nsys2026.2.sqlite")
    expected = query(
        path,
        "SELECT coalesce(n.text, s.value) FROM NVTX_EVENTS n LEFT JOIN StringIds s "
        "ON s.id = n.textId WHERE n.eventType IN (59, 60) AND n.end IS NOT NULL "
        "ORDER BY n.start, n.rowid",
    )
    styles = query(
        path,
        "SELECT sum(text IS NOT NULL), sum(text IS NULL AND textId IS NOT NULL) FROM NVTX_EVENTS",
    )[0]
    assert styles[0] > 0 and styles[1] > 0  # the file really mixes both styles
    with Trace(path) as t:
        ranges = t.nvtx_ranges()
        got = t.nvtx_names(ranges["row"])
    assert sorted(got) == sorted(v.decode() for (v,) in expected)
    # The table holds each name's pattern: digits masked (``op_id = 990346`` -> ``op_id = #``).
    masked = [re.sub(r"\d+", "#", n) for n in got]
    assert ranges["pattern"].values().tolist() == masked


def test_gpu_descriptions_and_packed_ids_on_a_real_export():
    path = shared_trace("cs336_h100_train_nsys2023.4.sqlite")
    with Trace(path) as t:
        gpus = t.gpus()
        runtime = t.runtime()
    assert len(gpus) == 8 and all(g.name == "NVIDIA H100 80GB HBM3" for g in gpus)
    (raw,) = query(path, "SELECT globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME LIMIT 1")[0]
    assert pid_of([raw])[0] == (raw >> 24) & 0xFFFFFF
    assert set(pid_of(runtime["globalTid"])) == {raw >> 24 & 0xFFFFFF}


def test_the_export_is_not_written(tmp_path):
    path = shared_trace("cs336_h100_train_nsys2023.4.sqlite")
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    with Trace(path) as t:
        t.kernels(), t.osrt(), t.nvtx_ranges()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


@pytest.mark.parametrize("version", ["2020.3", "2022.4", "2023.4", "2026.2"])
def test_every_schema_reads_the_same_events(build, version):
    ex = Export(version=version)
    ex.kernel(100, 200, launch_at=50)
    ex.memcpy(300, 400, 4096, api="cudaMemcpy_v3020")
    ex.nvtx(0, 1000, "Batch 0", color=0xFF0000FF)
    ex.osrt(10, 20, "munmap")
    with Trace(build(ex)) as t:
        k, m, n, o = t.kernels(), t.memcpy(), t.nvtx_ranges(), t.osrt()
        assert (k["start"].tolist(), k["end"].tolist()) == ([100], [200])
        assert m["bytes"].tolist() == [4096]
        assert t.nvtx_details(n["row"]) == [("Batch 0", 0xFF0000FF)]
        assert n["pattern"].values().tolist() == ["Batch #"]
        assert [t.strings[i] for i in o["nameId"]] == ["munmap"]
        assert tid_of(o["globalTid"]).tolist() == [MAIN_TID]
        assert t.mem_kind_labels()[0] == "Pageable"
        assert (t.nsys_version is None) == (version == "2020.3")


def test_absent_tables_read_as_empty(build):
    ex = Export()
    ex.nvtx(0, 10, "only nvtx")
    with Trace(build(ex)) as t:
        assert len(t.kernels()) == len(t.runtime()) == len(t.osrt()) == 0
        assert list(t.memcpy().columns)[:2] == ["start", "end"]
        assert t.gpus() == [] and t.requested_traces is None


def test_non_utf8_text_is_decoded_leniently(build, tmp_path):
    ex = Export(version="2022.4")
    ex.nvtx(0, 10, "placeholder")
    path = build(ex)
    db = sqlite3.connect(path)
    cp1251 = "Пакет 1".encode("cp1251")
    # CAST keeps the bytes but stores them as TEXT, as a Windows export does
    db.execute("UPDATE NVTX_EVENTS SET text = CAST(? AS TEXT)", (cp1251,))
    db.execute("INSERT INTO StringIds VALUES (999, CAST(? AS TEXT))", (b"caf\xe9",))
    db.execute("INSERT INTO StringIds VALUES (1000, ?)", (b"blob\xff",))
    db.commit()
    db.close()
    with Trace(path) as t:
        (name,) = t.nvtx_names(t.nvtx_ranges()["row"])
        assert name.endswith(" 1") and "\ufffd" in name
        assert t.strings[999] == "caf\ufffd"
        assert t.strings[1000] == "blob\ufffd"  # a BLOB where text belongs reads as text


def test_reversed_and_open_intervals_are_skipped_and_counted(build):
    ex = Export()
    ex.kernel(100, 200)
    ex.kernel(500, 400)  # end before start
    ex.nvtx(0, None, "never closed")
    ex.nvtx(0, 50, "closed")
    with Trace(build(ex)) as t:
        k = t.kernels()
        n = t.nvtx_ranges()
        assert t.nvtx_names(n["row"]) == ["closed"] and n.dropped == 1
    assert k["start"].tolist() == [100] and k.dropped == 1


# Names as PyTorch, NCCL and users write them; digits of other scripts are digits too.
NAMES = [
    "Batch 12",
    "Batch 7",
    "aten::add, seq = 12, op_id = 3401",
    "aten::add, seq = 3, op_id = 77",
    "ncclAllReduce",
    "step \u0663\u0664 of 9",  # Arabic-Indic digits
    "",
    "a#1",
    "x" * 300 + " 5",
]


def _named_export(build, extra=()):
    """Every name of NAMES twice, once in ``text`` and once through ``textId``, then ``extra``
    (SQL run on the saved file)."""
    ex = Export(version="2026.2")
    t = 0
    for inline in (True, False):
        for name in NAMES:
            ex.nvtx(t, t + 10, name, color=0xFF000000 + t, inline_text=inline)
            t += 20
    path = build(ex)
    db = sqlite3.connect(path)
    for sql, args in extra:
        db.execute(sql, args)
    db.commit()
    db.close()
    return path


def _shown(name: str) -> str:
    """A name as the reader gives it: longer than 200 characters, cut to 199 and an ellipsis."""
    return name if len(name) <= 200 else name[:199] + "\u2026"


SHOWN = [_shown(n) for n in NAMES + NAMES]


def _read_all(path):
    with Trace(path) as t:
        ranges = t.nvtx_ranges()
        ranges = ranges.take(np.argsort(ranges["start"], kind="stable"))
        return ranges, t.nvtx_details(ranges["row"])


def _masked(name: str) -> str:
    return re.sub(r"\d+", "#", name)


@pytest.mark.parametrize("batch_rows", [4, 1 << 18])
def test_nvtx_ranges_give_patterns_and_the_names_by_row(build, monkeypatch, batch_rows):
    # Batches of 4 rows: names masked and coded batch by batch, then across the batches.
    monkeypatch.setattr(arrow, "BATCH_ROWS", batch_rows)
    ranges, details = _read_all(_named_export(build))
    names = SHOWN
    assert [n for n, _ in details] == names
    assert [c for _, c in details] == [0xFF000000 + 20 * i for i in range(len(names))]
    assert ranges["pattern"].values().tolist() == [_masked(n) for n in names]
    assert ranges["pattern"].categories.tolist() == sorted({_masked(n) for n in names})


TEXT_ONLY = (
    "UPDATE NVTX_EVENTS SET text = coalesce(text, (SELECT value FROM StringIds "
    "WHERE id = textId)), textId = NULL",
    (),
)


@pytest.mark.parametrize(
    "layout",
    [
        # rowids 1e11 apart: blocks of rowids would be empty by the million
        [("UPDATE NVTX_EVENTS SET rowid = rowid * 100000000000", ())],
        # a column named rowid, holding text or one number, hides the real rowid
        [
            TEXT_ONLY,
            ("ALTER TABLE NVTX_EVENTS ADD COLUMN rowid TEXT", ()),
            ("UPDATE NVTX_EVENTS SET rowid = 'r' || _rowid_", ()),
        ],
        [
            ("ALTER TABLE NVTX_EVENTS ADD COLUMN rowid INTEGER", ()),
            ("UPDATE NVTX_EVENTS SET rowid = 5", ()),
        ],
        # names in text only, and no textId column at all
        [TEXT_ONLY, ("ALTER TABLE NVTX_EVENTS DROP COLUMN textId", ())],
    ],
    ids=["sparse-rowids", "rowid-column-text", "rowid-column-int", "no-textId"],
)
def test_nvtx_names_whatever_the_table_layout(build, layout):
    ranges, details = _read_all(_named_export(build, layout))
    names = SHOWN
    assert [n for n, _ in details] == names
    assert ranges["pattern"].values().tolist() == [_masked(n) for n in names]


@pytest.mark.parametrize(
    "damage, name",
    [
        # a NUL inside a name
        ("UPDATE NVTX_EVENTS SET text = CAST(? AS TEXT) WHERE start = 0", "Ba\x00tch 1"),
        # a number where text belongs reads as its text
        ("UPDATE NVTX_EVENTS SET text = ? WHERE start = 0", 51),
        # a BLOB of bytes that are not UTF-8, digits among them
        ("UPDATE NVTX_EVENTS SET text = ? WHERE start = 0", b"\xe2\x82 12 \xff9"),
    ],
)
def test_nvtx_names_survive_damaged_text(build, damage, name):
    args = (name.encode() if isinstance(name, str) else name,)
    ranges, details = _read_all(_named_export(build, [(damage, args)]))
    expected = {
        "Ba\x00tch 1": "Ba\\u0000tch 1",  # NUL, as every control character, escaped
        51: "51",
        b"\xe2\x82 12 \xff9": "\ufffd 12 \ufffd9",
    }[name]
    assert details[0][0] == expected
    assert [n for n, _ in details[1:]] == SHOWN[1:]
    assert ranges["pattern"].values().tolist()[0] == _masked(expected)


def test_requested_traces_come_from_capture_options(build):
    ex = Export()
    ex.capture = {
        "CAPTURE_EVENT_TYPE": "OSRuntime",
        "PROCESS_0:COLLECT_NVTX_TRACE": "true",
        "PROCESS_0:COLLECT_CUDA_TRACE": "false",
    }
    ex.kernel(0, 1)
    with Trace(build(ex)) as t:
        assert t.requested_traces == {"osrt", "nvtx"}


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="no such file; give a .sqlite export"):
        Trace(tmp_path / "nope.sqlite")


def test_directory(tmp_path):
    with pytest.raises(InputError, match="is a folder"):
        Trace(tmp_path)


def test_empty_file(tmp_path):
    (tmp_path / "e.sqlite").write_bytes(b"")
    with pytest.raises(InputError, match="an empty file; give a .sqlite export"):
        Trace(tmp_path / "e.sqlite")


def test_not_sqlite(tmp_path):
    (tmp_path / "x.sqlite").write_text("hello")
    with pytest.raises(InputError, match="not an SQLite file"):
        Trace(tmp_path / "x.sqlite")


def test_sqlite_that_is_not_an_export(tmp_path):
    db = sqlite3.connect(tmp_path / "other.sqlite")
    db.execute("CREATE TABLE users (id)")
    db.commit()
    db.close()
    with pytest.raises(TraceError, match="not an Nsight Systems export"):
        Trace(tmp_path / "other.sqlite")


def test_truncated_export(tmp_path):
    path = shared_trace("centerformer_titanrtx_nsys2022.4.sqlite")
    cut = tmp_path / "cut.sqlite"
    cut.write_bytes(path.read_bytes()[:20000])
    with pytest.raises(TraceError):
        with Trace(cut) as t:
            t.nvtx_ranges()


def test_global_ids_pack_pid_and_tid():
    g = gtid(PID, MAIN_TID)
    assert pid_of([g]).tolist() == [PID] and tid_of([g]).tolist() == [MAIN_TID]


def test_ids_beyond_32_bits_read_wide_and_analyze_the_same(tmp_path):
    # Ids are read as int32 when they fit. Correlation ids that do not (each multiplied by
    # 2^32, so that any cut to 32 bits would make them all one) read as int64, and every
    # figure of the analysis, which joins GPU work to its calls by them, stays the same.
    from nsysprobe.report.analyze import analyze
    from nsysprobe.report.saved import report_dict

    from conftest import SAMPLE_TRACES

    src = SAMPLE_TRACES / "h200_nccl_one_rank.sqlite"
    wide = tmp_path / "wide.sqlite"
    with sqlite3.connect(src) as a, sqlite3.connect(wide) as b:
        a.backup(b)
    db = sqlite3.connect(wide)
    tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    shifted = 0
    for table in tables:
        if "correlationId" in {r[1] for r in db.execute(f"PRAGMA table_info({table})")}:
            db.execute(f"UPDATE {table} SET correlationId = correlationId * 4294967296")
            shifted += 1
    db.commit()
    db.close()
    assert shifted >= 4  # runtime, kernels, copies, memsets at least
    with Trace(src) as t:
        assert t.kernels()["correlationId"].dtype == "int32"
        assert t.runtime()["correlationId"].dtype == "int32"
    with Trace(wide) as t:
        assert t.kernels()["correlationId"].dtype == "int64"
        assert int(t.runtime()["correlationId"].max()) > 1 << 32

    def figures(path):
        data = report_dict(analyze(path))
        data.pop("trace")  # names the file
        return data

    assert figures(wide) == figures(src)
