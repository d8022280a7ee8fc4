"""Periodic steps: an event every N steps (a checkpoint, an evaluation) found, named and
costed as such, and its steps' excess kept out of the other rules' figures.

The periodic steps are held to what the workloads did (``workloads/checkpoint.py`` saves in
the steps where ``(index + 1) % 4 == 0``, ``workloads/periodic_eval.py`` evaluates every 5th)
found by SQL: the step ranges that hold a 'save checkpoint' or 'evaluate' range. Their cost is
held to the windows and GPU work by SQL and plain Python (``independent``)."""

from __future__ import annotations

import numpy as np
import pytest
from independent import completion_windows, gpu_pids, gpu_work, inside, step_ranges, union

import nsysprobe
from nsysprobe.analyses.windows import PERIODIC_RATIO, periodic_steps

from conftest import SAMPLE_TRACES


def _walls(*pattern):
    return np.array(pattern, dtype=np.int64)


@pytest.mark.parametrize(
    ("walls", "expected"),
    [
        # every 4th step, from the third: 10 10 50 10 | 10 10 50 10 | ...
        ([10, 10, 50, 10] * 5, (4, [2, 6, 10, 14, 18])),
        # the event spills into the step after it: one occurrence, both steps its own
        ([10, 10, 50, 30, 10] * 4, (5, [2, 3, 7, 8, 12, 13, 17, 18])),
        # every other step
        ([10, 40] * 6, (2, [1, 3, 5, 7, 9, 11])),
        # every 4th, once skipped (among five): an evaluation skipped once
        ([10, 10, 50, 10] * 2 + [10] * 4 + [10, 10, 50, 10] * 2, (4, [2, 6, 14, 18])),
    ],
)
def test_periodic_steps_are_found_with_their_period(walls, expected):
    period, idx = periodic_steps(_walls(*walls))
    assert (period, idx.tolist()) == (expected[0], expected[1])


@pytest.mark.parametrize(
    "walls",
    [
        [10] * 20,  # nothing long
        [10, 10, 50, 10] * 2 + [10] * 4,  # two occurrences, then none where a third was due
        [10, 50, 10, 10, 50, 10, 10, 10, 50, 10, 10, 50],  # 3 apart, then 4: no period
        [10, 10, 10, 10, 10, 50, 10, 10, 50, 10, 10, 50],  # none in the first period
        [10, 50, 50, 50] * 4,  # long three steps in four: the typical step is the long one
        [10, 10, 14, 10] * 5,  # 1.4x a typical step: noise, not an event
        [10, 10, 50, 10] + [10] * 4 + [10, 10, 50, 10] * 2 + [10] * 4,  # two skipped
        [10, 10, 50, 10, 10, 10, 10, 10, 10, 10, 50, 10, 10, 10, 50],  # 8 then 4: one skip of 3
    ],
)
def test_no_period_where_there_is_none(walls):
    assert periodic_steps(_walls(*walls)) is None


def _independent(path, inner: str):
    """Per steady step (all of them here: no start-up in these captures, by the test of
    ``startup_count`` elsewhere): its name, wall and idle time, and whether its CPU range holds
    the range ``inner``; by SQL."""
    (pid,) = gpu_pids(path)
    ranges = step_ranges(path, pid)
    windows = completion_windows(path, ranges, pid)
    s, e = gpu_work(path, pid)
    busy = union(list(zip(s.tolist(), e.tolist())))
    from independent import nvtx_ranges

    marks = [a for a, _ in nvtx_ranges(path, inner, pid)]
    out = []
    for (name, lo, hi), (_, cpu_s, cpu_e) in zip(windows, ranges):
        holds = any(cpu_s <= m < cpu_e for m in marks)
        out.append((name, hi - lo, hi - lo - inside(busy, lo, hi), holds))
    return out


