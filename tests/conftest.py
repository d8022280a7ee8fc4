"""Shared fixtures: the real traces others published (../shared/traces/) and built exports."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from exports import Export, ladder_rung

SHARED_TRACES = Path(__file__).resolve().parents[1].parent / "shared" / "traces"
SAMPLE_TRACES = Path(__file__).resolve().parents[1] / "sample_traces"
# Modules of nsysprobe/analyses/ that answer no question of their own: what the analyses use.
ANALYSIS_TOOLS = {"__init__", "calls", "events", "intervals", "rows", "stats"}


def analysis_modules() -> set[str]:
    """The modules and packages of nsysprobe/analyses/ that each answer a question."""
    folder = Path(__file__).resolve().parents[1] / "nsysprobe/analyses"
    found = {p.stem for p in folder.glob("*.py")}
    found |= {p.parent.name for p in folder.glob("*/__init__.py")}
    return found - ANALYSIS_TOOLS


def shared_trace(name: str) -> Path:
    path = SHARED_TRACES / name
    if not path.exists():
        pytest.skip(f"{name} is not in ../shared/traces/ on this machine")
    return path


@pytest.fixture
def build(tmp_path):
    """build(export, name) -> path of the saved .sqlite."""

    def _build(export: Export, name: str = "trace.sqlite") -> Path:
        return export.save(tmp_path / name)

    return _build


@pytest.fixture
def rung(build):
    def _rung(name: str, **kw) -> Path:
        return build(ladder_rung(name, **kw), f"{name}.sqlite")

    return _rung


# Set (by scripts/test.sh, for a user who is not root and has no Chromium) to the reason the
# HTML report's browser tests, those that use the ``chromium_present`` fixture, are skipped.
SKIP_BROWSER_ENV = "NSYSPROBE_SKIP_BROWSER_TESTS"


def pytest_collection_modifyitems(config, items):
    why = os.environ.get(SKIP_BROWSER_ENV)
    if not why:
        return
    for item in items:
        if "chromium_present" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.skip(reason=why))


@pytest.fixture(autouse=True)
def _history_in_tmp(tmp_path, monkeypatch):
    """Every analyze/run records a history entry: keep it out of the real home."""
    monkeypatch.setenv("NSYSPROBE_HISTORY", str(tmp_path / "history.db"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
