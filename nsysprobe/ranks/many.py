"""Many ranks: every report analyzed on its own on a Dask worker, then a cross-rank view.

The reports are expanded from files, folders and globs and labelled (``inputs``), each
analyzed on a Dask worker (``cluster``) in a process of its own with a time and a memory
limit (``bounded``) into one ``RankSummary`` per rank (``summary``), and the summaries
compared across ranks (``nsysprobe.analyses.cross_rank``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

from nsysprobe.analyses.cross_rank import ManyReport, RankSummary, cross_rank
from nsysprobe.errors import InputError
from nsysprobe.ranks.bounded import summarize_bounded
from nsysprobe.ranks.cluster import dask_client, usable_cpus
from nsysprobe.ranks.inputs import expand_paths, rank_labels
from nsysprobe.ranks.summary import error_summary


def analyze_many(
    paths: Iterable[str | os.PathLike] | str | os.PathLike,
    client=None,
    *,
    scheduler: str | None = None,
    workers: int | None = None,
    rank_timeout_s: float | None = None,
    rank_memory_bytes: int | None = None,
    progress: Callable[[str], None] | None = None,
    **analyze_options,
) -> ManyReport:
    """Analyze many reports (or one holding several processes) and compare the ranks.

    ``client``: a ``dask.distributed.Client`` to run on. Else ``scheduler`` (an address such
    as ``tcp://HOST:8786``), else Dask's ``scheduler-address`` configuration, else a
    ``LocalCluster`` of ``workers`` processes (default and most: one per CPU this process may
    use, at most one per report), one thread each, the machine's memory divided among them.
    Each report is analyzed in a process of its own (``summarize_bounded``), stopped after
    ``rank_timeout_s`` seconds or at ``rank_memory_bytes`` resident; that, or its worker dying,
    is that rank's error and the other ranks are compared. ``analyze_options`` are those of
    ``nsysprobe.analyze`` (``min_gap_ms``, ``step_range``, ``nsys``, ``topology``).
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    files = expand_paths(paths)
    labels = rank_labels(files)
    if "pid" in analyze_options:
        raise InputError("analyze_many: pid is chosen per report; leave it out")
    workers = min(workers or usable_cpus(), len(files))
    with dask_client(client, scheduler=scheduler, workers=workers) as c:
        from distributed import as_completed

        futures = c.map(
            summarize_bounded,
            [str(f) for f in files],
            labels,
            options=analyze_options,
            timeout_s=rank_timeout_s,
            memory_bytes=rank_memory_bytes,
            pure=False,
        )
        index = {future.key: i for i, future in enumerate(futures)}
        per_report: list[list[RankSummary]] = [[] for _ in files]
        for done, future in enumerate(as_completed(futures), 1):
            i = index[future.key]
            if future.status == "finished":
                per_report[i] = future.result()
            else:
                per_report[i] = [_lost(files[i], labels[i], future)]
            if progress is not None:
                progress(f"analyzed {done}/{len(files)} reports")
    return cross_rank([s for summaries in per_report for s in summaries])


def _lost(path: Path, label: str, future) -> RankSummary:
    """The error of a report whose task ended without a result: its worker died, or the task
    failed or was cancelled on the cluster."""
    from distributed import KilledWorker

    exc = future.exception() if future.status == "error" else None
    if isinstance(exc, KilledWorker):
        error = (
            f"{path}: the Dask worker analyzing it died (KilledWorker), as when the OOM killer "
            f"ends a worker process; see the workers' logs, and run fewer --workers or a lower "
            f"--rank-memory-gb"
        )
    else:
        why = f"{type(exc).__name__}: {exc}" if exc is not None else f"it was {future.status}"
        error = f"{path}: its task on the Dask cluster failed ({why}); see the workers' logs"
    return error_summary(label, path.name, error)
