"""The sections of the step account, the steps, the patterns across them, the Python frames
and the ranks' arrivals: where each step's time went."""

from __future__ import annotations

from nsysprobe.analyses.arrivals import ROUND_UNITS, Arrivals
from nsysprobe.common.units import counted
from nsysprobe.render.sections import Section, ms, pct, shown
from nsysprobe.report.analyze import Report

STEP_ROWS_SHOWN = 12


def pace_lines(st) -> tuple[str, ...]:
    """How fast the loop went and which side set the pace (``windows.Pace``), in words."""
    first = ""
    if st.first_step_outlier and st.rows:
        steady = st.steady_steps_per_s
        first = (
            f"; the first step is an outlier ({ms(st.rows[0].wall_ns)} against a median of "
            f"{ms(st.median_step_ns)})" + (f", {steady:,.2f} steps/s without it" if steady else "")
        )
    lag = f"; the GPU ends a step's work a median {ms(st.gpu_lag_ns)} after its CPU range"
    return (
        f"{st.count:,} steps in {ms(st.span_ns)}: {st.steps_per_s:,.2f} steps/s{first}",
        f"a step: from the last step's completion to its own (its CPU range and the GPU work "
        f"it launched both ended); median {ms(st.median_step_ns)}, 10-90% "
        f"{st.p10_step_ns / 1e6:,.1f}-{ms(st.p90_step_ns)}; CPU range median "
        f"{ms(st.median_cpu_ns)}",
        f"pace: {st.note}" + (lag if st.gpu_lag_ns else ""),
    )


def _steady_busy(st) -> str:
    if not st.startup_steps and not st.final_steps:
        return ""
    return (
        f"; {pct(st.steady_busy_ratio)} of the steady steps' ({st.startup_steps} start-up and "
        f"{st.final_steps} final one-time steps apart)"
    )


def _steps(report: Report) -> Section | None:
    st = report.steps
    if st is None:
        return None
    main = report.account.main if report.account else None
    # One table when the steps are the main account's (the same thread's); else their own.
    merged = main is not None and main.stepped and bool(main.steps) and st.thread == main.thread
    notes = (
        f"step range '{st.range_pattern}' on {st.thread}",
        *pace_lines(st),
        f"GPU busy {pct(st.gpu_busy_ratio)} of step time (union of GPU work in each step)"
        + _steady_busy(st),
        "children (CPU time in the step's range): "
        + (
            ", ".join(
                f"{c.name} median {ms(c.median_ns)} ({pct(c.share_ratio)})" for c in st.children
            )
            or "none"
        ),
    )
    if merged:  # its columns are in the step account's per-step table
        return Section("Steps", (*notes, "each step: the per-step table above"), (), ())
    notes += shown(min(len(st.rows), STEP_ROWS_SHOWN), st.count, "steps", _json_rows(st))
    header, cells = _cpu_columns(report)
    rows = tuple(
        (str(r.index), r.name, ms(r.wall_ns), ms(r.gpu_busy_ns), ms(r.gpu_idle_ns))
        + cells[r.start_ns]
        for r in st.rows[:STEP_ROWS_SHOWN]
    )
    header = ("#", "step", "wall", "GPU busy", "GPU idle", *header)
    return Section("Steps", notes, header, rows)


def _cpu_columns(report: Report) -> tuple[tuple[str, ...], dict[int, tuple[str, ...]]]:
    """The steps analysis's columns of the per-step table (its CPU range, when the GPU
    ended its work, its children's CPU time), by step start; none without it."""
    st = report.steps
    if st is None:
        return (), {}
    names = [c.name for c in st.children]
    cells = {}
    for r in st.rows:
        child = {c.name: c.cpu_ns for c in r.children}
        done = "-" if r.gpu_end_ns is None else ms(r.gpu_end_ns - r.cpu_start_ns - r.cpu_ns)
        cells[r.start_ns] = (ms(r.cpu_ns), done) + tuple(ms(child.get(n, 0)) for n in names)
    header = ("CPU range", "GPU ends after") + tuple(f"{n} (CPU)" for n in names)
    return header, cells


