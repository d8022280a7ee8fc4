"""Each recommendation id's page (``nsysprobe explain ID``, ``nsysprobe/diagnose/pages.py``):
all five parts; its thresholds the code's constants, read when the page is shown; its evidence
keys and thresholds what ``rules.py`` writes; its example trace giving the id with the line
kept beside it; its before/after traces passing the comparison it prints."""

from __future__ import annotations

import ast
import importlib
import re
from collections import defaultdict
from functools import cache
from pathlib import Path

import pytest
from click.testing import CliRunner

import nsysprobe
from nsysprobe.analyses import account, arrivals, calls, cpu_placement, kernels, step_patterns
from nsysprobe.analyses import windows as win
from nsysprobe.cli import main
from nsysprobe.diagnose import common, copies, host, patterns, rules, verdicts
from nsysprobe.diagnose.pages import ACCOUNT_KEYS, PAGES, PER_BUCKET
from nsysprobe.diagnose.rules import RULES
from nsysprobe.report import explain as ex
from nsysprobe.runs.compare import compare_runs, gate, load_run, parse_condition

from conftest import SAMPLE_TRACES, SHARED_TRACES, shared_trace

ROOT = Path(__file__).parents[2]
IDS = sorted(PAGES)
SHIPPED = sorted(i for i in IDS if PAGES[i].example and not PAGES[i].example.published)
PUBLISHED = sorted(i for i in IDS if PAGES[i].example and PAGES[i].example.published)
PAIRED = sorted(i for i in IDS if PAGES[i].pair)
# The constants each rule reads, imported here: its page's "When it fires" must show each with
# the value the code holds.
MIN_GAIN = {"MIN_GAIN_RATIO": common.MIN_GAIN_RATIO}
FIRES = {
    **{i: MIN_GAIN for i in IDS if i not in ("startup_in_capture", "capture_incomplete")},
    "pinned_memory": {
        **MIN_GAIN,
        "MIN_COPY_BYTES": copies.MIN_COPY_BYTES,
        "PINNED_SPEEDUP_ASSUMED": copies.PINNED_SPEEDUP_ASSUMED,
        "account.LIKE_SIZE": account.LIKE_SIZE,
        "account.LINK_BOUND_BYTES": account.LINK_BOUND_BYTES,
    },
    "device_to_host": {**MIN_GAIN, "account.READBACK_MIN_BYTES": account.READBACK_MIN_BYTES},
    "host_sync": {**MIN_GAIN, "account.READBACK_MIN_BYTES": account.READBACK_MIN_BYTES},
    "launch_overhead": {**MIN_GAIN, "account.LAUNCH_GAP_NS": account.LAUNCH_GAP_NS},
    "warmup_in_capture": {**MIN_GAIN, "calls.SLOW_LAUNCH_NS": calls.SLOW_LAUNCH_NS},
    "kernel_gaps": {
        **MIN_GAIN,
        "KERNEL_GAPS_TINY_TIME_RATIO": host.KERNEL_GAPS_TINY_TIME_RATIO,
        "kernels.TINY_NS": kernels.TINY_NS,
    },
    "periodic_step": {
        **MIN_GAIN,
        "windows.PERIODIC_RATIO": win.PERIODIC_RATIO,
        "windows.PERIODIC_MIN": win.PERIODIC_MIN,
    },
    "startup_in_capture": {
        "windows.STARTUP_RATIO": win.STARTUP_RATIO,
        "account.STARTUP_LEAVES": account.STARTUP_LEAVES,
    },
    "autotuning": {
        **MIN_GAIN,
        "step_patterns.MIN_PATTERN_STEPS": step_patterns.MIN_PATTERN_STEPS,
        "step_patterns.SYNC_STORM_CALLS": step_patterns.SYNC_STORM_CALLS,
        "step_patterns.STORM_RATIO": step_patterns.STORM_RATIO,
    },
    "recompilation": {
        **MIN_GAIN,
        "step_patterns.MIN_PATTERN_STEPS": step_patterns.MIN_PATTERN_STEPS,
    },
    "late_rank": {
        **MIN_GAIN,
        "arrivals.ALPHA": arrivals.ALPHA,
        "arrivals.MIN_HELD_UP_RATIO": arrivals.MIN_HELD_UP_RATIO,
    },
    "numa_binding": {
        **MIN_GAIN,
        "cpu_placement.LOCAL_RATIO": cpu_placement.LOCAL_RATIO,
        "cpu_placement.REMOTE_RATIO": cpu_placement.REMOTE_RATIO,
        "NUMA_TIME_SAVED_WHEN_REMOTE": verdicts.NUMA_TIME_SAVED_WHEN_REMOTE,
    },
    "gpu_idle": {**MIN_GAIN, "GPU_BOUND_IDLE_RATIO": common.GPU_BOUND_IDLE_RATIO},
    "gpu_bound": {
        **MIN_GAIN,
        "GPU_BOUND_IDLE_RATIO": common.GPU_BOUND_IDLE_RATIO,
        "kernels.CONTENTION_RATIO": kernels.CONTENTION_RATIO,
        "kernels.FP32_LEVER_RATIO": kernels.FP32_LEVER_RATIO,
        "kernels.FUSION_LEVER_RATIO": kernels.FUSION_LEVER_RATIO,
        "kernels.TINY_LEVER_RATIO": kernels.TINY_LEVER_RATIO,
        "kernels.TINY_NS": kernels.TINY_NS,
    },
}
# A constant named and not followed by its value; one followed by it.
UNFILLED = re.compile(r"``((?:[a-z_]+\.)?[A-Z][A-Z0-9_]*)``(?! = )")
SHOWN = re.compile(r"``((?:[a-z_]+\.)?[A-Z][A-Z0-9_]*)`` = ([-0-9.,e+]+)")


