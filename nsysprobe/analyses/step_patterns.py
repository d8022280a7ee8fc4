"""Patterns across steps: steps that never repeat their kernels, and worker processes born
inside the capture.

A training loop repeats itself: once warm, every step runs the set of kernels an earlier step
ran. Over the main account's steps (``account/``: the loop's NVTX steps, each window to its
completion; not equal windows, which repeat nothing), per step:

    kernels        the distinct kernel names run on the account's process and GPU (by the
                   kernel's start in the step's window)
    new set        the step's set of kernel names is no earlier step's set (every step of
                   the capture before it is compared, start-up ones too; the capture's first
                   step has none to compare with)
    syncs          cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize (and
                   their driver forms) called in the window by any thread of the process;
                   of them, *timing syncs*: the device and event ones, which time GPU work
                   (a read-back waits on its stream instead)
    allocations    cudaMalloc/cudaFree and cuMem* device allocations and releases
    module loads   cuModuleLoad*, cuLibraryLoad*, cuLink*, nvrtc*, nvJitLink*: GPU code
                   loaded or compiled at run time
    births         fork, vfork, clone, posix_spawn calls of the process (OS runtime)

The steady steps (start-up and one-time final steps apart) then get one verdict:

    autotuning     at least ``MIN_PATTERN_STEPS`` steady steps after the capture's first with
                   a new set, each making ``SYNC_STORM_CALLS`` timing syncs or more (and
                   ``STORM_RATIO`` times the median of the steps that repeat a set): a library
                   timing candidate kernels for input shapes it has not seen
                   (``torch.backends.cudnn.benchmark`` with changing shapes: trial kernels, a
                   sync around each, workspace malloc/free)
    recompilation  without that, at least ``MIN_PATTERN_STEPS`` steady steps after the first
                   that load or compile GPU code: torch.compile recompiling for new shapes
                   (Triton kernels compiled and loaded), or new shapes loading new kernels
    none           the steps repeat their kernels and load no code: no pattern (a normal
                   training loop, its first step's lazy loading and a periodic step's first
                   run included)

The steps of the verdict are its *pattern steps*; the diagnosis charges them the idle time
they took beyond the other steady steps.

**Worker processes born in the capture.** Each birth falls in a steady step; the steps holding
births are *generations* (a DataLoader starts ``num_workers`` processes for each new iterator:
with ``persistent_workers=False``, the default, every epoch). The period is the median number
of steps between generations; the cost is the idle of the generations' steps beyond the median
idle of the other steady steps (the training thread forking, then waiting for the new workers'
first batches). The births are the DataLoader's when the report names DataLoader workers
(``pt_data_worker``). Of a report with more steps than ``account.STEP_ROWS_LISTED``, the
steps listed are read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import numpy as np

from nsysprobe.analyses.account import Account
from nsysprobe.analyses.calls import (
    API_ALLOC,
    API_MODULE,
    API_SYNC,
    BIRTH_CALLS,
    api_kind,
)
from nsysprobe.analyses.events import Events
from nsysprobe.analyses.rows import ROWS_PER_BLOCK, api_name, per_distinct
from nsysprobe.common.frames import Tables
from nsysprobe.common.table import distinct
from nsysprobe.trace.values import pid_of

# Steady steps after the capture's first with a verdict's signature that the verdict needs.
MIN_PATTERN_STEPS = 2
# A step that autotunes makes at least this many timing syncs, and this many times the median
# of the steps that repeat a set (a normal step makes none, or one at its end).
SYNC_STORM_CALLS = 10
STORM_RATIO = 4
# The verdicts, each also the id of its recommendation (``diagnose.patterns.step_pattern``).
VERDICTS = ("autotuning", "recompilation")
# Kernel names: cuDNN's own (its trial kernels when it autotunes), and Triton's (Inductor's).
CUDNN_KERNELS = r"(?i)cudnn|implicit_convolve|winograd|conv2d_|_engine$"
TRITON_KERNELS = r"(?i)^triton"
# Synchronizations that time GPU work (a benchmark's events, a full drain): a read-back
# waits on its stream instead.
TIMING_SYNCS = frozenset(
    {"cudaDeviceSynchronize", "cudaEventSynchronize", "cuCtxSynchronize", "cuEventSynchronize"}
)
_SYNC, _TIMING, _ALLOC, _MODULE, _OTHER = range(5)


@dataclass(frozen=True)
class StepKernels:
    """One step's figures (module docstring)."""

    name: str
    steady: bool
    kernels: int  # distinct kernel names
    new_set: bool  # its set of names is no earlier step's
    new_kernels: int  # names no earlier step ran
    syncs: int
    timing_syncs: int  # of those, device and event synchronizations
    allocations: int
    module_loads: int
    births: int
    idle_ns: int  # the account's idle in the step
    pattern: bool  # a step of the verdict


