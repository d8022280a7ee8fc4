"""Step windows: where each step ran on the GPU, and how fast the loop went.

A step's NVTX range (``steps.find_steps``) is when the step thread *issued* its work. In a
loop where the CPU runs ahead of the GPU (the goal state of every input pipeline, any
GPU-bound job) that range ends long before the GPU has run what it launched, so timing steps
by their CPU ranges measures the launch rate, not the training rate:

    CPU ranges  |s1|s2|s3|s4|s5|........(blocked: launch queue full, or a sync)........|s9
    GPU work    |k1 k1 k1 k1 k1|k2 k2 k2 k2 k2|k3 k3 k3 k3 k3|k4 k4 k4 k4 k4|k5 ...
                ^- window 1 ---^- window 2 ---^- window 3 ---^- window 4 ---^

**GPU projection.** A step's GPU work is every kernel, copy, memset and CUDA graph replay
whose launching CUDA API call (joined on the process and the correlation id) started inside
the step's CPU range, on *any* thread of the process: PyTorch's autograd thread launches the
backward pass while the step thread waits in ``backward()``.

**Completion.** A step is done when its CPU range has ended and the GPU work it launched has
ended, and not before the step before it:
``completion[i] = max(cpu_end[i], gpu_end[i], completion[i-1])``. Window *i* runs from
``completion[i-1]`` to ``completion[i]`` (the first from its CPU range's start), so every
nanosecond from the first step's start to the last step's completion belongs to exactly one
step, whichever side bounds the loop. Idle time inside a window takes its cause from what the
process's threads were doing then (``account/``), which in a CPU-ahead loop is often a
later step's range. A lock-step loop (a sync every step, a loader-bound loop) gets the same
windows as its CPU ranges, plus the time between them.

**Throughput** is steps over time: ``steps / (last completion - first start)``, what a timer
around the loop that synchronizes at its end measures; the median and the 10th and 90th
percentiles of the window lengths are reported beside it (1 / median is *not* the rate when
batches arrive in bursts). The first window is flagged as an outlier (warm-up, the capture's
start) when it differs from the median of the others by more than ``FIRST_OUTLIER_RATIO``;
the rate without it is reported too.

**Which side sets the pace.** The GPU idle ``GPU_WAITS_IDLE_RATIO`` of the windows' time or
more waits for the CPU; less, it sets the pace. *CPU ahead by N steps*: the median over steps
of how many later steps' CPU ranges had ended (their work all queued) when the step completed
(none: lock step). Start-up steps (leading steps over ``STARTUP_RATIO`` times longer than
every step after them) and one-time final steps (the same, at the end) are left out of both.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nsysprobe.analyses.events import Events
from nsysprobe.common.table import Table, percentile
from nsysprobe.trace.values import pid_of

# The first window is an outlier when it is this much longer or shorter than the median of
# the others (a warm-up step, work queued before the capture started).
FIRST_OUTLIER_RATIO = 0.25
# Idle at least this share of the windows: the GPU waits for the CPU (the gpu_bound verdict's
# threshold, ``diagnose.common.GPU_BOUND_IDLE_RATIO``, is the same 10 %).
GPU_WAITS_IDLE_RATIO = 0.10
# Leading steps this many times longer than the longest step after them are start-up
# (compilation, autotuning, lazy initialization in the first steps of a capture): reported
# apart, never as the steady state's cause or pace.
STARTUP_RATIO = 3
# A steady step this many times a typical one (the lower quartile) is long; long steps at
# least PERIODIC_MIN times, a fixed number of steps apart, are a periodic event
# (``periodic_steps``: a checkpoint, an evaluation, logging every N steps).
PERIODIC_RATIO = 1.5
PERIODIC_MIN = 3
# What names one-time start-up work (a range of these names is never the steps' range unless
# it also names a step, and without steps one run once is start-up).
STARTUP_WORDS = (
    r"(?i)init|setup|set_up|build|construct|load.?(?:model|weights|checkpoint)|warm.?up|"
    r"compile|prepare"
)


@dataclass(frozen=True)
class StepWindows:
    """The steps of one process: their CPU ranges, the GPU work each launched, their windows.
    Arrays of one value per step, in the order of the CPU ranges (by start)."""

    pattern: str  # the step range's name pattern (``Batch #``)
    thread: int  # globalTid of the step thread
    names: np.ndarray  # object array of the ranges' names
    cpu_start: np.ndarray
    cpu_end: np.ndarray
    gpu_start: np.ndarray  # the projected GPU work's first start (where gpu_ops > 0)
    gpu_end: np.ndarray  # its last end (where gpu_ops > 0)
    gpu_ops: np.ndarray  # how many GPU operations each step launched
    process_ops: int  # the process's GPU operations in all, joined to a launch or not
    start: np.ndarray  # the window: the last step's completion (the first: its CPU start)
    end: np.ndarray  # the step's completion

    @property
    def count(self) -> int:
        return int(self.start.size)

    @property
    def wall(self) -> np.ndarray:
        return self.end - self.start


@dataclass(frozen=True)
class Pace:
    """How fast the loop went, and which side set the pace (see the module docstring)."""

    steps_per_s: float  # steps / (last completion - first start)
    span_ns: int  # last completion - first start
    median_step_ns: int  # median window
    p10_step_ns: int
    p90_step_ns: int
    first_step_outlier: bool  # the first window is FIRST_OUTLIER_RATIO off the others' median
    steady_steps_per_s: float | None  # without the first step, when it is an outlier
    cpu_ahead_steps: float  # median over steps of later CPU ranges ended before completion
    gpu_lag_ns: int  # median over steps of how long the GPU ran the step after its CPU range
    paced_by: str  # "gpu" (CPU ahead or in lock step, the GPU busy) or "cpu" (the GPU waits)
    startup_steps: int  # leading start-up steps, out of the pace (``startup_steps``)
    final_steps: int  # trailing one-time steps, out of it too (``final_steps``)
    steady_busy_ratio: float  # GPU busy over the steady steps (``steady_steps``)
    note: str  # one line: "CPU ahead by 14 steps (median; up to 19): the GPU sets the pace ..."


def project(events: Events, pattern: str, thread: int, ranges: Table) -> StepWindows:
    """The windows of the step ranges ``ranges`` (``start``, ``end``, ``name``, by start) of
    the pattern ``pattern`` on the thread ``thread`` (``StepRanges.windows`` gives them)."""
    cpu_s = np.asarray(ranges["start"], dtype=np.int64)
    cpu_e = np.asarray(ranges["end"], dtype=np.int64)
    n = cpu_s.size
    gpu_s = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    gpu_e = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
    ops = np.zeros(n, dtype=np.int64)
    process_ops = 0
    pid = int(pid_of(np.array([thread], dtype=np.int64))[0])
    launched_at = events.runtime["start"]
    for table in (events.kernels, events.memcpy, events.memset, events.graphs):
        if not len(table) or not n:
            continue
        mine = np.flatnonzero(pid_of(table["globalPid"]) == pid)
        process_ops += int(mine.size)
        if not mine.size:
            continue
        row = events.issuing_rows_of(pid, table["correlationId"][mine])
        known = row >= 0
        mine, at = mine[known], launched_at[row[known]]
        # The step whose CPU range holds the launch: the last to start at or before it.
        step = np.searchsorted(cpu_s, at, side="right") - 1
        inside = step >= 0
        inside[inside] = at[inside] < cpu_e[step[inside]]
        step, mine = step[inside], mine[inside]
        np.minimum.at(gpu_s, step, table["start"][mine])
        np.maximum.at(gpu_e, step, table["end"][mine])
        ops += np.bincount(step, minlength=n)
    done = np.maximum.accumulate(np.maximum(cpu_e, gpu_e)) if n else cpu_e
    start = np.concatenate([cpu_s[:1], done[:-1]]) if n else cpu_s
    return StepWindows(
        pattern=pattern,
        thread=thread,
        names=np.asarray(ranges["name"], dtype=object),
        cpu_start=cpu_s,
        cpu_end=cpu_e,
        gpu_start=gpu_s,
        gpu_end=gpu_e,
        gpu_ops=ops,
        process_ops=process_ops,
        start=start,
        end=done,
    )


def startup_steps(wall: np.ndarray) -> int:
    """How many leading steps are start-up: the most that are each ``STARTUP_RATIO`` times
    longer than every step after them (a compilation, then a recompilation, both count); at
    least two steps are left to the steady state."""
    n = wall.size
    if n < 3:
        return 0
    first_min = np.minimum.accumulate(wall)[: n - 2]  # first_min[k - 1]: shortest of wall[:k]
    later_max = np.maximum.accumulate(wall[::-1])[::-1][1 : n - 1]  # longest of wall[k:]
    ok = np.flatnonzero(first_min > STARTUP_RATIO * later_max)
    return int(ok[-1]) + 1 if ok.size else 0


def final_steps(wall: np.ndarray, startup: int) -> int:
    """How many trailing steps are one-time (a final checkpoint or evaluation): the most that
    are each ``STARTUP_RATIO`` times longer than every step between the ``startup`` leading
    ones and them; at least two steps are left to the steady state."""
    return startup_steps(wall[startup:][::-1])  # the same rule, the last step first


def steady_steps(wall: np.ndarray) -> slice:
    """The steps of the steady state: all but the leading start-up and the trailing one-time
    steps (``startup_steps``, ``final_steps``). A first step that is long and breaks a
    period the steps after it keep (``periodic_steps``) is start-up too: next to a periodic
    event's long steps it need not be ``STARTUP_RATIO`` times the longest."""
    k = startup_steps(wall)
    end = wall.size - final_steps(wall, k)
    rest = wall[k:end]
    if (
        rest.size > 2 * PERIODIC_MIN
        and periodic_steps(rest) is None
        and rest[0] > PERIODIC_RATIO * percentile(rest[1:], 25)
        and periodic_steps(rest[1:]) is not None
    ):
        k += 1
    return slice(k, end)


