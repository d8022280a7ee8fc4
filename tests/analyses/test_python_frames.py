"""Python frames behind idle time (``analyses/python_frames.py``) on the H200 captures made
with Python sampling: each bucket's samples held to SQL over the export, the frame named held
to the workload's own source line, and what a report says when the frames are missing."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import nsysprobe
from nsysprobe.analyses.account import IDLE_CAUSES, analyze_account
from nsysprobe.analyses.events import Events
from nsysprobe.analyses.python_frames import PLACES_LISTED
from nsysprobe.cli import main
from nsysprobe.trace.reader import Trace

from conftest import SAMPLE_TRACES

ROOT = Path(__file__).parents[2]
MANIFEST = json.loads((SAMPLE_TRACES / "manifest.json").read_text())["pathologies"]["traces"]
SAMPLED = sorted(n for n, t in MANIFEST.items() if t.get("python_payload"))
MARK = 34


def marks(path: Path, thread: int) -> list[tuple[int, str | None, bytes | None]]:
    """The thread's Python sampling marks (start, jsonText, binaryData), by SQL: the marks of
    the domain whose creation row names it."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        (domain,) = db.execute(
            "SELECT domainId FROM NVTX_EVENTS WHERE eventType = 75 "
            "AND text = 'Python Periodic Sampling'"
        ).fetchone()
        columns = {row[1] for row in db.execute("PRAGMA table_info(NVTX_EVENTS)")}
        payload = ", ".join(c if c in columns else "NULL" for c in ("jsonText", "binaryData"))
        return db.execute(
            f"SELECT start, {payload} FROM NVTX_EVENTS WHERE eventType = ? "
            "AND domainId = ? AND globalTid = ? ORDER BY start",
            (MARK, domain, thread),
        ).fetchall()
    finally:
        db.close()


def spans_of(path: Path):
    with Trace(path) as trace:
        account = analyze_account(Events.load(trace), idle_spans=True).main
    return account


def counted_by_sql(path: Path, account, period: int) -> dict[str, list[int]]:
    """The samples (rowids) of each bucket, by SQL: a sample stands for [t - period/2,
    t + period/2) and goes to the idle cause whose pieces cover most of it, when they cover
    more than the busy rest of it does."""
    spans = account.idle_spans
    db = sqlite3.connect(":memory:")
    try:
        db.execute("ATTACH DATABASE ? AS src", (f"file:{path}?mode=ro",))
        db.execute("CREATE TABLE pieces (s INTEGER, e INTEGER, cause INTEGER)")
        db.executemany(
            "INSERT INTO pieces VALUES (?, ?, ?)",
            zip(spans.start_ns.tolist(), spans.end_ns.tolist(), spans.cause.tolist()),
        )
        db.execute("CREATE INDEX by_start ON pieces (s)")
        longest = int((spans.end_ns - spans.start_ns).max())
        rows = db.execute(
            """
            WITH samples AS (
                SELECT rowid AS id, start - :half AS lo, start - :half + :period AS hi
                FROM src.NVTX_EVENTS WHERE eventType = :mark AND globalTid = :thread
                AND (jsonText IS NOT NULL OR binaryData IS NOT NULL)),
            covered AS (
                SELECT id, cause, sum(min(e, hi) - max(s, lo)) AS ns FROM samples
                JOIN pieces ON s < hi AND e > lo AND s >= lo - :longest GROUP BY id, cause),
            ranked AS (
                SELECT id, cause, ns, sum(ns) OVER (PARTITION BY id) AS idle,
                row_number() OVER (PARTITION BY id ORDER BY ns DESC, cause) AS place
                FROM covered)
            SELECT cause, id FROM ranked WHERE place = 1 AND ns > :period - idle
            """,
            {
                "half": period // 2,
                "period": period,
                "mark": MARK,
                "thread": account.thread_id,
                "longest": longest,
            },
        ).fetchall()
    finally:
        db.close()
    out: dict[str, list[int]] = {}
    for c, row in rows:
        out.setdefault(IDLE_CAUSES[c], []).append(row)
    return out


