"""``nsysprobe analyze`` through click's CliRunner: formats, exact errors, real traces checked
against figures computed here straight from the SQLite file."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import pytest
from click.testing import CliRunner

from nsysprobe.cli import main

from conftest import SAMPLE_TRACES, shared_trace

SHARED = [
    "cs336_h100_train_nsys2023.4.sqlite",
    "nsysai_mfu_2gpu_before_nsys2026.2.sqlite",
    "centerformer_titanrtx_nsys2022.4.sqlite",
]


def run(*args):
    return CliRunner().invoke(main, list(map(str, args)))


def union_length(rows) -> int:
    """Union of [start, end) rows by a plain sweep (independent of nsysprobe's numpy code)."""
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(rows):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + (cur_e - cur_s if cur_e is not None else 0)


@pytest.mark.parametrize("name", SHARED)
def test_json_report_for_each_real_trace(name):
    path = shared_trace(name)
    result = run("analyze", path, "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["schema_version"] == 3
    assert {"trace", "devices", "transfers", "osrt", "steps", "findings", "recommendations"} <= (
        data.keys()
    )
    assert data["recommendations"], "every report ranks at least one recommendation"
    for rec in data["recommendations"]:
        assert {"id", "reason", "expected_gain_ratio"} <= rec.keys()


def test_cs336_figures_match_the_database():
    path = shared_trace("cs336_h100_train_nsys2023.4.sqlite")
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    gpu_rows = db.execute(
        "SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL UNION ALL "
        "SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY UNION ALL "
        "SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMSET"
    ).fetchall()
    kernel_rows = db.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchall()
    pageable = db.execute(
        "SELECT count(*), sum(bytes), sum(end - start) FROM CUPTI_ACTIVITY_KIND_MEMCPY m "
        "JOIN ENUM_CUDA_MEM_KIND k ON k.id = m.srcKind "
        "WHERE m.copyKind = 1 AND k.label = 'Pageable'"
    ).fetchone()
    munmap = db.execute(
        "SELECT count(*), sum(o.end - o.start), max(o.end - o.start) FROM OSRT_API o "
        "JOIN StringIds s ON s.id = o.nameId WHERE s.value = 'munmap'"
    ).fetchone()
    db.close()

    data = json.loads(run("analyze", path, "--format", "json").output)
    (dev,) = data["devices"]
    assert dev["busy_ns"] == union_length(gpu_rows)
    assert dev["kernel_busy_ns"] == union_length(kernel_rows)
    assert dev["span_ns"] == max(e for _, e in gpu_rows) - min(s for s, _ in gpu_rows)
    rows = [
        r
        for r in data["transfers"]["rows"]
        if (r["copy_kind"], r["src_kind"]) == ("HtoD", "Pageable")
    ]
    assert [(r["count"], r["bytes"], r["duration_ns"]) for r in rows] == [tuple(pageable)]
    fn = next(f for f in data["osrt"]["functions"] if f["function"] == "munmap")
    assert (fn["count"], fn["total_ns"], fn["max_ns"]) == tuple(munmap)
    assert [f["id"] for f in data["findings"]] == ["nvtx_missing"]


def test_two_gpu_trace_has_both_devices():
    data = json.loads(
        run(
            "analyze", shared_trace("nsysai_mfu_2gpu_before_nsys2026.2.sqlite"), "--format", "json"
        ).output
    )
    assert [d["device_id"] for d in data["devices"]] == [0, 1]
    assert data["trace"]["processes"] == 2


def test_no_environment_in_any_output():
    path = shared_trace("cs336_h100_train_nsys2023.4.sqlite")
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    values = [v for (v,) in db.execute("SELECT value FROM TARGET_INFO_SYSTEM_ENV") if v]
    db.close()
    secrets = [v for v in values if isinstance(v, str) and len(v) >= 12]
    assert secrets
    for fmt in ("text", "json", "markdown"):
        out = run("analyze", path, "--format", fmt).output
        assert not [s for s in secrets if s in out], fmt


def test_text_report_leads_with_the_verdict(rung):
    out = run("analyze", rung("baseline")).output
    first = out.splitlines()[2]
    assert (
        first == "VERDICT: multiprocess_loading - Load batches in worker processes (saves ~75.0%)"
    )
    assert "Steps\n-----\nstep range 'Batch #'" in out


def test_markdown_report(rung):
    out = run("analyze", rung("multiworker"), "--format", "markdown").output
    assert out.startswith("# nsysprobe report\n")
    assert "**Verdict: `pinned_memory`**" in out
    assert "| kind | from | to | count | bytes | time | GB/s |" in out


def test_missing_path_message_and_exit_code(tmp_path):
    result = run("analyze", tmp_path / "run.sqlite")
    assert result.exit_code == 2
    assert result.output == (
        f"nsysprobe: error: {tmp_path / 'run.sqlite'}: no such file; give a .sqlite export or "
        f"a .nsys-rep report\n"
    )


def test_not_sqlite_message(tmp_path):
    bad = tmp_path / "notes.sqlite"
    bad.write_text("not a database")
    result = run("analyze", bad)
    assert result.exit_code == 2
    assert result.output == (
        f"nsysprobe: error: {bad}: not an SQLite file; give a .sqlite export "
        f"(`nsys export --type sqlite REPORT`) or a .nsys-rep report\n"
    )


def test_negative_gap_threshold(rung):
    result = run("analyze", rung("baseline"), "--min-gap-ms", "-1")
    assert result.exit_code == 2
    assert result.output == (
        "nsysprobe: error: --min-gap-ms -1.0: give a number of milliseconds from 0 to "
        "604800000, e.g. 1\n"
    )


def test_help_teaches():
    out = CliRunner().invoke(main, ["analyze", "--help"], prog_name="nsysprobe").output
    assert out.startswith("Usage: nsysprobe analyze [OPTIONS] PATH")
    assert "nsysprobe analyze run.sqlite --format json" in out
    words = " ".join(out.split())
    assert "--min-gap-ms FLOAT" in words and "NVIDIA's gpu_gaps rule uses 500" in words


# Modules a one-report `analyze` never needs: the many-ranks view and its Dask, the launcher,
# the ladder, the comparisons, the HTML page (only with --html), the history (not with
# --no-history).
NOT_FOR_ONE_REPORT = [
    # the analyses read numpy arrays (nsysprobe.common.table), the history writes with sqlite3
    "pandas",
    "sqlite_utils",
    "dask",
    "distributed",
    "nsysprobe.ranks.many",
    "nsysprobe.ranks.cluster",
    "nsysprobe.analyses.cross_rank",
    "nsysprobe.runs.compare",
    "nsysprobe.ladder.run",
    "nsysprobe.numa.launch",
    "nsysprobe.numa.plan",
    "nsysprobe.render.html",
    "nsysprobe.render.many",
    # without --html, a CPU placement (--cpuctxsw) or a capture (a .qdstrm to finish)
    "nsysprobe.analyses.timeline",
    "nsysprobe.analyses.cpu_placement",
    "nsysprobe.numa.topology",
    "nsysprobe.capture.machine",
    # nsys's modules: only for a report to export or a run folder to finish
    "nsysprobe.capture.export",
    "nsysprobe.capture.importer",
    "nsysprobe.capture.locate",
    "nsysprobe.capture.profile",
    "subprocess",
]

_RUN_AND_LIST_MODULES = """
import json, sys
from nsysprobe.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    assert not exc.code, exc.code
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


def modules_after(*args) -> set[str]:
    """The modules a fresh interpreter holds after running ``nsysprobe ARGS``."""
    done = subprocess.run(
        [sys.executable, "-c", _RUN_AND_LIST_MODULES, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


def test_one_report_imports_only_what_it_uses(tmp_path):
    trace = SAMPLE_TRACES / "h200_pinned.sqlite"
    loaded = modules_after("analyze", trace, "--format", "json")
    assert {"nsysprobe.report.analyze", "nsysprobe.runs.history"} <= loaded
    assert sorted(set(NOT_FOR_ONE_REPORT) & loaded) == []
    # JSON is the report's saved form: the text and Markdown renderers stay unloaded
    assert sorted({"nsysprobe.render.text", "nsysprobe.render.markdown"} & loaded) == []
    with_html = modules_after("analyze", trace, "--html", tmp_path / "r.html", "--no-history")
    assert {"nsysprobe.render.html", "nsysprobe.analyses.timeline"} <= with_html
    assert "nsysprobe.runs.history" not in with_html


def test_lazy_exports_are_the_functions_even_after_their_submodule_loads():
    """``nsysprobe.numa.plan`` is the function, as with eager imports, also when the module
    ``nsysprobe.numa.plan`` was imported first (importing it binds the module on the
    package)."""
    code = (
        "import nsysprobe.numa.plan, nsysprobe.numa.launch, nsysprobe.numa.placement\n"
        "import nsysprobe.numa as numa\n"
        "from nsysprobe.numa import plan\n"
        "print(all(callable(getattr(numa, n)) for n in ('plan', 'launch', 'placement')),"
        " callable(plan), sorted(numa.__all__) == sorted(n for n in dir(numa) if n in"
        " numa.__all__))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.split() == ["True", "True", "True"], done.stderr[-2000:]
