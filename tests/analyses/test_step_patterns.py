"""Patterns across steps (``analyses/step_patterns.py``) on real captures, every figure held to
SQL over the export (``independent``): the steps' windows, the kernels each ran, the CUDA
calls made in each, the processes forked in each.

    h200_cudnn_autotune   cudnn.benchmark with a new input size every step: no step repeats
                          an earlier step's kernels, hundreds of syncs and workspace
                          malloc/free in each -> autotuning, first
    h200_worker_respawn   DataLoader(num_workers=8, persistent_workers=False), 4 batches an
                          epoch: 8 worker processes forked every 4 steps -> multiprocess_loading
                          naming persistent_workers=True, first
    h200_val_respawn      a loop these rules were not written for: a validation pass every
                          5 steps whose DataLoader forks 4 new workers each time
    every other capture   the steps repeat their kernels and fork nothing: no pattern
"""

from __future__ import annotations

import statistics
from bisect import bisect_right
from collections import Counter

import pytest
from independent import (
    completion_windows,
    final_count,
    gpu_ops,
    inside,
    query,
    startup_count,
    step_ranges,
    tables,
    union,
)

import nsysprobe

from conftest import SAMPLE_TRACES, shared_trace

AUTOTUNE = SAMPLE_TRACES / "h200_cudnn_autotune.sqlite"
RESPAWN = SAMPLE_TRACES / "h200_worker_respawn.sqlite"
VAL_RESPAWN = SAMPLE_TRACES / "h200_val_respawn.sqlite"
SHARED = [
    "nsysai_mfu_2gpu_before_nsys2026.2.sqlite",
    "cs336_h100_train_nsys2023.4.sqlite",
    "centerformer_titanrtx_nsys2022.4.sqlite",
]
REGULAR = sorted(
    p.name
    for p in [*SAMPLE_TRACES.glob("*.sqlite"), *SAMPLE_TRACES.glob("*/*.sqlite")]
    if p not in (AUTOTUNE, RESPAWN, VAL_RESPAWN)
)
PID = "((globalTid >> 24) & 16777215)"
# CUDA calls by SQL GLOB over their names (``cudaMalloc_v3020``).
SYNCS = ("cudaDeviceSynchronize*", "cudaStreamSynchronize*", "cudaEventSynchronize*")
SYNCS += ("cuCtxSynchronize*", "cuStreamSynchronize*", "cuEventSynchronize*")
TIMING = ("cudaDeviceSynchronize*", "cudaEventSynchronize*", "cuCtxSynchronize*")
TIMING += ("cuEventSynchronize*",)
ALLOCS = ("cudaMalloc_*", "cudaFree_*", "cudaMallocAsync*", "cudaFreeAsync*", "cuMemAlloc*")
ALLOCS += ("cuMemFree*", "cuMemCreate*", "cuMemRelease*", "cuMemMap*", "cuMemUnmap*")
LOADS = ("cuModuleLoad*", "cuLibraryLoad*", "cuLink*", "nvrtc*", "nvJitLink*")
FORKS = ("fork", "vfork", "clone", "clone3", "posix_spawn", "posix_spawnp")


def path_of(name):
    return next(SAMPLE_TRACES.glob(f"**/{name}"), None) or shared_trace(name)


def windows(path, pid):
    """(name, start, end, steady) of each step window of ``pid``, by SQL."""
    w = completion_windows(path, step_ranges(path, pid), pid)
    walls = [e - s for _, s, e in w]
    k = startup_count(walls)
    f = final_count(walls, k)
    return [(n, s, e, k <= i < len(w) - f) for i, (n, s, e) in enumerate(w)]


def per_window(w, times) -> list[int]:
    """How many of ``times`` fall in each window [start, end)."""
    starts = [s for _, s, _, _ in w]
    out = [0] * len(w)
    for t in times:
        i = bisect_right(starts, t) - 1
        if i >= 0 and t < w[i][2]:
            out[i] += 1
    return out


def kernel_sets(path, pid, device, w) -> list[frozenset]:
    rows = query(
        path,
        "SELECT start, shortName FROM CUPTI_ACTIVITY_KIND_KERNEL "
        "WHERE ((globalPid >> 24) & 16777215) = ? AND deviceId = ?",
        (pid, device),
    )
    starts = [s for _, s, _, _ in w]
    sets: list[set] = [set() for _ in w]
    for t, name in rows:
        i = bisect_right(starts, t) - 1
        if i >= 0 and t < w[i][2]:
            sets[i].add(name)
    return [frozenset(s) for s in sets]