@pytest.mark.parametrize("name", SAMPLED)
def test_each_buckets_samples_are_the_exports_marks_in_its_idle_pieces(name):
    path = SAMPLE_TRACES / name
    report = nsysprobe.analyze(path)
    frames = report.python_frames
    account = spans_of(path)
    starts = np.array([t for t, j, b in marks(path, account.thread_id) if j or b])
    period = int(np.median(np.diff(starts)))
    assert frames.period_ns == period
    assert frames.thread == report.account.main.thread == account.thread
    expected = {c: len(ids) for c, ids in counted_by_sql(path, account, period).items()}
    assert {b.bucket: b.samples for b in frames.buckets} == expected
    assert frames.samples == sum(expected.values()) > 300
    for b in frames.buckets:
        assert b.sampled_ns == b.samples * period
        assert b.bucket_ns == report.account.main.bucket(b.bucket).total_ns
        assert 0 < len(b.places) <= PLACES_LISTED
        assert [p.samples for p in b.places] == sorted((p.samples for p in b.places), reverse=True)
        assert all(p.ns == p.samples * period for p in b.places)
    assert frames.form == MANIFEST[name]["python_payload"]


def _json_frames(text: str, names: dict[int, str]) -> list[tuple[str, str, int]]:
    body = json.loads(text)["Python Periodic Sampling"]["Frames"]
    return [(names[f["Function"]], names[f["File"]], f["Line"]) for f in body]


def test_the_gc_collect_bucket_is_the_line_of_gc_collect():
    """The cpu bucket's first place is the line that called gc.collect() (a C function has
    no frame of its own): the bucket's samples (by SQL) whose innermost frame (json parsed
    here) is that line."""
    path = SAMPLE_TRACES / "h200_gc_collect_python.sqlite"
    frames = nsysprobe.analyze(path).python_frames
    cpu = frames.buckets[0]
    assert cpu.bucket == "cpu" and cpu.samples == frames.samples
    top = cpu.places[0]
    assert top.place == "step at gc_collect.py:72" and top.library is None
    source = (ROOT / "workloads" / "gc_collect.py").read_text().splitlines()
    assert source[top.user.line - 1].strip() == "gc.collect()"
    ids = counted_by_sql(path, spans_of(path), frames.period_ns)["cpu"]
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    names = dict(db.execute("SELECT id, value FROM StringIds"))
    texts = dict(db.execute(f"SELECT rowid, jsonText FROM NVTX_EVENTS WHERE eventType = {MARK}"))
    innermost = [_json_frames(texts[i], names)[0] for i in ids]
    at_72 = [f for f in innermost if f[0] == "step" and f[1].endswith("/gc_collect.py")]
    assert top.samples == sum(f[2] == 72 for f in at_72) > 0.99 * cpu.samples


@pytest.mark.parametrize(
    ("name", "rec", "words", "line"),
    [
        (
            "h200_gc_collect_python.sqlite",
            "cpu_overhead",
            "in Python, step at gc_collect.py:72 held the thread",
            ("gc_collect.py", 72, "gc.collect()"),
        ),
        (
            "h200_checkpoint_python.sqlite",
            "periodic_step",
            "in Python, torch.serialization.save ← step at checkpoint.py:60 held the thread",
            ("checkpoint.py", 60, "torch.save("),
        ),
        (
            "h200_cpu_optimizer_python.sqlite",
            "cpu_optimizer",
            "in Python, torch.optim.optimizer.wrapper ← step at cpu_optimizer.py:62 held",
            ("cpu_optimizer.py", 62, "optimizer.step()"),
        ),
        (
            "h200_host_postprocess_python.sqlite",
            "cpu_overhead",
            "in Python, top_predictions at host_postprocess.py:43 held the thread",
            ("host_postprocess.py", 43, "ranked = sorted("),
        ),
    ],
)
def test_each_recommendation_names_the_place_behind_its_buckets(name, rec, words, line):
    report = nsysprobe.analyze(SAMPLE_TRACES / name)
    verdict = report.verdict
    assert verdict.id == rec
    assert words in verdict.reason
    listed = verdict.evidence["python_frames"]
    buckets = verdict.evidence["buckets"].split(", ")
    for b in report.python_frames.buckets:
        if b.bucket in buckets:
            assert f"{b.bucket}: {b.places[0].place} " in listed
    file, number, code = line
    source = (ROOT / "workloads" / file).read_text().splitlines()
    assert code in source[number - 1]