def _json_rows(st) -> str:
    listed = len(st.rows)
    if listed < st.count:
        return f"the JSON has the first {listed:,}"
    return "all are in the JSON"


ACCOUNT_STEP_COLUMNS = 6


ACCOUNT_STEPS_SHOWN = 12


COLLECTIVES_SHOWN = 4


DETAILS_SHOWN = 3


def _account(report: Report) -> Section | None:
    acc = report.account
    a = acc.main if acc else None
    if a is None:
        return None
    notes = [
        f"process {a.pid}, GPU {a.device_id}, {a.thread}: {a.step_count} steps ({a.windows}), "
        f"median {ms(a.median_wall_ns)}; busy {pct(1 - a.idle_ratio)}, idle "
        f"{pct(a.idle_ratio)}; busy + idle = wall, each ns once",
    ]
    if a.startup_ns or a.final_ns:
        first = "step" if a.startup_steps == 1 else f"{a.startup_steps} steps"
        last = "step" if a.final_steps == 1 else f"{a.final_steps} steps"
        what = [f"the first {first}"] if a.startup_steps else []
        if a.startup_before_ns:
            what.insert(0, f"'{a.startup_range}'" if a.startup_range else "the work before")
        what += [f"the last {last}"] if a.final_steps else []
        notes.append(
            f"left out of every figure here as one-time: {' and '.join(what)} "
            f"({ms(a.startup_ns + a.final_ns)}; see startup_in_capture)"
        )
    if a.periodic is not None:
        p = a.periodic
        where = f" ('{p.ranges[0].name}')" if p.ranges else ""
        notes.append(
            f"periodic: every {p.period} steps{where}, {counted(len(p.occurrences), 'time')} "
            f"({counted(len(p.steps), 'step')}) of median {ms(p.median_wall_ns)} against "
            f"{ms(p.typical_wall_ns)}: "
            f"{ms(p.excess_ns)} beyond the others (see periodic_step)"
        )
    if a.communication_ns:
        each = "; ".join(
            f"{c.name} x{c.count} {ms(c.total_ns)} ({ms(c.exposed_ns)} exposed)"
            for c in a.collectives[:COLLECTIVES_SHOWN]
        )
        if len(a.collectives) > COLLECTIVES_SHOWN:
            each += f" ({COLLECTIVES_SHOWN} of {len(a.collectives)} collectives; all in the JSON)"
        notes.append(
            f"communication: {ms(a.communication_ns)} of NCCL work, "
            f"{ms(a.communication_overlapped_ns)} of it under compute kernels"
            + (f"; {each}" if each else "")
        )
    for other in acc.accounts:
        if other is not a:
            ranks = (
                "its account, and which rank arrives last at the collectives"
                if other.communication_ns and a.communication_ns and other.pid != a.pid
                else "its account"
            )
            notes.append(
                f"also process {other.pid}, GPU {other.device_id}: {other.step_count} steps, "
                f"busy {pct(1 - other.idle_ratio)} (nsysprobe analyze --ranks for {ranks})"
            )
    if acc.left_out:
        notes.append(
            f"{acc.left_out:,} more (process, GPU) pairs with less GPU work were not accounted "
            f"(at most {len(acc.accounts)} are)"
        )
    rows = tuple(
        (
            b.kind,
            b.name,
            ms(b.median_ns),
            ms(b.total_ns),
            pct(b.share_ratio),
            ", ".join(f"{d.name} {ms(d.ns)}" for d in b.details[:DETAILS_SHOWN]) or "-",
        )
        for b in a.buckets
    )
    if any(len(b.details) > DETAILS_SHOWN for b in a.buckets):
        notes.append(
            f"mostly: each bucket's {DETAILS_SHOWN} largest names; the JSON has up to "
            f"{max(len(b.details) for b in a.buckets)} per bucket"
        )
    return Section(
        "Where the step time went (step account)",
        tuple(notes),
        ("", "bucket", "median/step", "total", "share", "mostly"),
        rows,
    )


