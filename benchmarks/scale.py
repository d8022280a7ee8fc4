"""How ``nsysprobe analyze`` scales: build large exports from a real one and time the analysis.

For each size (GPU operations: kernels + memcpy + memset) the source export is replicated
whole: every event table (``CUPTI_ACTIVITY_KIND_*``, ``NVTX_EVENTS``, ``OSRT_API``,
``PROFILER_OVERHEAD``) is copied the same number of times, each copy shifted in time by the
source's span (so copies follow one another without overlapping) and with its
``correlationId`` offset (so GPU work still joins one API call per process). Every other
table, ``StringIds`` included, is copied once, unchanged; the schema is the source's own
``CREATE`` statements. The copying is done by SQLite (``INSERT INTO t SELECT ...``).

Each export is then analyzed by ``nsysprobe analyze PATH --format json`` in a fresh process,
whose wall time and peak resident memory are recorded. It records its history entry, as every
``analyze`` does, in a history of the benchmark's own in a temporary folder (``--history``),
never in the user's.

``--osrt-factor F`` thins ``OSRT_API``: each copy carries 1/k of the source's rows (k = 1/F,
a different 1/k in each of k consecutive copies, so every source row still occurs). The
output says so whenever it is used.

    .venv/bin/python benchmarks/scale.py --sizes 1e5,1e6,1e7
    .venv/bin/python benchmarks/scale.py --source sample_traces/run.sqlite --json
"""

from __future__ import annotations

import compileall
import datetime as dt
import json
import math
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SOURCE = Path("sample_traces") / "h200_pinned.sqlite"
GPU_OP_TABLES = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
)
EVENT_TABLES = ("NVTX_EVENTS", "OSRT_API", "PROFILER_OVERHEAD")
TIME_COLUMNS = ("start", "end", "timestamp")
OSRT = "OSRT_API"


def is_event_table(name: str) -> bool:
    return name.startswith("CUPTI_ACTIVITY_KIND_") or name in EVENT_TABLES


def quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@dataclass(frozen=True)
class Source:
    path: Path
    tables: dict[str, list[str]]  # table -> its columns, in order
    counts: dict[str, int]
    span_ns: int  # first event start to last event end, over every event table
    correlation_stride: int  # above every correlationId in the source

    @property
    def event_tables(self) -> list[str]:
        return [t for t in self.tables if is_event_table(t)]

    @property
    def gpu_ops(self) -> int:
        return sum(self.counts.get(t, 0) for t in GPU_OP_TABLES)


def inspect_source(path: Path) -> Source:
    db = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
    try:
        names = [
            n
            for (n,) in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                "AND name NOT LIKE 'sqlite_%' ORDER BY rowid"
            )
        ]
        tables = {n: [r[1] for r in db.execute(f"PRAGMA table_info({quoted(n)})")] for n in names}
        counts = {n: db.execute(f"SELECT count(*) FROM {quoted(n)}").fetchone()[0] for n in names}
        lo, hi, corr = None, None, 0
        for t, cols in tables.items():
            if not is_event_table(t) or not counts[t]:
                continue
            for c in (c for c in TIME_COLUMNS if c in cols):
                sql = f"SELECT min({quoted(c)}), max({quoted(c)}) FROM {quoted(t)}"
                a, b = db.execute(sql).fetchone()
                if a is not None:
                    lo = a if lo is None else min(lo, a)
                    hi = b if hi is None else max(hi, b)
            if "correlationId" in cols:
                (m,) = db.execute(f"SELECT max(correlationId) FROM {quoted(t)}").fetchone()
                corr = max(corr, m or 0)
    finally:
        db.close()
    if lo is None:
        raise click.ClickException(f"{path}: no timed events to replicate")
    return Source(path, tables, counts, hi - lo + 1, corr + 1)


@dataclass(frozen=True)
class Built:
    path: Path
    copies: int
    gpu_ops: int
    rows: dict[str, int]  # event table -> rows written
    osrt_keep_every: int  # 1: OSRT_API copied whole; k: 1/k of it per copy
    build_s: float
    size_bytes: int


def copies_for(source: Source, target_ops: int) -> int:
    return max(1, math.ceil(target_ops / source.gpu_ops))


