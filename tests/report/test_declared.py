"""The analyses declared once (``nsysprobe/report/declared.py``): ``analyze`` runs each,
``explain`` lists each (its module's docstring), the renderers show each in the declared order,
and what one lacks is its skipped row with its declared fix."""

from __future__ import annotations

from pathlib import Path

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
