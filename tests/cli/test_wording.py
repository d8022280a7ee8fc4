"""Small things that cost trust (issue 34, item 6): counts in their noun's number, one number
format, gate lines that read right both ways, no certainty claimed, the GPUs a trace used
named, and a warning when compared runs ran on different GPUs."""

from __future__ import annotations

import json
import re
import sqlite3

import independent
import pytest
from click.testing import CliRunner

import nsysprobe
from nsysprobe.cli import main
from nsysprobe.common.units import counted
from nsysprobe.render import render
from nsysprobe.render.comparison import confidence_text, gate_lines
from nsysprobe.report.metrics import RunMetrics
from nsysprobe.runs.compare import Comparison, Difference, Run, gate

from conftest import SAMPLE_TRACES, shared_trace
from exports import MS, Export


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


# -- singular and plural ---------------------------------------------------------------------


def test_counted_puts_the_noun_in_its_number():
    assert counted(1, "gap") == "1 gap"
    assert counted(0, "gap") == "0 gaps"
    assert counted(12_345, "row") == "12,345 rows"
    assert counted(1, "process", "processes") == "1 process"
    assert counted(2, "process", "processes") == "2 processes"
    assert counted(1, "view/trigger/index", "views/triggers/indexes") == "1 view/trigger/index"


def test_scrub_names_one_dropped_view_in_the_singular(build, tmp_path):
    ex = Export()
    ex.kernel(0, 5 * MS, launch_at=0)
    src = build(ex)
    with sqlite3.connect(src) as db:
        db.execute("CREATE VIEW kernels_again AS SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL")
    db.close()
    result = run("scrub", src, "-o", tmp_path / "shared.sqlite")
    assert result.exit_code == 0, result.output
    assert " and 1 view/trigger/index\n" in result.output


def test_one_idle_gap_is_one_gap(build):
    ex = Export()
    ex.kernel(0, 1 * MS, launch_at=0)
    ex.kernel(4 * MS, 5 * MS, launch_at=3 * MS)
    text = render(nsysprobe.analyze(build(ex)), "text")
    assert "(1 gap, 3.0 ms of 3.0 ms idle)" in text


def test_the_workers_warning_counts_one_cpu_in_the_singular(monkeypatch, capsys):
    from nsysprobe.cli import analyze

    monkeypatch.setattr("nsysprobe.ranks.cluster.usable_cpus", lambda: 1)
    analyze.warn_over_cpus(4)
    assert "this process may use 1 CPU (its affinity); the local cluster gets 1 worker at " in (
        capsys.readouterr().err
    )


def test_the_loader_workers_are_counted_in_the_singular_or_plural():
    """h200_slow_loader: 2 DataLoader workers. The wording is the diagnosis rules' (rules.py)."""
    text = render(nsysprobe.analyze(SAMPLE_TRACES / "h200_slow_loader.sqlite"), "text")
    assert "(es)" not in text and "2 loader worker processes" in text


# -- one number format -----------------------------------------------------------------------


def test_steps_per_second_over_a_thousand_have_a_thousands_separator(build):
    """20 steps of 0.5 ms: some 2,000 steps/s, written as the tables write milliseconds."""
    ex = Export()
    step = MS // 2
    for i in range(20):
        ex.nvtx(i * step, (i + 1) * step - 10_000, f"Batch {i}")
        ex.kernel(i * step + 2_000, i * step + 300_000, launch_at=i * step + 1_000)
    text = render(nsysprobe.analyze(build(ex)), "text")
    [figure] = re.findall(r"20 steps in [\d.,]+ ms: ([\d.,]+) steps/s", text)
    assert re.fullmatch(r"\d,\d{3}\.\d\d", figure), figure


UNSEPARATED = re.compile(r"(?<![\w,.])\d{4,}(?:\.\d+)? ?(?:ms|s|us|GB|MB|kB|GB/s|steps)\b")