def periodic_steps(wall: np.ndarray) -> tuple[int, np.ndarray] | None:
    """The steps of a periodic event among the steady steps ``wall``: its period and the
    indices (into ``wall``) of the steps it made long, or None.

    A step is long when it is ``PERIODIC_RATIO`` times a typical one (the lower quartile: at
    most half the steps are the event's). An event may spill into the step after it, so a
    run of long steps is one occurrence, at its first step. The occurrences are periodic
    when there are at least ``PERIODIC_MIN`` of them, ``period`` (two or more) steps apart
    every time, none missing (one may, among four or more), and none lasting a whole period."""
    n = wall.size
    if n < 2 * PERIODIC_MIN:
        return None
    typical = percentile(wall, 25)
    long = np.flatnonzero(wall > PERIODIC_RATIO * typical)
    if long.size < PERIODIC_MIN or long.size > n // 2:
        return None
    first = long[np.concatenate([[True], np.diff(long) > 1])]
    if first.size < PERIODIC_MIN:
        return None
    gaps = np.diff(first)
    period = int(np.bincount(gaps).argmax())  # the most common gap
    if period < 2 or (gaps % period).any():
        return None
    # Occurrences missing: between two (a gap of twice the period), before the first or
    # after the last. One is let pass (an evaluation skipped once) where four or more occur,
    # three or more steps apart (every other step, a skip is just irregular).
    missing = int((gaps // period - 1).sum()) + first[0] // period + (n - 1 - first[-1]) // period
    if missing > (1 if first.size > PERIODIC_MIN and period > 2 else 0):
        return None
    runs = np.searchsorted(first, long, side="right") - 1
    if (long - first[runs]).max() >= period - 1:
        return None
    return period, long


def pace(windows: StepWindows, busy_ns: np.ndarray) -> Pace:
    """The throughput and pace of ``windows``; ``busy_ns``: the GPU busy time in each."""
    wall = windows.wall
    n = wall.size
    span = int(windows.end[-1] - windows.start[0]) if n else 0
    rate = n * 1e9 / span if span > 0 else 0.0
    others = wall[1:] if n > 2 else wall
    typical = float(np.median(others)) if n else 0.0
    outlier = n > 2 and typical > 0 and abs(wall[0] - typical) > FIRST_OUTLIER_RATIO * typical
    steady = None
    if outlier:
        rest = int(windows.end[-1] - windows.end[0])
        steady = (n - 1) * 1e9 / rest if rest > 0 else None
    # Steps whose CPU ranges had ended (whole steps queued) when each step completed, less
    # the step itself and those before it (all ended by then: completion is a running max).
    queued = np.searchsorted(np.sort(windows.cpu_end), windows.end, side="right")
    ahead = np.clip(queued - np.arange(1, n + 1), 0, None)
    has_work = windows.gpu_ops > 0
    # Which side sets the pace is a question about the steady state: start-up steps apart.
    kept = steady_steps(wall)
    startup = kept.start
    steady_from = np.zeros(n, dtype=bool)
    steady_from[kept] = True
    both = has_work & steady_from
    lag = np.clip(windows.gpu_end[both] - windows.cpu_end[both], 0, None)
    ahead = ahead[steady_from]
    ahead_median = float(np.median(ahead)) if ahead.size else 0.0
    total = int(wall[steady_from].sum())
    idle_ratio = 1 - float(busy_ns[steady_from].sum()) / total if total else 1.0
    ahead_text = (
        f"ahead by {ahead_median:g} step{'' if ahead_median == 1 else 's'} (median; up to "
        f"{int(ahead.max())})"
        if ahead_median >= 1
        else ""
    )
    if idle_ratio < GPU_WAITS_IDLE_RATIO:
        paced_by = "gpu"
        how = f"CPU {ahead_text}" if ahead_text else "CPU and GPU in lock step"
        note = f"{how}: the GPU sets the pace (busy {1 - idle_ratio:.0%})"
    else:
        paced_by = "cpu"
        note = f"the GPU waits for the CPU (idle {idle_ratio:.0%} of the step time)"
        note += f", though the CPU runs {ahead_text}" if ahead_text else ""
    if windows.process_ops and not has_work.any():
        note += (
            "; none of the process's GPU work could be joined to a launch in a step range (no "
            "CUDA API calls traced): steps are timed by their CPU ranges"
        )
    return Pace(
        steps_per_s=rate,
        span_ns=span,
        median_step_ns=int(np.median(wall)) if n else 0,
        p10_step_ns=int(percentile(wall, 10)) if n else 0,
        p90_step_ns=int(percentile(wall, 90)) if n else 0,
        first_step_outlier=bool(outlier),
        steady_steps_per_s=steady,
        cpu_ahead_steps=ahead_median,
        gpu_lag_ns=int(np.median(lag)) if lag.size else 0,
        paced_by=paced_by,
        startup_steps=startup,
        final_steps=n - kept.stop,
        steady_busy_ratio=1 - idle_ratio,
        note=note,
    )