def invoke(*args):
    return CliRunner().invoke(main, ["explain", *args])


def parts(text: str) -> dict[str, str]:
    """A text page's parts: heading -> body (the lines indented under it)."""
    out, head = {}, None
    for line in text.splitlines():
        if line and not line[0].isspace():
            head = line
            out[head] = []
        elif head is not None:
            out[head].append(line)
    return {h: "\n".join(body).strip() for h, body in out.items()}


def shown(text: str) -> dict[str, list[float]]:
    values = defaultdict(list)
    for ref, value in SHOWN.findall(text):
        values[ref].append(float(value.rstrip(".,").replace(",", "")))
    return values


@cache
def analyzed(path: Path) -> dict[str, common.Recommendation]:
    return {r.id: r for r in nsysprobe.analyze(path).recommendations}


def code_value(name: str) -> object:
    """The constant ``name`` as the first of the diagnosis's modules that reads it holds it."""
    diagnosis = (common, copies, patterns, verdicts)
    return next(getattr(m, name) for m in diagnosis if hasattr(m, name))


def matches(key: str, documented: tuple[str, ...]) -> bool:
    """``key`` is one of ``documented``, where ``<...>`` stands for any name."""
    return any(re.fullmatch(re.sub(r"<[^>]*>", ".+", re.escape(d)), key) for d in documented)


def test_every_id_of_the_catalogue_has_a_page_and_every_page_an_id():
    assert list(PAGES) == list(ex.catalogue())


@pytest.mark.parametrize("rec_id", IDS)
def test_every_page_has_its_five_parts_in_text_and_in_markdown(rec_id):
    page = PAGES[rec_id]
    assert page.fires and page.reads and page.fix and page.code and page.confirm
    assert (page.example is None) != (not page.no_example)
    text = invoke(rec_id).output
    assert text.startswith(f"{rec_id}: ")
    found = parts(text)
    assert [h for h in found if not h.startswith(f"{rec_id}:")] == [*ex.PARTS, ex.SHARED]
    assert all(found[h] for h in ex.PARTS), rec_id
    assert page.code.splitlines()[0] in found["The fix"]
    if page.compared:
        assert "nsysprobe compare before after --fail-if-slower 0" in found[ex.PARTS[4]]
    markdown = invoke(rec_id, "--format", "markdown").output
    headings = [h[4:] for h in markdown.splitlines() if h.startswith("### ")]
    assert headings == [*ex.PARTS, ex.SHARED]
    assert f"```python\n{page.code}\n```" in markdown


def test_no_constant_is_left_without_its_value():
    for topic in ex.recommendations():
        assert not UNFILLED.findall(topic.text), topic.name
        assert not UNFILLED.findall(topic.markdown), topic.name
    assert not UNFILLED.findall(ex.markdown_tables())
    assert not UNFILLED.findall(ex.shared())
    # An analysis may name SQLite tables (``ENUM_CUDA_MEM_KIND``) the same way: only names
    # that no module of the analyses or the diagnosis defines are left as they are.
    modules = [
        importlib.import_module(f"nsysprobe.{p.parent.name}.{p.stem}")
        for folder in ("analyses", "diagnose")
        for p in (ROOT / "nsysprobe" / folder).glob("*.py")
        if p.stem != "__init__"
    ]
    for topic in ex.analyses():
        for ref in UNFILLED.findall(topic.text):
            name = ref.rpartition(".")[2]
            assert not any(hasattr(m, name) for m in modules), (topic.name, ref)