def test_every_figure_the_renderers_write_has_thousands_separators():
    """No "6741.8 ms" in what the renderers write (the recommendations' own words apart)."""
    for path in sorted(SAMPLE_TRACES.glob("*.sqlite")):
        report = nsysprobe.analyze(path)
        text = render(report, "text")
        for r in report.recommendations:
            text = text.replace(r.reason, "").replace(r.advice, "")
        assert not UNSEPARATED.findall(text), path.name


def test_the_verdict_writes_figures_as_the_tables_do():
    """h200_baseline's verdict: "idle 6,741.8 ms", as its step account writes it."""
    report = nsysprobe.analyze(SAMPLE_TRACES / "h200_baseline.sqlite")
    assert "6,741.8 ms" in report.verdict.reason
    for r in report.recommendations:
        assert not UNSEPARATED.findall(r.reason + " " + r.advice), r.id


# -- the compare gate and its test -----------------------------------------------------------


def test_confidence_is_never_certain():
    assert confidence_text(1 - 2 / 924) == "99.8% confidence"
    assert confidence_text(0.999) == "99.9% confidence"
    for near in (0.9996, 1 - 6.8e-08, 1.0):
        assert confidence_text(near) == "over 99.9% confidence"


def test_a_very_small_p_value_reads_as_over_99_9_percent():
    base, pinned = SAMPLE_TRACES / "h200_baseline.sqlite", SAMPLE_TRACES / "h200_pinned.sqlite"
    out = run("compare", base, pinned).output
    assert "faster (over 99.9% confidence, p=6.8e-08)" in out
    assert "100.0%" not in out


def metrics(walls=(1, 2, 3), gpus="") -> RunMetrics:
    return RunMetrics(
        trace="t.sqlite",
        step_count=len(walls),
        steps_per_s=1.0,
        median_step_ns=2,
        gpu_busy_ratio=0.5,
        busy_basis="steps",
        idle_per_step_ns=1,
        gap_ns=0,
        pageable_htod_bytes=0,
        exposed_copy_ns=0,
        top_recommendation=None,
        top_gain_ratio=None,
        step_wall_ns=tuple(walls),
        gpus=gpus,
    )


@pytest.mark.parametrize(
    "verdict, speedup, pct, line",
    [
        (
            "faster",
            1 / 0.141,
            5,
            "pass  b: slower by more than 5% (no: time per step -85.9%, faster beyond noise, "
            "p=0.001)",
        ),
        (
            "within noise",
            1 / 1.014,
            0,
            "pass  b: slower by more than 0% (no: time per step +1.4%, within noise, p=0.001)",
        ),
        (
            "slower",
            1 / 1.03,
            5,
            "pass  b: slower by more than 5% (no: time per step +3.0%, slower beyond noise, "
            "p=0.001, but not over 5%)",
        ),
        (
            "slower",
            1 / 1.12,
            5,
            "FAIL  b: slower by more than 5% (yes: time per step +12.0%, slower beyond noise, "
            "p=0.001)",
        ),
    ],
)
def test_each_gate_line_answers_its_condition(verdict, speedup, pct, line):
    diff = Difference(speedup, verdict, 0.001, 0.999, 0.5, "test")
    runs = (Run("a", "a", metrics()), Run("b", "b", metrics()))
    comparison = Comparison(runs, (None, diff))
    checked = Comparison(runs, (None, diff), gate=gate(comparison, pct, ("steps_per_s>0.5",)))
    assert gate_lines(checked)[1:] == [line, "FAIL  b: steps_per_s>0.5 (yes: steps_per_s = 1)"]


def test_the_real_gate_passes_a_faster_run_in_words_that_say_so():
    base, pinned = SAMPLE_TRACES / "h200_baseline.sqlite", SAMPLE_TRACES / "h200_pinned.sqlite"
    out = run("compare", base, pinned, "--fail-if-slower", "5").output
    [line] = [x for x in out.splitlines() if x.startswith("pass  h200_pinned.sqlite")]
    assert re.fullmatch(
        r"pass  h200_pinned\.sqlite: slower by more than 5% \(no: time per step -\d+\.\d%, "
        r"faster beyond noise, p=6\.8e-08\)",
        line,
    )