def test_the_samplers_own_gil_waits_do_not_take_the_samples():
    """Each sample hands the GIL to nsys's sampling thread: the sampled thread waits in
    pthread_cond_wait for microseconds, and the sample's moment falls in that wait, an
    os_wait piece. By SQL, hundreds of sample times fall in the os_wait pieces of
    host_postprocess, which total 26 ms; the samples' periods put them in the cpu bucket."""
    path = SAMPLE_TRACES / "h200_host_postprocess_python.sqlite"
    account = spans_of(path)
    spans = account.idle_spans
    waits = spans.cause == IDLE_CAUSES.index("os_wait")
    starts = np.array([t for t, j, b in marks(path, account.thread_id)])
    inside = sum(
        int(((starts >= s) & (starts < e)).sum())
        for s, e in zip(spans.start_ns[waits], spans.end_ns[waits])
    )
    measured = int((spans.end_ns[waits] - spans.start_ns[waits]).sum())
    frames = nsysprobe.analyze(path).python_frames
    period = frames.period_ns
    assert inside > 10 * measured / period  # far more moments than the waits' time holds
    got = {b.bucket: b for b in frames.buckets}
    assert got.get("os_wait") is None or got["os_wait"].samples <= measured / period + 1
    assert got["cpu"].sampled_ns == pytest.approx(got["cpu"].bucket_ns, rel=0.1)


def test_an_export_without_the_frames_says_how_to_export_them():
    """The earlier gc_collect capture was sampled, but exported without payload: its marks
    are there (counted by SQL), their frames are not."""
    path = SAMPLE_TRACES / "h200_gc_collect.sqlite"
    report = nsysprobe.analyze(path)
    assert report.python_frames is None
    account = report.account.main
    n = len(marks(path, account.thread_id))
    (skipped,) = [s for s in report.skipped if s.analysis == "python_frames"]
    assert skipped.reason == (
        f"{n:,} Python samples of {account.thread}, but the export holds none of their frames "
        "(nsys 2025.3.2.0; nsys exports them only when asked)"
    )
    assert skipped.fix == (
        "export the report again with `nsys export --type sqlite --include-json=true REPORT` "
        "(nsys 2025.3 has the option; nsys 2023.4 cannot export them to SQLite: use a newer "
        "nsys)"
    )
    assert n == 4164
    assert all("python_frames" not in r.evidence for r in report.recommendations)


def test_a_trace_without_sampling_says_how_to_capture_it():
    report = nsysprobe.analyze(SAMPLE_TRACES / "h200_pinned.sqlite")
    (skipped,) = [s for s in report.skipped if s.analysis == "python_frames"]
    assert skipped.reason == "no Python sampling in the trace"
    assert skipped.fix.startswith("profile with `nsysprobe run --python`")


@pytest.mark.parametrize("fmt", ["text", "markdown", "json"])
def test_every_format_shows_the_frames_and_the_verdicts_chain(fmt, tmp_path):
    path = SAMPLE_TRACES / "h200_gc_collect_python.sqlite"
    html = tmp_path / "report.html"
    args = ["analyze", str(path), "--format", fmt, "--no-history", "--html", str(html)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    out = result.output
    if fmt == "json":
        data = json.loads(out)
        cpu = data["python_frames"]["buckets"][0]
        assert cpu["bucket"] == "cpu" and cpu["places"][0]["place"] == "step at gc_collect.py:72"
        assert cpu["places"][0]["user"] == {
            "function": "step",
            "file": "gc_collect.py",
            "line": 72,
            "module": "",
        }
        verdict = data["recommendations"][0]
        assert verdict["evidence"]["python_frames"].startswith("cpu: step at gc_collect.py:72 ")
        assert "step at gc_collect.py:72 held the thread" in verdict["reason"]
    else:
        escaped = "gc\\_collect" if fmt == "markdown" else "gc_collect"
        assert "Python frames behind idle time" in out
        assert f"step at {escaped}.py:72 held the thread" in out
    page = html.read_text()
    assert "Python frames behind idle time" in page
    assert "step at gc_collect.py:72 held the thread" in page
