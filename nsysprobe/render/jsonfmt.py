"""The JSON form of a Report: the dataclasses as they are, with ``schema_version`` first.

Keys: ``schema_version``, ``trace``, ``devices`` (per device ``device_id``, ``busy_ns``,
``kernel_busy_ns``, ``span_ns``, ``busy_ratio``, ...), ``gaps``, ``transfers`` (``rows`` with
``copy_kind``, ``src_kind``, ``dst_kind``, ``count``, ``bytes``, ``duration_ns``, ``gbps``),
``osrt`` (``rows`` with ``function``, ``thread``, ``count``, ``total_ns``, ``max_ns``,
``in_gap_ns``), ``overlap``, ``steps``, ``findings``, ``recommendations`` (ordered, each with
``id``, ``reason``, ``expected_gain_ratio``, ``evidence``), ``skipped``.
"""

from __future__ import annotations

import dataclasses
import json

from nsysprobe.report.analyze import Report


def report_dict(report: Report) -> dict:
    data = dataclasses.asdict(report)
    out = {"schema_version": data.pop("schema_version"), "trace": data.pop("trace")}
    gaps = data["gaps"]
    out["devices"] = gaps.pop("devices") if gaps else []
    for account in (data["account"] or {}).get("accounts", ()):
        account.pop("communication_ops", None)  # per-operation arrays, for the ranks view
    out.update(data)
    return out


def render_json(report: Report) -> str:
    return json.dumps(report_dict(report), indent=2, ensure_ascii=False) + "\n"
