"""The optimization ladder, measured: every rung with and without nsys, and nsysprobe's diagnosis
of each checked against the rung that comes next.

``run_ladder()`` runs the rungs in ``workloads/`` (see ``workloads/ladder.py``) as subprocesses
of this Python. For each repeat and each rung it runs the rung once plain and once under
``nsys profile`` (``nsysprobe.capture.capture``), back to back, so drift on the machine hits
both alike. The output folder holds::

    ladder.json, ladder.md     the table, as JSON and Markdown
    <rung>/plain-<k>.log       the output of the k-th plain run
    <rung>/profiled-<k>/       the k-th profiled run folder: report, export, nsys.log (with the
                               workload's output), analysis.json

One row per rung (``build_ladder``, a pure function of the runs):

    steps_per_s          median over the profiled runs of the steps/s nsysprobe's analysis
                         reads from the trace (steps over time, each step to its completion)
    profiled_steps_per_s median of the profiled runs' steps/s as the workload's own clock
                         printed them: the analysis must agree within ``CLOCK_TOLERANCE``
                         (checked where the run has GPU work: without a GPU the capture has
                         no capture range and holds the warm-up steps too)
    plain_steps_per_s    median of the plain runs' steps/s, as the workload printed them
    speedup              steps_per_s / the baseline's
    share_of_ceiling     steps_per_s / the cached rung's (the compute ceiling); noise can put a
                         rung slightly above 1
    gpu_busy_ratio       median over the profiled runs of the GPU busy share as ``nsysprobe
                         compare`` shows it (union of GPU work in the steps / their wall time);
                         None when the trace has no GPU activity
    profiled_over_plain  profiled_steps_per_s / plain_steps_per_s, both printed by the
                         workload: 1 minus it is what profiling costs
    top_recommendation   the most frequent first recommendation over the profiled runs
    check                ``expected``: every profiled run's first recommendation is the rung's
                         ``EXPECTED`` one; ``unexpected``: one is not; ``no_gpu``: not checked,
                         a profiled run has no GPU activity to diagnose (a CPU-only machine);
                         ``failed``: a run of the rung failed, so the rung's later runs were
                         skipped
"""

from __future__ import annotations

import os
import re
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from nsysprobe.capture.locate import find_nsys
from nsysprobe.capture.plain import run_plain
from nsysprobe.capture.profile import DEFAULT_RUNS_DIR, LOG_FILE, ProfileOptions, capture
from nsysprobe.errors import InputError, NothingCaptured, NsysprobeError
from nsysprobe.report.saved import ANALYSIS_FILE

# 2: steps_per_s is the analysis's figure from the trace (the workload's: profiled_steps_per_s
# and plain_steps_per_s); 1 had the plain runs' figure there.
SCHEMA_VERSION = 2
# The analysis's steps/s and the workload's own clock may differ by this much (a share).
CLOCK_TOLERANCE = 0.05
RUNGS = ("baseline", "multiworker", "pinned", "streams", "prefetch", "cached")
WORKER_RUNGS = frozenset({"multiworker", "pinned", "streams", "prefetch"})
BASELINE, CEILING = "baseline", "cached"
# Each rung's diagnosis should name the change the next rung makes; the top rungs have none left.
EXPECTED = {
    "baseline": "multiprocess_loading",
    "multiworker": "pinned_memory",
    "pinned": "stream_pipelining",
    "streams": "gpu_bound",
    "prefetch": "gpu_bound",
    "cached": "gpu_bound",
}


def _workloads_folder() -> Path:
    """The workloads' folder: the installed package ``nsysprobe.workloads``, or a checkout's
    ``workloads/`` when nsysprobe runs from the source tree without being installed."""
    try:
        from nsysprobe.workloads import FOLDER
    except ImportError:
        return Path(__file__).resolve().parents[2] / "workloads"
    return FOLDER


WORKLOADS = _workloads_folder()
LADDER_JSON, LADDER_MD = "ladder.json", "ladder.md"
NO_GPU_FINDING = "no_gpu_activity"

_STEPS_PER_S = re.compile(r"^steps_per_s=(\S+)\s*$", re.MULTILINE)
_CONFIG = re.compile(r"^config .*?\s*$", re.MULTILINE)


class LadderFailed(NsysprobeError):
    """A rung's workload failed or its diagnosis is not the expected one; the table is written."""

    exit_code = 1


