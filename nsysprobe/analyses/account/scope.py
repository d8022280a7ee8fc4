"""What one account is made over: a process's GPU operations on a device, its API calls,
and its windows (its steps, or equal windows over its GPU work), steady or periodic."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from nsysprobe.analyses import intervals as iv
from nsysprobe.analyses.account.causes import LAUNCH
from nsysprobe.analyses.account.model import EQUAL_WINDOWS
from nsysprobe.analyses.account.ops import gpu_ops, runtime_calls
from nsysprobe.analyses.events import Events
from nsysprobe.analyses.rows import first_row_of
from nsysprobe.analyses.windows import STARTUP_WORDS, StepWindows, periodic_steps, steady_steps
from nsysprobe.common.table import Table, by_count

FIXED_WINDOWS = 10
# Without steps, a top-level NVTX range of the thread driving the GPU that occurs once, leaves
# at least ``STARTUP_LEAVES`` of the GPU work's span after it and is named like start-up is
# start-up: the windows begin after it.
STARTUP_LEAVES = 0.1


@dataclass(frozen=True)
class Scope:
    """The account of one process on one device: what every part of it reads (its GPU
    operations, its API calls, its windows and which of them are steady or periodic)."""

    ev: Events
    pid: int
    dev: int
    loaders: int
    ops: Table  # ``gpu_ops``
    runtime: Table  # ``runtime_calls``
    steps: StepWindows | None
    home: int  # the thread driving the GPU (``_home_thread``)
    win_s: np.ndarray
    win_e: np.ndarray
    win_names: np.ndarray
    windows: str
    startup_range: str
    before_ns: int
    steady: slice
    period: int
    periodic: np.ndarray
    # Per thread, the starts of its calls that issued pageable copies (``_pageable_calls``).
    pageable: dict[int, np.ndarray] = field(default_factory=dict, compare=False, repr=False)

    @property
    def step_thread(self) -> int | None:
        return self.steps.thread if self.steps is not None else None

    @property
    def startup(self) -> int:
        return self.steady.start

    @cached_property
    def reach(self) -> np.ndarray:
        """Per GPU operation (by start), the latest end of it and every one before it."""
        return np.maximum.accumulate(self.ops["end"])

    @cached_property
    def held(self) -> iv.Intervals:
        """Where another process's work held the device (the GPU shared: the union of all the
        work on it, which within this process's idle is the others'); empty when it ran
        alone."""
        return self.ev.shared_devices.get(self.dev, iv.union([], []))

    @cached_property
    def op_calls(self) -> np.ndarray:
        """Per GPU operation, the row of the API call that issued it (same correlation id),
        or -1."""
        call = first_row_of(self.runtime["correlationId"], self.ops["correlationId"])
        return call.astype(iv.index_type(len(self.runtime)), copy=False)


def scope_of(events: Events, pid: int, dev: int, steps, loaders: int, nccl=None) -> Scope:
    """The scope of the account of process ``pid`` on device ``dev``; ``nccl``: the calls
    made inside NCCL's NVTX ranges (``nccl_issued``). ``steps``: its step windows, None, or
    a function that gives them, asked only once the process's operations and calls are made
    (the windows found on another core meanwhile: ``report.declared``)."""
    ops = gpu_ops(events, pid, dev, nccl)
    runtime = runtime_calls(events, pid)
    if callable(steps):
        steps = steps()
    if steps is not None and not _any_work_in(ops, steps):
        steps = None  # none of this GPU work falls in a step: the steps are another's
    step_thread = steps.thread if steps is not None else None
    home = _home_thread(runtime, step_thread, pid)
    first = int(ops["start"][0]) if len(ops) else 0
    if steps is not None and steps.count:
        win_s, win_e = steps.start, steps.end
        win_names = steps.names  # texts (``find_steps``)
        windows = f"NVTX range '{steps.pattern}', each to its completion"
        # GPU work before the first step: a one-time range there is start-up, any name.
        startup_range, _ = _once_range(events, ops, home, int(win_s[0]), named=False)
        before_ns = max(0, int(win_s[0]) - first) if len(ops) else 0
    else:
        startup_range, begin = _once_range(events, ops, home, None, named=True)
        later = ops["start"] >= begin
        op_s, op_e = ops["start"][later], ops["end"][later]
        win_s, win_e = _fixed_windows(op_s, op_e)
        win_names = np.array([f"window {i}" for i in range(win_s.size)])
        windows = f"{EQUAL_WINDOWS} over the GPU work, no step range"
        before_ns = max(0, begin - first) if len(ops) else 0
    stepped = steps is not None and steps.count
    wall = win_e - win_s
    # The steady steps; the start-up ones before them and one-time final ones after.
    steady = steady_steps(wall) if stepped else slice(0, wall.size)
    # The steps of a periodic event among the steady ones (``periodic_steps``).
    period = 0
    periodic = np.zeros(wall.size, dtype=bool)
    found = periodic_steps(wall[steady]) if stepped else None
    if found is not None:
        period = found[0]
        periodic[steady.start + found[1]] = True
    return Scope(
        ev=events,
        pid=pid,
        dev=dev,
        loaders=loaders,
        ops=ops,
        runtime=runtime,
        steps=steps,
        home=home,
        win_s=win_s,
        win_e=win_e,
        win_names=win_names,
        windows=windows,
        startup_range=startup_range,
        before_ns=before_ns,
        steady=steady,
        period=period,
        periodic=periodic,
    )


def _once_range(
    ev: Events, ops: Table, home: int, before: int | None, named: bool
) -> tuple[str, int]:
    """A top-level range of the thread driving the GPU (``_home_thread``) that ends after
    the first GPU operation, by ``before`` (default: with ``STARTUP_LEAVES`` of the GPU
    work's span after it): when ``named``, named like start-up (``STARTUP_WORDS``), all
    its occurrences over by then; else one that occurs once. Its name and end, the latest
    such, or ("", the first operation's start)."""
    first = int(ops["start"][0]) if len(ops) else 0
    nv, top = ev.nvtx, ev.nvtx_top_level
    if not len(ops) or not len(nv):
        return "", first
    mine = np.flatnonzero(top & (nv["globalTid"] == home))
    if not mine.size:
        return "", first
    span = int(ops["end"].max()) - first
    half = first + int(span * (1 - STARTUP_LEAVES))
    codes = nv["pattern"].codes[mine]
    cats = nv["pattern"].categories
    ends = nv["end"][mine]
    by = half if before is None else before
    if named:
        # Named like start-up, any number of times ('init_model' for a teacher and a
        # student), every one of them over by then.
        late = np.bincount(codes, weights=ends > by, minlength=len(cats))[codes] > 0
        words = np.array([bool(re.search(STARTUP_WORDS, str(c))) for c in cats.tolist()])
        words = words[codes] if words.size else np.zeros(codes.size, dtype=bool)
        chosen = words & ~late
    else:
        chosen = np.bincount(codes, minlength=len(cats))[codes] == 1
    pick = np.flatnonzero(chosen & (ends > first) & (ends <= by))
    if not pick.size:
        return "", first
    last = pick[np.argmax(ends[pick])]
    return str(cats[codes[last]]), int(ends[last])


def _any_work_in(ops: Table, steps: StepWindows) -> bool:
    """Does any of the process's GPU work on the device overlap the steps' windows (from
    the first step's start to the last one's completion)?"""
    if not steps.count:
        return False
    by = (steps.start[:1], steps.end[-1:])
    return bool(iv.overlaps_any(ops["start"], ops["end"], by).any())


def _home_thread(runtime: Table, step_thread: int | None, pid: int) -> int:
    """The step thread; without steps, the process's main thread when it launches
    kernels (PyTorch's autograd threads launch many too), else the thread launching most."""
    if step_thread is not None:
        return step_thread
    rt = runtime
    tids = rt["globalTid"]
    launches = rt["cat"] == LAUNCH
    if launches.any():
        tids = tids[launches]
    if not tids.size:
        return -1
    main = tids[(tids & 0xFFFFFF) == pid]
    if main.size:
        return int(main[0])
    return int(by_count(tids)[0])  # the most calls; of several, the first to call


def _fixed_windows(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if not len(starts):
        return np.zeros(1, np.int64), np.zeros(1, np.int64)
    lo, hi = int(starts.min()), int(ends.max())
    n = max(1, min(FIXED_WINDOWS, hi - lo))
    edges = lo + (np.arange(n + 1, dtype=np.int64) * (hi - lo)) // n
    return edges[:-1], edges[1:]