# -- which GPUs ------------------------------------------------------------------------------


def test_a_trace_that_describes_no_gpu_names_the_device_ids_of_its_work():
    path = shared_trace("nsysai_mfu_2gpu_before_nsys2026.2.sqlite")
    ids = [
        d
        for (d,) in independent.query(
            path, "SELECT DISTINCT deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY 1"
        )
    ]
    assert ids == [0, 1]
    assert not independent.query(
        path, "SELECT name FROM sqlite_master WHERE name = 'TARGET_INFO_GPU'"
    )
    head = render(nsysprobe.analyze(path), "text").splitlines()[0]
    assert head.endswith(
        ", GPU 0 and GPU 1 (device ids of its GPU work; the trace describes no GPU)"
    )
    data = json.loads(render(nsysprobe.analyze(path), "json"))
    assert data["trace"]["gpus"] == [] and data["trace"]["gpu_ids"] == [0, 1]


def test_the_headline_says_when_there_is_no_gpu_at_all(build):
    head = render(nsysprobe.analyze(build(Export())), "text").splitlines()[0]
    assert head.endswith(", no GPU described and no GPU work")


def cpu_run(build, name: str):
    """A run on the CPU of a GPU machine: steps, no GPU work, the H200 described."""
    ex = Export()
    ex.gpu("0000:00:06.0")
    for i in range(5):
        ex.nvtx(i * 10 * MS, (i + 1) * 10 * MS - MS, f"Batch {i}")
    return build(ex, name)


def test_compare_warns_when_a_cpu_run_stands_beside_a_gpu_run(build):
    cpu, gpu = cpu_run(build, "cpu.sqlite"), SAMPLE_TRACES / "h200_baseline.sqlite"
    text = run("compare", cpu, gpu).output
    assert (
        "warning: the runs did not run on the same GPUs (cpu.sqlite: no GPU; "
        "h200_baseline.sqlite: NVIDIA H200): their differences are the machines' as much as "
        "the code's; compare runs of one machine"
    ) in text
    data = json.loads(run("compare", cpu, gpu, "--format", "json").output)
    assert [r["gpus"] for r in data["runs"]] == ["no GPU", "NVIDIA H200"]
    assert len(data["warnings"]) == 1
    assert (
        "> **Warning:** the runs did not run"
        in run("compare", cpu, gpu, "--format", "markdown").output
    )


def test_compare_of_runs_on_one_kind_of_gpu_warns_of_nothing():
    a, b = SAMPLE_TRACES / "h200_baseline.sqlite", SAMPLE_TRACES / "h200_pinned.sqlite"
    assert "warning" not in run("compare", a, b).output
    assert json.loads(run("compare", a, b, "--format", "json").output)["warnings"] == []


def test_compare_of_history_ids_warns_too(build, tmp_path):
    history = tmp_path / "h.db"
    cpu = cpu_run(build, "cpu.sqlite")
    for path in (cpu, SAMPLE_TRACES / "h200_pinned.sqlite"):
        assert run("analyze", path, "--history", history).exit_code == 0
    out = run("compare", "1", "2", "--history", history).output
    assert "(#1 cpu.sqlite: no GPU; #2 h200_pinned.sqlite: NVIDIA H200)" in out


def test_an_old_history_entry_without_gpus_is_not_warned_about(build, tmp_path):
    history = tmp_path / "h.db"
    for path in (cpu_run(build, "cpu.sqlite"), SAMPLE_TRACES / "h200_pinned.sqlite"):
        assert run("analyze", path, "--history", history).exit_code == 0
    with sqlite3.connect(history) as db:
        db.execute("UPDATE runs SET gpus = NULL WHERE id = 1")  # as an older nsysprobe left it
    db.close()
    assert "warning" not in run("compare", "1", "2", "--history", history).output