def call_times(path, pid, globs) -> list[int]:
    where = " OR ".join("s.value GLOB ?" for _ in globs)
    return [
        t
        for (t,) in query(
            path,
            f"SELECT r.start FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = "
            f"r.nameId WHERE {PID.replace('globalTid', 'r.globalTid')} = ? AND ({where})",
            (pid, *globs),
        )
    ]


def forks(path, pid) -> list[tuple[int, str]]:
    if "OSRT_API" not in tables(path):
        return []
    marks = ", ".join("?" for _ in FORKS)
    return query(
        path,
        f"SELECT o.start, s.value FROM OSRT_API o JOIN StringIds s ON s.id = o.nameId "
        f"WHERE {PID.replace('globalTid', 'o.globalTid')} = ? AND s.value IN ({marks})",
        (pid, *FORKS),
    )


def new_sets(sets) -> list[bool]:
    return [all(s != earlier for earlier in sets[:i]) for i, s in enumerate(sets)]


def idle_per_window(path, pid, device, w) -> list[int]:
    ops = gpu_ops(path)[(pid, device)]
    every = union(ops["compute"] + ops["nccl"] + ops["other"])
    return [e - s - inside(every, s, e) for _, s, e, _ in w]


def test_cudnn_autotuning_every_step_is_named_first_with_its_figures():
    report = nsysprobe.analyze(AUTOTUNE)
    a, sp = report.account.main, report.step_patterns
    w = windows(AUTOTUNE, a.pid)
    sets = kernel_sets(AUTOTUNE, a.pid, a.device_id, w)
    syncs = per_window(w, call_times(AUTOTUNE, a.pid, SYNCS))
    timing = per_window(w, call_times(AUTOTUNE, a.pid, TIMING))
    allocs = per_window(w, call_times(AUTOTUNE, a.pid, ALLOCS))
    loads = per_window(w, call_times(AUTOTUNE, a.pid, LOADS))
    new = new_sets(sets)
    # Step by step, as SQL has them.
    assert [(s.name, s.kernels, s.new_set) for s in sp.steps] == [
        (n, len(k), fresh) for (n, *_), k, fresh in zip(w, sets, new)
    ]
    assert [(s.syncs, s.timing_syncs, s.allocations, s.module_loads) for s in sp.steps] == list(
        zip(syncs, timing, allocs, loads)
    )
    steady = [i for i, (*_, ok) in enumerate(w) if ok]
    assert len(steady) == 20 and all(new[i] for i in steady)  # no step repeats its kernels
    assert sp.verdict == "autotuning" and sp.library == "cuDNN"
    assert sp.pattern_steps == tuple(w[i][0] for i in steady)
    assert sp.distinct_kernels == len(frozenset().union(*(sets[i] for i in steady))) == 93
    assert sp.syncs_per_step == statistics.median(syncs[i] for i in steady)
    assert sp.timing_syncs_per_step == statistics.median(timing[i] for i in steady)
    assert sp.allocations_per_step == statistics.median(allocs[i] for i in steady)
    assert min(syncs[i] for i in steady) >= 400 and min(allocs[i] for i in steady) >= 90
    names = Counter(
        n.split("_v")[0]
        for (n,) in query(
            AUTOTUNE,
            "SELECT s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s "
            "ON s.id = r.nameId WHERE s.value GLOB 'cuda*Synchronize*' AND r.start >= ? "
            "AND r.start < ?",
            (w[steady[0]][1], w[steady[-1]][2]),
        )
    )
    assert sp.sync_calls == ", ".join(f"{n} {c:,}" for n, c in names.most_common())

    first = report.recommendations[0]
    assert first.id == "autotuning"
    assert "cudnn.benchmark" in first.reason and "cudnn.benchmark = False" in first.advice
    assert "bucket" in first.advice
    assert first.evidence["distinct_kernels"] == 93
    # Its gain is the idle of its steps (every steady step here), and most of it: the host
    # drove cuDNN's trials while the GPU waited.
    idle = sum(
        x for i, x in enumerate(idle_per_window(AUTOTUNE, a.pid, a.device_id, w)) if i in steady
    )
    assert 0.9 * idle <= first.saved_ns <= idle
    # Nothing else reads the same idle time: the thread's own code is the autotuning's.
    assert "cpu_overhead" not in [r.id for r in report.recommendations]


