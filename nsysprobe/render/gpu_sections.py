"""The sections of the GPU's work and idle time: the devices, the idle gaps and the longest
of them, transfers, copy/compute overlap, OS-runtime calls and the threads' CPU placement."""

from __future__ import annotations

from nsysprobe.common.units import counted, size
from nsysprobe.numa.cpulist import format_cpulist as cpulist
from nsysprobe.render.sections import Section, ms, pct, shown
from nsysprobe.report.analyze import Report

CAUSES_SHOWN = 10


LONGEST_SHOWN = 8


OSRT_SHOWN = 15


def _devices(report: Report) -> Section | None:
    g = report.gaps
    if g is None:
        return None
    return Section(
        "GPU activity",
        (
            "busy = union of kernels, memcpy and memset over the span, first to last GPU "
            "operation (the step account's busy share is of its steady steps); gaps: the step "
            "account's idle gaps on the device",
        ),
        (
            "device",
            "kernels",
            "memcpy",
            "memset",
            "busy",
            "kernel busy",
            "span",
            "busy % of span",
            f"gaps > {g.min_gap_ns / 1e6:g} ms",
            "gap time",
        ),
        tuple(
            (
                str(d.device_id),
                f"{d.kernel_count:,}",
                f"{d.memcpy_count:,}",
                f"{d.memset_count:,}",
                ms(d.busy_ns),
                ms(d.kernel_busy_ns),
                ms(d.span_ns),
                pct(d.busy_ratio),
                f"{d.gap_count:,}",
                ms(d.gap_ns),
            )
            for d in g.devices
        ),
    )


def _gaps(report: Report) -> Section | None:
    g = report.gaps
    if g is None or not g.gap_count:
        return None
    processes = len({x.pid for x in g.longest})
    # Processes sharing a GPU each count their own gaps, in their own accounts' words.
    whose = f" in {processes} processes' accounts" if processes > 1 else ""
    return Section(
        f"Idle gaps: the step account's idle stretches over {g.min_gap_ns / 1e6:g} ms "
        f"({counted(g.gap_count, 'gap')}{whose}, {ms(g.gap_ns)} of {ms(g.idle_ns)} idle)",
        (
            "cause: the step account's (nsysprobe explain account), named as it names them; "
            "--min-gap-ms chooses what is listed here, not the causes or the verdict",
            *shown(min(len(g.by_name), CAUSES_SHOWN), len(g.by_name), "causes"),
        ),
        ("cause", "named", "idle", "share"),
        tuple(
            (c.cause, c.name or "-", ms(c.idle_ns), pct(c.share_ratio))
            for c in g.by_name[:CAUSES_SHOWN]
        ),
    )


def _longest_gaps(report: Report) -> Section | None:
    g = report.gaps
    if g is None or not g.longest:
        return None

    def top(overlaps) -> str:
        return ", ".join(f"{o.name} {ms(o.overlap_ns)}" for o in overlaps[:3]) or "-"

    listed = min(len(g.longest), LONGEST_SHOWN)
    notes = ()
    if listed < g.gap_count:
        notes = (
            f"the {listed} longest of {g.gap_count:,} gaps shown; the JSON has the "
            f"{len(g.longest)} longest",
        )
    # With several processes' gaps listed, each row says whose (one stretch may be listed
    # once for each process that idled in it).
    pid = len({x.pid for x in g.longest}) > 1
    return Section(
        "Longest gaps",
        notes,
        ("device", *(("process",) if pid else ()), "at", "length", "cause", "NVTX open")
        + ("OS runtime", "CUDA API"),
        tuple(
            (
                str(x.device_id),
                *((str(x.pid),) if pid else ()),
                f"{x.start_ns / 1e9:,.4f} s",
                ms(x.duration_ns),
                x.cause if x.name is None else f"{x.cause}: {x.name}",
                top(x.nvtx),
                top(x.osrt),
                top(x.cuda_api),
            )
            for x in g.longest[:LONGEST_SHOWN]
        ),
    )


def _transfers(report: Report) -> Section | None:
    t = report.transfers
    if t is None or not t.memcpy_count:
        return None
    return Section(
        "Transfers",
        (
            f"memcpy busy {ms(t.memcpy_busy_ns)} vs kernel busy {ms(t.kernel_busy_ns)} "
            f"(unions): ratio {t.memcpy_kernel_ratio:.2f}",
            f"{t.sync_copy_count:,} copies blocked the CPU thread (synchronous API or pageable "
            f"source), {ms(t.sync_copy_ns)}",
            "time is the sum of copy durations",
        ),
        ("kind", "from", "to", "count", "bytes", "time", "GB/s"),
        tuple(
            (
                r.copy_kind,
                r.src_kind,
                r.dst_kind,
                f"{r.count:,}",
                size(r.bytes),
                ms(r.duration_ns),
                f"{r.gbps:,.1f}",
            )
            for r in t.rows
        ),
    )


def _overlap(report: Report) -> Section | None:
    o = report.overlap
    if o is None or not o.htod_ns:
        return None
    return Section(
        "Copy/compute overlap",
        ("HtoD time as a union; overlapped = while a kernel ran on the same device",),
        ("device", "HtoD", "overlapped", "exposed", "overlap %"),
        tuple(
            (
                str(d.device_id),
                ms(d.htod_ns),
                ms(d.overlapped_ns),
                ms(d.exposed_ns),
                pct(d.overlap_ratio),
            )
            for d in o.devices
        ),
    )


def _osrt(report: Report) -> Section | None:
    o = report.osrt
    if o is None or not o.rows:
        return None
    pairs = max(o.pairs, len(o.rows))
    listed = min(len(o.rows), OSRT_SHOWN)
    cut = ()
    if listed < pairs:
        cut = (
            f"{listed} of {pairs:,} (function, thread) pairs shown, most time in gaps first; "
            + (
                "all are in the JSON"
                if len(o.rows) == pairs
                else f"the JSON has the first {len(o.rows)} (and every function's totals)"
            ),
        )
    return Section(
        "OS runtime",
        ("total is the sum of call durations; in gaps = overlap with GPU idle gaps", *cut),
        ("function", "thread", "count", "total", "longest", "in gaps"),
        tuple(
            (r.function, r.thread, f"{r.count:,}", ms(r.total_ns), ms(r.max_ns), ms(r.in_gap_ns))
            for r in o.rows[:OSRT_SHOWN]
        ),
    )


def _placement(report: Report) -> Section | None:
    p = report.placement
    if p is None:
        return None
    return Section(
        "CPU placement",
        (p.note, "run time is the sum of scheduled-in time (--cpuctxsw)"),
        ("role", "threads", "run time", "CPUs", "nodes", "on GPU's node", "verdict"),
        tuple(
            (
                r.role,
                str(r.threads),
                ms(r.run_ns),
                cpulist(r.cpus),
                ", ".join(f"{n.node}: {pct(n.share_ratio)}" for n in r.nodes),
                "-" if r.gpu_node_ratio is None else pct(r.gpu_node_ratio),
                r.verdict,
            )
            for r in p.roles
        ),
    )


# Each analysis's sections here, in order (``report_sections.SECTIONS``).
SECTIONS = {
    "gaps": (_devices, _gaps, _longest_gaps),
    "transfers": (_transfers,),
    "overlap": (_overlap,),
    "osrt": (_osrt,),
    "placement": (_placement,),
    "kernels": (),
}
