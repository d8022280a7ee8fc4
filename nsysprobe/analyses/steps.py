"""Steps: the per-iteration NVTX range and where each step's time went.

The step range is the top-level NVTX range (one no other range on its thread encloses) that
repeats: its name with numbers masked (``Batch 12`` -> ``Batch #``) occurs at least twice on
one thread, and those ranges cover at least half the time from the first to the last (steps
follow one another). Names with a step word (step, iteration, batch, train) win, then names
without an evaluation word (val, eval, test, ...), then numbered names, then the pattern
covering the most time; when no top-level range is named like a step, a repeating step-named
range below the top level (inside an ``epoch`` range) is taken. PyTorch's per-operator
ranges (``aten::...``) are never steps. ``--step-range NAME`` picks it instead (an exact name,
or a pattern such as ``Batch #``).

Per step: its window (``windows.py``: from the last step's completion to its own, a step
being complete when its CPU range and the GPU work it launched have both ended), GPU busy
time (the **union** of GPU work on every device within the window), GPU idle time (the window
minus busy), its CPU range and the GPU work it launched, and the CPU time of each direct child
range on the step's thread (the **sum** of that child's ranges in the step's CPU range, e.g.
``get batch``, ``copy batch``, ``Compute``). Steps per second is steps over time (the first
step's start to the last completion), with the median and spread of the windows beside it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from nsysprobe.analyses import intervals as iv
from nsysprobe.analyses.events import Events
from nsysprobe.analyses.rows import grouped_in_blocks, top_level
from nsysprobe.analyses.windows import STARTUP_WORDS, Pace, StepWindows, pace, project
from nsysprobe.common.frames import Tables
from nsysprobe.common.table import Groups, Table, by_count, descending, distinct
from nsysprobe.errors import InputError
from nsysprobe.trace.values import pid_of, range_pattern

ROWS_LISTED = 10_000
# Steps follow one another: together they cover most of the time from the first to the last
# (numbered ranges named like steps, beside a sparser range, need not: ``_choose_pattern``).
MIN_STEP_COVERAGE = 0.5
# Validation and test loops repeat too; the training steps win over them.
_EVAL_WORD = r"(?i)(?:^|[^a-z])(?:val|valid|validation|eval|evaluation|test|inference)(?:[^a-z]|$)"
# (an ``epoch`` is not a step: one holds thousands of them)
_STEP_WORD = r"(?i)\b(?:step|iter|iteration|batch|train)"
# Ranges PyTorch's autograd profiler emits per operator (``aten::mul, seq = 3, op_id = 7``).
_OP_RANGE = r"^aten::|op_id = |, seq = "


@dataclass(frozen=True)
class ChildTime:
    name: str
    cpu_ns: int  # sum of this child's ranges within the step


@dataclass(frozen=True)
class StepRow:
    index: int
    name: str
    start_ns: int  # the window's start: the last step's completion (the first: its CPU start)
    wall_ns: int  # the window: to this step's completion
    gpu_busy_ns: int  # union of GPU work within the window
    gpu_idle_ns: int  # wall_ns - gpu_busy_ns
    cpu_start_ns: int  # the step's NVTX range
    cpu_ns: int
    gpu_start_ns: int | None  # the GPU work the range launched (None: it launched none)
    gpu_end_ns: int | None
    gpu_ops: int
    children: tuple[ChildTime, ...]


@dataclass(frozen=True)
class ChildSummary:
    name: str
    median_ns: int  # median over steps of the child's CPU time
    share_ratio: float  # its total CPU time / total step wall time


@dataclass(frozen=True)
class StepsResult(Pace, Tables):
    """The pace of the loop (``windows.Pace``: steps/s, the windows' median and spread, which
    side sets the pace), then the steps themselves."""

    TABLES = {"rows": (StepRow, "children"), "children": ChildSummary}

    range_pattern: str
    thread: str
    count: int
    mean_step_ns: int
    median_cpu_ns: int  # median of the steps' CPU ranges
    gpu_busy_ratio: float  # sum of per-step busy / sum of wall
    children: tuple[ChildSummary, ...]
    rows: tuple[StepRow, ...]  # the first ROWS_LISTED steps


@dataclass(frozen=True)
class StepRanges:
    """The step ranges themselves: one thread's ranges of one pattern, in time order."""

    pattern: str
    thread: int  # globalTid
    # start, end, globalTid, pattern (``Labels``), row, ... and name (an object array of str),
    # sorted by start
    ranges: Table
    all_ranges: Table  # every NVTX range of the events (``Events.nvtx``), all processes'

    def windows(self, events: Events) -> StepWindows:
        """Where each step ran on the GPU (``windows.project``)."""
        return project(events, self.pattern, self.thread, self.ranges)


