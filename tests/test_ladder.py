"""``nsysprobe ladder``: the table built from runs, and the real command under the real nsys.

The table's runs are each rung's recorded H200 capture (sample_traces/) analyzed as a profiled
ladder run analyzes its own; what each should recommend is the manifest's record of it. The
real ladder runs two rungs with tiny images on the CPU. Without a GPU there is nothing to
diagnose, so the rungs' recommendations are reported as not checked rather than failed.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import independent
import pytest
from click.testing import CliRunner

from nsysprobe import analyze
from nsysprobe.capture.locate import find_nsys
from nsysprobe.cli import main
from nsysprobe.errors import InputError, NsysNotFound
from nsysprobe.ladder.run import (
    EXPECTED,
    RUNGS,
    LadderFailed,
    RunResult,
    WorkloadOptions,
    build_ladder,
    check_ladder,
    select_rungs,
)
from nsysprobe.render.ladder import HEADER, ladder_dict, render_ladder
from nsysprobe.report.metrics import metrics_of

from conftest import SAMPLE_TRACES

TINY = ["--device", "cpu", "--image-size", "32", "--batch-size", "4", "--steps", "2"]
PRINTED = re.compile(r"^steps_per_s=(\d+\.\d+)$", re.MULTILINE)
MANIFEST = json.loads((SAMPLE_TRACES / "manifest.json").read_text())["traces"]
# Each rung's capture (not the extra --cpuctxsw one) and the verdict recorded for it.
CAPTURES = {t["rung"]: n for n, t in MANIFEST.items() if "rung" in t and "extra" not in t}
RECORDED = {rung: MANIFEST[name]["expected_verdict"] for rung, name in CAPTURES.items()}


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def plain(rung: str, repeat: int, rate: float) -> RunResult:
    return RunResult(rung, repeat, False, f"{rung}/plain-{repeat}.log", rate)


def profiled(
    rung: str,
    repeat: int,
    rate: float,
    rec: str | None,
    busy: float = 0.5,
    gpu: bool = True,
    analyzed: float | None = None,
) -> RunResult:
    """A profiled run whose workload printed ``rate`` and whose trace the analysis read as
    ``analyzed`` steps/s (``rate`` when not given)."""
    return RunResult(
        rung,
        repeat,
        True,
        f"{rung}/profiled-{repeat}/nsys.log",
        rate,
        folder=f"{rung}/profiled-{repeat}",
        gpu_activity=gpu,
        gpu_busy_ratio=busy if gpu else None,
        top_recommendation=rec,
        analyzed_steps_per_s=rate if analyzed is None else analyzed,
    )


# Plain steps/s per repeat, about what the H200 measured; the profiled runs are the rungs'
# captures, with the steps/s their workloads printed under nsys (the manifest's).
H200 = {
    "baseline": (2.5, 2.3),
    "multiworker": (9.8, 10.0),
    "pinned": (15.5, 15.7),
    "streams": (16.5, 16.5),
    "prefetch": (16.6, 16.4),
    "cached": (16.6, 16.8),
}


@cache
def analyzed(rung: str) -> tuple[str | None, float | None, float | None]:
    """The rung's capture analyzed as ``_profiled_run`` analyzes a profiled run's report: its
    top recommendation, GPU busy ratio and steps/s."""
    metrics = metrics_of(analyze(SAMPLE_TRACES / CAPTURES[rung]))
    return metrics.top_recommendation, metrics.gpu_busy_ratio, metrics.steps_per_s


def clock(rung: str) -> float:
    """What the rung's captured workload printed under nsys."""
    return MANIFEST[CAPTURES[rung]]["steps_per_s_printed"]


def h200_runs() -> list[RunResult]:
    runs = []
    for repeat in (1, 2):
        for rung in RUNGS:
            rec, busy, rate = analyzed(rung)
            runs += [
                plain(rung, repeat, H200[rung][repeat - 1]),
                profiled(rung, repeat, clock(rung), rec, busy, analyzed=rate),
            ]
    return runs


