"""Rules of the input pipeline: whether the trace shows one behind the training thread's
``loading`` and ``loader_wait`` (``input_pipeline``), and the two rules that read those
buckets, ``multiprocess_loading`` (with DataLoader workers born in the capture, their start
too) and ``cpu_optimizer`` (an optimizer step on the host before the upload)."""

from __future__ import annotations

import re

from nsysprobe.analyses.account import Account
from nsysprobe.common.units import counted
from nsysprobe.diagnose.common import (
    Evidence,
    Outcome,
    detail_names,
    ms_text,
    rec,
    share_text,
    top,
)
from nsysprobe.diagnose.patterns import WORKER_START

# What names a training input pipeline (the NVTX ranges the thread's loading ran in), and what
# rules a name out however it reads (model weights, an optimizer, start-up, checkpoints).
INPUT_WORDS = (
    r"(?i)(?<![a-z])(?:batch|data|dataset|loader|input|fetch|samples?|collate|next|read|"
    r"load|preprocess|augment|transform|tokeni[sz]e|decode_(?:image|jpeg|audio))(?![a-z])"
)


NOT_INPUT_WORDS = (
    r"(?i)weight|param|optim|adam|sgd|lamb|grad|model|init|setup|ckpt|checkpoint|save|_w#|\bw#|"
    r"next_token|logit|generat"
)


OPTIMIZER_WORDS = r"(?i)optim|adam|sgd|lamb|lion|shampoo|\bstep\b.*param"


# What names weights streamed to the GPU (the ranges their copies were issued in).
WEIGHT_WORDS = r"(?i)weight|param|offload|layer|_w#|\bw#|shard|quantiz"


def input_pipeline(a: Account) -> bool:
    """Whether the trace shows a training input pipeline behind the thread's ``loading`` and
    ``loader_wait``: not when the loading, longer than the waits, ran mostly in ranges named
    for weights or an optimizer; else DataLoader worker processes; else the ranges it ran in,
    by time, mostly named for input (``INPUT_WORDS``, none of ``NOT_INPUT_WORDS``) and not
    mostly for something else; else, with neither, the step's input copy: every steady step
    uploads, from a range not named for weights or an optimizer."""
    b = a.bucket("loading")
    details = b.details if b else ()
    named = sum(d.ns for d in details)
    inputs = sum(d.ns for d in details if _input_name(d.name))
    other = sum(d.ns for d in details if _other_name(d.name))
    elsewhere = named and 2 * other >= named
    # The thread's own code before its uploads, mostly named for weights or an optimizer and
    # more than its waits for workers: not the input, workers in the report or not.
    if elsewhere and a.ns("loading") >= a.ns("loader_wait"):
        return False
    if a.loader_processes:
        return True
    if named and 2 * inputs >= named:
        return True
    if elsewhere:
        return False
    where = a.copy_ranges[0].name if a.copy_ranges else ""
    return bool(a.step_count and a.htod.steps_with_copy >= a.step_count and not _other_name(where))


def _pipeline_evidence(a: Account) -> str:
    if a.loader_processes:
        return f"{a.loader_processes} DataLoader worker processes"
    b = a.bucket("loading")
    inputs = [d.name for d in (b.details if b else ()) if _input_name(d.name)]
    if inputs:
        return "NVTX ranges named for input: " + ", ".join(inputs[:3])
    return f"an input copy in each of the {a.step_count} steps"


def _other_name(name: str) -> bool:
    """Named for model weights, an optimizer, start-up or checkpoints: not the input."""
    return bool(re.search(NOT_INPUT_WORDS, name) or re.search(WEIGHT_WORDS, name))


def _input_name(name: str) -> bool:
    return bool(re.search(INPUT_WORDS, name)) and not _other_name(name)


def _host_optimizer(a: Account) -> bool:
    """The thread's code before its uploads is an optimizer step on the host (named so)."""
    names = detail_names(a, "loading", "loader_wait")
    return not input_pipeline(a) and bool(names) and bool(re.search(OPTIMIZER_WORDS, names[0]))


def loading_has_a_rule(a: Account) -> bool:
    """``loading`` and ``loader_wait`` are read by multiprocess_loading or cpu_optimizer;
    else the thread's own code and OS calls take them (cpu_overhead, os_runtime_stall)."""
    return input_pipeline(a) or _host_optimizer(a)