@dataclass(frozen=True)
class Generation:
    step: str  # the step the processes were born in
    births: int
    at_ns: int  # the first birth


@dataclass(frozen=True)
class WorkerBirths:
    births: int  # processes born in the steady steps
    calls: str  # the calls that started them, by count: "fork 40"
    generations: tuple[Generation, ...]
    per_generation: int  # median births per generation
    period_steps: int  # median steps between generations; 0 with one generation
    regular: bool  # every generation the same number of steps after the last
    loader: bool  # the report names DataLoader workers (pt_data_worker)
    cost_ns: int  # the generations' steps' idle beyond the other steady steps' median
    others_idle_median_ns: int
    input_wait_ns: int  # loading + loader_wait in the generations' steps
    others_input_wait_median_ns: int
    outside_steps: int  # births in the capture outside the steady steps


@dataclass(frozen=True)
class StepPatterns(Tables):
    TABLES = {"steps": StepKernels}

    pid: int
    device_id: int
    verdict: str  # "autotuning", "recompilation" or "" (the steps repeat their kernels)
    steps: tuple[StepKernels, ...]  # every step of the account, start-up and final too
    compared_steps: int  # steady steps with an earlier step to compare with
    new_set_steps: int  # of those, steps whose kernel set is new
    pattern_steps: tuple[str, ...]  # the verdict's steps (module docstring)
    distinct_kernels: int  # over the steady steps
    median_kernels: float  # distinct kernels per steady step, median
    syncs_per_step: float  # median over the pattern steps (over the steady steps without)
    allocations_per_step: float
    module_loads_per_step: float
    timing_syncs_per_step: float  # device and event synchronizations, the same way
    repeating_timing_syncs_per_step: float  # median over the steady steps that repeat a set
    sync_calls: str  # the synchronizing calls of the pattern steps by name: "cudaX 5,556, ..."
    library: str  # "cuDNN" (cuDNN's kernels in the pattern steps), "Triton" or ""
    births: WorkerBirths | None
    note: str  # one line: the verdict and its figures, or the all-clear