def find_steps(
    events: Events, step_range: str | None = None, *, pid: int | None = None
) -> StepRanges | None:
    """The step ranges (see the module docstring), or None when no top-level range repeats.
    ``pid``: look only at that process's ranges (one rank in a report holding several)."""
    ranges, top = events.nvtx, events.nvtx_top_level
    # The process's rows as a mask, not a copy of its ranges (millions of operator ranges).
    # Top-level on its thread is top-level in its process: the whole report's mask holds.
    mine = None if pid is None else pid_of(ranges["globalTid"]) == pid
    if not (len(ranges) if mine is None else mine.any()):
        if step_range:
            raise InputError(
                f"--step-range {step_range!r}: the trace has no NVTX ranges; capture with "
                f"--trace=nvtx and annotate each step"
            )
        return None
    tops = ranges.take(top if mine is None else top & mine)
    chosen = _choose_pattern(tops, step_range)
    if not step_range and (chosen is None or not _is_step_word(chosen)):
        # Steps inside an enclosing range (an ``epoch`` range around them): look below the
        # top level for a repeating range named like a step (without copying the millions
        # of operator ranges there may be below it).
        below = ~top if mine is None else ~top & mine
        inner = _choose_pattern(ranges, None, rows=below)
        if inner is not None and _is_step_word(inner):
            own = ranges.take(below & (ranges["pattern"] == inner))
            tops = own.take(top_level(own, "globalTid"))
            chosen = inner
    if chosen is None:
        return None
    steps = tops.take(tops["pattern"] == chosen)
    thread = int(by_count(steps["globalTid"])[0])
    steps = steps.take(steps["globalTid"] == thread)
    # (as pandas' ``sort_values``: a quicksort; a thread's top-level ranges never start together)
    steps = steps.take(np.argsort(steps["start"], kind="quicksort"))
    steps["name"] = np.array(events.nvtx_names(steps["row"]), dtype=object).reshape(-1)
    return StepRanges(pattern=chosen, thread=thread, ranges=steps, all_ranges=ranges)


def analyze_steps(events: Events, step_range: str | None = None) -> StepsResult | None:
    """The per-step breakdown, or None when no repeating top-level range exists."""
    found = find_steps(events, step_range)
    return None if found is None else step_breakdown(events, found, found.windows(events))


def step_breakdown(events: Events, found: StepRanges, windows: StepWindows) -> StepsResult:
    """The per-step breakdown of the steps ``find_steps`` found in ``events``, timed by their
    ``windows`` (``windows.project``)."""
    chosen, thread, steps, ranges = found.pattern, found.thread, found.ranges, found.all_ranges
    s, e = windows.start, windows.end
    busy_ns = iv.covered(s, e, events.busy_all)
    wall = e - s
    cpu = windows.cpu_end - windows.cpu_start
    children = _children(ranges.take(ranges["globalTid"] == thread), steps)

    def when(times: np.ndarray, i: int) -> int | None:
        return int(times[i]) if windows.gpu_ops[i] else None

    rows = tuple(
        StepRow(
            index=i,
            name=str(steps["name"][i]),
            start_ns=int(s[i]),
            wall_ns=int(wall[i]),
            gpu_busy_ns=int(busy_ns[i]),
            gpu_idle_ns=int(wall[i] - busy_ns[i]),
            cpu_start_ns=int(windows.cpu_start[i]),
            cpu_ns=int(cpu[i]),
            gpu_start_ns=when(windows.gpu_start, i),
            gpu_end_ns=when(windows.gpu_end, i),
            gpu_ops=int(windows.gpu_ops[i]),
            children=tuple(
                ChildTime(name=n, cpu_ns=int(ns)) for n, ns in children.get(i, {}).items()
            ),
        )
        for i in range(min(len(steps), ROWS_LISTED))
    )
    summaries = []
    names = sorted({n for d in children.values() for n in d})
    if names:
        # step x child -> its CPU ns, 0 where the step has none of that child
        table = np.zeros((len(steps), len(names)), dtype=np.int64)
        column = {n: k for k, n in enumerate(names)}
        for i, d in children.items():
            for n, ns in d.items():
                table[i, column[n]] = ns
        totals = table.sum(axis=0)
        for k in descending(totals).tolist():
            summaries.append(
                ChildSummary(
                    name=names[k],
                    median_ns=int(np.median(table[:, k])),
                    share_ratio=float(totals[k] / wall.sum()) if wall.sum() else 0.0,
                )
            )
    return StepsResult(
        **vars(pace(windows, busy_ns)),
        range_pattern=chosen,
        thread=events.thread_label(thread),
        count=len(steps),
        mean_step_ns=int(wall.mean()),
        median_cpu_ns=int(np.median(cpu)),
        gpu_busy_ratio=iv.busy_ratio(busy_ns.sum(), wall.sum()),
        children=tuple(summaries),
        rows=rows,
    )


def _is_step_word(pattern: str) -> bool:
    return bool(re.search(_STEP_WORD, pattern))