def busy_in_batches(rung: str) -> float:
    path = SAMPLE_TRACES / CAPTURES[rung]
    return independent.busy_ratio_over_steps(path, independent.step_windows(path, "Batch %"))


def steps_over_time(rung: str) -> float:
    windows = independent.step_windows(SAMPLE_TRACES / CAPTURES[rung], "Batch %")
    return len(windows) * 1e9 / (windows[-1][1] - windows[0][0])


def test_the_table_from_two_repeats_of_every_rung():
    ladder = build_ladder(h200_runs(), RUNGS, repeats=2)
    rows = {row.rung: row for row in ladder.rows}
    assert [row.rung for row in ladder.rows] == list(RUNGS)
    # steps/s: the trace's, steps over time by SQL; within 5 % of the workload's own clock
    trace = {rung: steps_over_time(rung) for rung in RUNGS}
    for rung in RUNGS:
        assert rows[rung].steps_per_s == pytest.approx(trace[rung], rel=1e-9)
        assert rows[rung].profiled_steps_per_s == clock(rung)
        assert rows[rung].steps_per_s == pytest.approx(clock(rung), rel=0.05)
        assert rows[rung].gpu_busy_ratio == pytest.approx(busy_in_batches(rung), rel=1e-12)
    assert rows["baseline"].plain_steps_per_s == pytest.approx(2.4)
    assert rows["baseline"].profiled_over_plain == pytest.approx(clock("baseline") / 2.4)
    assert rows["baseline"].speedup == pytest.approx(1.0)
    assert rows["multiworker"].speedup == pytest.approx(trace["multiworker"] / trace["baseline"])
    assert rows["prefetch"].share_of_ceiling == pytest.approx(trace["prefetch"] / trace["cached"])
    assert rows["cached"].share_of_ceiling == pytest.approx(1.0)
    assert {rung: row.top_recommendation for rung, row in rows.items()} == RECORDED
    assert {rung: row.recommendations for rung, row in rows.items()} == {
        rung: (verdict, verdict) for rung, verdict in RECORDED.items()
    }
    assert {row.check for row in ladder.rows} == {"expected"}
    assert ladder.problems == ()
    check_ladder(ladder)


def test_expected_next_rung_is_what_the_h200_ladder_recorded():
    assert RECORDED == {
        "baseline": "multiprocess_loading",
        "multiworker": "pinned_memory",
        "pinned": "stream_pipelining",
        "streams": "gpu_bound",
        "prefetch": "gpu_bound",
        "cached": "gpu_bound",
    }
    assert EXPECTED == RECORDED
    # What the real ladder on the H200 recommended for each rung, and what it expected.
    recorded_run = json.loads((SAMPLE_TRACES / "h200_ladder" / "ladder.json").read_text())
    for key in ("top_recommendation", "expected_recommendation"):
        assert {row["rung"]: row[key] for row in recorded_run["rows"]} == RECORDED


def test_an_unexpected_recommendation_is_a_problem_naming_the_analysis():
    runs = h200_runs()
    # The second profiled run of pinned says what the streams capture says: gpu_bound
    # instead of stream_pipelining.
    index = next(
        i for i, r in enumerate(runs) if (r.rung, r.repeat, r.profiled) == ("pinned", 2, True)
    )
    runs[index] = profiled("pinned", 2, clock("pinned"), analyzed("streams")[0])
    ladder = build_ladder(runs, RUNGS, repeats=2, folder=Path("out"))
    pinned = ladder.rows[RUNGS.index("pinned")]
    assert pinned.check == "unexpected"
    assert pinned.recommendations == ("stream_pipelining", "gpu_bound")
    message = (
        "rung pinned: top recommendation gpu_bound, expected stream_pipelining (profiled run 2); "
        f"see {Path('out/pinned/profiled-2/analysis.json')}"
    )
    assert ladder.problems == (message,)
    with pytest.raises(LadderFailed, match=re.escape(message)) as raised:
        check_ladder(ladder)
    assert raised.value.exit_code == 1
    # The header and its rule come first.
    line = render_ladder(ladder).splitlines()[2 + RUNGS.index("pinned")]
    assert line.split()[-4:] == ["runs)", "no:", "expected", "stream_pipelining"]
    assert "stream_pipelining (1 of 2 runs)" in line


