"""The HTML report's colors are told apart: every pair at least MIN_DELTA_E apart in CIELAB
(delta E 1976: the straight distance between two colors in a space made so that equal
distances look about equally different; 2.3 is just noticeable, 20 is plainly another color
side by side), and from the white of the page."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from nsysprobe.analyses.account import COMMUNICATION, COMPUTE, IDLE_CAUSES, MEMSET
from nsysprobe.render.charts import BUCKET_COLORS, COPY_COLORS, _bucket_colors
from nsysprobe.render.svg import KIND_COLORS
from nsysprobe.render.timeline_figure import TRACK

MIN_DELTA_E = 20
WHITE = "#ffffff"


def lab(color: str) -> np.ndarray:
    """CIELAB (D65) of an sRGB ``#rrggbb``."""
    rgb = np.array([int(color[i : i + 2], 16) for i in (1, 3, 5)]) / 255
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    xyz = (
        np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]])
        @ linear
        / np.array([0.95047, 1.0, 1.08883])
    )
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def delta_e(a: str, b: str) -> float:
    return float(np.linalg.norm(lab(a) - lab(b)))


def closest_pairs(colors: dict[str, str]) -> list[tuple[float, str, str]]:
    """Every pair of named colors closer than MIN_DELTA_E, closest first."""
    pairs = [(delta_e(colors[a], colors[b]), a, b) for a, b in itertools.combinations(colors, 2)]
    return sorted(p for p in pairs if p[0] < MIN_DELTA_E)


def test_delta_e_sees_the_old_greys():
    """A control: the account's old profiler_overhead and queued greys (#dbdbdb, #c7c7c7)
    and the timeline's old NVTX and "several kinds merged" greys fail the check."""
    assert delta_e("#dbdbdb", "#c7c7c7") < 8
    assert closest_pairs({"nvtx": "#9aa5b1", "mixed": "#8f8f8f"})
    assert delta_e(WHITE, "#000000") == pytest.approx(100, abs=0.01)


def test_timeline_kinds_are_told_apart():
    """Every kind of bar from each other, from white, and from a GPU row's track (its idle
    color, itself near white)."""
    assert all(c.startswith("#") for c in KIND_COLORS.values())  # solid: a GPU row mixes them
    assert closest_pairs({**KIND_COLORS, "white": WHITE}) == []
    assert closest_pairs({**KIND_COLORS, "track": TRACK}) == []


def test_step_account_buckets_are_told_apart():
    """Every bucket's color (the busy kinds, the common copies, every idle cause) and the
    colors other copy kinds get, from each other and from white."""
    colors = {**BUCKET_COLORS, **{f"copy {i}": c for i, c in enumerate(COPY_COLORS)}}
    assert closest_pairs({**colors, "white": WHITE}) == []
    assert set(IDLE_CAUSES) | {COMPUTE, COMMUNICATION, MEMSET} <= set(BUCKET_COLORS)


def test_an_account_never_shows_two_buckets_alike():
    """All the buckets at once, with as many uncommon copy kinds as COPY_COLORS holds."""
    names = [*IDLE_CAUSES, COMPUTE, COMMUNICATION, MEMSET, "memcpy HtoD Pinned"]
    names += ["memcpy HtoD Pageable", "memcpy DtoD", "memcpy HtoH", "memcpy HtoD Device"]
    names += ["memcpy AtoD"]
    colors = _bucket_colors(names)
    assert len(set(colors.values())) == len(names)
    assert closest_pairs(colors) == []
