"""``nsysprobe compare``: traces, run folders and history ids side by side; the noise test."""

from __future__ import annotations

import itertools
import json
import shutil
import sqlite3
import statistics
from fractions import Fraction

import independent
import numpy as np
import pytest
from click.testing import CliRunner

from nsysprobe.cli import main
from nsysprobe.runs.compare import mann_whitney

from conftest import SAMPLE_TRACES


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def step_walls(path) -> list[int]:
    """Per-step wall times straight from the file: each 'Batch i' NVTX range's window, from
    the last step's completion to its own (``independent.completion_windows``)."""
    return [e - s for s, e in independent.step_windows(path, "Batch %")]


def rate(path, like: str = "Batch %") -> float:
    """Steps over the time from the first step's start to the last one's completion."""
    windows = independent.step_windows(path, like)
    return len(windows) * 1e9 / (windows[-1][1] - windows[0][0])


def test_two_copies_of_a_rung_are_within_noise(rung, tmp_path):
    a = rung("pinned")
    b = tmp_path / "pinned-again.sqlite"
    shutil.copy(a, b)
    data = json.loads(run("compare", a, b, "--format", "json").output)
    diff = data["runs"][1]["vs_first"]
    assert diff["verdict"] == "within noise"
    assert diff["speedup"] == 1.0
    out = run("compare", a, b).output
    assert "within noise (p=1)" in out


def test_pipelined_is_faster_than_baseline(rung):
    base, pipe = rung("baseline"), rung("pipelined")
    expected = rate(pipe) / rate(base)
    data = json.loads(run("compare", base, pipe, "--format", "json").output)
    diff = data["runs"][1]["vs_first"]
    assert diff["verdict"] == "faster"
    assert diff["speedup"] == pytest.approx(expected, rel=1e-9)
    # all 6 pipelined steps are shorter than all 6 baseline steps: the most extreme of the
    # C(12, 6) = 924 equally likely splits, on either side
    assert diff["p_value"] == pytest.approx(2 / 924)
    assert diff["confidence"] == pytest.approx(1 - 2 / 924)
    text = run("compare", base, pipe).output
    assert f"{expected:.2f}x" in text
    assert "faster (99.8% confidence, p=0.0022)" in text


def test_the_ladder_table(rung):
    names = ["baseline", "multiworker", "pinned", "pipelined"]
    paths = [rung(n) for n in names]
    rates = [rate(p) for p in paths]
    data = json.loads(run("compare", *paths, "--format", "json").output)
    got = [r["steps_per_s"] for r in data["runs"]]
    assert got == pytest.approx(rates)
    speedups = [r["vs_first"]["speedup"] for r in data["runs"][1:]]
    assert speedups == pytest.approx([r / rates[0] for r in rates[1:]])
    assert [r["vs_first"]["verdict"] for r in data["runs"][1:]] == ["faster"] * 3
    assert [r["top_recommendation"] for r in data["runs"]] == [
        "multiprocess_loading",
        "pinned_memory",
        "stream_pipelining",
        "gpu_bound",
    ]
    # pageable bytes vanish once copies are pinned; 64 MiB per step in the ladder
    assert [r["pageable_htod_bytes"] for r in data["runs"]] == [6 * (64 << 20)] * 2 + [0, 0]
    md = run("compare", *paths, "--format", "markdown").output
    assert md.splitlines()[0] == (
        "| run | steps | steps/s | speed-up | GPU busy | idle/step | pageable HtoD | "
        "exposed copy | vs first | top recommendation |"
    )
    assert len([line for line in md.splitlines() if line.startswith("| ")]) == 5


def test_run_folder_and_history_id(rung, tmp_path):
    trace = rung("multiworker")
    folder = tmp_path / "run-1"
    folder.mkdir()
    (folder / "analysis.json").write_text(run("analyze", trace, "--format", "json").output)
    history = tmp_path / "h.db"
    assert run("analyze", trace, "--history", history).exit_code == 0
    data = json.loads(
        run("compare", trace, folder, "1", "--history", history, "--format", "json").output
    )
    assert [r["source"] for r in data["runs"]] == [str(trace), str(folder), "history #1"]
    assert [r["vs_first"]["verdict"] for r in data["runs"][1:]] == ["within noise"] * 2
    assert [r["step_wall_ns"] for r in data["runs"]] == [step_walls(trace)] * 3


def test_folder_with_one_sqlite(rung, tmp_path):
    folder = tmp_path / "only-trace"
    folder.mkdir()
    trace = rung("pinned")
    shutil.copy(trace, folder / "x.sqlite")
    data = json.loads(run("compare", trace, folder, "--format", "json").output)
    assert data["runs"][1]["label"] == "only-trace"
    assert data["runs"][1]["vs_first"]["verdict"] == "within noise"