def test_without_gpu_activity_the_recommendation_is_not_checked():
    runs = [
        plain("baseline", 1, 1.1),
        profiled("baseline", 1, 0.9, "capture_incomplete", gpu=False),
    ]
    ladder = build_ladder(runs, ("baseline",))
    (row,) = ladder.rows
    assert row.check == "no_gpu"
    assert row.gpu_busy_ratio is None
    assert ladder.problems == ()
    check_ladder(ladder)
    assert render_ladder(ladder).splitlines()[2].endswith("capture_incomplete  not checked: no GPU")


def test_a_failed_run_fails_its_rung_only():
    failed = RunResult("baseline", 1, False, "baseline/plain-1.log", None, error="boom")
    runs = [failed, plain("cached", 1, 6.0), profiled("cached", 1, 5.0, "gpu_bound")]
    ladder = build_ladder(runs, ("baseline", "cached"), folder=Path("out"))
    baseline, cached = ladder.rows
    assert (baseline.check, baseline.steps_per_s, baseline.speedup) == ("failed", None, None)
    assert (cached.check, cached.speedup, cached.share_of_ceiling) == ("expected", None, 1.0)
    assert ladder.problems == (
        f"rung baseline: plain run 1 failed: boom; see {Path('out/baseline/plain-1.log')}",
    )


def test_json_schema():
    ladder = build_ladder(
        h200_runs(), RUNGS, repeats=2, options=WorkloadOptions(steps=20, warmup=5, workers=8)
    )
    data = json.loads(render_ladder(ladder, "json"))
    assert data == ladder_dict(ladder)
    assert list(data) == [
        "schema_version",
        "repeats",
        "nsys_version",
        "workload_options",
        "rows",
        "runs",
        "problems",
    ]
    assert data["schema_version"] == 2
    assert data["workload_options"]["workers"] == 8
    assert set(data["rows"][0]) == {
        "rung",
        "steps_per_s",
        "profiled_steps_per_s",
        "plain_steps_per_s",
        "speedup",
        "share_of_ceiling",
        "gpu_busy_ratio",
        "profiled_over_plain",
        "top_recommendation",
        "recommendations",
        "expected_recommendation",
        "check",
    }
    assert len(data["runs"]) == 24
    assert data["runs"][1]["mode"] == "profiled"
    assert data["runs"][1]["folder"] == "baseline/profiled-1"


@pytest.mark.parametrize("fmt", ["text", "markdown", "json"])
def test_renderers_on_an_empty_ladder(fmt):
    text = render_ladder(build_ladder([], ()), fmt)
    assert text.endswith("\n")
    if fmt == "json":
        assert json.loads(text)["rows"] == []
    else:
        assert "rung" in text.splitlines()[0]


def test_rungs_keep_ladder_order_and_workers_go_to_worker_rungs_only():
    assert select_rungs(["cached", " baseline", "cached"]) == ("baseline", "cached")
    with pytest.raises(InputError, match="unknown rung fast; choose from baseline, multiworker"):
        select_rungs(["baseline", "fast"])
    options = WorkloadOptions(steps=3, workers=2, device="cpu")
    assert options.args("pinned") == ["--steps", "3", "--device", "cpu", "--workers", "2"]
    assert options.args("cached") == ["--steps", "3", "--device", "cpu"]


