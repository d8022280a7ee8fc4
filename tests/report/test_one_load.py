"""One analysis opens its export once and loads its events once: the HTML timeline, the step
account and every analysis read the same ``Events``; a report holding several ranks is loaded
once and split."""

from pathlib import Path

import pytest
from click.testing import CliRunner

from nsysprobe.analyses import events as events_mod
from nsysprobe.cli import main
from nsysprobe.trace import reader

from conftest import shared_trace

SAMPLES = Path(__file__).parents[2] / "sample_traces"
TWO_GPU = "nsysai_mfu_2gpu_before_nsys2026.2.sqlite"


@pytest.fixture
def opened(monkeypatch):
    """Every Trace opened and every Events.load, by path."""
    seen = {"trace": [], "load": []}
    trace_init, load = reader.Trace.__init__, events_mod.Events.load.__func__

    def counting_init(self, path):
        seen["trace"].append(Path(path).name)
        trace_init(self, path)

    def counting_load(cls, trace, **kwargs):
        seen["load"].append(trace.path.name)
        return load(cls, trace, **kwargs)

    monkeypatch.setattr(reader.Trace, "__init__", counting_init)
    monkeypatch.setattr(events_mod.Events, "load", classmethod(counting_load))
    return seen


def test_analyze_with_html_opens_the_export_once(opened, tmp_path):
    page = tmp_path / "report.html"
    trace = SAMPLES / "h200_pinned.sqlite"
    args = ["analyze", str(trace), "--html", str(page), "--no-history", "--format", "json"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert page.stat().st_size > 10_000
    assert opened == {"trace": [trace.name], "load": [trace.name]}


def test_a_report_of_two_ranks_is_loaded_once_and_split(opened):
    from nsysprobe.ranks.summary import summarize_report

    path = shared_trace(TWO_GPU)
    summaries = summarize_report(str(path), "job", {})
    assert [s.pid for s in summaries] == [144, 145]
    assert opened == {"trace": [path.name], "load": [path.name]}