@dataclass(frozen=True)
class WorkloadOptions:
    """Options passed to every rung; None leaves the workload's default."""

    steps: int | None = None
    warmup: int | None = None
    workers: int | None = None
    batch_size: int | None = None
    image_size: int | None = None
    device: str | None = None

    def args(self, rung: str) -> list[str]:
        """The rung's command-line options. ``--workers`` goes only to the rungs that use
        worker processes: baseline and cached are defined by having none."""
        pairs = [
            ("--steps", self.steps),
            ("--warmup", self.warmup),
            ("--batch-size", self.batch_size),
            ("--image-size", self.image_size),
            ("--device", self.device),
        ]
        if rung in WORKER_RUNGS:
            pairs.append(("--workers", self.workers))
        return [word for flag, value in pairs if value is not None for word in (flag, str(value))]


@dataclass(frozen=True)
class RunResult:
    """One run of one rung. Paths are relative to the ladder's output folder."""

    rung: str
    repeat: int  # 1-based
    profiled: bool
    log: str  # the workload's output
    steps_per_s: float | None  # as the workload printed it; None when the run failed
    config: str | None = None  # the workload's first line, "config rung=... device=..."
    error: str | None = None  # why the run failed
    folder: str | None = None  # the run folder, for a profiled run
    gpu_activity: bool | None = None  # profiled: whether the trace has GPU work
    gpu_busy_ratio: float | None = None  # profiled, with GPU activity
    top_recommendation: str | None = None  # profiled: the first recommendation's id
    analyzed_steps_per_s: float | None = None  # profiled: the analysis's, from the trace

    @property
    def mode(self) -> str:
        return "profiled" if self.profiled else "plain"


@dataclass(frozen=True)
class Row:
    rung: str
    steps_per_s: float | None  # the analysis's, from the profiled runs' traces
    profiled_steps_per_s: float | None  # the workload's clock under nsys
    plain_steps_per_s: float | None  # the workload's clock without nsys
    speedup: float | None
    share_of_ceiling: float | None
    gpu_busy_ratio: float | None
    profiled_over_plain: float | None
    top_recommendation: str | None
    recommendations: tuple[str | None, ...]  # each profiled run's, in run order
    expected_recommendation: str
    check: str  # "expected", "unexpected", "no_gpu" or "failed"


@dataclass(frozen=True)
class Ladder:
    schema_version: int
    rows: tuple[Row, ...]
    runs: tuple[RunResult, ...]
    repeats: int
    options: WorkloadOptions
    nsys_version: str | None
    problems: tuple[str, ...]  # one line each: the rung, what went wrong, the file to read
    folder: Path | None = None  # where the runs are; None for a ladder built from results


def select_rungs(names: Iterable[str] | None) -> tuple[str, ...]:
    """The named rungs in ladder order (all six for None); unknown names are an InputError."""
    if names is None:
        return RUNGS
    wanted = {name.strip() for name in names if name.strip()}
    unknown = sorted(wanted - set(RUNGS))
    if unknown:
        raise InputError(
            f"--rungs: unknown rung {', '.join(unknown)}; choose from {', '.join(RUNGS)}"
        )
    if not wanted:
        raise InputError(f"--rungs: no rung given; choose from {', '.join(RUNGS)}")
    return tuple(rung for rung in RUNGS if rung in wanted)


def parse_output(text: str) -> tuple[str | None, float | None]:
    """The workload's ``config ...`` line and the steps/s of its last ``steps_per_s=`` line."""
    config = _CONFIG.search(text)
    rates = _STEPS_PER_S.findall(text)
    try:
        rate = float(rates[-1]) if rates else None
    except ValueError:
        rate = None
    return (config.group(0).strip() if config else None), rate


