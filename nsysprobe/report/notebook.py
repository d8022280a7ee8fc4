"""The report in a notebook: ``Report._repr_html_``, what Jupyter shows for a report.

Compact on purpose: the trace, the verdict, the ranked recommendations and the step account
(its buckets), nothing else; the tables behind them are DataFrames on request
(``nsysprobe.common.frames``) and the full page is ``nsysprobe analyze --html``. Every string
goes through Jinja2's autoescape, control characters dropped: names in a trace (NVTX ranges,
threads, kernels) are anyone's text. No stylesheet: the notebook's own.
"""

from __future__ import annotations

import re

import jinja2

DETAILS_SHOWN = 3
# Dropped from what the template writes (as the HTML page does): they mean nothing in a page.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

_TEMPLATE = """\
<div class="nsysprobe-report">
<p><b>nsysprobe</b> · {{ t.path }}: nsys {{ t.nsys_version or "version unknown" }}, \
{{ t.gpus|join(", ") or "no GPU described" }}\
{% if steps %} · {{ "%.2f"|format(steps.steps_per_s) }} steps/s over {{ steps.count }} steps\
{% endif %}</p>
{% if v is none %}
<p><b>No verdict</b>: nothing to diagnose in this trace.</p>
{% else %}
<p><b>VERDICT: {{ v.id }}</b> · {{ v.title }}\
{% if v.expected_gain_ratio %} (saves ~{{ v.expected_gain_ratio|pct }}){% endif %}<br>
<b>why</b>: {{ v.reason }}<br><b>do</b>: {{ v.advice }}</p>
<table><thead><tr><th>#</th><th>recommendation</th><th>gain</th><th>saves</th><th>why</th>\
</tr></thead><tbody>
{% for r in report.recommendations %}<tr><td>{{ loop.index }}</td><td>{{ r.id }}</td>\
<td>{{ r.expected_gain_ratio|pct }}</td><td>{{ r.saved_ns|ms }}</td><td>{{ r.reason }}</td></tr>
{% endfor %}</tbody></table>
{% endif %}
{% if a is not none %}
<p><b>Where the step time went</b>: process {{ a.pid }}, GPU {{ a.device_id }}, {{ a.thread }}: \
{{ a.step_count }} steps, median {{ a.median_wall_ns|ms }}; busy {{ (1 - a.idle_ratio)|pct }}, \
idle {{ a.idle_ratio|pct }}</p>
<table><thead><tr><th></th><th>bucket</th><th>median/step</th><th>total</th><th>share</th>\
<th>mostly</th></tr></thead><tbody>
{% for b in a.buckets %}<tr><td>{{ b.kind }}</td><td>{{ b.name }}</td><td>{{ b.median_ns|ms }}</td>\
<td>{{ b.total_ns|ms }}</td><td>{{ b.share_ratio|pct }}</td><td>\
{% for d in b.details[:shown] %}{{ d.name }} {{ d.ns|ms }}{% if not loop.last %}, {% endif %}\
{% else %}-{% endfor %}</td></tr>
{% endfor %}</tbody></table>
{% endif %}
<p><small>Each table as a DataFrame: report.to_pandas(), report.steps.to_pandas(), \
report.account.main.to_pandas("steps"), ...</small></p>
</div>
"""

_ENVIRONMENT = jinja2.Environment(
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    finalize=lambda value: _CONTROL.sub("", value) if isinstance(value, str) else value,
)
_ENVIRONMENT.filters.update(
    ms=lambda ns: f"{ns / 1e6:,.1f} ms",
    pct=lambda ratio: f"{ratio:.1%}",
)


def report_html(report) -> str:
    """``report`` (a ``Report``: this module is what its ``_repr_html_`` calls, so it does not
    import it) as an HTML fragment for a notebook cell."""
    account = report.account.main if report.account else None
    return _ENVIRONMENT.from_string(_TEMPLATE).render(
        report=report,
        t=report.trace,
        v=report.verdict,
        a=account,
        steps=report.steps,
        shown=DETAILS_SHOWN,
    )
