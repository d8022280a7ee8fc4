"""The shapes an HTML figure is drawn with (``templates/svg.html`` writes each), the colors
of the event kinds every figure shares, and the layout helpers the figures lay text out with:
text cut to fit a bar, ink that reads on a fill, round tick steps, millisecond labels.

A figure is a ``Figure`` of ``Rect``, ``Text``, ``Line`` and ``Group`` shapes in page units
(``W`` wide); the templates escape every string a shape carries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

# Every kind at least 20 CIELAB units (delta E 1976) from every other and from white
# (tests/render/test_palette.py): told apart side by side, and a GPU row mixes them.
KIND_COLORS = {
    "nvtx": "#a4b7d5",
    "kernel": "#3f6fd1",
    "memcpy HtoD": "#2e9d4a",
    "memcpy HtoD pageable": "#92c22c",
    "memcpy DtoH": "#c52172",
    "memcpy DtoD": "#8946b1",
    "memcpy other": "#926238",
    "memset": "#0093a8",
    "cuda_sync": "#da394c",
    "cuda_copy": "#eb8c1e",
    "cuda_alloc": "#7a2e1f",
    "cuda_launch": "#7bb69b",
    "cuda_other": "#ccb19a",
    "cuda_module": "#4b4f8f",
    "os_wait": "#ffdf4a",
    "os_call": "#956590",
    "mixed": "#6d7271",
}
KIND_LABELS = {
    "nvtx": "NVTX range (its own color)",
    "kernel": "kernel",
    "memcpy HtoD": "memcpy HtoD (pinned)",
    "memcpy HtoD pageable": "HtoD from pageable memory",
    "memcpy DtoH": "memcpy DtoH",
    "memcpy DtoD": "memcpy DtoD",
    "memcpy other": "other copy",
    "memset": "memset",
    "cuda_sync": "CUDA synchronize",
    "cuda_copy": "CUDA memcpy or memset call",
    "cuda_alloc": "CUDA allocator call",
    "cuda_launch": "CUDA launch",
    "cuda_other": "other CUDA call",
    "cuda_module": "CUDA module loading",
    "os_wait": "OS wait (poll, futex, read...)",
    "os_call": "other OS call",
    "mixed": "several kinds merged",
}

W = 1200


@dataclass(frozen=True)
class Rect:
    shape: ClassVar[str] = "rect"
    x: float
    y: float
    w: float  # drawn at least 0.6 wide
    h: float
    fill: str
    title: str | None = None  # the tooltip
    cls: str | None = None
    data: tuple[tuple[str, object], ...] = ()  # data-NAME attributes
    stroke: str | None = None
    stroke_width: float = 0


@dataclass(frozen=True)
class Text:
    shape: ClassVar[str] = "text"
    x: float
    y: float
    text: str
    size: int = 11
    fill: str = "#1d2330"
    anchor: str = "start"
    weight: int | None = None
    cls: str | None = None


@dataclass(frozen=True)
class Line:
    shape: ClassVar[str] = "line"
    x1: float
    y1: float
    x2: float
    y2: float
    stroke: str
    width: float | None = None
    dash: str | None = None


@dataclass(frozen=True)
class Group:
    shape: ClassVar[str] = "group"
    cls: str
    data: tuple[tuple[str, object], ...]
    items: tuple[Rect | Text | Line, ...]


Shape = Rect | Text | Line | Group


@dataclass(frozen=True)
class Figure:
    id: str
    label: str  # aria-label
    width: float
    height: float
    items: tuple[Shape, ...]
    defs: bool = False  # uses the striped patterns (pageable, idle, exposed)


def fit(text: str, width_px: float, size: int = 10) -> str | None:
    """``text`` cut to fit ``width_px`` (about 0.58 em a character), or None if nothing fits."""
    chars = int((width_px - 4) / (size * 0.58))
    if chars < 3:
        return None
    return text if len(text) <= chars else text[: chars - 1] + "…"


def argb(color: int | None) -> str:
    if color is None:
        return KIND_COLORS["nvtx"]
    return f"#{color & 0xFFFFFF:06x}"


def ink_on(fill: str) -> str:
    if not fill.startswith("#"):  # striped patterns: dark text reads on both stripes
        return "#111111"
    r, g, b = (int(fill[i : i + 2], 16) for i in (1, 3, 5))
    return "#111111" if 0.299 * r + 0.587 * g + 0.114 * b > 150 else "#ffffff"


def ticks(span_ns: int, target: int = 8) -> float:
    """A round tick step in ns giving about ``target`` ticks over ``span_ns``."""
    raw = max(span_ns / target, 1)
    mag = 10 ** (len(str(int(raw))) - 1)
    for m in (1, 2, 5, 10):
        if m * mag >= raw:
            return m * mag
    return 10 * mag


def ms_label(ns: float) -> str:
    v = ns / 1e6
    return f"{v:,.0f} ms" if abs(v) >= 10 or v == 0 else f"{v:,.2g} ms"
