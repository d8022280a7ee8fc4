"""Many ranks on Dask: per-process ranks of a real two-GPU trace, straggler detection on a
synthetic DDP job with one report per rank (``tests/ddp.py``: equal step walls, one rank's
input slower, the others' NCCL kernels longer), a LocalCluster, and a separately started
`dask scheduler` with two `dask worker` processes on loopback. The arrival analysis itself is
tested in ``tests/analyses/test_arrivals.py``."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import ddp
import independent
import pytest
from click.testing import CliRunner

from nsysprobe import analyze
from nsysprobe.analyses.cross_rank import RankSummary, cross_rank
from nsysprobe.cli import main
from nsysprobe.errors import InputError
from nsysprobe.ranks.inputs import expand_paths
from nsysprobe.ranks.many import analyze_many
from nsysprobe.ranks.summary import summarize_report
from nsysprobe.render.many import RENDERERS, render_many_html

from conftest import SAMPLE_TRACES, shared_trace

distributed = pytest.importorskip("distributed")

TWO_GPU = "nsysai_mfu_2gpu_before_nsys2026.2.sqlite"
PINNED = SAMPLE_TRACES / "h200_pinned.sqlite"
RANKS = 4
SLOW_RANK = 2


@pytest.fixture(scope="module")
def rank_folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("ranks")
    exs, _ = ddp.build(ddp.Job(ranks=RANKS, slow_rank=SLOW_RANK, slow="load"))
    ddp.save_per_rank(exs, folder)
    return folder


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            host="127.0.0.1",
        ) as cluster,
        Client(cluster) as c,
    ):
        yield c


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_straggler(many) -> None:
    slow = f"rank{SLOW_RANK}"
    assert many.stragglers == (slow,)
    by_label = {v.label: v for v in many.verdicts}
    assert by_label[slow].verdict == "straggler"
    assert all(v.verdict == "not late" for k, v in by_label.items() if k != slow)
    assert many.slowest[0].label == slow
    assert many.slowest[0].causes[0].recommendation == "multiprocess_loading"
    assert many.arrivals.rank(slow).last_rounds == many.arrivals.rank(slow).rounds


def test_two_process_report_gives_one_rank_per_process(client):
    """Each rank's busy ratio is its own process's GPU work (the union of its kernels, copies
    and memsets) over the span of that work, counted here with sqlite3 and numpy."""
    path = shared_trace(TWO_GPU)
    assert independent.gpu_pids(path) == [144, 145]
    expected = {pid: independent.busy_ratio_over_span(path, pid) for pid in (144, 145)}
    assert expected[144] == pytest.approx(0.91318617, abs=1e-8)  # the two ranks differ, so a
    assert expected[145] == pytest.approx(0.89491237, abs=1e-8)  # swapped pid shows
    many = analyze_many([path], client=client)
    assert [r.label for r in many.ranks] == [f"{path.stem}:144", f"{path.stem}:145"]
    assert [r.pid for r in many.ranks] == [144, 145]
    for rank in many.ranks:
        assert rank.busy_basis == "span"  # this window has no step range
        assert rank.gpu_busy_ratio == pytest.approx(expected[rank.pid], rel=1e-12)
        alone = analyze(path, pid=rank.pid)
        assert alone.trace.processes == 1
        (device,) = alone.gaps.devices
        assert device.busy_ratio == pytest.approx(expected[rank.pid], rel=1e-12)
    assert analyze(path).trace.processes == 2  # the whole report is unchanged
    # No steps to compare walls with; the arrivals at its 33 SendRecv name rank 145.
    assert many.stragglers == (f"{path.stem}:145",)
    assert [v.verdict for v in many.verdicts] == ["not late", "straggler"]


def test_ranks_of_one_report_are_busy_over_their_own_steps(client, tmp_path):
    """A DDP job as one report (``nsys profile torchrun``) whose rank 1 has a slow GPU: each
    rank's busy ratio is the union of its own process's GPU work inside its own steps (its
    ``step N`` ranges, each to its completion on the GPU) over their wall time."""
    exs, _ = ddp.build(ddp.Job(ranks=3, slow_rank=1, slow="gpu"))
    path = ddp.save_one_report(exs, tmp_path / "job.sqlite")
    pids = [ddp.pid(r) for r in range(3)]
    assert independent.gpu_pids(path) == pids
    expected = {
        pid: independent.busy_ratio_over_steps(
            path, independent.step_windows(path, "step %", pid), pid
        )
        for pid in pids
    }
    assert len({round(x, 6) for x in expected.values()}) == 3
    many = analyze_many([path], client=client)
    assert [(r.pid, r.busy_basis, r.step_count) for r in many.ranks] == [
        (pid, "steps", 12) for pid in pids
    ]
    for rank in many.ranks:
        assert rank.gpu_busy_ratio == pytest.approx(expected[rank.pid], rel=1e-12)
        assert analyze(path, pid=rank.pid).steps.gpu_busy_ratio == pytest.approx(
            expected[rank.pid], rel=1e-12
        )


def test_pid_filter_on_a_single_process_report():
    """The one process of a single-process report: the same steps and busy ratio with and
    without ``pid``, both the union of the GPU work in the 20 ``Batch N`` steps (each to its
    completion on the GPU) over their wall time."""
    (pid,) = independent.gpu_pids(PINNED)
    batches = independent.step_windows(PINNED, "Batch %")
    assert len(batches) == 20
    expected = independent.busy_ratio_over_steps(PINNED, batches)
    for report in (analyze(PINNED), analyze(PINNED, pid=pid)):
        assert report.steps.count == 20
        assert [(r.start_ns, r.start_ns + r.wall_ns) for r in report.steps.rows] == batches
        assert report.steps.gpu_busy_ratio == pytest.approx(expected, rel=1e-12)


def test_local_cluster_finds_the_straggler(client, rank_folder):
    many = analyze_many(rank_folder, client=client)
    assert [r.label for r in many.ranks] == [f"rank{i}" for i in range(RANKS)]
    assert many.alignment == "utc"
    assert len({r.worker for r in many.ranks}) == 2  # both workers took reports
    for i, rank in enumerate(many.ranks):
        path = rank_folder / f"rank{i}.sqlite"
        steps = independent.step_windows(path, "step %")
        assert rank.busy_basis == "steps"
        assert rank.gpu_busy_ratio == pytest.approx(
            independent.busy_ratio_over_steps(path, steps), rel=1e-12
        )
    check_straggler(many)


def test_separate_scheduler_and_workers_on_loopback(rank_folder, tmp_path):
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    common = ["--no-dashboard"]
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dask",
                "scheduler",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                *common,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=tmp_path,
        )
    ]
    try:
        for _ in range(2):
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "dask",
                        "worker",
                        address,
                        "--nthreads",
                        "1",
                        "--host",
                        "127.0.0.1",
                        "--local-directory",
                        str(tmp_path),
                        *common,
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    cwd=tmp_path,
                )
            )
        with distributed.Client(address, timeout=30) as c:
            c.wait_for_workers(2, timeout=60)
        many = analyze_many(sorted(rank_folder.glob("*.sqlite")), scheduler=address)
        check_straggler(many)
        assert len({r.worker for r in many.ranks}) == 2
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in reversed(procs):
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)


def test_unreachable_scheduler_is_an_input_error(rank_folder):
    import dask

    address = f"tcp://127.0.0.1:{free_port()}"
    with dask.config.set({"distributed.comm.timeouts.connect": "2s"}):
        with pytest.raises(InputError, match="cannot connect"):
            analyze_many(rank_folder, scheduler=address)


def test_a_broken_report_is_an_error_row(client, rank_folder, tmp_path):
    bad = tmp_path / "rank9.sqlite"
    bad.write_text("not a database")
    many = analyze_many(
        [rank_folder / "rank0.sqlite", rank_folder / "rank1.sqlite", bad], client=client
    )
    assert [r.label.split("/")[-1] for r in many.errors] == ["rank9"]
    assert "rank9.sqlite" in many.errors[0].error
    assert many.stragglers == ()
    assert "Not analyzed" in RENDERERS["text"](many)


def test_identical_ranks_have_no_straggler_and_few_steps_are_not_tested():
    summary = summarize_report(str(PINNED), "r", {})[0]
    assert summary.step_count == 20 and summary.error is None
    same = [RankSummary(**{**summary.__dict__, "label": f"r{i}"}) for i in range(3)]
    many = cross_rank(same)
    assert many.stragglers == () and many.slowest == ()
    assert {v.verdict for v in many.verdicts} == {"not slower"}
    short = RankSummary(**{**summary.__dict__, "label": "short", "step_wall_ns": (1, 2)})
    assert cross_rank([*same, short]).verdicts[-1].why == "needs 3+ steps to test (has 2)"


def test_paths_folders_and_globs(tmp_path):
    for name in ("a.nsys-rep", "a.sqlite", "b10.sqlite", "b9.sqlite", "notes.txt"):
        (tmp_path / name).write_bytes(b"")
    # a report and its own export count once; natural order
    assert [p.name for p in expand_paths([tmp_path])] == ["a.nsys-rep", "b9.sqlite", "b10.sqlite"]
    assert [p.name for p in expand_paths([str(tmp_path / "b*.sqlite")])] == [
        "b9.sqlite",
        "b10.sqlite",
    ]
    with pytest.raises(InputError, match=r"the glob matches no \.sqlite or \.nsys-rep file"):
        expand_paths([str(tmp_path / "c*.sqlite")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no .sqlite, .nsys-rep or .qdrep files"):
        expand_paths([tmp_path / "empty"])


def run(*args):
    return CliRunner().invoke(main, list(map(str, args)))


def test_cli_folder_json_markdown_html(client, rank_folder, tmp_path):
    address = client.scheduler.address
    result = run("analyze", rank_folder, "--scheduler", address, "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["schema_version"] == 1
    assert data["stragglers"] == [f"rank{SLOW_RANK}"]
    assert data["arrivals"]["stragglers"] == [f"rank{SLOW_RANK}"]
    assert [r["label"] for r in data["ranks"]] == [f"rank{i}" for i in range(RANKS)]
    assert data["ranks"][0]["vs_others"]["verdict"] == "not late"
    assert "collectives" not in data["ranks"][0]  # the per-operation arrays stay out

    html = tmp_path / "ranks.html"
    glob = str(rank_folder / "rank*.sqlite")
    result = run("analyze", glob, "--scheduler", address, "--format", "markdown", "--html", html)
    assert result.exit_code == 0, result.output
    assert "## Stragglers" in result.stdout
    assert f"rank{SLOW_RANK}: the latest at the collectives" in result.stdout
    assert "## Arrivals at the collectives" in result.stdout
    page = html.read_text()
    assert page.startswith("<!DOCTYPE html>") and "Slowest ranks" in page


def test_cli_single_path_gets_the_one_report_view():
    """One report, without --ranks, is the one-report view: its headline and the verdict the
    capture was recorded for (sample_traces/manifest.json), not the cross-rank table."""
    manifest = json.loads((SAMPLE_TRACES / "manifest.json").read_text())
    expected = manifest["traces"][PINNED.name]["expected_verdict"]
    result = run("analyze", PINNED, "--no-history")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"{PINNED.name}: nsys 2025.3.2.0, NVIDIA H200")
    assert f"\nVERDICT: {expected} - " in result.stdout
    assert "ranks from" not in result.stdout and "Ranks\n-----" not in result.stdout


def test_cli_ranks_flag_on_one_report(client):
    path = shared_trace(TWO_GPU)
    result = run("analyze", path, "--ranks", "--scheduler", client.scheduler.address)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("2 ranks from 1 report;")
    assert "Arrivals at the collectives" in result.stdout
    assert f"{path.stem}:145: the latest at the collectives in 16 of 33" in result.stdout


def test_html_of_an_empty_view_renders():
    assert "nsysprobe cross-rank report" in render_many_html(cross_rank([]))