def test_the_shared_paragraph_names_its_thresholds_with_their_values():
    assert "3% (``MIN_GAIN_RATIO`` = 0.03)" in invoke("host_sync").output.replace("\n    ", " ")
    values = shown(ex.shared())
    assert values["MIN_GAIN_RATIO"] == [common.MIN_GAIN_RATIO]
    assert values["MIN_COPY_BYTES"] == [copies.MIN_COPY_BYTES]
    assert values["READBACK_MIN_BYTES"] == [account.READBACK_MIN_BYTES]


@pytest.mark.parametrize("rec_id", IDS)
def test_the_thresholds_a_page_shows_are_the_constants_the_rule_reads(rec_id):
    page = parts(ex.explain(rec_id, live=False).text)
    fires = shown(page["When it fires"])
    for ref, value in FIRES.get(rec_id, {}).items():
        assert fires.get(ref), (rec_id, ref)
        assert fires[ref] == [pytest.approx(value, rel=1e-5)] * len(fires[ref]), (rec_id, ref)
    thresholds = shown(page["What it reads and writes"])
    for key in PAGES[rec_id].thresholds:
        assert thresholds[key.upper()] == [code_value(key.upper())], (rec_id, key)
    # Every value the whole page shows is the code's, whatever the constant.
    for ref, values in shown(ex.explain(rec_id, live=False).text).items():
        assert values == [pytest.approx(float(ex.constant(ref)), rel=1e-5)] * len(values)


def test_a_page_reads_its_thresholds_from_the_code_when_it_is_shown(monkeypatch):
    monkeypatch.setattr(common, "MIN_GAIN_RATIO", 0.05)
    monkeypatch.setattr(win, "PERIODIC_RATIO", 2.0)
    text = invoke("periodic_step").output.replace("\n    ", " ")
    assert "5% (``MIN_GAIN_RATIO`` = 0.05)" in text
    assert "over 2 (``windows.PERIODIC_RATIO`` = 2) times a typical one" in text


def rules_writes() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Per id, the evidence keys and threshold keys its rule writes, read from the source of
    the diagnosis's modules: from its row's check (``rules.RULES``), or the function whose
    ``Outcome`` ``diagnose`` makes into its row (``ROW.made(function(...))``), through every
    function they call, ``rec(account, title, ..., key=...)`` (``bucket_evidence``'s keys, its
    buckets' apart) and ``Outcome(evidence={...}, thresholds={...})``."""
    functions = {
        node.name: node
        for path in (ROOT / "nsysprobe/diagnose").glob("*.py")
        for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.FunctionDef)
    }

    def writes(name: str, seen: set[str]) -> tuple[set[str], set[str]]:
        keys: set[str] = set()
        limits: set[str] = set()
        if name in seen or name not in functions:
            return keys, limits
        seen.add(name)
        for node in ast.walk(functions[name]):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                continue
            kw = {k.arg: k.value for k in node.keywords}
            if node.func.id == "rec":
                keys |= {k for k in kw if k != "saved"}
            elif node.func.id == "Outcome":
                made = kw.get("evidence")
                keys |= (
                    {k.value for k in made.keys}
                    if isinstance(made, ast.Dict)
                    else (set(ACCOUNT_KEYS) if made is not None else set())
                )
                limits |= {k.value for k in kw["thresholds"].keys} if "thresholds" in kw else set()
            more_keys, more_limits = writes(node.func.id, seen)
            keys |= more_keys
            limits |= more_limits
        return keys, limits

    roots = defaultdict(set)
    for rule in RULES:
        if rule.check is not None:  # partial(step_pattern, verdict): its function's
            roots[rule.id].add(getattr(rule.check, "func", rule.check).__name__)
    made = ast.parse((ROOT / "nsysprobe/diagnose/rules.py").read_text())
    # ROW.made(function(...)), or ROW.made(name) after name = function(...)
    assigned = {
        node.targets[0].id: node.value.func.id
        for node in ast.walk(made)
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
        if isinstance(node.targets[0], ast.Name) and isinstance(node.value.func, ast.Name)
    }
    for node in ast.walk(made):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "made":
            found = node.args[0]
            name = found.func.id if isinstance(found, ast.Call) else assigned[found.id]
            roots[getattr(rules, node.func.value.id).id].add(name)
    evidence, thresholds = defaultdict(set), defaultdict(set)
    for rec_id, names in roots.items():
        for name in names:
            keys, limits = writes(name, set())
            evidence[rec_id] |= keys
            thresholds[rec_id] |= limits
    return evidence, thresholds