def analyze_step_patterns(events: Events, account: Account) -> StepPatterns | None:
    """The patterns across the steps of ``account`` (the report's main account); None
    without steps (equal windows) or with fewer than three."""
    steps = account.steps
    if not account.stepped or len(steps) < 3:
        return None
    pid, dev = account.pid, account.device_id
    starts = np.array([s.start_ns for s in steps], dtype=np.int64)
    ends = starts + np.array([s.wall_ns for s in steps], dtype=np.int64)
    steady = np.array([not s.startup and not s.final for s in steps])
    n = starts.size

    # Each table a block of rows at a time (10 M kernels: no array of their length held).
    k_step, k_name = _kernel_pairs(events, pid, dev, starts, ends)
    sets, new_set, new_kernels = _kernel_sets(k_step, k_name, n)
    counts, sync_step, sync_name = _call_counts(events, pid, starts, ends)
    b_start, b_names = _births_of(events, pid)
    b_step = _step_of(starts, ends, b_start)
    births = np.bincount(b_step[b_step >= 0], minlength=n)

    idle = np.array([s.idle_ns for s in steps], dtype=np.int64)
    compared = steady & (np.arange(n) > 0)
    timing, allocs, loads = counts[_TIMING], counts[_ALLOC], counts[_MODULE]
    syncs = counts[_SYNC] + timing
    repeating = compared & ~new_set
    base_timing = float(np.median(timing[repeating])) if repeating.any() else 0.0
    storm = (timing >= SYNC_STORM_CALLS) & (timing >= STORM_RATIO * base_timing)
    verdict, pattern = "", np.zeros(n, dtype=bool)
    for name, signature in zip(VERDICTS, (new_set & storm, loads > 0)):
        candidate = steady & signature
        # Autotuning allocates workspaces for the candidates it times: new kernels and a
        # storm of syncs without any allocation are not it.
        if name == VERDICTS[0] and not allocs[candidate].any():
            continue
        if int((candidate & compared).sum()) >= MIN_PATTERN_STEPS:
            verdict, pattern = name, candidate
            break

    names = [s.name for s in steps]
    rows_out = tuple(
        StepKernels(
            name=names[i],
            steady=bool(steady[i]),
            kernels=len(sets[i]),
            new_set=bool(new_set[i]),
            new_kernels=int(new_kernels[i]),
            syncs=int(syncs[i]),
            timing_syncs=int(timing[i]),
            allocations=int(allocs[i]),
            module_loads=int(loads[i]),
            births=int(births[i]),
            idle_ns=int(idle[i]),
            pattern=bool(pattern[i]),
        )
        for i in range(n)
    )
    judged = pattern if pattern.any() else steady
    steady_names = (
        set().union(*(sets[i] for i in np.flatnonzero(steady))) if steady.any() else set()
    )
    result = StepPatterns(
        pid=pid,
        device_id=dev,
        verdict=verdict,
        steps=rows_out,
        compared_steps=int(compared.sum()),
        new_set_steps=int((compared & new_set).sum()),
        pattern_steps=tuple(names[i] for i in np.flatnonzero(pattern)),
        distinct_kernels=len(steady_names),
        median_kernels=_median([len(sets[i]) for i in np.flatnonzero(steady)]),
        syncs_per_step=_median(syncs[judged]),
        allocations_per_step=_median(allocs[judged]),
        module_loads_per_step=_median(loads[judged]),
        timing_syncs_per_step=_median(timing[judged]),
        repeating_timing_syncs_per_step=base_timing,
        sync_calls=_sync_calls(events, sync_step, sync_name, pattern),
        library=_library(events, k_step, k_name, pattern),
        births=_births(account, steady, births, b_step, b_start, b_names, idle),
        note="",
    )
    return _with_note(result)