def _account_steps(report: Report) -> Section | None:
    a = report.account.main if report.account else None
    if a is None or not a.steps:
        return None
    top = [b.name for b in a.buckets[:ACCOUNT_STEP_COLUMNS]]
    comm = ("NCCL", "NCCL hidden") if a.communication_ns else ()
    same = a.stepped and report.steps is not None and report.steps.thread == a.thread
    cpu, cpu_cells = _cpu_columns(report) if same else ((), {})
    rows = []
    for st in a.steps[:ACCOUNT_STEPS_SHOWN]:
        by = dict(st.buckets)
        nccl = (ms(st.communication_ns), ms(st.communication_overlapped_ns)) if comm else ()
        name = f"{st.name} (start-up)" if st.startup else st.name
        name = f"{st.name} (final, one-time)" if st.final else name
        rows.append(
            (str(st.index), name, ms(st.wall_ns), ms(st.busy_ns), ms(st.idle_ns))
            + tuple(ms(by.get(n, 0)) for n in top)
            + nccl
            + cpu_cells.get(st.start_ns, ("-",) * len(cpu))
        )
    buckets = (
        f"the {len(top)} largest of {len(a.buckets)} buckets"
        if len(a.buckets) > len(top)
        else "every bucket"
    )
    where = "every step's buckets are in the JSON"
    total = a.step_count + a.startup_steps
    if len(a.steps) < total:
        where = f"the JSON has the first {len(a.steps):,} steps' buckets"
    notes = [f"{buckets}; {where}"]
    notes += shown(min(len(a.steps), ACCOUNT_STEPS_SHOWN), total, "steps", where)
    if comm:
        notes.append(
            "NCCL: its work in the step, hidden: the part under compute kernels (the rest is "
            "the communication bucket)"
        )
    if cpu:
        notes.append(
            "CPU range: the step's NVTX range on its thread; GPU ends after: when the GPU "
            "finished the step's work after that range ended; (CPU): a child range's CPU time"
        )
    return Section(
        "Per step",
        tuple(notes),
        ("#", "step", "wall", "busy", "idle", *top, *comm, *cpu),
        tuple(rows),
    )


POORLY_MATCHED_RATIO = 0.5


def arrivals_section(a: Arrivals, nccl_ns: dict[str, tuple[int, int]]) -> Section:
    """The ranks' arrivals at the collectives (``nsysprobe.analyses.arrivals``); ``nccl_ns``:
    each rank's NCCL time in its steps, and the part with no compute kernel running."""
    rounds = ROUND_UNITS[a.rounds_basis]
    notes = (
        f"{a.instances} collective instances, matched across the ranks taking part by their "
        f"ends ({a.clock}; "
        f"median end spread {a.median_end_spread_ns / 1e3:.0f} us); rounds: the {rounds} of "
        f"{a.reference}",
        "lateness: its arrival minus the other ranks' median arrival (under "
        f"{a.thresholds['tie_ns'] / 1e3:.0f} us is a tie); latest in: rounds where its "
        "lateness was the largest; held up: its largest lateness in each round, summed; "
        "waited: its NCCL time spent waiting for later ranks (a fix on the late rank removes "
        "it, tuning communication does not); NCCL time: in its steps, exposed: with no "
        "compute kernel running",
        "straggler: lateness per round larger than the other ranks' (one-sided Mann-Whitney "
        f"U, p < {a.alpha_per_rank:.2g}) and holding them up "
        f"{a.thresholds['min_held_up_ratio']:.0%} of the time or more; late at times: that "
        "much, not consistently; slightly late: consistently, less"
        + (
            f"; {a.left_out} clusters of ends were not one instance and are left out"
            if a.left_out
            else ""
        ),
    )
    if a.unaligned:
        notes += (
            "left out, no collective end lined up on a clock of their own (no session start): "
            + ", ".join(a.unaligned),
        )
    poor = [r for r in a.ranks if r.matched_ratio < POORLY_MATCHED_RATIO]
    if poor:
        notes += (
            "lined up at few of its collectives (a clock drifting against the first rank's, "
            "or records lost), so its figures cover part of the capture: "
            + ", ".join(f"{r.label} {r.instances} of {r.operations}" for r in poor),
        )
    rows = []
    for r in a.ranks:
        rows.append(
            (
                r.label,
                str(r.operations),
                ms(nccl_ns[r.label][0]) if r.label in nccl_ns else "-",
                ms(nccl_ns[r.label][1]) if r.label in nccl_ns else "-",
                f"{r.last_rounds}/{r.rounds}",
                f"{r.p_value:.2g}",
                ms(r.held_up_ns),
                pct(r.held_up_ratio),
                ms(r.waited_ns),
                _offset(r.clock_offset_ns),
                r.verdict,
            )
        )
    header = (
        "rank",
        "NCCL ops",
        "NCCL time",
        "exposed",
        "latest in",
        "p",
        "held up",
        "of time",
        "waited",
        "clock offset",
        "verdict",
    )
    return Section("Arrivals at the collectives", notes, header, tuple(rows))