@pytest.mark.parametrize("rec_id", IDS)
def test_a_page_lists_the_evidence_and_thresholds_its_rule_writes(rec_id):
    evidence, thresholds = rules_writes()
    page = PAGES[rec_id]
    per_bucket = {form.format(b) for b in page.buckets for form in PER_BUCKET}
    assert set(page.evidence_keys()) - per_bucket == evidence[rec_id] - per_bucket
    assert set(page.thresholds) == thresholds[rec_id]
    busy = ("compute", "communication", "memset")
    for bucket in page.buckets:
        known = (*account.IDLE_CAUSES, *busy, *step_patterns.VERDICTS, patterns.WORKER_START)
        assert bucket in known or bucket.startswith("memcpy "), bucket


def check_example(rec_id: str, path: Path) -> None:
    page = PAGES[rec_id]
    recs = analyzed(path)
    assert rec_id in recs, (rec_id, path.name, sorted(recs))
    rec = recs[rec_id]
    assert rec.reason == page.example.reason, f"kept line of {rec_id} is now: {rec.reason!r}"
    keys = (*page.evidence_keys(), "python_frames")
    assert all(matches(k, keys) for k in rec.evidence), set(rec.evidence) - set(keys)
    assert set(rec.thresholds) <= set(page.thresholds)  # gpu_idle: two forms
    read = [b for b in str(rec.evidence.get("buckets", "")).split(", ") if b]
    if page.buckets:
        assert all(matches(b, page.buckets) for b in read), read


@pytest.mark.parametrize("rec_id", SHIPPED)
def test_a_shipped_example_gives_its_id_with_the_line_kept_beside_it(rec_id):
    ex_ = PAGES[rec_id].example
    check_example(rec_id, SAMPLE_TRACES / ex_.trace)
    live = parts(invoke(rec_id).output)[ex.PARTS[3]]
    assert f"nsysprobe analyze sample_traces/{ex_.trace} prints, for {rec_id}:" in " ".join(
        live.split()
    )
    assert f"why: {ex_.reason}" in live


@pytest.mark.parametrize("rec_id", PUBLISHED)
def test_a_published_example_gives_its_id_with_the_line_kept_beside_it(rec_id):
    ex_ = PAGES[rec_id].example
    check_example(rec_id, shared_trace(ex_.trace))
    shown_ = parts(invoke(rec_id).output)[ex.PARTS[3]]
    assert "not shipped with nsysprobe" in " ".join(shown_.split())
    assert f"why: {ex_.reason}" in shown_


def test_without_sample_traces_a_page_shows_the_kept_line(monkeypatch, tmp_path):
    monkeypatch.setattr(ex, "SAMPLE_TRACES", tmp_path)  # an installed wheel has none
    example = " ".join(parts(invoke("host_sync").output)[ex.PARTS[3]].split())
    assert "sample_traces/h200_readback.sqlite: " in example
    assert "when this page was written" in example
    assert example.endswith("why: " + PAGES["host_sync"].example.reason)


def test_an_id_without_an_example_is_given_by_no_trace_the_project_holds():
    traces = sorted(SAMPLE_TRACES.glob("**/*.sqlite")) + sorted(SHARED_TRACES.glob("*.sqlite"))
    given = {rec_id for path in traces for rec_id in analyzed(path)}
    assert given  # the traces are at hand
    without = {i for i in IDS if PAGES[i].example is None}
    assert not given & without


@pytest.mark.parametrize("rec_id", PAIRED)
def test_the_shipped_traces_before_and_after_a_fix_pass_its_comparison(rec_id):
    page = PAGES[rec_id]
    before, after = (SAMPLE_TRACES / t for t in page.pair)
    conditions = (*ex.FAIL_IF, *((page.gate,) if page.gate else ()))
    for condition in conditions:
        parse_condition(condition)
    comparison = compare_runs([load_run(str(before)), load_run(str(after))])
    assert not gate(comparison, ex.FAIL_IF_SLOWER, conditions).failed
    assert rec_id in analyzed(before)
    if rec_id == "gpu_bound":  # still GPU-bound after its fix: the next lever is named
        levers = [analyzed(p)[rec_id].evidence["lever"] for p in (before, after)]
        assert levers[0] != levers[1]
    else:
        assert rec_id not in analyzed(after)
    command = ex.compare_command(
        f"sample_traces/{before.name}", f"sample_traces/{after.name}", page
    )
    assert command in invoke(rec_id).output
