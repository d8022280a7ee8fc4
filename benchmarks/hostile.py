"""What the inputs of issue 12 cost: the time and peak memory of ``nsysprobe analyze`` (or
``scrub``, ``topo``) on each file built to make it do unbounded work.

Each case is built from ``sample_traces/h200_pinned.sqlite`` (a 1.6 MB H200 export) and run in
a fresh process with a cap on its time (``--timeout``), address space (``--max-gb``) and the
size of any file it writes (2 GiB), so that code without the bounds ends at a cap instead of
taking the machine down; the table says when a run hit one.

    .venv/bin/python benchmarks/hostile.py                   # every case, Markdown
    .venv/bin/python benchmarks/hostile.py --cases view,fifo --json
    PYTHONPATH=OTHER_CHECKOUT .venv/bin/python benchmarks/hostile.py   # another version's code

The cases:

- ``view``: ``NVTX_EVENTS``, ``CUPTI_ACTIVITY_KIND_KERNEL`` and ``StringIds`` replaced by views
  over a recursive CTE that never ends (1.6 MB of file).
- ``nested``: 100,000 NVTX ranges nested in one another over the export's 7,780 kernels,
  analyzed with the default gap threshold and with ``--min-gap-ms 0``.
- ``long-name``: a 20 MB thread name (and GPU name), ``--format json``: output bytes too.
- ``fifo``: a FIFO named ``x.sqlite``.
- ``affinity``: a recorded topology whose GPU has CPU affinity ``0-2000000000`` (``topo --from``).
- ``scrub-trigger``: ``scrub`` of an export holding 12 environment strings and a trigger that
  writes 100 kB per string whenever a string is rewritten.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "sample_traces" / "h200_pinned.sqlite"
NESTED = 100_000
NAME_BYTES = 20_000_000
MAX_FILE_BYTES = 2 << 30  # no run may write a larger file (the disk is shared)


@dataclass
class Result:
    case: str
    command: str
    wall_s: float
    peak_rss_mib: float
    exit_code: int
    capped: str  # "", "time" or "memory"
    output_bytes: int  # printed
    written_bytes: int  # left in the output folder (scrub's -o)
    last_line: str


def _copy(folder: Path, *sql: str) -> Path:
    path = folder / "trace.sqlite"
    shutil.copyfile(SOURCE, path)
    db = sqlite3.connect(path, isolation_level=None)
    for statement in sql:
        db.execute(statement)
    db.close()
    return path


def _view(folder: Path) -> list[str]:
    sql = []
    for table in ("NVTX_EVENTS", "CUPTI_ACTIVITY_KIND_KERNEL", "StringIds"):
        sql += [
            f"ALTER TABLE {table} RENAME TO {table}_raw",
            f"CREATE VIEW {table} AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 "
            f"FROM n) SELECT {table}_raw.* FROM n, {table}_raw",
        ]
    return ["analyze", str(_copy(folder, *sql)), "--format", "json", "--no-history"]


def _nested(folder: Path) -> list[str]:
    path = _copy(
        folder,
        "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) "
        f"WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < {NESTED - 1}) "
        "SELECT lo + i, hi - i, 59, 'nest ' || i, tid, 0 FROM n, (SELECT min(start) - "
        f"{NESTED} AS lo, max(end) + {NESTED} AS hi FROM CUPTI_ACTIVITY_KIND_KERNEL), "
        "(SELECT globalTid AS tid FROM CUPTI_ACTIVITY_KIND_RUNTIME GROUP BY globalTid "
        "ORDER BY count(*) DESC LIMIT 1)",
    )
    return ["analyze", str(path), "--format", "json", "--no-history"]


def _long_name(folder: Path) -> list[str]:
    big = f"printf('%.*c', {NAME_BYTES}, 'n')"
    path = _copy(
        folder,
        f"UPDATE TARGET_INFO_GPU SET name = {big}",
        f"UPDATE StringIds SET value = {big} WHERE id = (SELECT nameId FROM ThreadNames "
        "WHERE globalTid = (SELECT globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME LIMIT 1))",
    )
    return ["analyze", str(path), "--format", "json", "--no-history"]


def _fifo(folder: Path) -> list[str]:
    os.mkfifo(folder / "x.sqlite")
    return ["analyze", str(folder / "x.sqlite"), "--no-history"]


def _affinity(folder: Path) -> list[str]:
    recorded = ROOT / "sample_traces" / "h200_topology"
    shutil.copytree(recorded, folder / "topo")
    topo = folder / "topo" / "nvidia-smi-topo-m.txt"
    lines = topo.read_text().splitlines()
    header = lines[0].split("\t")
    column = next(i for i, c in enumerate(header) if "CPU Affinity" in c)
    row = lines[1].split("\t")
    row[column] = "0-2000000000"
    lines[1] = "\t".join(row)
    topo.write_text("\n".join(lines) + "\n")
    return ["topo", "--from", str(folder / "topo")]


def _scrub_trigger(folder: Path) -> list[str]:
    # Secrets for a deny-list scrub to rewrite, as a real export's StringIds holds them; each
    # rewrite of a string fires a trigger that writes 100 kB for every string.
    sql = [
        f"INSERT INTO StringIds (id, value) VALUES ({1_000_000 + i}, 'HF_TOKEN=hf_{i:032d}')"
        for i in range(12)
    ]
    sql += [
        "CREATE TABLE junk (b)",
        "CREATE TRIGGER grow AFTER UPDATE ON StringIds BEGIN "
        "INSERT INTO junk SELECT zeroblob(100000) FROM StringIds; END",
    ]
    return ["scrub", str(_copy(folder, *sql)), "-o", str(folder / "out" / "shared.sqlite")]


CASES = {
    "view": [_view],
    "nested": [_nested, lambda f: [*_nested(f), "--min-gap-ms", "0"]],
    "long-name": [_long_name],
    "fifo": [_fifo],
    "affinity": [_affinity],
    "scrub-trigger": [_scrub_trigger],
}


def measure(case: str, args: list[str], timeout: float, max_bytes: int, folder: Path) -> Result:
    """``nsysprobe ARGS`` in a fresh process under the caps: wall time and peak RSS (wait4)."""
    (folder / "out").mkdir(exist_ok=True)

    def caps():
        resource.setrlimit(resource.RLIMIT_AS, (max_bytes, max_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_FILE_BYTES, MAX_FILE_BYTES))

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-m", "nsysprobe", *args],
            stdout=out,
            stderr=err,
            preexec_fn=caps,
            start_new_session=True,
            cwd=folder,  # not the checkout: -m would import the nsysprobe found there
            env={**os.environ, "NSYSPROBE_HISTORY": str(folder / "history.db")},
        )
        capped = ""
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - started > timeout:
                os.killpg(proc.pid, signal.SIGKILL)
                pid, status, usage = os.wait4(proc.pid, 0)
                capped = "time"
                break
            time.sleep(0.05)
        wall = time.monotonic() - started
        err.seek(0)
        errors = err.read().decode("utf-8", "replace")
        if "MemoryError" in errors or "Cannot allocate memory" in errors:
            capped = capped or "memory"
        if "File too large" in errors or "disk is full" in errors:
            capped = capped or "file size"
        out_bytes = out.seek(0, os.SEEK_END)
    lines = [line for line in errors.splitlines() if line.strip()]
    return Result(
        case=case,
        command=" ".join(
            a if not a.startswith(str(folder)) else "<built>" + a[len(str(folder)) :] for a in args
        ),
        wall_s=round(wall, 2),
        peak_rss_mib=round(usage.ru_maxrss / 1024, 1),
        exit_code=os.waitstatus_to_exitcode(status),
        capped=capped,
        output_bytes=out_bytes,
        written_bytes=sum(f.stat().st_size for f in (folder / "out").rglob("*") if f.is_file()),
        last_line=(lines[-1][:160] if lines else ""),
    )


def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{cpu}, {os.cpu_count()} CPUs, {mem:.1f} GiB, Python {platform.python_version()}"


def _code() -> str:
    import nsysprobe

    where = Path(nsysprobe.__file__).resolve().parent.parent
    try:
        rev = subprocess.run(
            ["git", "-C", str(where), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(where), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return rev + (" + uncommitted changes" if dirty else "")


@click.command()
@click.option("--cases", default=",".join(CASES), show_default=True, help="Comma-separated.")
@click.option("--timeout", default=120.0, show_default=True, help="Seconds per run.")
@click.option("--max-gb", default=6.0, show_default=True, help="Address space per run, GiB.")
@click.option("--json", "as_json", is_flag=True, help="JSON instead of a Markdown table.")
def main(cases: str, timeout: float, max_gb: float, as_json: bool) -> None:
    """Time and peak memory of nsysprobe on the inputs built to make it do unbounded work."""
    results = []
    for case in cases.split(","):
        for build in CASES[case]:
            with tempfile.TemporaryDirectory(prefix="nsysprobe-hostile-") as tmp:
                args = build(Path(tmp))
                results.append(measure(case, args, timeout, int(max_gb * 2**30), Path(tmp)))
                click.echo(f"{results[-1].case}: {results[-1].wall_s} s", err=True)
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    meta = {"when": when, "machine": _machine(), "code": _code(), "caps": [timeout, max_gb]}
    if as_json:
        click.echo(json.dumps({**meta, "results": [asdict(r) for r in results]}, indent=2))
        return
    click.echo(f"{when}; {meta['machine']}; nsysprobe {meta['code']}")
    click.echo(f"caps: {timeout:.0f} s and {max_gb:g} GiB of address space per run\n")
    click.echo("| case | command | wall | peak RSS | exit | printed | written | last line |")
    click.echo("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for r in results:
        cap = f" (stopped at the {r.capped} cap)" if r.capped else ""
        click.echo(
            f"| {r.case} | `{r.command}` | {r.wall_s:.1f} s{cap} | {r.peak_rss_mib:,.0f} MiB | "
            f"{r.exit_code} | {r.output_bytes:,} B | {r.written_bytes:,} B | "
            f"{r.last_line.replace('|', '/')} |"
        )


if __name__ == "__main__":
    main()