def loading(ev: Evidence, a: Account) -> Outcome | None:
    if not input_pipeline(a):
        return None  # host work before an upload that is not the step's input: see host.cpu
    if (respawned := _respawned(ev, a)) is not None:
        return respawned
    own, wait = a.ns("loading"), a.ns("loader_wait")
    names = ("loading", "loader_wait")
    idle = (
        f"the GPU sat idle {ms_text(own + wait)} ({share_text(a, *names)} of the step time) while"
    )
    if own >= wait:
        title = "Load batches in worker processes"
        reason = f"{idle} the training thread produced batches itself ({top(a, 'loading')})"
        advice = (
            "load batches in DataLoader worker processes: DataLoader(..., num_workers=N) with N "
            "up to the CPU cores per GPU, persistent_workers=True"
        )
    else:
        title = "Load batches faster: the training thread waits for the loader"
        workers = (
            counted(a.loader_processes, "loader worker process", "loader worker processes")
            if a.loader_processes
            else "the loader"
        )
        reason = (
            f"{idle} the training thread waited for batches from {workers} "
            f"({top(a, 'loader_wait')})"
        )
        advice = (
            "the workers cannot keep up: raise num_workers (and prefetch_factor), or make "
            "per-sample work cheaper (decode once, cache, move augmentation to the GPU)"
        )
    return rec(
        a,
        title,
        names,
        reason,
        advice,
        loader_processes=a.loader_processes,
        input_pipeline=_pipeline_evidence(a),
        bound="the loading fix removes at most this idle time (a loader that keeps up)",
    )


def _respawned(ev: Evidence, a: Account) -> Outcome | None:
    """multiprocess_loading when DataLoader workers are born inside the capture: the loading
    fix with ``persistent_workers=True`` first, and the idle of starting them too."""
    sp = ev.step_patterns
    b = sp.births if sp is not None else None
    if b is None or not b.loader:
        return None
    names = ("loading", "loader_wait", WORKER_START)
    gens = len(b.generations)
    every = f"every {b.period_steps} steps" if gens > 1 else "once"
    steps = [g.step for g in b.generations]
    shown = ", ".join(steps[:5]) + (", ..." if gens > 5 else "")
    idle = sum(a.ns(n) for n in names)
    reason = (
        f"{b.births:,} DataLoader worker processes were born inside the capture, "
        f"{b.per_generation} at a time {every} ({counted(gens, 'generation')}: {shown}; "
        f"{b.calls}): those steps sat idle {ms_text(b.cost_ns)} beyond the other steps' median, "
        f"{ms_text(b.input_wait_ns)} of it waiting for the new workers' batches; the GPU sat idle "
        f"{ms_text(idle)} ({share_text(a, *names)} of the step time) while the training thread "
        f"started workers ({ms_text(a.ns(WORKER_START))}: {top(a, WORKER_START)}) or made or "
        f"waited for batches ({top(a, 'loading', 'loader_wait')})"
    )
    advice = (
        f"DataLoader(..., persistent_workers=True): every new iterator (each epoch or "
        f"evaluation pass) starts "
        f"{b.per_generation} worker processes and waits for their first batches; kept alive, "
        "they start once (and a prefetch_factor covering an epoch's first batches hides the "
        "rest); if the thread still waits, raise num_workers"
    )
    return rec(
        a,
        "Keep the DataLoader's workers alive: persistent_workers=True",
        names,
        reason,
        advice,
        loader_processes=a.loader_processes,
        input_pipeline=_pipeline_evidence(a),
        births=b.births,
        generations=gens,
        workers_per_generation=b.per_generation,
        period_steps=b.period_steps,
        birth_steps=", ".join(steps),
        recreation_cost_ns=b.cost_ns,
        bound="persistent workers remove at most the idle of the steps they were born in "
        "beyond the other steps' (worker_start: forks and host work) and, with a loader that "
        "keeps up, the loading and loader wait",
    )


def cpu_optimizer(ev: Evidence, a: Account) -> Outcome | None:
    if not _host_optimizer(a):
        return None
    names = ("loading", "loader_wait")
    where = detail_names(a, *names)[0]
    return rec(
        a,
        "Keep the optimizer on the GPU, or overlap its offloaded step",
        names,
        (
            f"the GPU sat idle {ms_text(a.ns('loading') + a.ns('loader_wait'))} "
            f"({share_text(a, *names)} of the step time) while the training thread ran an "
            f"optimizer step on the host before uploading the weights ({top(a, *names)})"
        ),
        (
            f"run '{where}' on the GPU (torch.optim.AdamW(..., fused=True) on the model's own "
            "parameters); where memory forces an offloaded optimizer, overlap it: the CPU step "
            "of one bucket of parameters while the GPU computes the next (ZeRO-Offload), with "
            "pinned buffers and non_blocking copies"
        ),
        range=where,
        bound="at most this idle time: the step's GPU work stays",
    )