def test_workers_born_every_epoch_name_persistent_workers_with_their_period_and_cost():
    report = nsysprobe.analyze(RESPAWN)
    a, sp = report.account.main, report.step_patterns
    w = windows(RESPAWN, a.pid)
    born = per_window(w, [t for t, _ in forks(RESPAWN, a.pid)])
    steady = [i for i, (*_, ok) in enumerate(w) if ok]
    gens = [i for i in steady if born[i]]
    assert [w[i][0] for i in gens] == ["Batch 8", "Batch 12", "Batch 16", "Batch 20", "Batch 24"]
    assert [born[i] for i in gens] == [8] * 5
    assert {d for _, d in forks(RESPAWN, a.pid)} == {"fork"}
    # The report names them DataLoader workers.
    (workers,) = query(RESPAWN, "SELECT count(*) FROM PROCESSES WHERE name = 'pt_data_worker'")[0]
    assert workers > 0

    b = sp.births
    assert b.loader and b.births == sum(born) == 40 and b.calls == "fork 40"
    assert [(g.step, g.births) for g in b.generations] == [(w[i][0], born[i]) for i in gens]
    firsts = [min(t for t, _ in forks(RESPAWN, a.pid) if w[i][1] <= t < w[i][2]) for i in gens]
    assert [g.at_ns for g in b.generations] == firsts
    assert b.per_generation == 8 and b.period_steps == 4 and b.regular
    assert {gens[j + 1] - gens[j] for j in range(len(gens) - 1)} == {4}
    # What a generation costs: its step's idle beyond the median of the other steady steps.
    idle = idle_per_window(RESPAWN, a.pid, a.device_id, w)
    others = statistics.median(idle[i] for i in steady if i not in gens)
    cost = sum(max(0, idle[i] - others) for i in gens)
    assert abs(b.cost_ns - cost) <= len(gens)  # the median of ints, rounded
    assert b.cost_ns > 0.8 * sum(idle[i] for i in steady)
    # The forked processes are real: new threads show up in each generation's step, at least
    # one per birth, after the first fork.
    first_seen = query(RESPAWN, "SELECT min(start) FROM OSRT_API GROUP BY globalTid")
    new_threads = per_window(w, [t for (t,) in first_seen])
    assert all(new_threads[i] >= born[i] for i in gens)
    assert sp.verdict == ""  # the kernels repeat: no autotuning

    first = report.recommendations[0]
    assert first.id == "multiprocess_loading"
    assert "persistent_workers=True" in first.title and "persistent_workers=True" in first.advice
    assert "8 at a time every 4 steps" in first.reason
    ev = first.evidence
    assert (ev["births"], ev["generations"], ev["workers_per_generation"]) == (40, 5, 8)
    assert ev["period_steps"] == 4 and ev["recreation_cost_ns"] == b.cost_ns
    # The forks are the loader's: no OS-call rule reads them again.
    ids = [r.id for r in report.recommendations]
    assert "os_runtime_stall" not in ids
    steady_idle = sum(idle[i] for i in steady)
    assert first.saved_ns <= steady_idle


def test_validation_workers_born_every_pass_are_found_and_counted_once():
    """The validation passes are periodic steps, the periodic rule's: the births are found
    with their period, and the step time they cost is not read again as worker_start."""
    report = nsysprobe.analyze(VAL_RESPAWN)
    a, b = report.account.main, report.step_patterns.births
    w = windows(VAL_RESPAWN, a.pid)
    born = per_window(w, [t for t, _ in forks(VAL_RESPAWN, a.pid)])
    gens = [i for i, (*_, ok) in enumerate(w) if ok and born[i]]
    assert [(g.step, g.births) for g in b.generations] == [(w[i][0], born[i]) for i in gens]
    assert b.births == sum(born[i] for i in gens) == 16 and b.per_generation == 4
    assert b.period_steps == 5 and {gens[j + 1] - gens[j] for j in range(len(gens) - 1)} == {5}
    first = report.recommendations[0]
    assert "persistent_workers=True" in first.advice
    if a.periodic is not None and {w[i][0] for i in gens} <= set(a.periodic.steps):
        # The periodic rule's steps: no rule reads their time again.
        assert all(r.evidence.get("worker_start_ns", 0) == 0 for r in report.recommendations)
    else:
        assert first.id == "multiprocess_loading" and first.evidence["period_steps"] == 5


@pytest.mark.parametrize("key_bits", [62, 0])
def test_figures_made_a_block_of_rows_at_a_time_are_those_of_sql(monkeypatch, key_bits):
    """Each table read 97 rows at a time, the (step, kernel) pairs as one integer or, with no
    bits for one, sorted as pairs: every figure still that of SQL."""
    from nsysprobe.analyses import step_patterns

    monkeypatch.setattr(step_patterns, "ROWS_PER_BLOCK", 97)
    monkeypatch.setattr(step_patterns, "PAIR_KEY_BITS", key_bits)
    test_cudnn_autotuning_every_step_is_named_first_with_its_figures()
    test_workers_born_every_epoch_name_persistent_workers_with_their_period_and_cost()
    test_validation_workers_born_every_pass_are_found_and_counted_once()