def test_errors(rung, tmp_path):
    trace = str(rung("pinned"))
    result = CliRunner().invoke(main, ["compare", trace, "7"])
    assert result.exit_code == 2
    assert result.output == (
        f"nsysprobe: error: history id 7: no such entry in {tmp_path / 'history.db'}; "
        f"list them with `nsysprobe history`\n"
    )
    result = CliRunner().invoke(main, ["compare", trace])
    assert result.output == (
        "nsysprobe: error: compare needs two runs or more; give traces, run folders or "
        "history ids\n"
    )
    result = CliRunner().invoke(main, ["compare", "nope.sqlite", "x"])
    assert result.output == (
        "nsysprobe: error: nope.sqlite: no such file, folder or history id; give a trace "
        "(.sqlite, .nsys-rep), a run folder or an id from `nsysprobe history`\n"
    )


def brute_force(a, b) -> tuple[Fraction, Fraction]:
    """U of a by counting pairs, and the exact two-sided p by relabelling every split."""

    def u_of(x, y):
        return sum(Fraction(1) if p > q else Fraction(1, 2) if p == q else 0 for p in x for q in y)

    pooled = list(a) + list(b)
    n1 = len(a)
    mean = Fraction(n1 * len(b), 2)
    u = u_of(a, b)
    splits = list(itertools.combinations(range(len(pooled)), n1))
    extreme = 0
    for idx in splits:
        x = [pooled[i] for i in idx]
        y = [pooled[i] for i in range(len(pooled)) if i not in idx]
        extreme += abs(u_of(x, y) - mean) >= abs(u - mean)
    return u, Fraction(extreme, len(splits))


@pytest.mark.parametrize(
    "a, b",
    [
        ([1, 2, 3, 4], [5, 6, 7, 8]),
        ([1, 2, 2, 3, 5], [2, 3, 4, 4, 6]),
        ([3, 3, 3], [3, 3, 3, 3]),
        ([10, 12, 9, 11, 13, 10], [11, 9, 12, 10, 12, 11]),
    ],
)
def test_mann_whitney_exact_matches_brute_force(a, b):
    u, p = mann_whitney(a, b)
    want_u, want_p = brute_force(a, b)
    assert u == float(want_u)
    assert p == pytest.approx(float(want_p))


def test_mann_whitney_large_samples():
    rng = np.random.default_rng(7)
    same_a, same_b = rng.normal(100, 5, 200), rng.normal(100, 5, 200)
    assert mann_whitney(same_a, same_b)[1] > 0.05
    shifted = rng.normal(97, 5, 200)
    u, p = mann_whitney(shifted, same_a)
    assert p < 1e-3
    # U counted by pairs
    assert u == float(sum((x > y) + 0.5 * (x == y) for x in shifted for y in same_a))


# -- the regression gate ---------------------------------------------------------------------

SAMPLES = SAMPLE_TRACES


def gpu_time_over_steps(path) -> float:
    """Summed durations of kernels, copies and memsets over the summed 'Batch i' walls: an
    upper bound of the GPU busy ratio (the union of overlapping work is no longer)."""
    db = sqlite3.connect(path)
    busy = sum(
        db.execute(f"SELECT coalesce(sum(end - start), 0) FROM {t}").fetchone()[0]
        for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY")
    )
    db.close()
    return busy / sum(step_walls(path))


def test_the_gate_fails_a_real_slowdown_with_a_pull_request_comment():
    base, new = SAMPLES / "h200_pinned.sqlite", SAMPLES / "h200_baseline.sqlite"
    result = CliRunner().invoke(
        main, ["compare", str(base), str(new), "--fail-if-slower", "5", "--format", "markdown"]
    )
    assert result.exit_code == 1
    slowdown = rate(base) / rate(new) - 1  # time per step
    assert result.stdout.startswith("**nsysprobe gate: failed**\n")
    assert f"time per step \\+{slowdown * 100:.1f}%" in result.stdout
    assert "nsysprobe: gate failed: h200_baseline.sqlite: slower by more than 5%" in result.stderr


def test_the_gate_passes_two_captures_of_one_rung():
    """The multiworker rung captured twice (once with --cpuctxsw): 1 % apart, within noise."""
    a, b = SAMPLES / "h200_multiworker.sqlite", SAMPLES / "h200_multiworker-cpuctxsw.sqlite"
    assert abs(rate(a) / rate(b) - 1) < 0.05
    result = CliRunner().invoke(main, ["compare", str(a), str(b), "--fail-if-slower", "5"])
    assert result.exit_code == 0, result.output
    assert "gate: passed" in result.stdout
    # No slowdown may pass a 0 % gate only when it is within noise.
    zero = CliRunner().invoke(main, ["compare", str(a), str(b), "--fail-if-slower", "0"])
    assert zero.exit_code == 0 and "within noise" in zero.stdout


