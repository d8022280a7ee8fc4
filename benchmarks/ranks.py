"""How ``analyze_many`` scales with reports and Dask workers.

Builds sets of replicated rank reports (copies of one real export, one rank's timeline
stretched so its steps are slower; these copies hold no collectives, so it is found by its
step wall times, as a "slower" rank), analyzes each set on a fresh ``LocalCluster`` of 1, 2 and 4
worker processes (one thread each), and prints a Markdown table: wall time of
``analyze_many`` (cluster start excluded), reports per second, the largest peak resident
memory of any worker (``getrusage`` in the worker, sent back with each summary), and whether
exactly the stretched rank was found.

    .venv/bin/python benchmarks/ranks.py                        # 64 and 256 reports, 1/2/4
    .venv/bin/python benchmarks/ranks.py --counts 16 --workers 1,2
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = ROOT / "sample_traces" / "h200_pinned.sqlite"
STRETCH = 1.3


def stretch(path: Path, factor: float) -> None:
    """Every event's start and end times ``factor``: steps, GPU work and CPU calls alike."""
    db = sqlite3.connect(path)
    tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    for table in tables:
        cols = {r[1] for r in db.execute(f'PRAGMA table_info("{table}")')}
        if {"start", "end"} <= cols:
            db.execute(
                f'UPDATE "{table}" SET start = CAST(start * ? AS INTEGER), '
                f'"end" = CAST("end" * ? AS INTEGER)',
                (factor, factor),
            )
    db.commit()
    db.close()


def make_ranks(source: Path, folder: Path, count: int) -> str:
    """``count`` copies of ``source`` as rank0..; the middle one stretched. Its label."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        shutil.copyfile(source, folder / f"rank{i}.sqlite")
    slow = count // 2
    stretch(folder / f"rank{slow}.sqlite", STRETCH)
    return f"rank{slow}"


def measure(folder: Path, workers: int, slow: str) -> dict:
    import logging

    from distributed import Client, LocalCluster

    from nsysprobe.ranks.many import analyze_many

    with (
        LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=logging.ERROR,
        ) as cluster,
        Client(cluster) as client,
    ):
        started = time.perf_counter()
        many = analyze_many(folder, client=client)
        wall = time.perf_counter() - started
    peaks: dict[str, int] = {}
    for r in many.ranks:
        peaks[r.worker] = max(peaks.get(r.worker, 0), r.peak_rss_bytes or 0)
    return {
        "wall_s": wall,
        "ranks": len(many.ranks),
        "errors": len(many.errors),
        "peak_mib": max(peaks.values()) / 2**20,
        "workers_used": len(peaks),
        "found": [v.label for v in many.verdicts if v.verdict == "slower"] == [slow],
    }


def machine() -> str:
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (
        f"{platform.processor() or platform.machine()}, {cpus} CPUs, {mem:.0f} GiB RAM, "
        f"Python {platform.python_version()}, {platform.system()}"
    )


@click.command()
@click.option("--counts", default="64,256", show_default=True, help="Reports per set.")
@click.option("--workers", "worker_counts", default="1,2,4", show_default=True)
@click.option(
    "--source",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=DEFAULT_SOURCE,
    show_default="sample_traces/h200_pinned.sqlite",
)
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path))
def main(counts: str, worker_counts: str, source: Path, workdir: Path | None) -> None:
    base = Path(workdir or tempfile.mkdtemp(prefix="nsysprobe-ranks-"))
    rows = []
    try:
        for count in (int(c) for c in counts.split(",")):
            folder = base / f"ranks{count}"
            slow = make_ranks(source, folder, count)
            for workers in (int(w) for w in worker_counts.split(",")):
                click.echo(f"{count} reports, {workers} workers ...", err=True)
                rows.append((count, workers, measure(folder, workers, slow)))
            shutil.rmtree(folder)
    finally:
        if workdir is None:
            shutil.rmtree(base, ignore_errors=True)
    click.echo(
        f"`analyze_many` on {machine()}, {dt.date.today().isoformat()}; source "
        f"{source.name} ({source.stat().st_size / 2**20:.1f} MiB) copied per rank, "
        f"one rank stretched x{STRETCH}.\n"
    )
    click.echo(
        "| reports | workers | wall s | reports/s | peak RSS per worker (max) | slower rank found |"
    )
    click.echo("|---:|---:|---:|---:|---:|---|")
    for count, workers, m in rows:
        click.echo(
            f"| {count} | {workers} | {m['wall_s']:.1f} | {count / m['wall_s']:.1f} "
            f"| {m['peak_mib']:.0f} MiB | {'yes' if m['found'] else 'NO'} |"
        )
    if any(m["errors"] for _, _, m in rows):
        sys.exit("some reports could not be analyzed")


if __name__ == "__main__":
    main()