def _choose_pattern(tops: Table, step_range: str | None, rows=None) -> str | None:
    """The steps' pattern among the ranges ``tops`` (those of them in the mask ``rows``)."""
    if step_range:
        # A range named ``step_range`` (or its pattern) has one of these patterns.
        wanted = {step_range, range_pattern(step_range)}
        patterns = tops["pattern"]
        hits = patterns.codes[patterns.isin(wanted)]
        if not hits.size:
            present = patterns.categories[distinct(patterns.codes)].tolist()
            known = ", ".join(sorted(present)[:8])
            raise InputError(
                f"--step-range {step_range!r}: no top-level NVTX range has that name; "
                f"top-level ranges here: {known or 'none'}"
            )
        return str(patterns.categories[by_count(hits)[0]])
    table = _per_pattern_and_thread(tops, rows)
    coverage = table["total"] / np.maximum(table["last"] - table["first"], 1)
    numbered_step = np.array(
        [bool(re.search(_STEP_WORD, p)) and "#" in p for p in table["pattern"]], dtype=bool
    )
    sparse = table.take((table["count"] >= 2) & numbered_step & (coverage < MIN_STEP_COVERAGE))
    table = table.take((table["count"] >= 2) & (coverage >= MIN_STEP_COVERAGE))
    best = _best_pattern(table)
    # A numbered step range may cover little of the loop when something runs between the
    # steps (a checkpoint or an evaluation after the step's range): when what would be chosen
    # is no such range and repeats less often, the steps are the numbered ones.
    if best is not None and len(sparse) and not re.search(_STEP_WORD, best):
        most = int(np.argmax(sparse["count"]))
        if sparse["count"][most] > table["count"][table["pattern"].tolist().index(best)]:
            return str(sparse["pattern"][most])
    return best


def _best_pattern(table: Table) -> str | None:
    """The steps' pattern among candidates that repeat and cover their span."""
    if not len(table):
        return None
    patterns = table["pattern"].tolist()
    step_word = np.array([bool(re.search(_STEP_WORD, p)) for p in patterns])
    # Start-up work that repeats ('init_model' for a teacher and a student) is not a step.
    startup = np.array([bool(re.search(STARTUP_WORDS, p)) for p in patterns]) & ~step_word
    if startup.all():
        return None
    table = table.take(~startup)
    patterns = table["pattern"].tolist()
    step_word = step_word[~startup]
    training = np.array([not re.search(_EVAL_WORD, p) for p in patterns])
    numbered = np.array(["#" in p for p in patterns])
    # The first of the table's order (pattern, thread) among the best: a stable sort.
    best = np.lexsort((-table["total"], ~numbered, ~training, ~step_word))[0]
    return str(patterns[best])


def _per_pattern_and_thread(ranges: Table, rows=None) -> Table:
    """pattern, globalTid, count, total (ns), first (start) and last (end) of the ranges
    (those in the mask ``rows``) per (pattern, globalTid), sorted by both, operator ranges
    (``_OP_RANGE``) left out: summed a block of rows at a time, then over the blocks (millions
    of ``aten::`` ranges, a few hundred groups)."""
    # ``_OP_RANGE`` has no digits: a pattern matches it when its names do.
    cats = ranges["pattern"].categories
    op = np.array([bool(re.search(_OP_RANGE, str(c))) for c in cats] + [True], dtype=bool)
    codes = ranges["pattern"].codes
    tids, start, end = (ranges[c] for c in ("globalTid", "start", "end"))

    def block(lo: int, hi: int) -> dict[str, np.ndarray]:
        keep = ~op[codes[lo:hi]] if rows is None else ~op[codes[lo:hi]] & rows[lo:hi]
        s, e = start[lo:hi][keep], end[lo:hi][keep]
        return {
            "code": codes[lo:hi][keep],
            "globalTid": tids[lo:hi][keep],
            "dur": e - s,
            "start": s,
            "end": e,
        }

    how = {
        "count": ("dur", "size"),
        "total": ("dur", "sum"),
        "first": ("start", "min"),
        "last": ("end", "max"),
    }
    table = grouped_in_blocks(len(ranges), block, ["code", "globalTid"], how, sort=True)
    pattern = np.asarray(cats, dtype=object)[table.pop("code")]
    return Table({"pattern": pattern, **{c: table[c] for c in table.columns}})


def _children(ranges: Table, steps: Table) -> dict[int, dict[str, int]]:
    """step index -> {child name: CPU ns}, direct children on the step's thread only."""
    s, e = steps["start"], steps["end"]
    idx = np.searchsorted(s, ranges["start"], side="right") - 1
    valid = idx >= 0
    inside = valid.copy()
    inside[valid] = ranges["end"][valid] <= e[idx[valid]]
    inner = ranges.take(inside)
    inner["step"] = idx[inside]
    # The step ranges themselves are inside their own window: leave them out.
    step = inner["step"]
    inner = inner.take(~((inner["start"] == s[step]) & (inner["end"] == e[step])))
    if not len(inner):
        return {}
    direct = inner.take(top_level(inner, "step"))
    # The categories are sorted: groups in (step, code) order are in (step, name) order.
    pattern = direct["pattern"]
    groups = Groups([direct["step"], pattern.codes], sort=True)
    ns = groups.sum(direct["end"] - direct["start"])
    names = pattern.categories[groups.keys[1]]
    out: dict[int, dict[str, int]] = {}
    for step, name, total in zip(groups.keys[0].tolist(), names.tolist(), ns.tolist()):
        out.setdefault(int(step), {})[str(name)] = int(total)
    return out