def test_cli_rejects_an_unknown_rung_and_a_used_folder(tmp_path):
    result = invoke("ladder", "--rungs", "baseline,turbo", "--output", tmp_path / "new")
    assert result.exit_code == 2
    assert result.stderr == (
        "nsysprobe: error: --rungs: unknown rung turbo; choose from baseline, multiworker, "
        "pinned, streams, prefetch, cached\n"
    )
    (tmp_path / "used" / "baseline").mkdir(parents=True)
    result = invoke("ladder", "--rungs", "baseline", "--output", tmp_path / "used")
    assert result.exit_code == 2
    assert result.stderr == (
        f"nsysprobe: error: --output {tmp_path / 'used'} is not empty; pass a new or empty "
        "folder so no run is overwritten\n"
    )


@pytest.fixture(scope="module")
def nsys():
    try:
        return find_nsys()
    except NsysNotFound as exc:
        pytest.fail(f"the ladder tests need a real nsys (scripts/setup.sh installs one): {exc}")


@pytest.fixture(scope="module")
def real_ladder(tmp_path_factory, nsys):
    out = tmp_path_factory.mktemp("ladder") / "out"
    args = ["ladder", "--rungs", "cached,baseline", *TINY, "--warmup", "1", "--repeats", "1"]
    result = invoke(*args, "--nsys", nsys.path, "--output", out)
    return out, result


def printed(log: Path) -> float:
    return float(PRINTED.findall(log.read_text())[-1])


def trace_rate(path: Path) -> float:
    windows = independent.step_windows(path, "Batch %")
    return len(windows) * 1e9 / (windows[-1][1] - windows[0][0])


def test_real_ladder_on_the_cpu(real_ladder):
    out, result = real_ladder
    assert result.exit_code == 0, result.output
    base_plain = printed(out / "baseline" / "plain-1.log")
    base_prof = printed(out / "baseline" / "profiled-1" / "nsys.log")
    ceil_plain = printed(out / "cached" / "plain-1.log")
    ceil_prof = printed(out / "cached" / "profiled-1" / "nsys.log")

    # The trace's steps/s, by SQL: without a GPU the capture has no range and holds the
    # warm-up step too, so it is not held to the workload's clock.
    base_trace, ceil_trace = (
        trace_rate(out / rung / "profiled-1" / "report.sqlite") for rung in ("baseline", "cached")
    )
    data = json.loads((out / "ladder.json").read_text())
    assert data["schema_version"] == 2
    assert data["problems"] == []
    baseline, cached = data["rows"]
    assert (baseline["rung"], cached["rung"]) == ("baseline", "cached")
    assert baseline["steps_per_s"] == pytest.approx(base_trace, rel=1e-9)
    assert cached["steps_per_s"] == pytest.approx(ceil_trace, rel=1e-9)
    assert (baseline["plain_steps_per_s"], baseline["profiled_steps_per_s"]) == (
        base_plain,
        base_prof,
    )
    assert (cached["plain_steps_per_s"], cached["profiled_steps_per_s"]) == (ceil_plain, ceil_prof)
    assert baseline["profiled_over_plain"] == pytest.approx(base_prof / base_plain)
    assert cached["profiled_over_plain"] == pytest.approx(ceil_prof / ceil_plain)
    assert cached["speedup"] == pytest.approx(ceil_trace / base_trace)
    assert baseline["share_of_ceiling"] == pytest.approx(base_trace / ceil_trace)
    for row in (baseline, cached):
        assert row["top_recommendation"] == "capture_incomplete"
        assert row["check"] == "no_gpu"
        assert row["gpu_busy_ratio"] is None

    lines = result.stdout.splitlines()
    assert lines[0].split("  ")[0] == HEADER[0]
    assert re.split(r"\s{2,}", lines[2]) == [
        "baseline",
        f"{base_trace:.2f}",
        f"{base_prof:.2f}",
        "1.00x",
        f"{base_trace / ceil_trace:.1%}",
        "-",
        f"{base_prof / base_plain:.3f}",
        "capture_incomplete",
        "not checked: no GPU",
    ]
    assert re.split(r"\s{2,}", lines[3])[:5] == [
        "cached",
        f"{ceil_trace:.2f}",
        f"{ceil_prof:.2f}",
        f"{ceil_trace / base_trace:.2f}x",
        "100.0%",
    ]


