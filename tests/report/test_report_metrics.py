"""The headline figures read from a Report (``metrics_of``) against the same figures read from
its JSON form (``metrics_from_json``, the path ``compare`` takes for ``analysis.json``), and
against plain SQL over the export."""

import json
import sqlite3
from pathlib import Path

import independent
import pytest

from nsysprobe.report.analyze import analyze
from nsysprobe.report.metrics import metrics_from_json, metrics_of
from nsysprobe.report.saved import to_json

SAMPLES = sorted((Path(__file__).parents[2] / "sample_traces").glob("*.sqlite"))
PAGEABLE, HTOD = 0, 1  # ENUM_CUDA_MEM_KIND, ENUM_CUDA_MEMCPY_OPER


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.stem)
def test_figures_of_a_report_are_those_of_its_json(path):
    report = analyze(path)
    from_report = metrics_of(report)
    assert from_report == metrics_from_json(json.loads(to_json(report)), strict=False)
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        tables = {t for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        pageable = 0
        if "CUPTI_ACTIVITY_KIND_MEMCPY" in tables:
            (pageable,) = db.execute(
                "SELECT COALESCE(SUM(bytes), 0) FROM CUPTI_ACTIVITY_KIND_MEMCPY "
                "WHERE copyKind = ? AND srcKind = ?",
                (HTOD, PAGEABLE),
            ).fetchone()
    assert from_report.pageable_htod_bytes == pageable
    if report.steps is None:
        assert (from_report.step_count, from_report.step_wall_ns) == (None, ())
    else:
        assert from_report.step_count == len(from_report.step_wall_ns) > 0


def test_the_gaps_of_a_report_written_before_schema_3_are_not_read_as_the_accounts():
    """Before schema 3 a report's gaps were the devices' idle stretches over the whole
    capture: another figure, so compare and history do not set it against today's."""
    data = json.loads(to_json(analyze(SAMPLES[0])))
    assert data["schema_version"] == 3
    assert metrics_from_json(data).gap_ns == data["gaps"]["gap_ns"] > 0
    data["schema_version"] = 2
    old = metrics_from_json(data)
    assert old.gap_ns is None and old.step_timing == "completion"
    data["schema_version"] = 1
    assert metrics_from_json(data).step_timing == "cpu range"


def test_every_busy_ratio_of_a_one_gpu_capture_is_the_same_figure():
    """The steps' busy ratio, compare's, and the one the gpu_bound verdict quotes are one
    definition over one window here (one process, one GPU, steps named ``step``): each
    equals the union of the GPU work in the steps' windows over their wall time, counted with
    sqlite3 and numpy."""
    path = SAMPLES[0].parent / "h200_compute_bound.sqlite"
    expected = independent.busy_ratio_over_steps(path, independent.step_windows(path, "step"))
    report = analyze(path)
    assert report.verdict.id == "gpu_bound"
    assert report.steps.gpu_busy_ratio == pytest.approx(expected, rel=1e-12)
    assert metrics_of(report).gpu_busy_ratio == pytest.approx(expected, rel=1e-12)
    assert report.verdict.evidence["gpu_busy_ratio"] == round(expected, 4)