def test_fail_if_on_any_figure_and_in_the_json():
    base, new = SAMPLES / "h200_pinned.sqlite", SAMPLES / "h200_baseline.sqlite"
    assert gpu_time_over_steps(new) < 0.5  # the baseline's GPU is mostly idle
    failing = CliRunner().invoke(
        main,
        ["compare", str(base), str(new), "--fail-if", "gpu_busy_ratio<0.5", "--format", "json"],
    )
    assert failing.exit_code == 1
    gate = json.loads(failing.stdout)["gate"]
    assert gate["failed"] is True
    [check] = gate["checks"]
    assert check["check"] == "gpu_busy_ratio<0.5" and check["value"] < 0.5
    passing = CliRunner().invoke(
        main, ["compare", str(base), str(new), "--fail-if", "steps_per_s>1000"]
    )
    assert passing.exit_code == 0 and "gate: passed" in passing.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["--fail-if", "gpu_busy<0.9"], "unknown figure 'gpu_busy'"),
        (["--fail-if", "gpu_busy_ratio=0.9"], "not a condition"),
        (["--fail-if", "gpu_busy_ratio<nan"], "is not a finite number"),
        (["--fail-if-slower", "-1"], "give a percentage of 0 or more"),
        (["--fail-if-slower", "inf"], "give a percentage of 0 or more"),
    ],
)
def test_bad_gates_are_refused_in_one_line_before_loading(args, message, tmp_path):
    result = CliRunner().invoke(main, ["compare", "missing-a", "missing-b", *args])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and lines[0].startswith("nsysprobe: error:")


def test_a_gate_that_cannot_test_fails(rung, tmp_path):
    """Two steps are too few for the test: the gate says so and fails, it does not pass."""
    base, short = rung("pinned"), rung("baseline", steps=2)
    result = CliRunner().invoke(main, ["compare", str(base), str(short), "--fail-if-slower", "5"])
    assert result.exit_code == 1
    assert "cannot test: needs 3+ steps in each run to test (has 6 and 2)" in result.stdout


def test_a_gpu_bound_loop_at_two_gpu_speeds_differs_where_its_cpu_ranges_do_not():
    """fp32 against TF32 GEMMs on the H200: the CPU queues both loops' steps equally fast (it
    runs ahead), so only the steps timed to their completion on the GPU tell them apart."""
    fp32, tf32 = SAMPLES / "h200_gpu_bound_fp32.sqlite", SAMPLES / "h200_gpu_bound_tf32.sqlite"
    cpu = [
        statistics.median(e - s for s, e in independent.nvtx_ranges(p, "step %"))
        for p in (fp32, tf32)
    ]
    assert 0.75 < cpu[0] / cpu[1] < 1.33  # the CPU ranges: alike
    expected = rate(tf32, "step %") / rate(fp32, "step %")
    assert expected > 4  # the GPU: TF32 five times faster (83.2 against 16.3 steps/s printed)
    data = json.loads(run("compare", fp32, tf32, "--format", "json").output)
    diff = data["runs"][1]["vs_first"]
    assert diff["speedup"] == pytest.approx(expected, rel=1e-9)
    # every TF32 step is shorter than every fp32 step: the most extreme of C(40, 20) splits
    assert diff["verdict"] == "faster" and diff["p_value"] < 1e-6
    gate = run("compare", tf32, fp32, "--fail-if-slower", "5")
    assert gate.exit_code == 1 and f"time per step +{(expected - 1) * 100:.1f}%" in gate.output


def test_an_analysis_that_timed_cpu_ranges_is_not_tested_against_one_timed_to_completion(
    rung, tmp_path
):
    """An ``analysis.json`` of report schema 1 (steps timed by their CPU ranges) against a
    trace analyzed now: no figure is compared, the gate cannot pass; with its trace beside
    it, the folder is analyzed again."""
    trace = rung("multiworker")
    data = json.loads(run("analyze", trace, "--format", "json", "--no-history").output)
    data["schema_version"] = 1
    folder = tmp_path / "old-run"
    folder.mkdir()
    (folder / "analysis.json").write_text(json.dumps(data))
    result = json.loads(run("compare", trace, folder, "--format", "json").output)
    diff = result["runs"][1]["vs_first"]
    assert (diff["verdict"], diff["speedup"]) == ("unknown", None)
    assert "timed its steps by their CPU ranges" in diff["why"]
    gate = run("compare", trace, folder, "--fail-if-slower", "5")
    assert gate.exit_code == 1 and "cannot test" in gate.output
    shutil.copy(trace, folder / "report.sqlite")
    again = json.loads(run("compare", trace, folder, "--format", "json").output)
    assert again["runs"][1]["vs_first"]["verdict"] == "within noise"