def _offset(ns: int | None) -> str:
    """A clock offset in us; one of over an hour is a report without a session start set
    against one with it (its own clock), not a skew."""
    if ns is None:
        return "-"
    return "own clock" if abs(ns) > 3_600 * 10**9 else f"{ns / 1e3:+,.0f} us"


def _arrivals(report: Report) -> Section | None:
    if report.arrivals is None or report.account is None:
        return None
    from nsysprobe.analyses.arrivals import process_label

    nccl = {
        process_label(a.pid): (a.communication_ns, a.ns("communication"))
        for a in report.account.accounts
        if a.communication_ns
    }
    return arrivals_section(report.arrivals, nccl)


def _step_patterns(report: Report) -> Section | None:
    """The steps of a pattern across steps (autotuning, recompilation, workers born), when
    one was found."""
    sp = report.step_patterns
    if sp is None or (not sp.verdict and sp.births is None):
        return None
    rows = [s for s in sp.steps if s.pattern or s.births]
    return Section(
        "Patterns across steps",
        (
            sp.note,
            "new set: the step's set of kernel names is no earlier step's; syncs, "
            "allocations, module loads: CUDA calls in the step; born: processes started",
            *shown(min(len(rows), STEP_ROWS_SHOWN), len(rows), "steps"),
        ),
        ("step", "kernels", "new set", "syncs", "allocations", "module loads", "born", "idle"),
        tuple(
            (
                s.name,
                f"{s.kernels:,}",
                "yes" if s.new_set else "no",
                f"{s.syncs:,}",
                f"{s.allocations:,}",
                f"{s.module_loads:,}",
                f"{s.births:,}",
                ms(s.idle_ns),
            )
            for s in rows[:STEP_ROWS_SHOWN]
        ),
    )


PYTHON_FRAMES_TITLE = "Python frames behind idle time"


def _python_frames(report: Report) -> Section | None:
    """Per idle bucket, the Python places that held the training thread
    (``analyses/python_frames.py``)."""
    pf = report.python_frames
    if pf is None or not pf.buckets:
        return None
    notes = (
        f"{pf.thread}: {pf.samples:,} Python samples in the steady steps' idle time, one every "
        f"{pf.period_ns / 1e6:,.2f} ms (sampled = samples x that period; measured: the "
        f"bucket's own time)",
        "place: the innermost frame of your code (file:line), after the library function it "
        "called (←); a C call such as gc.collect() shows as the line that called it",
    )
    rows = tuple(
        (
            b.bucket,
            ms(b.bucket_ns),
            f"{ms(b.sampled_ns)} ({b.samples:,})",
            "; ".join(f"{p.place} {ms(p.ns)}" for p in b.places),
        )
        for b in pf.buckets
    )
    return Section(
        PYTHON_FRAMES_TITLE, notes, ("bucket", "measured", "sampled (samples)", "places"), rows
    )


# Each analysis's sections here, in order (``report_sections.SECTIONS``).
SECTIONS = {
    "account": (_account, _account_steps),
    "python_frames": (_python_frames,),
    "step_patterns": (_step_patterns,),
    "arrivals": (_arrivals,),
    "steps": (_steps,),
}
