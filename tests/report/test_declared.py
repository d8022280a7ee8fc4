"""The analyses declared once (``nsysprobe/report/declared.py``): ``analyze`` runs each,
``explain`` lists each (its module's docstring), the renderers show each in the declared order,
and what one lacks is its skipped row with its declared fix."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

import pytest

import nsysprobe
from nsysprobe.render.report_sections import SECTIONS
from nsysprobe.report import declared, explain
from nsysprobe.report.analyze import Skipped
from nsysprobe.report.declared import ANALYSES, Analysis, Missing

from conftest import analysis_modules
from exports import Export

ROOT = Path(__file__).resolve().parents[2]
MS = 1_000_000


def test_every_analysis_module_is_declared_once_and_each_shown_one_has_its_sections():
    modules = analysis_modules()
    assert sorted(a.module for a in ANALYSES) == sorted(modules)
    assert len({a.name for a in ANALYSES}) == len(ANALYSES)
    assert set(SECTIONS) == {a.name for a in ANALYSES if a.shown}
    assert [t.name for t in explain.analyses()] == [a.name for a in ANALYSES]


def test_the_text_report_shows_the_sections_in_the_declared_order():
    report = nsysprobe.analyze(ROOT / "sample_traces/h200_baseline.sqlite")
    from nsysprobe.render import render

    text = render(report, "text")
    titles = [
        "Where the step time went",
        "Per step",
        "Steps",
        "GPU activity",
        "Idle gaps",
        "Longest gaps",
        "Transfers",
        "Copy/compute overlap",
        "OS runtime",
        "Skipped analyses",
    ]
    at = [text.index(f"\n{t}") for t in titles]
    assert at == sorted(at)


def test_what_an_analysis_lacks_is_its_skipped_row_with_its_fix(build):
    # NVTX ranges and one OS call, no GPU work and no Python sampling: every analysis that
    # reads GPU work is skipped with the CUDA fix, in the declared order; steps are found.
    ex = Export()
    for i in range(4):
        ex.nvtx(i * 10 * MS, (i * 10 + 9) * MS, f"Batch {i}")
    ex.osrt(0, MS, "poll")
    report = nsysprobe.analyze(build(ex))
    cuda = "profile with --trace=cuda,nvtx,osrt on a machine with a CUDA GPU"
    no_gpu = "no GPU activity in the trace"
    assert [(s.analysis, s.reason, s.fix) for s in report.skipped] == [
        ("account", no_gpu, cuda),
        (
            "python_frames",
            "no Python sampling in the trace",
            "profile with `nsysprobe run --python` (nsys profile --python-sampling=true), and "
            "export with `nsys export --type sqlite --include-json=true`",
        ),
        ("gaps", no_gpu, cuda),
        ("transfers", no_gpu, cuda),
        ("overlap", no_gpu, cuda),
        (
            "placement",
            "no machine topology given",
            "profile with --cpuctxsw=process-tree and analyze with --topology live (or a "
            "folder of recorded lscpu/numactl/nvidia-smi outputs)",
        ),
    ]
    assert report.steps is not None and report.steps.count == 4
    assert report.osrt is not None and report.account is None and report.gaps is None


def test_an_analysis_added_as_a_row_is_run_listed_and_skipped_with_its_fix(build, monkeypatch):
    ran = []

    def toy(run):
        ran.append(run.events.has_gpu_activity)
        return Missing("no toy data in the trace")

    row = Analysis("toy", "health", "toy data", "profile with --toy", toy, shown=False)
    monkeypatch.setattr(declared, "ANALYSES", (*ANALYSES, row))
    monkeypatch.setattr(declared, "BY_NAME", {**declared.BY_NAME, "toy": row})
    ex = Export()
    ex.kernel(0, MS, launch_at=0)
    report = nsysprobe.analyze(build(ex))
    assert ran == [True]
    assert report.skipped[-1] == Skipped("toy", "no toy data in the trace", "profile with --toy")


def _replaced(monkeypatch, runs: dict) -> None:
    """The analyses ``runs`` names run by the functions it gives."""
    analyses = tuple(replace(a, run=runs[a.name]) if a.name in runs else a for a in ANALYSES)
    monkeypatch.setattr(declared, "ANALYSES", analyses)
    monkeypatch.setattr(declared, "BY_NAME", {a.name: a for a in analyses})


def _one_kernel_with(monkeypatch, build, **runs):
    """The report of an export of one kernel, the analyses ``runs`` names run by its
    functions."""
    _replaced(monkeypatch, runs)
    ex = Export()
    ex.kernel(0, MS, launch_at=0)
    return nsysprobe.analyze(build(ex))


def test_every_analysis_runs_once_on_two_threads_and_the_report_is_the_one_thread_report(
    monkeypatch,
):
    trace = ROOT / "sample_traces/h200_baseline.sqlite"
    with monkeypatch.context() as one_thread:
        one_thread.setattr(declared, "_from_both_ends", lambda run, names: [*map(run.get, names)])
        alone = nsysprobe.analyze(trace)
    ran: list[tuple[str, str]] = []

    def counted(a: Analysis):
        def run(r):
            ran.append((a.name, threading.current_thread().name))
            return a.run(r)

        return run

    _replaced(monkeypatch, {a.name: counted(a) for a in ANALYSES})
    both = nsysprobe.analyze(trace)
    names = [name for name, _ in ran]
    assert len(names) == len(set(names))
    # The account makes the arrivals with the accounts.
    assert set(names) == {a.name for a in ANALYSES} - {"arrivals"}
    assert {t for _, t in ran} == {"MainThread", "nsysprobe-analysis"}
    from nsysprobe.render import render

    for fmt in ("text", "json", "markdown"):
        assert render(both, fmt) == render(alone, fmt)


def test_the_first_error_in_the_declared_order_is_raised_whichever_thread_failed_first(
    monkeypatch, build
):
    later_failed = threading.Event()

    def first(run):
        # Wait until the helper thread (from the last analysis) has failed its own.
        assert later_failed.wait(10)
        raise ValueError("the first analysis's error")

    def later(run):
        later_failed.set()
        raise KeyError("a later analysis's error")

    with pytest.raises(ValueError, match="the first analysis's error"):
        _one_kernel_with(monkeypatch, build, python_frames=first, timeline=later)


def test_an_analysis_two_threads_ask_for_is_made_once_and_both_get_its_result_or_error():
    run = declared.Run(events=None, min_gap_ns=0)
    started, release = threading.Event(), threading.Event()
    calls = []

    def make(r):
        calls.append(threading.current_thread().name)
        started.set()
        assert release.wait(10)
        return "made"

    other = []
    thread = threading.Thread(target=lambda: other.append(run.once("x", make)), name="other")
    thread.start()
    assert started.wait(10)
    release.set()
    assert run.once("x", make) == "made"
    thread.join(10)
    assert other == ["made"] and calls == ["other"]

    def broken(r):
        raise OSError("once")

    with pytest.raises(OSError, match="once"):
        run.once("y", broken)
    with pytest.raises(OSError, match="once"):
        run.once("y", make)  # not made again: the same error
    assert calls == ["other"]


def test_an_error_of_the_steps_run_first_waits_for_one_declared_before_them(monkeypatch, build):
    # The steps run with the account, before the analyses declared between them; an error of
    # python_frames (declared second) is still the one raised, and no helper thread is left.
    def broken(message):
        def run(r):
            raise ValueError(message)

        return run

    with pytest.raises(ValueError, match="2nd"):
        _one_kernel_with(monkeypatch, build, python_frames=broken("2nd"), steps=broken("5th"))
    assert not [t for t in threading.enumerate() if t.name == "nsysprobe-analysis"]


def test_the_helper_thread_is_waited_for_before_the_export_is_closed(monkeypatch, build):
    # The calling thread fails while the helper is still in an analysis: analyze() returns
    # (raises) only after the helper is done with the export.
    inside, done = threading.Event(), []

    def slow(run):
        inside.set()
        threading.Event().wait(0.5)
        done.append(run.events.trace.tables is not None)
        return None

    def failing(run):
        assert inside.wait(10)
        raise KeyError("the calling thread's error")

    with pytest.raises(KeyError):
        _one_kernel_with(monkeypatch, build, python_frames=failing, timeline=slow)
    assert done == [True]


def test_after_the_first_declared_analysis_fails_no_later_one_is_started(monkeypatch, build):
    # The account (declared first) fails: its error is the one raised whatever comes after,
    # so nothing after the first set is run for it (a bad --step-range stops at once).
    ran = []

    def failing(run):
        raise ValueError("the account's error")

    def later(run):
        ran.append("health")

    with pytest.raises(ValueError, match="the account's error"):
        _one_kernel_with(monkeypatch, build, account=failing, health=later)
    assert ran == []
