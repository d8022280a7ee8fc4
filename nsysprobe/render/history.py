"""A history Listing -> text or JSON: one row per recorded run, newest first.

Columns: the id (what ``nsysprobe compare`` takes), when it was recorded, the trace, steps/s,
GPU busy, the top recommendation and the command. The JSON carries each entry's fields and
headline figures (per-step wall times aside).
"""

from __future__ import annotations

import dataclasses
import json

from nsysprobe.common.safetext import one_line
from nsysprobe.render.layout import table as layout
from nsysprobe.render.sections import pct
from nsysprobe.runs.history import Listing

HEADER = (
    "id",
    "recorded (UTC)",
    "trace",
    "steps/s",
    "GPU busy",
    "top recommendation",
    "command",
)


def render_history_text(listing: Listing, width: int | None = None) -> str:
    """The table, laid out for ``width`` columns (None: each row on one line), then where it
    was read from."""
    if not listing.entries:
        return f"no runs recorded yet in {listing.path}\n"
    table = []
    for e in listing.entries:
        m = e.metrics
        row = (
            str(e.id),
            e.recorded_utc.replace("+00:00", ""),
            m.trace,
            "-" if m.steps_per_s is None else f"{m.steps_per_s:,.2f}",
            "-" if m.gpu_busy_ratio is None else pct(m.gpu_busy_ratio),
            m.top_recommendation or "-",
            e.command,
        )
        table.append(tuple(one_line(cell) for cell in row))  # a hand-edited row, too
    lines = layout(HEADER, table, width)
    return "\n".join(lines) + f"\n({len(listing.entries)} newest in {listing.path})\n"


def render_history_json(listing: Listing) -> str:
    data = [
        {
            **{k: v for k, v in dataclasses.asdict(e).items() if k != "metrics"},
            **{k: v for k, v in dataclasses.asdict(e.metrics).items() if k != "step_wall_ns"},
        }
        for e in listing.entries
    ]
    return json.dumps({"history": str(listing.path), "entries": data}, indent=2) + "\n"


RENDERERS = {"text": render_history_text, "json": render_history_json}