def _step_of(starts: np.ndarray, ends: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The window holding each time of ``at``, -1 outside every window."""
    step = np.searchsorted(starts, at, side="right") - 1
    inside = step >= 0
    inside[inside] = at[inside] < ends[step[inside]]
    return np.where(inside, step, -1)


# A (step, name id) pair is one integer where the steps times the ids' span fit these bits.
PAIR_KEY_BITS = 62


def _blocks(n: int):
    """Row ranges [lo, hi) of a table of ``n`` rows, ``ROWS_PER_BLOCK`` at a time."""
    return ((lo, lo + ROWS_PER_BLOCK) for lo in range(0, n, ROWS_PER_BLOCK))


def _kernel_pairs(events: Events, pid: int, dev: int, starts, ends):
    """The distinct (step, name id) of the process's kernels on the device that start in a
    step's window, by step then name: what the steps' kernel sets and the pattern steps'
    library read."""
    k = events.kernels
    names = k["nameId"]
    if not len(k):
        return np.empty(0, np.int64), np.empty(0, np.int64)
    low = int(names.min())
    span = int(names.max()) - low + 1
    # One integer per pair where it fits (steps times the ids' span), else pairs made
    # distinct by a sort of both.
    keyed = span <= (1 << PAIR_KEY_BITS) // max(starts.size, 1)
    parts = [np.empty((0, 2), np.int64)]
    for lo, hi in _blocks(len(k)):
        on = (pid_of(k["globalPid"][lo:hi]) == pid) & (k["deviceId"][lo:hi] == dev)
        rows = np.flatnonzero(on)
        step = _step_of(starts, ends, k["start"][lo:hi][rows])
        kept = step >= 0
        step, name = step[kept], names[lo:hi][rows[kept]].astype(np.int64)
        parts.append(_distinct_pairs(step, name, low, span, keyed))
    pairs = np.concatenate(parts)
    pairs = _distinct_pairs(pairs[:, 0], pairs[:, 1], low, span, keyed)
    return pairs[:, 0], pairs[:, 1]


def _distinct_pairs(step, name, low: int, span: int, keyed: bool) -> np.ndarray:
    """The distinct (step, name) pairs as rows of two columns, by step then name."""
    if keyed:
        key = distinct(step * span + (name - low))
        return np.stack([key // span, key % span + low], axis=1)
    if not step.size:
        return np.empty((0, 2), np.int64)
    order = np.lexsort((name, step))
    step, name = step[order], name[order]
    new = np.ones(step.size, dtype=bool)
    new[1:] = (step[1:] != step[:-1]) | (name[1:] != name[:-1])
    return np.stack([step[new], name[new]], axis=1)


def _call_counts(events: Events, pid: int, starts, ends):
    """Per kind of call (``_SYNC``, ``_TIMING``, ``_ALLOC``, ``_MODULE``), how many of the
    process's CUDA calls each step's window holds; and the step and name id of each
    synchronizing one (``_SYNC``, ``_TIMING``) in a window, for ``_sync_calls``."""
    rt = events.runtime
    counts = {c: np.zeros(starts.size, np.int64) for c in (_SYNC, _TIMING, _ALLOC, _MODULE)}
    steps, names = [np.empty(0, np.int64)], [np.empty(0, np.int64)]
    for lo, hi in _blocks(len(rt)):
        rows = np.flatnonzero(pid_of(rt["globalTid"][lo:hi]) == pid)
        ids = rt["nameId"][lo:hi][rows]
        kind = per_distinct(ids, lambda i: _api_kind(events.name_of(i)), np.int64)
        step = _step_of(starts, ends, rt["start"][lo:hi][rows])
        for c, total in counts.items():
            total += np.bincount(step[(step >= 0) & (kind == c)], minlength=starts.size)
        sync = ((kind == _SYNC) | (kind == _TIMING)) & (step >= 0)
        steps.append(step[sync])
        names.append(ids[sync].astype(np.int64))
    return counts, np.concatenate(steps), np.concatenate(names)


def _births_of(events: Events, pid: int) -> tuple[np.ndarray, np.ndarray]:
    """The start and name of each of the process's OS-runtime calls that starts a process
    (``BIRTH_CALLS``), in table order."""
    os_ = events.osrt
    starts, names = [np.empty(0, np.int64)], [np.empty(0, dtype=object)]
    for lo, hi in _blocks(len(os_)):
        rows = np.flatnonzero(pid_of(os_["globalTid"][lo:hi]) == pid)
        o_names = per_distinct(os_["nameId"][lo:hi][rows], events.name_of)
        born = np.isin(o_names, list(BIRTH_CALLS)) if o_names.size else np.zeros(0, bool)
        starts.append(os_["start"][lo:hi][rows[born]])
        names.append(o_names[born])
    return np.concatenate(starts), np.concatenate(names)


def _kernel_sets(step: np.ndarray, name: np.ndarray, n: int):
    """Per step: its set of kernel names, whether no earlier step had that set, and how many
    of its names no earlier step ran (``step``, ``name``: the distinct pairs, by step)."""
    cut = np.searchsorted(step, np.arange(n + 1))
    sets = [frozenset(name[cut[i] : cut[i + 1]].tolist()) for i in range(n)]
    seen_sets: set[frozenset] = set()
    seen: set[int] = set()
    new_set = np.zeros(n, dtype=bool)
    new_kernels = np.zeros(n, dtype=np.int64)
    for i, s in enumerate(sets):
        new_set[i] = s not in seen_sets
        new_kernels[i] = len(s - seen)
        seen_sets.add(s)
        seen |= s
    return sets, new_set, new_kernels


def _api_kind(raw: str) -> int:
    """What a step's call counts as (the categories of ``calls.api_kind``): a timing or
    other synchronization, a device allocation (not of host memory), loading GPU code."""
    name = api_name(raw)
    kind = api_kind(name)
    if kind == API_SYNC:
        return _TIMING if name in TIMING_SYNCS else _SYNC
    if kind == API_ALLOC and "Host" not in name:
        return _ALLOC
    return _MODULE if kind == API_MODULE else _OTHER


def _median(values) -> float:
    values = np.asarray(values)
    return float(np.median(values)) if values.size else 0.0


def _sync_calls(events, step, name_id, pattern) -> str:
    """The pattern steps' synchronizing calls by name, most first (``step``, ``name_id``: those
    of every synchronizing call in a window)."""
    if not pattern.any():
        return ""
    ids, n = np.unique(name_id[pattern[step]], return_counts=True)
    by_name: dict[str, int] = {}
    for i, c in zip(ids.tolist(), n.tolist()):
        name = api_name(events.name_of(i))
        by_name[name] = by_name.get(name, 0) + c
    return ", ".join(f"{k} {v:,}" for k, v in sorted(by_name.items(), key=lambda x: -x[1]))


def _library(events, k_step, k_name, pattern) -> str:
    """Whose kernels the pattern steps ran: cuDNN's, Triton's, or neither (``k_step``,
    ``k_name``: the distinct pairs)."""
    if not pattern.any() or not k_step.size:
        return ""
    ids = distinct(k_name[pattern[k_step]]).tolist()
    texts = [events.name_of(i) for i in ids]
    if any(re.search(CUDNN_KERNELS, t) for t in texts):
        return "cuDNN"
    if any(re.search(TRITON_KERNELS, t) for t in texts):
        return "Triton"
    return ""


def _births(account, steady, births, step, at, names, idle) -> WorkerBirths | None:
    """The births in the steady steps, by generation (module docstring); None without."""
    born = steady & (births > 0)
    if not born.any():
        return None
    steps = account.steps
    which = np.flatnonzero(born)
    inside = step >= 0
    inside[inside] = born[step[inside]]
    first = np.full(births.size, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, step[inside], at[inside])
    gens = tuple(Generation(steps[i].name, int(births[i]), int(first[i])) for i in which)
    gaps = np.diff(which)
    others = steady & ~born
    base = _median(idle[others])
    wait = np.array(
        [sum(ns for b, ns in s.buckets if b in ("loading", "loader_wait")) for s in steps],
        dtype=np.int64,
    )
    calls, n = np.unique(names[inside], return_counts=True)
    return WorkerBirths(
        births=int(births[which].sum()),
        calls=", ".join(f"{c} {k:,}" for c, k in sorted(zip(calls, n), key=lambda x: -x[1])),
        generations=gens,
        per_generation=int(np.median(births[which])),
        period_steps=int(np.median(gaps)) if gaps.size else 0,
        regular=bool(gaps.size) and bool((gaps == gaps[0]).all()),
        loader=account.loader_processes > 0,
        cost_ns=int(np.clip(idle[which] - base, 0, None).sum()),
        others_idle_median_ns=int(base),
        input_wait_ns=int(wait[which].sum()),
        others_input_wait_median_ns=int(_median(wait[others])),
        outside_steps=int(names.size - inside.sum()),
    )


def _with_note(r: StepPatterns) -> StepPatterns:
    """``r`` with its one-line summary."""
    parts = []
    steady = sum(s.steady for s in r.steps)
    figures = (
        f"each with a median {r.syncs_per_step:,.0f} synchronizing calls "
        f"({r.timing_syncs_per_step:,.0f} device and event ones), "
        f"{r.allocations_per_step:,.0f} allocations and {r.module_loads_per_step:,.0f} module "
        f"loads; {r.distinct_kernels:,} distinct kernels in the steady steps"
    )
    if r.verdict == "autotuning":
        parts.append(
            f"autotuning: {len(r.pattern_steps)} of {steady} steady steps ran a set of kernels "
            f"no earlier step ran, {figures}"
        )
    elif r.verdict == "recompilation":
        new = sum(s.new_set for s in r.steps if s.pattern)
        parts.append(
            f"recompilation: {len(r.pattern_steps)} of {steady} steady steps loaded or "
            f"compiled GPU code, {new} of them with a set of kernels no earlier step ran, "
            f"{figures}"
        )
    else:
        parts.append(
            f"the steps repeat their kernels: {r.new_set_steps} of {r.compared_steps} steady "
            "steps after the first ran a new set of kernels"
        )
    b = r.births
    if b is not None:
        every = f"every {b.period_steps} steps" if b.period_steps else "once"
        who = "DataLoader worker processes" if b.loader else "processes"
        parts.append(
            f"{b.births} {who} born in the steps ({b.per_generation} at a time, {every}; "
            f"{b.calls}), costing {b.cost_ns / 1e6:,.1f} ms of idle beyond the other steps'"
        )
    return replace(r, note="; ".join(parts))
