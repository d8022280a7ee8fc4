"""The reader on real exports of three nsys versions, on built exports of each schema, and on
files that are not exports."""

from __future__ import annotations

import hashlib
import sqlite3

import pytest

from nsysprobe.errors import InputError, TraceError
from nsysprobe.trace.reader import Trace, pid_of, tid_of

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
        got = t.nvtx_ranges().sort_values("start", kind="stable")["name"].tolist()
    assert sorted(got) == sorted(v.decode() for (v,) in expected)


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
        assert n["name"].tolist() == ["Batch 0"]
        assert n["color"].tolist() == [0xFF0000FF]
        assert [t.strings[i] for i in o["nameId"]] == ["munmap"]
        assert tid_of(o["globalTid"]).tolist() == [MAIN_TID]
        assert t.mem_kind_labels()[0] == "Pageable"
        assert (t.nsys_version is None) == (version == "2020.3")


def test_absent_tables_read_as_empty(build):
    ex = Export()
    ex.nvtx(0, 10, "only nvtx")
    with Trace(build(ex)) as t:
        assert t.kernels().empty and t.runtime().empty and t.osrt().empty
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
        (name,) = t.nvtx_ranges()["name"].tolist()
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
    assert k["start"].tolist() == [100] and k.attrs["dropped"] == 1
    assert n["name"].tolist() == ["closed"] and n.attrs["dropped"] == 1


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
    with pytest.raises(InputError, match="is a directory"):
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