def run_ladder(
    rungs: Sequence[str] = RUNGS,
    options: WorkloadOptions | None = None,
    *,
    repeats: int = 1,
    output: Path | None = None,
    nsys: str | None = None,
    workloads: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> Ladder:
    """Run each rung plain and profiled, ``repeats`` times, each run in its own folder under
    ``output``; the command writes the Ladder beside them (``LADDER_JSON``, ``LADDER_MD``).

    A rung whose run fails is not run again; the others go on. The returned Ladder lists the
    failures and unexpected diagnoses in ``problems`` (``check_ladder`` raises on them).
    """
    rungs = select_rungs(rungs)
    options = options or WorkloadOptions()
    if repeats < 1:
        raise InputError(f"--repeats {repeats}: must be 1 or more")
    scripts = _scripts(rungs, Path(workloads) if workloads is not None else WORKLOADS)
    install = find_nsys(nsys)
    folder = _prepare_output(output)
    say = progress or (lambda line: None)
    runs: list[RunResult] = []
    failed: set[str] = set()
    for repeat in range(1, repeats + 1):
        for rung in rungs:
            if rung in failed:
                continue
            workload = [str(scripts[rung]), *options.args(rung)]
            for measure in (_plain_run, _profiled_run):
                started = time.monotonic()
                run = measure(rung, repeat, workload, folder, str(install.path))
                runs.append(run)
                say(_progress_line(run, repeats, time.monotonic() - started, folder))
                if run.error is not None:
                    failed.add(rung)
                    break
    ladder = build_ladder(
        runs, rungs, options=options, repeats=repeats, nsys_version=install.version, folder=folder
    )
    return ladder


def check_ladder(ladder: Ladder) -> None:
    """Raise LadderFailed, one line, when a rung failed or was diagnosed otherwise."""
    if not ladder.problems:
        return
    message = ladder.problems[0]
    more = len(ladder.problems) - 1
    if more:
        where = ladder.folder / LADDER_MD if ladder.folder is not None else LADDER_MD
        message += f" (and {more} more, listed in {where})"
    raise LadderFailed(message)


def build_ladder(
    runs: Sequence[RunResult],
    rungs: Sequence[str],
    *,
    options: WorkloadOptions | None = None,
    repeats: int = 1,
    nsys_version: str | None = None,
    folder: Path | None = None,
) -> Ladder:
    """The table from the runs: one row per rung in ``rungs`` (see the module docstring)."""
    analyzed = {rung: _median(runs, rung, profiled=True, analyzed=True) for rung in rungs}
    base, ceiling = analyzed.get(BASELINE), analyzed.get(CEILING)
    rows = []
    for rung in rungs:
        mine = [r for r in runs if r.rung == rung]
        profiled = [r for r in mine if r.profiled and r.error is None]
        rate = analyzed[rung]
        plain, profiled_rate = _median(runs, rung, False), _median(runs, rung, True)
        busy = [r.gpu_busy_ratio for r in profiled if r.gpu_busy_ratio is not None]
        recommendations = tuple(r.top_recommendation for r in profiled)
        rows.append(
            Row(
                rung=rung,
                steps_per_s=rate,
                profiled_steps_per_s=profiled_rate,
                plain_steps_per_s=plain,
                speedup=_ratio(rate, base),
                share_of_ceiling=_ratio(rate, ceiling),
                gpu_busy_ratio=statistics.median(busy) if busy else None,
                profiled_over_plain=_ratio(profiled_rate, plain),
                top_recommendation=(
                    Counter(recommendations).most_common(1)[0][0] if recommendations else None
                ),
                recommendations=recommendations,
                expected_recommendation=EXPECTED[rung],
                check=_check(mine, EXPECTED[rung]),
            )
        )
    return Ladder(
        schema_version=SCHEMA_VERSION,
        rows=tuple(rows),
        runs=tuple(runs),
        repeats=repeats,
        options=options or WorkloadOptions(),
        nsys_version=nsys_version,
        problems=tuple(_problems(rows, runs, folder)),
        folder=folder,
    )


def _check(runs: list[RunResult], expected: str) -> str:
    profiled = [r for r in runs if r.profiled]
    if not profiled or any(r.error is not None for r in runs):
        return "failed"
    if any(r.gpu_activity is False for r in profiled):
        return "no_gpu"
    if all(r.top_recommendation == expected for r in profiled):
        return "expected"
    return "unexpected"


def _problems(rows: list[Row], runs: Sequence[RunResult], folder: Path | None) -> list[str]:
    base = folder if folder is not None else Path()
    problems = []
    for row in rows:
        mine = [r for r in runs if r.rung == row.rung]
        failure = next((r for r in mine if r.error is not None), None)
        if failure is not None:
            problems.append(
                f"rung {row.rung}: {failure.mode} run {failure.repeat} failed: {failure.error}; "
                f"see {base / failure.log}"
            )
        elif not any(r.profiled for r in mine):
            problems.append(f"rung {row.rung}: no profiled run")
            continue
        if row.check == "unexpected":
            odd = next(
                r
                for r in mine
                if r.profiled and r.top_recommendation != row.expected_recommendation
            )
            problems.append(
                f"rung {row.rung}: top recommendation {odd.top_recommendation or 'none'}, "
                f"expected {row.expected_recommendation} (profiled run {odd.repeat}); "
                f"see {base / (odd.folder or '') / ANALYSIS_FILE}"
            )
        for run in mine:
            # Without a GPU the capture has no range: it holds the warm-up steps too.
            timed = run.profiled and run.gpu_activity
            off = _ratio(run.analyzed_steps_per_s, run.steps_per_s if timed else None)
            if off is not None and abs(off - 1) > CLOCK_TOLERANCE:
                problems.append(
                    f"rung {row.rung}: the trace gives {run.analyzed_steps_per_s:.3f} steps/s, "
                    f"the workload's clock {run.steps_per_s:.3f} (profiled run {run.repeat}); "
                    f"see {base / (run.folder or '') / ANALYSIS_FILE}"
                )
    return problems


def _median(
    runs: Sequence[RunResult], rung: str, profiled: bool, analyzed: bool = False
) -> float | None:
    """The median steps/s of the rung's plain or profiled runs, as the workload printed them
    or (``analyzed``) as the analysis of their traces gives them."""
    rates = [
        r.analyzed_steps_per_s if analyzed else r.steps_per_s
        for r in runs
        if r.rung == rung and r.profiled == profiled and r.error is None
    ]
    rates = [rate for rate in rates if rate is not None]
    return statistics.median(rates) if rates else None


def _ratio(value: float | None, reference: float | None) -> float | None:
    if value is None or not reference:
        return None
    return value / reference


def _scripts(rungs: Sequence[str], workloads: Path) -> dict[str, Path]:
    scripts = {rung: workloads / f"{rung}.py" for rung in rungs}
    for path in scripts.values():
        if not path.is_file():
            raise InputError(
                f"{path} does not exist; pass --workloads DIR, a folder holding {path.name} "
                f"(nsysprobe's own are in the package nsysprobe.workloads)"
            )
    return scripts


def _prepare_output(output: Path | None) -> Path:
    if output is None:
        output = DEFAULT_RUNS_DIR / f"ladder-{time.strftime('%Y%m%d-%H%M%S')}"
    output = Path(output)
    if output.exists() and not output.is_dir():
        raise InputError(f"--output {output} is a file; pass a folder for the ladder's runs")
    if output.is_dir() and any(output.iterdir()):
        raise InputError(
            f"--output {output} is not empty; pass a new or empty folder so no run is overwritten"
        )
    output.mkdir(parents=True, exist_ok=True)
    return output


def _plain_run(rung: str, repeat: int, workload: list[str], output: Path, nsys: str) -> RunResult:
    log = Path(rung) / f"plain-{repeat}.log"
    code = run_plain(workload, output / log)
    config, rate = parse_output((output / log).read_text(encoding="utf-8", errors="replace"))
    error = _failure(code, rate)
    return RunResult(
        rung, repeat, False, str(log), rate if error is None else None, config, error=error
    )


def _profiled_run(
    rung: str, repeat: int, workload: list[str], output: Path, nsys: str
) -> RunResult:
    from nsysprobe.report.analyze import analyze
    from nsysprobe.report.metrics import metrics_of
    from nsysprobe.report.saved import save_analysis

    folder = Path(rung) / f"profiled-{repeat}"
    log = folder / LOG_FILE
    try:
        with open(os.devnull, "wb") as sink:
            result = capture(
                workload, output / folder, ProfileOptions(), nsys, stdout=sink, stderr=sink
            )
    except NothingCaptured as exc:
        return RunResult(
            rung,
            repeat,
            True,
            str(log),
            None,
            # Its message ends with "; see <nsys.log>", which the problem line says itself.
            error=str(exc).rsplit("; see ", 1)[0],
            folder=str(folder),
        )
    report = analyze(result.sqlite)
    save_analysis(report, result.folder)
    config, rate = parse_output((output / log).read_text(encoding="utf-8", errors="replace"))
    error = _failure(result.exit_code, rate)
    gpu = not any(f.id == NO_GPU_FINDING for f in report.findings)
    metrics = metrics_of(report)
    return RunResult(
        rung,
        repeat,
        True,
        str(log),
        rate if error is None else None,
        config,
        error=error,
        folder=str(folder),
        gpu_activity=gpu,
        gpu_busy_ratio=metrics.gpu_busy_ratio if gpu else None,
        top_recommendation=metrics.top_recommendation,
        analyzed_steps_per_s=metrics.steps_per_s,
    )


def _failure(exit_code: int, rate: float | None) -> str | None:
    if exit_code != 0:
        return f"the workload exited with code {exit_code}"
    if rate is None:
        return "the workload printed no steps_per_s= line"
    return None


def _progress_line(run: RunResult, repeats: int, seconds: float, output: Path) -> str:
    head = f"{run.rung} {run.repeat}/{repeats} {run.mode}"
    if run.error is not None:
        return f"{head}: FAILED: {run.error}; see {output / run.log}"
    line = f"{head}: {run.steps_per_s:.3f} steps/s"
    if run.profiled:
        if run.analyzed_steps_per_s is not None:
            line += f" ({run.analyzed_steps_per_s:.3f} from the trace)"
        line += f", top recommendation {run.top_recommendation or 'none'}"
    return f"{line} ({seconds:.0f} s)"