def test_real_ladder_writes_its_files_and_reports_progress(real_ladder):
    out, result = real_ladder
    assert {p.name for p in out.iterdir()} == {"ladder.json", "ladder.md", "baseline", "cached"}
    for rung in ("baseline", "cached"):
        assert {p.name for p in (out / rung).iterdir()} == {"plain-1.log", "profiled-1"}
        folder = out / rung / "profiled-1"
        assert {"report.sqlite", "analysis.json", "nsys.log"} <= {p.name for p in folder.iterdir()}
        assert json.loads((folder / "analysis.json").read_text())["schema_version"] == 3
    markdown = (out / "ladder.md").read_text()
    assert markdown.startswith("| rung | steps/s | workload's clock | speed-up |")
    assert "| cached |" in markdown
    runs = json.loads((out / "ladder.json").read_text())["runs"]
    assert [(r["rung"], r["mode"]) for r in runs] == [
        ("baseline", "plain"),
        ("baseline", "profiled"),
        ("cached", "plain"),
        ("cached", "profiled"),
    ]
    config = (out / "baseline" / "plain-1.log").read_text().splitlines()[0]
    assert runs[0]["config"] == config
    assert config.startswith("config rung=baseline device=cpu batch_size=4 workers=0")
    progress = [line for line in result.stderr.splitlines() if line.startswith("nsysprobe: ")]
    assert [line.split(":")[1].strip() for line in progress[:4]] == [
        "baseline 1/1 plain",
        "baseline 1/1 profiled",
        "cached 1/1 plain",
        "cached 1/1 profiled",
    ]
    row = json.loads((out / "ladder.json").read_text())["rows"][0]
    assert progress[1].startswith(
        f"nsysprobe: baseline 1/1 profiled: {row['profiled_steps_per_s']:.3f} steps/s "
        f"({row['steps_per_s']:.3f} from the trace), top recommendation capture_incomplete ("
    )
    assert progress[-1] == f"nsysprobe: runs, ladder.json and ladder.md in {out}"


def test_a_failing_workload_exits_1_naming_the_rung_and_log(tmp_path, nsys):
    workloads = tmp_path / "workloads"
    workloads.mkdir()
    (workloads / "baseline.py").write_text(
        "import sys\nprint('config rung=baseline')\nsys.exit(3)\n"
    )
    # No torch: a stand-in that is quick to run plain and under nsys.
    (workloads / "cached.py").write_text(
        "print('config rung=cached')\nprint('steps_per_s=4.000')\n"
    )
    out = tmp_path / "out"
    result = invoke(
        "ladder",
        "--rungs",
        "baseline,cached",
        "--workloads",
        workloads,
        "--nsys",
        nsys.path,
        "--output",
        out,
    )
    assert result.exit_code == 1
    log = out / "baseline" / "plain-1.log"
    assert result.stderr.splitlines()[-1] == (
        f"nsysprobe: error: rung baseline: plain run 1 failed: the workload exited with code 3; "
        f"see {log}"
    )
    assert log.read_text() == "config rung=baseline\n"
    data = json.loads((out / "ladder.json").read_text())
    assert [(row["rung"], row["check"]) for row in data["rows"]] == [
        ("baseline", "failed"),
        ("cached", "no_gpu"),
    ]
    # the stand-in's trace holds no steps to time; its clock said 4.0
    assert data["rows"][1]["steps_per_s"] is None
    assert data["rows"][1]["profiled_steps_per_s"] == data["rows"][1]["plain_steps_per_s"] == 4.0
    assert "not checked: run failed" in (out / "ladder.md").read_text()
    assert not (out / "baseline" / "profiled-1").exists()


def test_the_package_does_not_import_torch():
    code = (
        "import sys, nsysprobe.cli, nsysprobe.ladder.run, nsysprobe.render.ladder; "
        "sys.exit('torch' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
