"""Tools for the hostile-input tests: crafted copies of a real export, and ``nsysprobe`` run as
a real process whose time, peak memory and output are measured.

``run_cli`` can first patch the library inside that process (``patch``, Python run before the
command): a slow step made slower, so that a signal lands at a known place.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
BASE = SAMPLES / "h200_pinned.sqlite"


@dataclass
class Done:
    code: int
    stdout: str
    stderr: str
    wall_s: float
    peak_rss_mib: float

    @property
    def error_lines(self) -> list[str]:
        return self.stderr.splitlines()


def crafted(folder: Path, *sql: str, name: str = "trace.sqlite", base: Path = BASE) -> Path:
    """A copy of ``base`` changed by ``sql`` (each a statement, run in order)."""
    path = folder / name
    shutil.copyfile(base, path)
    db = sqlite3.connect(path, isolation_level=None)
    try:
        for statement in sql:
            db.execute(statement)
    finally:
        db.close()
    return path


def patch_rowid(path: Path, table: str, old: int, new: int) -> None:
    """Rewrite, in the file's bytes, the rowid ``old`` of ``table``'s leaf cell as ``new``
    (both two-byte varints, 128-16383): a damaged tree whose rowid seeks and whole scans
    disagree. Walks the table's b-tree from its root page (SQLite's file format: interior
    table pages 0x05, leaf pages 0x0D)."""
    (root,) = (
        sqlite3.connect(path)
        .execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,))
        .fetchone()
    )
    data = bytearray(path.read_bytes())
    size = int.from_bytes(data[16:18], "big")
    size = 65536 if size == 1 else size
    assert 128 <= old < 16384 and 128 <= new < 16384

    def varint(i: int) -> tuple[int, int]:
        value = 0
        for k in range(9):
            byte = data[i + k]
            if k == 8:
                return (value << 8) | byte, i + 9
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                return value, i + k + 1
        raise AssertionError

    def find(page: int) -> int | None:
        base = (page - 1) * size
        head = base + (100 if page == 1 else 0)
        kind, cells = data[head], int.from_bytes(data[head + 3 : head + 5], "big")
        pointers = head + (8 if kind == 0x0D else 12)
        children = []
        for k in range(cells):
            cell = base + int.from_bytes(data[pointers + 2 * k : pointers + 2 * k + 2], "big")
            if kind == 0x0D:
                _, at = varint(cell)  # the payload's size, then the rowid
                if varint(at)[0] == old:
                    return at
            else:
                children.append(int.from_bytes(data[cell : cell + 4], "big"))
        if kind == 0x05:
            children.append(int.from_bytes(data[head + 8 : head + 12], "big"))
        return next((at for c in children if (at := find(c)) is not None), None)

    at = find(root)
    assert at is not None, f"rowid {old} not found"
    data[at : at + 2] = bytes([0x80 | (new >> 7), new & 0x7F])
    path.write_bytes(data)


def run_cli(
    *args: str,
    timeout: float = 180,
    env: dict[str, str] | None = None,
    patch: str = "",
    stdout=None,
    limits: dict[int, tuple[int, int]] | None = None,
    on_start=None,
    cwd: str | Path | None = None,
) -> Done:
    """``python -m nsysprobe ARGS`` in a fresh process: its exit code, output, wall time and
    peak resident memory. A process still running at ``timeout`` is killed and the test
    fails. ``on_start(proc)`` runs while it is running (to send it a signal); ``limits`` are
    ``resource.setrlimit`` pairs set in it.

    The peak is the process's own ``VmHWM``, which it writes on its way out (and which is read
    while it runs, for a process killed first): ``wait4``'s figure would also count the memory
    of the forked test process at exec, gigabytes after a long test session."""
    with tempfile.TemporaryDirectory() as scratch:
        hwm = Path(scratch) / "hwm"
        code = (
            "import runpy, sys\n"
            f"{patch}\n"
            f"sys.argv = ['nsysprobe', *{list(args)!r}]\n"
            "try:\n"
            "    runpy.run_module('nsysprobe', run_name='__main__')\n"
            "finally:\n"
            f"    open({str(hwm)!r}, 'w').write(str({_HWM_KB}))\n"
        )
        full_env = {**os.environ, **(env or {})}
        full_env.setdefault("NSYSPROBE_HISTORY", str(Path(scratch) / "unused.db"))

        def preexec():
            for which, value in (limits or {}).items():
                resource.setrlimit(which, value)

        with open(Path(scratch) / "out", "w+b") as out, open(Path(scratch) / "err", "w+b") as err:
            started = time.monotonic()
            proc = subprocess.Popen(
                [sys.executable, "-c", code],
                stdin=subprocess.DEVNULL,
                stdout=stdout if stdout is not None else out,
                stderr=err,
                env=full_env,
                cwd=cwd,
                preexec_fn=preexec if limits else None,
                start_new_session=True,
            )
            if on_start is not None:
                on_start(proc)
            peak_kb = 0
            while True:
                peak_kb = max(peak_kb, _vm_hwm_kb(proc.pid))
                pid, status, _ = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                if time.monotonic() - started > timeout:
                    os.killpg(proc.pid, signal.SIGKILL)
                    os.wait4(proc.pid, 0)
                    raise AssertionError(
                        f"nsysprobe {' '.join(args)[:200]}: still running after {timeout} s"
                    )
                time.sleep(0.02)
            wall = time.monotonic() - started
            if hwm.exists():
                peak_kb = max(peak_kb, int(hwm.read_text() or 0))
            out.seek(0)
            err.seek(0)
            return Done(
                code=os.waitstatus_to_exitcode(status),
                stdout=out.read().decode("utf-8", "surrogateescape"),
                stderr=err.read().decode("utf-8", "surrogateescape"),
                wall_s=wall,
                peak_rss_mib=peak_kb / 1024,
            )


# Python, in the measured process: its VmHWM in kB.
_HWM_KB = (
    "next((int(line.split()[1]) for line in open('/proc/self/status') "
    "if line.startswith('VmHWM:')), 0)"
)


def _vm_hwm_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def wait_for(path: Path, timeout: float = 120) -> None:
    """Until ``path`` exists (a marker a patched step writes)."""
    started = time.monotonic()
    while not path.exists():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"{path} did not appear within {timeout} s")
        time.sleep(0.02)


def pause_at(target: str, marker: Path, seconds: float = 60) -> str:
    """Patch code that makes ``target`` (``module:function`` or ``module:Class.method``) write
    ``marker`` and sleep before running, so that a signal sent once ``marker`` exists lands
    inside it."""
    module, attribute = target.split(":")
    owner, _, name = attribute.rpartition(".")
    return (
        "import importlib, time, pathlib, functools\n"
        f"_owner = importlib.import_module({module!r})\n"
        f"for _part in {owner.split('.') if owner else []!r}:\n"
        "    _owner = getattr(_owner, _part)\n"
        f"_f = getattr(_owner, {name!r})\n"
        "@functools.wraps(_f)\n"
        "def _paused(*a, **k):\n"
        f"    pathlib.Path({str(marker)!r}).write_text('here')\n"
        f"    time.sleep({seconds})\n"
        "    return _f(*a, **k)\n"
        f"setattr(_owner, {name!r}, _paused)\n"
    )