CASES = {
    "h200_checkpoint.sqlite": ("save checkpoint", 4),
    "h200_checkpoint_python.sqlite": ("save checkpoint", 4),
    "h200_periodic_eval.sqlite": ("evaluate", 5),
    "h200_weight_histograms.sqlite": ("log metrics", 4),
    "h200_val_respawn.sqlite": ("validate", 5),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_periodic_event_is_the_first_recommendation_with_its_period_range_and_cost(name):
    inner, every = CASES[name]
    path = SAMPLE_TRACES / name
    steps = _independent(path, inner)
    chosen = [n for n, _, _, holds in steps if holds]
    # An occurrence may spill into the step after it: that step is long too.
    typical = np.percentile([w for _, w, _, _ in steps], 25)
    steps = [
        (n, w, i, holds or (k > 0 and steps[k - 1][3] and w > PERIODIC_RATIO * typical))
        for k, (n, w, i, holds) in enumerate(steps)
    ]
    report = nsysprobe.analyze(path)
    first = report.recommendations[0]
    assert first.id == "periodic_step"
    ev = first.evidence
    assert ev["occurrences"].split(", ") == chosen
    assert ev["periodic_steps"].split(", ") == [n for n, _, _, holds in steps if holds]
    assert ev["period_steps"] == every
    assert ev["range"] == inner and f"'{inner}'" in first.reason
    assert f"every {every} steps" in first.reason
    # Its cost: the periodic steps' wall and idle time beyond the other steps' mean.
    mine = [(w, i) for n, w, i, holds in steps if holds]
    rest = [(w, i) for n, w, i, holds in steps if not holds]
    wall_excess = sum(w for w, _ in mine) - len(mine) * np.mean([w for w, _ in rest])
    idle_excess = sum(i for _, i in mine) - len(mine) * np.mean([i for _, i in rest])
    assert ev["excess_ns"] == pytest.approx(wall_excess, rel=1e-6)
    assert ev["excess_idle_ns"] == pytest.approx(idle_excess, rel=1e-6)
    assert first.saved_ns == pytest.approx(max(idle_excess, wall_excess / 2), rel=1e-6)
    assert ev["typical_step_ns"] == int(np.median([w for w, _ in rest]))


def test_the_other_rules_do_not_count_the_periodic_steps_excess():
    """h200_checkpoint's OS calls (fopen, writev, fclose of torch.save) run only in its
    checkpoint steps: they are the checkpoint's, and no other rule claims their time; what
    the other rules claim is at most the idle time of the other steps, scaled to all."""
    path = SAMPLE_TRACES / "h200_checkpoint.sqlite"
    steps = _independent(path, "save checkpoint")
    rest = [i for _, _, i, holds in steps if not holds]
    idle_as_if_typical = np.mean(rest) * len(steps)
    recs = nsysprobe.analyze(path).recommendations
    others = [r for r in recs if r.id not in ("periodic_step", "startup_in_capture")]
    assert "os_runtime_stall" not in [r.id for r in recs]
    assert sum(r.saved_ns for r in others) <= idle_as_if_typical


def test_an_input_pipeline_rhythm_is_not_a_periodic_event():
    """h200_worker_respawn's DataLoader starts new workers every 4-step epoch: every 4th step
    is long (by its walls), but waiting for the loader: the input's rules keep that time."""
    path = SAMPLE_TRACES / "h200_worker_respawn.sqlite"
    report = nsysprobe.analyze(path)
    walls = np.array([s.wall_ns for s in report.account.main.steps])
    long = np.flatnonzero(walls > PERIODIC_RATIO * np.percentile(walls, 25))
    assert len(long) >= 4 and set(np.diff(long[long > long[0] + 1]).tolist()) == {4}
    ids = [r.id for r in report.recommendations]
    assert "periodic_step" not in ids
    assert ids[0] == "multiprocess_loading"


ALL = sorted(p.name for p in SAMPLE_TRACES.glob("*.sqlite")) + sorted(
    f"h200_ladder/{p.name}" for p in (SAMPLE_TRACES / "h200_ladder").glob("*.sqlite")
)


@pytest.mark.parametrize("name", [n for n in ALL if n not in CASES])
def test_no_periodic_event_in_the_other_captures(name):
    recs = nsysprobe.analyze(SAMPLE_TRACES / name).recommendations
    assert "periodic_step" not in [r.id for r in recs]


def _named_ranges(db, like: str) -> list[tuple[int, int, int]]:
    return db.execute(
        "SELECT n.rowid, n.start, n.end FROM NVTX_EVENTS n LEFT JOIN StringIds s "
        "ON s.id = n.textId WHERE n.eventType = 59 AND coalesce(n.text, s.value) GLOB ? "
        "ORDER BY n.start",
        (like,),
    ).fetchall()


@pytest.mark.parametrize(
    ("name", "inner", "every"),
    [
        ("h200_checkpoint.sqlite", "save checkpoint", 4),
        ("h200_weight_histograms.sqlite", "log metrics", 4),
    ],
)
def test_an_event_after_the_step_range_is_still_the_step_s_event(name, inner, every, tmp_path):
    """``with nvtx.annotate('step'): train()`` then ``if i % N == 0: save()``: each step's
    range ends where its 'train' ends, the event runs between steps. The numbered step range
    stays the steps (not the event's range, which covers more of the loop), and the event is
    found with its period and named by its range."""
    import shutil
    import sqlite3

    path = tmp_path / name
    shutil.copy(SAMPLE_TRACES / name, path)
    db = sqlite3.connect(path)
    trains = _named_ranges(db, "train")
    for rowid, start, end in _named_ranges(db, "step [0-9]*"):
        train_end = next(e for _, s, e in trains if start <= s < end)
        db.execute("UPDATE NVTX_EVENTS SET end = ? WHERE rowid = ?", (train_end + 1000, rowid))
    db.commit()
    db.close()
    report = nsysprobe.analyze(path)
    assert report.steps.range_pattern == "step #"
    first = report.recommendations[0]
    assert first.id == "periodic_step"
    assert first.evidence["period_steps"] == every and first.evidence["range"] == inner


def test_steps_of_one_name_are_told_apart_by_their_place(tmp_path):
    """Step ranges all named 'train_step' (no number): each step is still its own, so the
    autotuning steps' idle is moved apart step by step, as with numbered steps."""
    import shutil
    import sqlite3

    name = "h200_cudnn_autotune.sqlite"
    path = tmp_path / name
    shutil.copy(SAMPLE_TRACES / name, path)
    db = sqlite3.connect(path)
    db.execute(
        "INSERT INTO StringIds (id, value) "
        "VALUES ((SELECT max(id) + 1 FROM StringIds), 'train_step')"
    )
    (sid,) = db.execute("SELECT id FROM StringIds WHERE value = 'train_step'").fetchone()
    for rowid, _, _ in _named_ranges(db, "step [0-9]*"):
        db.execute("UPDATE NVTX_EVENTS SET text = NULL, textId = ? WHERE rowid = ?", (sid, rowid))
    db.commit()
    db.close()
    numbered = nsysprobe.analyze(SAMPLE_TRACES / name).recommendations[0]
    first = nsysprobe.analyze(path).recommendations[0]
    assert first.id == numbered.id == "autotuning"
    assert first.saved_ns == numbered.saved_ns