def build(source: Source, dest: Path, target_ops: int, osrt_keep_every: int = 1) -> Built:
    """Write ``dest``: the source with its event tables replicated to about ``target_ops``
    GPU operations (whole copies, so slightly more)."""
    copies = copies_for(source, target_ops)
    t0 = time.perf_counter()
    dest.unlink(missing_ok=True)
    db = sqlite3.connect(dest, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode = OFF")
        db.execute("PRAGMA synchronous = OFF")
        db.execute("ATTACH DATABASE ? AS src", (source.path.resolve().as_uri() + "?mode=ro",))
        schema = db.execute(
            "SELECT type, name, sql FROM src.sqlite_master "
            "WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY rowid"
        ).fetchall()
        db.execute("BEGIN")
        for kind, _, sql in schema:
            if kind == "table":
                db.execute(sql)
        rows: dict[str, int] = {}
        for table, cols in source.tables.items():
            names = ", ".join(quoted(c) for c in cols)
            if not is_event_table(table):
                db.execute(
                    f"INSERT INTO main.{quoted(table)} SELECT {names} FROM src.{quoted(table)}"
                )
                continue
            thin = table == OSRT and osrt_keep_every > 1
            for copy in range(copies):
                exprs = [_shifted(c, copy, source) for c in cols]
                where = f" WHERE (rowid + {copy}) % {osrt_keep_every} = 0" if thin else ""
                db.execute(
                    f"INSERT INTO main.{quoted(table)} ({names}) "
                    f"SELECT {', '.join(exprs)} FROM src.{quoted(table)}{where}"
                )
            rows[table] = db.execute(f"SELECT count(*) FROM main.{quoted(table)}").fetchone()[0]
        if "ANALYSIS_DETAILS" in source.tables:
            # The capture window grows with the copies, as a longer capture's would.
            extra = (copies - 1) * source.span_ns
            db.execute(
                "UPDATE main.ANALYSIS_DETAILS SET duration = duration + ?, stopTime = stopTime + ?",
                (extra, extra),
            )
        for kind, _, sql in schema:
            if kind != "table":
                db.execute(sql)
        db.execute("COMMIT")
        db.execute("DETACH DATABASE src")
    finally:
        db.close()
    return Built(
        path=dest,
        copies=copies,
        gpu_ops=sum(rows.get(t, 0) for t in GPU_OP_TABLES),
        rows=rows,
        osrt_keep_every=osrt_keep_every,
        build_s=time.perf_counter() - t0,
        size_bytes=dest.stat().st_size,
    )


def nest_ranges(path: Path, count: int) -> int:
    """Add ``count`` NVTX push/pop ranges nested in one another on the thread with the most
    CUDA API calls, each spanning nearly the whole export (``nest 0`` outermost): the shape
    that makes work grow with gaps x open ranges. Returns the rows added."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        tid = db.execute(
            "SELECT globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME GROUP BY globalTid "
            "ORDER BY count(*) DESC LIMIT 1"
        ).fetchone()[0]
        span = "SELECT min(start), max(end) FROM CUPTI_ACTIVITY_KIND_KERNEL"
        lo, hi = db.execute(span).fetchone()
        if hi - lo <= 2 * count:
            raise click.ClickException(f"{path.name}: too short a span for {count} nested ranges")
        db.execute("BEGIN")
        db.executemany(
            "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) "
            "VALUES (?, ?, 59, ?, ?)",
            ((lo - count + i, hi + count - i, f"nest {i}", tid) for i in range(count)),
        )
        db.execute("COMMIT")
    finally:
        db.close()
    return count


def _shifted(col: str, copy: int, source: Source) -> str:
    if col in TIME_COLUMNS:
        return f"{quoted(col)} + {copy * source.span_ns}"
    if col == "correlationId":
        return f"{quoted(col)} + {copy * source.correlation_stride}"
    return quoted(col)


@dataclass(frozen=True)
class Timing:
    wall_s: float
    peak_rss_bytes: int
    reported_gpu_ops: int  # kernel + memcpy + memset counts in the JSON, as a check
    verdict: str | None


def _run(cmd: list[str], out: Path) -> tuple[float, int]:
    """Run ``cmd`` in a fresh process, its output to ``out``: (wall s, peak RSS bytes)."""
    with out.open("wb") as stdout:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.PIPE, cwd=ROOT)
        # wait4 gives this child's own rusage (RUSAGE_CHILDREN would keep the largest so far).
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if code:
        raise click.ClickException(f"{' '.join(cmd[1:3])} exited {code}: {err.strip()}")
    # ru_maxrss is in KiB on Linux.
    return wall, usage.ru_maxrss * 1024


@dataclass(frozen=True)
class Floor:
    wall_s: float
    peak_rss_bytes: int
    rows: int
    gpu_busy_ns: int


def time_floor(path: Path, out: Path, reader: str = "arrow") -> Floor:
    """``benchmarks/floor.py [--arrow] PATH`` in a fresh process: the plain read of the same
    columns, through ADBC's driver as Arrow (``reader`` "arrow") or Python's sqlite3."""
    flags = ["--arrow"] if reader == "arrow" else []
    wall, rss = _run(
        [sys.executable, str(ROOT / "benchmarks" / "floor.py"), *flags, str(path)], out
    )
    got = json.loads(out.read_text())
    return Floor(wall, rss, got["rows"], got["gpu_busy_ns"])


def compile_package() -> None:
    """Write the package's bytecode, as an installed copy has it. Where the environment sets
    PYTHONDONTWRITEBYTECODE (this project's CI machines do), every ``analyze`` of an editable
    install would compile the sources again: 0.03-0.05 s measured on the small exports."""
    if not compileall.compile_dir(ROOT / "nsysprobe", quiet=1):
        raise click.ClickException("could not compile the package's bytecode")


def time_analyze(path: Path, out: Path, history: Path) -> Timing:
    """Run ``nsysprobe analyze PATH --format json --history HISTORY`` in a fresh process: wall
    time, peak RSS. The history entry is written, as a user's analyze writes one, to
    ``history`` (a temporary file of the benchmark's)."""
    cmd = [sys.executable, "-m", "nsysprobe", "analyze", str(path), "--format", "json"]
    cmd += ["--history", str(history)]
    wall, rss = _run(cmd, out)
    report = json.loads(out.read_text())
    ops = sum(d["kernel_count"] + d["memcpy_count"] + d["memset_count"] for d in report["devices"])
    recs = report.get("recommendations") or []
    return Timing(wall, rss, ops, recs[0]["id"] if recs else None)


def machine() -> dict[str, object]:
    cpu = "unknown"
    mem_kib = 0
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "ram_gib": round(mem_kib / 2**20, 1),
        "python": platform.python_version(),
        "os": f"{platform.system()} {platform.release()}",
        "nsysprobe_commit": _git_commit(),
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


def _git_commit() -> str:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        commit = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no", "--", "nsysprobe")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("+local changes" if dirty else "")


@dataclass
class Result:
    """One export's runs: the floor and the analysis in turn, ``--repeat`` times each. The
    figures are the medians of each; a ratio is the ratio of two medians."""

    target_ops: int
    built: Built
    timings: list[Timing]
    floors: list[Floor]
    notes: list[str] = field(default_factory=list)

    @property
    def timing(self) -> Timing:
        return _median(self.timings)

    @property
    def floor(self) -> Floor:
        return _median(self.floors)

    @property
    def time_ratio(self) -> float:
        return self.timing.wall_s / self.floor.wall_s

    @property
    def memory_ratio(self) -> float:
        return self.timing.peak_rss_bytes / self.floor.peak_rss_bytes

    @property
    def pair_time_ratios(self) -> list[float]:
        """Each analysis over the floor run just before it."""
        return [t.wall_s / f.wall_s for t, f in zip(self.timings, self.floors)]

    def as_dict(self) -> dict[str, object]:
        built = asdict(self.built)
        built["path"] = self.built.path.name
        return {
            "target_gpu_ops": self.target_ops,
            **built,
            **asdict(self.timing),
            "floor": asdict(self.floor),
            "runs": [asdict(t) for t in self.timings],
            "floor_runs": [asdict(f) for f in self.floors],
            "time_vs_floor": self.time_ratio,
            "time_vs_floor_per_pair": self.pair_time_ratios,
            "memory_vs_floor": self.memory_ratio,
            "s_per_million_gpu_ops": self.timing.wall_s / self.built.gpu_ops * 1e6,
            "mib_per_million_gpu_ops": self.timing.peak_rss_bytes
            / 2**20
            / self.built.gpu_ops
            * 1e6,
        }


def _median(runs):
    """The first run with the median wall time and the median peak RSS of ``runs``."""
    return replace(
        runs[0],
        wall_s=statistics.median(r.wall_s for r in runs),
        peak_rss_bytes=int(statistics.median(r.peak_rss_bytes for r in runs)),
    )


def markdown(source: Source, results: list[Result], info: dict[str, object], nest: int = 0) -> str:
    nested = f", then {nest:,} nested NVTX ranges added over the whole span" if nest else ""
    lines = [
        f"Source: `{source.path.name}` ({source.gpu_ops:,} GPU ops, "
        f"{source.counts.get(OSRT, 0):,} OSRT rows, span {source.span_ns / 1e9:.2f} s), "
        f"replicated whole{nested}.",
        "",
        "| GPU ops | copies | OSRT rows | all event rows | file | build | analyze wall "
        "| peak RSS | floor wall | floor RSS | time / floor | memory / floor | runs |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: |",
    ]
    for r in results:
        b, t = r.built, r.timing
        osrt = f"{b.rows.get(OSRT, 0):,}" + (
            f" (1/{b.osrt_keep_every})" if b.osrt_keep_every > 1 else ""
        )
        lines.append(
            f"| {b.gpu_ops:,} | {b.copies} | {osrt} | {sum(b.rows.values()):,} "
            f"| {b.size_bytes / 2**30:.2f} GiB | {b.build_s:.1f} s | {t.wall_s:.1f} s "
            f"| {t.peak_rss_bytes / 2**20:,.0f} MiB | {r.floor.wall_s:.1f} s "
            f"| {r.floor.peak_rss_bytes / 2**20:,.0f} MiB | {r.time_ratio:.2f} "
            f"| {r.memory_ratio:.2f} | {_runs(r)} |"
        )
    lines.append("")
    thinned = [r for r in results if r.built.osrt_keep_every > 1]
    if thinned:
        k = thinned[0].built.osrt_keep_every
        sizes = ", ".join(f"{r.built.gpu_ops:,}" for r in thinned)
        lines.append(
            f"**OSRT_API thinned** at {sizes} GPU ops (`--osrt-factor {1 / k:g}`): each copy "
            f"carries 1/{k} of the source's OS-runtime rows; all other event tables, and "
            "every table at the other sizes, are copied whole."
        )
        lines.append("")
    lines.append(
        f"Machine: {info['cpu']}, {info['cores']} cores, {info['ram_gib']} GiB RAM, "
        f"{info['os']}, Python {info['python']}; nsysprobe {info['nsysprobe_commit']}; "
        f"{info['date']}. Wall time and peak RSS of `nsysprobe analyze PATH --format json` "
        "in a fresh process, the package's bytecode compiled first; the floor is "
        f"`benchmarks/floor.py {info['floor_flags']}PATH` (a plain {info['floor_reader']} read "
        "into numpy of the same integer columns, and the GPU busy union), run just before it. With "
        "several runs (`--repeat`), floor and analysis take turns; each figure is the median "
        "of its runs, and `runs` gives how many and the range of the time ratio of each "
        "analysis to the floor run just before it."
    )
    return "\n".join(lines) + "\n"


def _runs(r: Result) -> str:
    pairs = r.pair_time_ratios
    if len(pairs) == 1:
        return "1"
    return f"{len(pairs)} ({min(pairs):.2f}-{max(pairs):.2f})"


def parse_sizes(text: str) -> list[int]:
    try:
        sizes = [int(float(s)) for s in text.split(",") if s.strip()]
    except ValueError as exc:
        raise click.BadParameter(f"{text!r}: give numbers such as 1e5,1e6,1e7") from exc
    if not sizes or min(sizes) < 1:
        raise click.BadParameter(f"{text!r}: give positive numbers such as 1e5,1e6,1e7")
    return sizes


@click.command()
@click.option("--sizes", default="1e5,1e6,1e7", show_default=True, help="GPU ops per export.")
@click.option(
    "--source",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help=f"The export to replicate [default: {DEFAULT_SOURCE} from the repository root].",
)
@click.option(
    "--osrt-factor",
    type=click.FloatRange(0, 1, min_open=True),
    default=1.0,
    show_default=True,
    help="Share of OSRT_API rows each copy carries (1/k); 1 copies it whole.",
)
@click.option(
    "--osrt-factor-from",
    type=float,
    default=None,
    help="Apply --osrt-factor only to sizes of at least this many GPU ops.",
)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where to build the exports [default: a temporary folder].",
)
@click.option(
    "--nest",
    type=click.IntRange(0),
    default=0,
    show_default=True,
    help="Add this many NVTX ranges nested in one another over the whole export.",
)
@click.option(
    "--repeat",
    type=click.IntRange(1, 20),
    default=1,
    show_default=True,
    help="Run the floor and the analysis this many times each, in turn; report medians.",
)
@click.option(
    "--floor",
    "floor_reader",
    type=click.Choice(["arrow", "sqlite3"]),
    default="arrow",
    show_default=True,
    help="The floor's reader: ADBC's SQLite driver into Arrow, or Python's sqlite3.",
)
@click.option("--keep", is_flag=True, help="Keep the built exports.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of Markdown.")
def main(
    sizes: str,
    source: Path | None,
    osrt_factor: float,
    osrt_factor_from: float | None,
    workdir: Path | None,
    nest: int,
    repeat: int,
    floor_reader: str,
    keep: bool,
    as_json: bool,
) -> None:
    """Build exports of SIZES GPU ops from a real one and time `nsysprobe analyze` on each."""
    targets = parse_sizes(sizes)
    src = inspect_source(source or ROOT / DEFAULT_SOURCE)
    if not src.gpu_ops:
        raise click.ClickException(f"{src.path}: no kernels, memcpy or memset to replicate")
    keep_every = round(1 / osrt_factor)
    if abs(keep_every * osrt_factor - 1) > 1e-6:
        raise click.BadParameter(f"{osrt_factor}: give 1/k, such as 0.5 or 0.1", "--osrt-factor")
    if workdir:
        workdir.mkdir(parents=True, exist_ok=True)
        folder = workdir
    else:
        folder = Path(tempfile.mkdtemp(prefix="nsysprobe-scale-"))
    compile_package()
    results = []
    history = Path(tempfile.mkdtemp(prefix="nsysprobe-scale-history-")) / "history.db"
    try:
        for target in targets:
            thin = keep_every if osrt_factor_from is None or target >= osrt_factor_from else 1
            dest = folder / f"scale_{target:.0e}.sqlite".replace("+", "")
            click.echo(f"building {dest.name} ...", err=True)
            built = build(src, dest, target, thin)
            if nest:
                added = nest_ranges(dest, nest)
                built.rows["NVTX_EVENTS"] = built.rows.get("NVTX_EVENTS", 0) + added
                built = replace(built, size_bytes=dest.stat().st_size)
            click.echo(
                f"  {built.gpu_ops:,} GPU ops, {sum(built.rows.values()):,} event rows, "
                f"{built.size_bytes / 2**30:.2f} GiB in {built.build_s:.1f} s; analyzing ...",
                err=True,
            )
            floors, timings = [], []
            for _ in range(repeat):
                floor = time_floor(dest, folder / (dest.stem + ".floor.json"), floor_reader)
                timing = time_analyze(dest, folder / (dest.stem + ".json"), history)
                if timing.reported_gpu_ops != built.gpu_ops:
                    raise click.ClickException(
                        f"{dest.name}: the report counts {timing.reported_gpu_ops:,} GPU ops, "
                        f"the export holds {built.gpu_ops:,}"
                    )
                click.echo(
                    f"  floor {floor.wall_s:.1f} s, {floor.peak_rss_bytes / 2**20:,.0f} MiB; "
                    f"analyze {timing.wall_s:.1f} s, {timing.peak_rss_bytes / 2**20:,.0f} MiB",
                    err=True,
                )
                floors.append(floor)
                timings.append(timing)
            results.append(Result(target, built, timings, floors))
            if not keep:
                dest.unlink()
                (folder / (dest.stem + ".json")).unlink()
                (folder / (dest.stem + ".floor.json")).unlink()
    finally:
        shutil.rmtree(history.parent, ignore_errors=True)
        if not keep and not workdir:
            shutil.rmtree(folder, ignore_errors=True)
    info = machine()
    info["floor_reader"] = "ADBC SQLite driver + Arrow" if floor_reader == "arrow" else "sqlite3"
    info["floor_flags"] = "--arrow " if floor_reader == "arrow" else ""
    if as_json:
        payload = {
            "source": {
                "name": src.path.name,
                "gpu_ops": src.gpu_ops,
                "rows": {t: src.counts[t] for t in src.event_tables},
                "span_ns": src.span_ns,
            },
            "machine": info,
            "osrt_factor": osrt_factor,
            "osrt_factor_from_gpu_ops": osrt_factor_from,
            "nested_ranges": nest,
            "results": [r.as_dict() for r in results],
        }
        click.echo(json.dumps(payload, indent=2))
    else:
        click.echo(markdown(src, results, info, nest), nl=False)


if __name__ == "__main__":
    main()