@pytest.mark.parametrize("name", REGULAR + SHARED)
def test_a_loop_that_repeats_itself_has_no_pattern(name):
    """No capture but the two above autotunes, recompiles or forks in its steps."""
    report = nsysprobe.analyze(path_of(name))
    sp = report.step_patterns
    assert sp is None or (sp.verdict == "" and sp.births is None)
    ids = [r.id for r in report.recommendations]
    assert not {"autotuning", "recompilation"} & set(ids)
    assert all("persistent_workers=True:" not in r.advice for r in report.recommendations)


@pytest.mark.parametrize(
    "name",
    [
        "h200_baseline.sqlite",
        "h200_pinned.sqlite",
        "h200_checkpoint.sqlite",
        "h200_periodic_eval.sqlite",
        "h200_gpu_bound_fp32.sqlite",
        "h200_gpu_bound_tf32.sqlite",
        "h200_gpu_bound_bf16.sqlite",
        "h200_gpu_bound_sync.sqlite",
    ],
)
def test_regular_captures_repeat_their_kernels_by_sql(name):
    """By SQL: at most one steady step after the first runs a kernel set no earlier step ran
    (the first evaluation of h200_periodic_eval), and no process is forked in a step."""
    path = SAMPLE_TRACES / name
    report = nsysprobe.analyze(path)
    a, sp = report.account.main, report.step_patterns
    w = windows(path, a.pid)
    sets = kernel_sets(path, a.pid, a.device_id, w)
    new = new_sets(sets)
    compared = [i for i, (*_, ok) in enumerate(w) if ok and i > 0]
    assert sp.new_set_steps == sum(new[i] for i in compared) <= 1
    assert [s.new_set for s in sp.steps] == new
    assert not any(per_window(w, [t for t, _ in forks(path, a.pid)]))


def test_new_kernel_names_and_a_sync_storm_without_allocations_are_not_autotuning(tmp_path):
    """h200_readback with its kernels renamed every step (shape-specialized names) and 12
    cudaDeviceSynchronize calls added to each step (timers that synchronize): every step runs
    a new kernel set with a storm of syncs, but nothing allocates a workspace, so no candidate
    kernels were timed: no autotuning, and the .item() syncs stay host_sync's."""
    import shutil
    import sqlite3

    path = tmp_path / "renamed_with_syncs.sqlite"
    shutil.copy(SAMPLE_TRACES / "h200_readback.sqlite", path)
    db = sqlite3.connect(path)

    def string_id(text):
        row = db.execute("SELECT id FROM StringIds WHERE value = ?", (text,)).fetchone()
        if row:
            return row[0]
        (new,) = db.execute("SELECT max(id) + 1 FROM StringIds").fetchone()
        db.execute("INSERT INTO StringIds (id, value) VALUES (?, ?)", (new, text))
        return new

    steps = db.execute(
        "SELECT n.start, n.end, n.globalTid FROM NVTX_EVENTS n LEFT JOIN StringIds s "
        "ON s.id = n.textId WHERE n.eventType = 59 AND coalesce(n.text, s.value) GLOB 'step *' "
        "ORDER BY n.start"
    ).fetchall()
    sync = string_id("cudaDeviceSynchronize_v3020")
    for i, (start, end, tid) in enumerate(steps):
        upto = steps[i + 1][0] if i + 1 < len(steps) else end + 10**9
        kernels = db.execute(
            "SELECT k.rowid, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s "
            "ON s.id = k.shortName WHERE k.start >= ? AND k.start < ?",
            (start, upto),
        ).fetchall()
        for rowid, name in kernels:
            new = string_id(f"{name}_L{128 + 8 * i}")
            db.execute(
                "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET shortName = ?, demangledName = ? "
                "WHERE rowid = ?",
                (new, new, rowid),
            )
        for j in range(12):
            at = start + (j + 1) * (end - start) // 14
            db.execute(
                "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, "
                "correlationId, nameId, returnValue) VALUES (?, ?, 1, ?, 0, ?, 0)",
                (at, at + 3000, tid, sync),
            )
    db.commit()
    db.close()
    report = nsysprobe.analyze(path)
    assert report.step_patterns.verdict == ""
    ids = [r.id for r in report.recommendations]
    assert "autotuning" not in ids and ids[0] == "host_sync"
