"""Run a workload under ``nsys profile`` into a run folder, then finish and export the capture.

A run folder holds everything about one run::

    report.nsys-rep    the capture (report.qdstrm while unfinished; deleted once imported)
    report.sqlite      its SQLite export
    nsys-command.txt   the exact nsys command line
    nsys.log           nsys's console output, interleaved with the workload's
    analysis.json      written by the caller that analyzes the export
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from nsysprobe.capture.export import ensure_sqlite
from nsysprobe.capture.importer import finish_qdstrm, remove_imported_stream
from nsysprobe.capture.locate import NsysInstall, find_nsys
from nsysprobe.capture.runfolder import COMMAND_FILE, LOG_FILE, REPORT_STEM
from nsysprobe.errors import CaptureError, InputError, NothingCaptured

DEFAULT_RUNS_DIR = Path("nsysprobe-runs")
SIGINT_EXIT_CODE = 130
# How long output may keep flowing after nsys exits before what still holds it is stopped.
DRAIN_S = 10.0


# ``--python``: nsys samples the Python stack of every thread running Python this many times a
# second (2023.4 to 2025.3 take 1 to 2,000 Hz), each sample an NVTX mark with the frames as
# its payload; 1 kHz is nsys's default rate, ~60,000 marks a minute for one thread.
PYTHON_SAMPLING_HZ = 1000
PYTHON_ARGS = ("--python-sampling=true", f"--python-sampling-frequency={PYTHON_SAMPLING_HZ}")


@dataclass(frozen=True)
class ProfileOptions:
    """What to trace; ``trace=None`` picks ``cuda,nvtx,osrt``, or ``nvtx,osrt`` without a GPU.
    ``python``: Python sampling (``PYTHON_ARGS``), which names the function and line behind
    each idle bucket (``analyses/python_frames.py``)."""

    trace: str | None = None
    capture_range: bool = True
    cpuctxsw: bool = False
    sample: bool = False
    nsys_args: tuple[str, ...] = ()
    python: bool = False


@dataclass(frozen=True)
class CaptureResult:
    """One finished run. ``exit_code`` is nsys's, which is the workload's own."""

    folder: Path
    nsys: NsysInstall
    command: tuple[str, ...]
    exit_code: int
    interrupted: bool
    report: Path
    sqlite: Path
    trace: str
    notes: tuple[str, ...] = field(default_factory=tuple)


def workload_command(workload: Sequence[str]) -> list[str]:
    """A ``.py`` script runs under this interpreter; anything else runs as given."""
    if not workload:
        raise InputError("no workload given; pass a script (nsysprobe run train.py) or -- COMMAND")
    first = workload[0]
    if first.endswith(".py"):
        if not Path(first).is_file():
            raise InputError(f"{first} does not exist; pass the path of the script to profile")
        return [sys.executable, *workload]
    return list(workload)


def new_run_folder(workload: Sequence[str], output: Path | None) -> Path:
    """``output``, or ``nsysprobe-runs/<name>-<time>``; refuses a folder holding a capture."""
    if output is None:
        name = Path(workload[0]).stem if workload else "run"
        output = DEFAULT_RUNS_DIR / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
    output = Path(output)
    if output.exists() and not output.is_dir():
        raise InputError(f"--output {output} is a file; pass a folder for the run's files")
    for suffix in (".nsys-rep", ".qdstrm"):
        if (output / f"{REPORT_STEM}{suffix}").exists():
            raise InputError(
                f"{output} already holds a capture ({REPORT_STEM}{suffix}); "
                f"pass another --output folder so it is not overwritten"
            )
    output.mkdir(parents=True, exist_ok=True)
    return output


def plan(options: ProfileOptions, gpu: bool) -> tuple[str, bool, list[str]]:
    """The trace list, whether to use the cudaProfilerApi capture range, and notes to print."""
    notes = []
    trace = options.trace
    if trace is None:
        trace = "cuda,nvtx,osrt" if gpu else "nvtx,osrt"
        if not gpu:
            notes.append(
                "no CUDA GPU visible (nvidia-smi, /proc/driver/nvidia): tracing nvtx,osrt only"
            )
    capture_range = options.capture_range
    if capture_range and "cuda" not in trace.split(","):
        capture_range = False
        notes.append(
            "not tracing CUDA, so the capture covers the whole run "
            "(the cudaProfilerApi capture range needs CUDA)"
        )
    return trace, capture_range, notes


def nsys_command(
    nsys: NsysInstall,
    folder: Path,
    command: Sequence[str],
    options: ProfileOptions,
    trace: str,
    capture_range: bool,
) -> list[str]:
    args = [
        str(nsys.path),
        "profile",
        f"--trace={trace}",
        f"--sample={'process-tree' if options.sample else 'none'}",
        f"--cpuctxsw={'process-tree' if options.cpuctxsw else 'none'}",
        "--stats=false",
        f"--output={folder / REPORT_STEM}",
    ]
    if capture_range:
        # "stop" lets the workload run on after cudaProfilerStop, so its exit code is its own.
        args += ["--capture-range=cudaProfilerApi", "--capture-range-end=stop"]
    if options.python:
        args += PYTHON_ARGS
    return [*args, *options.nsys_args, *command]


def _tee(source: BinaryIO, sink: BinaryIO, log: BinaryIO, lock: threading.Lock) -> None:
    for chunk in iter(lambda: source.read1(65536), b""):
        sink.write(chunk)
        sink.flush()
        with lock:
            log.write(chunk)
    source.close()


def _run_streamed(
    args: list[str], log_path: Path, stdout: BinaryIO, stderr: BinaryIO
) -> tuple[int, bool]:
    """Run nsys, streaming its and the workload's output live and into ``log_path``.

    nsys runs in its own process group so that Ctrl-C reaches it once, from us: a second SIGINT
    (the terminal's plus ours) makes nsys quit without writing the report. On SIGINT nsys stops
    the workload and writes what it captured, so we keep waiting for it.
    """
    env = dict(os.environ)
    # Pipes make Python block-buffer; the user should see the workload's output as it happens.
    env.setdefault("PYTHONUNBUFFERED", "1")
    interrupted = interrupted_once = False
    lock = threading.Lock()
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True
        )
        threads = [
            threading.Thread(target=_tee, args=(proc.stdout, stdout, log, lock), daemon=True),
            threading.Thread(target=_tee, args=(proc.stderr, stderr, log, lock), daemon=True),
        ]
        for thread in threads:
            thread.start()
        while True:
            try:
                code = proc.wait()
                break
            except KeyboardInterrupt:
                interrupted = True
                if not interrupted_once and proc.poll() is None:
                    proc.send_signal(signal.SIGINT)
                interrupted_once = True
        for thread in threads:
            thread.join(timeout=DRAIN_S)
        if any(thread.is_alive() for thread in threads):
            # nsys has exited but something in its process group still holds the output open
            # (a child it left behind): stop that group rather than wait on the pipes forever.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            for thread in threads:
                thread.join(timeout=DRAIN_S)
    return code, interrupted


def capture(
    workload: Sequence[str],
    output: Path | None = None,
    options: ProfileOptions | None = None,
    nsys: str | None = None,
    stdout: BinaryIO | None = None,
    stderr: BinaryIO | None = None,
    progress: Callable[[str], None] | None = None,
) -> CaptureResult:
    """Profile ``workload`` (a script and its arguments, or any command) and export the capture.

    Raises NothingCaptured when nsys wrote no report (with the workload's exit code when it
    failed), ImporterLoadError/CaptureError when the capture cannot be finished; every file
    written so far stays in the run folder.
    """
    options = options or ProfileOptions()
    say = progress or (lambda line: None)
    install = find_nsys(nsys)
    command = workload_command(workload)
    folder = new_run_folder(workload, output)
    from nsysprobe.capture.machine import cuda_gpu_visible  # only for a capture

    trace, capture_range, notes = plan(options, cuda_gpu_visible())
    for note in notes:
        say(f"note: {note}")
    args = nsys_command(install, folder, command, options, trace, capture_range)
    (folder / COMMAND_FILE).write_text(shlex.join(args) + "\n", encoding="utf-8")
    say(f"profiling with nsys {install.version} ({install.path}); run folder {folder}")
    log = folder / LOG_FILE
    code, interrupted = _run_streamed(
        args, log, stdout or sys.stdout.buffer, stderr or sys.stderr.buffer
    )
    report = folder / f"{REPORT_STEM}.nsys-rep"
    qdstrm = folder / f"{REPORT_STEM}.qdstrm"
    try:
        if not report.is_file() and qdstrm.is_file():
            say(f"nsys left {qdstrm.name}; finishing it with QdstrmImporter")
            report = finish_qdstrm(qdstrm, install, log)
        if not report.is_file():
            message = _nothing_message(folder, code, interrupted, capture_range)
            raise NothingCaptured(message, code or 2)
        # The report exists, so its stream goes now, before an export that may fail.
        remove_imported_stream(report)
        sqlite = ensure_sqlite(report, str(install.path), progress=say)
    except NothingCaptured:
        raise
    except CaptureError as exc:
        # The capture is kept: say how to pick up from it once the cause is fixed.
        exc.args = (f"{exc}; once fixed, `nsysprobe analyze {folder}` finishes the job",)
        raise
    return CaptureResult(
        folder=folder,
        nsys=install,
        command=tuple(args),
        exit_code=SIGINT_EXIT_CODE if interrupted and code == 0 else code,
        interrupted=interrupted,
        report=report,
        sqlite=sqlite,
        trace=trace,
        notes=tuple(notes),
    )


def _nothing_message(folder: Path, code: int, interrupted: bool, capture_range: bool) -> str:
    where = f"see {folder / LOG_FILE}"
    if interrupted:
        return f"interrupted before nsys wrote a report; {where}"
    if code != 0:
        return f"the workload exited with code {code} and nsys wrote no report; {where}"
    if capture_range:
        return (
            "nsys wrote no report: the workload never started the capture range "
            "(torch.cuda.profiler.start()); call it around the steps to profile "
            f"or pass --no-capture-range; {where}"
        )
    return f"nsys wrote no report; {where}"
