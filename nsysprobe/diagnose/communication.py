"""Rules of communication: a rank the others wait for at the collectives (``late_rank``,
from a report holding every rank), NCCL work that compute can hide
(``exposed_communication``), and the rest of it (``communication_bound``)."""

from __future__ import annotations

from nsysprobe.analyses.account import Account
from nsysprobe.analyses.arrivals import process_label, rank_accounts
from nsysprobe.analyses.late_causes import late_causes
from nsysprobe.diagnose.common import (
    Evidence,
    Outcome,
    ms_text,
    ratio,
    rec,
    share_text,
)


def _waited(ev: Evidence, a: Account) -> tuple[int, list]:
    """The main account's NCCL time spent waiting for a straggler, and the stragglers."""
    arr = ev.arrivals
    me = arr.rank(process_label(a.pid)) if arr else None
    if me is None:
        return 0, []
    late = [r for r in arr.ranks if r.verdict == "straggler" and r.label != me.label]
    return (min(me.waited_ns, a.ns("communication")) if late else 0), late


def late_rank(ev: Evidence, a: Account) -> Outcome | None:
    waited, late = _waited(ev, a)
    if not waited:
        return None
    worst = max(late, key=lambda r: r.held_up_ns)
    ranked = rank_accounts(ev.accounts)
    theirs = next((o for o in ranked.values() if process_label(o.pid) == worst.label), None)
    others = [o for o in ranked.values() if o is not theirs]
    causes = ()
    if theirs is not None and theirs.step_count:
        per_step = {b.name: b.total_ns / theirs.step_count for b in theirs.buckets}
        held = worst.held_up_ratio * theirs.wall_ns / theirs.step_count
        causes = late_causes(
            per_step,
            [
                {b.name: b.total_ns / o.step_count for b in o.buckets}
                for o in others
                if o.step_count
            ],
            held,
        )
    why = (
        f"{worst.label} is late: {causes[0].what} ({ms_text(causes[0].ns_per_step)} per step "
        f"vs the others' {ms_text(causes[0].others_ns_per_step)})"
        if causes
        else f"{worst.label}'s own account shows no bucket above the other ranks'"
    )
    return rec(
        a,
        f"Fix the rank the others wait for: {worst.label}",
        ("communication",),
        (
            f"this rank's NCCL kernels waited {ms_text(waited)} ({ratio(waited, a.wall_ns):.0%} of "
            f"the step time) for {worst.label}, the latest at the collectives in "
            f"{worst.last_rounds} of {worst.rounds} rounds; {why}"
        ),
        (
            (f"on {worst.label}: see {causes[0].recommendation}; " if causes else "")
            + "nsysprobe analyze --ranks shows every rank's account side by side; tuning "
            "communication does not remove a wait for a late rank"
        ),
        saved=waited,
        late_rank=worst.label,
        late_cause=causes[0].recommendation if causes else "",
    )


def communication(ev: Evidence, a: Account) -> Outcome | None:
    waited, late = _waited(ev, a)
    each = "; ".join(
        f"{c.name} x{c.count}: {ms_text(c.exposed_ns)} exposed of {ms_text(c.total_ns)}"
        for c in a.collectives[:3]
    )
    wait_note = (
        f"; {ms_text(waited)} of it waiting for {late[0].label} (see late_rank)" if waited else ""
    )
    hideable = min(a.ns("communication") - waited, a.hideable_ns.get("communication", 0))
    return rec(
        a,
        "Hide communication behind compute",
        ("communication",),
        (
            f"NCCL work ran {ms_text(a.ns('communication'))} with no compute kernel running "
            f"({share_text(a, 'communication')} of the step time; "
            f"{ms_text(a.communication_overlapped_ns)} of {ms_text(a.communication_ns)} overlapped)"
            + (f": {each}" if each else "")
            + wait_note
        ),
        (
            "DDP: overlap the all-reduce with backward (the default; keep find_unused_parameters "
            "off), tune bucket_cap_mb (larger buckets, fewer collectives), "
            "gradient_as_bucket_view=True, no_sync() for gradient-accumulation steps; FSDP: "
            "forward_prefetch/backward_prefetch=BACKWARD_PRE, limit_all_gathers; "
            "fewer, larger collectives. Part of the exposed time can be waiting for a slower "
            "rank: nsysprobe analyze on every rank's report names the rank that arrives last"
        ),
        saved=hideable,
        bound="overlap hides communication only under compute: per step, the lesser of the "
        "exposed communication and the compute not already under it",
        communication_ns=a.communication_ns,
        communication_overlapped_ns=a.communication_overlapped_ns,
        collectives=each,
        waiting_for_late_rank_ns=waited,
    )


def communication_bound(ev: Evidence, a: Account) -> Outcome | None:
    waited, _ = _waited(ev, a)
    exposed = a.ns("communication") - waited
    rest = exposed - min(exposed, a.hideable_ns.get("communication", 0))
    if rest <= 0:
        return None
    return rec(
        a,
        "The job is communication-bound: move fewer bytes per sample",
        ("communication",),
        (
            f"NCCL work ran {ms_text(exposed)} with no compute kernel running "
            f"({share_text(a, 'communication')} of the step time) against "
            f"{ms_text(a.ns('compute'))} of compute: overlap can hide no more than the compute, "
            f"so {ms_text(rest)} is the "
            "communication's own"
        ),
        (
            "fewer bytes per sample: a larger batch per step (or gradient accumulation with "
            "no_sync()), bf16 or compressed gradients (DDP comm hooks: bf16_compress_hook, "
            "PowerSGD), fewer all-gathers (FSDP SHARD_GRAD_OP or HYBRID_SHARD), a faster "
            "interconnect"
        ),
        saved=rest,
        bound="communication removed saves its exposed time beyond what compute can hide",
    )
