"""The report's saved form: ``analysis.json`` of a run folder, the same JSON as
``nsysprobe analyze --format json``.

Keys: ``schema_version``, ``trace``, ``devices`` (per device ``device_id``, ``busy_ns``,
``kernel_busy_ns``, ``span_ns``, ``busy_ratio``, ...), ``gaps``, ``transfers`` (``rows`` with
``copy_kind``, ``src_kind``, ``dst_kind``, ``count``, ``bytes``, ``duration_ns``, ``gbps``),
``osrt`` (``rows`` with ``function``, ``thread``, ``count``, ``total_ns``, ``max_ns``,
``in_gap_ns``), ``overlap``, ``steps``, ``findings``, ``recommendations`` (ordered, each with
``id``, ``reason``, ``expected_gain_ratio``, ``evidence``), ``skipped``, ``step_patterns``
(``verdict``, per step ``kernels``, ``new_set``, ``syncs``, ``allocations``, ``module_loads``,
``births``; ``births`` by generation, ``period_steps``, ``cost_ns``), ``kernels`` (the main
account's ``classes`` with ``name``, ``ns``, ``count``, ``share_ratio``, ``top_kernel``, and
the ``lever``). The dataclasses as they are, with ``schema_version`` first;
``metrics.metrics_from_json`` reads it back.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from nsysprobe.common import jsontext
from nsysprobe.report.analyze import Report

ANALYSIS_FILE = "analysis.json"


def report_dict(report: Report) -> dict:
    # The timeline is the HTML page's, not a figure.
    # Per-operation and per-piece arrays (for the ranks view, for ``python_frames``) are not
    # figures: left out before the copy.
    accounts = report.account
    if accounts is not None:
        bare = (
            dataclasses.replace(a, communication_ops=None, idle_spans=None, idle_gaps=None)
            for a in accounts.accounts
        )
        accounts = dataclasses.replace(accounts, accounts=tuple(bare))
    data = _plain(dataclasses.replace(report, timeline=None, account=accounts))
    del data["timeline"]
    out = {"schema_version": data.pop("schema_version"), "trace": data.pop("trace")}
    gaps = data["gaps"]
    out["devices"] = gaps.pop("devices") if gaps else []
    for account in (data["account"] or {}).get("accounts", ()):
        del account["communication_ops"], account["idle_spans"], account["idle_gaps"]
    out.update(data)
    return out


def _plain(value):
    """``dataclasses.asdict`` of a report's values (dataclasses, tuples, lists and dicts of
    them, plain values), without its deep copy of every plain value: the dict is written out
    at once. Tuples come back as lists, as JSON writes both."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    kind = type(value)
    names = _FIELDS.get(kind)
    if names is None:
        is_one = dataclasses.is_dataclass(value) and not isinstance(value, type)
        names = _FIELDS[kind] = [f.name for f in dataclasses.fields(value)] if is_one else False
    if names is False:
        return value
    return {n: _plain(getattr(value, n)) for n in names}


_FIELDS: dict[type, list[str] | bool] = {}  # per type: its fields, False if no dataclass


def to_json(report: Report) -> str:
    return jsontext.dumps(report_dict(report)) + "\n"


def save_analysis(report: Report, folder: Path) -> Path:
    """Write ``report`` as ``folder/analysis.json``; return its path."""
    path = Path(folder) / ANALYSIS_FILE
    path.write_text(to_json(report), encoding="utf-8")
    return path
