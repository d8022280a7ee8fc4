"""The optimization-ladder workloads, run for real on the CPU with tiny images.

Each rung runs as a subprocess the way a user runs it; its NVTX ranges are checked through a
recording stand-in for the ``nvtx`` package and, where a working nsys exists, in a real capture.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from nsysprobe.capture.locate import find_nsys

REPO = Path(__file__).resolve().parents[2]
WORKLOADS = REPO / "workloads"
RECORDER = Path(__file__).resolve().parent / "recorder"
TINY = ["--image-size", "32", "--batch-size", "4", "--steps", "2", "--warmup", "1"]
WORKER_RUNGS = ["multiworker", "pinned", "streams", "prefetch"]
RUNGS = ["baseline", *WORKER_RUNGS, "cached"]
BLUE, RED, YELLOW, GREEN = 0x0000FF, 0xFF0000, 0xFFFF00, 0x008000
STEPS_PER_S = re.compile(r"steps_per_s=(\d+\.\d{3})")


@pytest.fixture(scope="module")
def ladder():
    spec = importlib.util.spec_from_file_location("ladder", WORKLOADS / "ladder.py")
    module = importlib.util.module_from_spec(spec)
    # Its dataclasses look their module up by name while they are being made.
    sys.modules["ladder"] = module
    spec.loader.exec_module(module)
    return module


def run_rung(rung: str, *args: str, env: dict[str, str] | None = None, prefix=()) -> str:
    """Run a rung's script with TINY sizes on the CPU; return its stdout, failing on exit != 0."""
    workers = ["--workers", "2"] if rung in WORKER_RUNGS else []
    command = [*prefix, sys.executable, str(WORKLOADS / f"{rung}.py"), *TINY, *workers, *args]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})}
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def step(number: int, *children) -> tuple:
    return (f"Batch {number}", BLUE, list(children))


GET, COPY, COMPUTE = ("get batch", RED, []), ("copy batch", YELLOW, []), ("Compute", GREEN, [])

# warm-up 1 + steps 2 = three steps; rungs that look one batch ahead fetch batch 0 first.
EXPECTED_RANGES = {
    "baseline": [step(i, GET, COPY, COMPUTE) for i in range(3)],
    "multiworker": [step(i, GET, COPY, COMPUTE) for i in range(3)],
    "pinned": [step(i, GET, COPY, COMPUTE) for i in range(3)],
    "streams": [step(0, GET, COPY, GET, COPY, COMPUTE)]
    + [step(i, GET, COPY, COMPUTE) for i in (1, 2)],
    "prefetch": [GET, COPY] + [step(i, GET, COPY, COMPUTE) for i in range(3)],
    "cached": [GET, COPY] + [step(i, COMPUTE) for i in range(3)],
}


def range_tree(record: Path) -> list[tuple]:
    """Nested (name, color, children) ranges from the recorder's push/pop lines."""
    roots: list[tuple] = []
    open_children = [roots]
    for line in record.read_text().splitlines():
        event = json.loads(line)
        if event[0] == "push":
            node = (event[1], event[2], [])
            open_children[-1].append(node)
            open_children.append(node[2])
        else:
            open_children.pop()
    assert open_children == [roots], "a range was pushed and never popped"
    return roots


def check_output(stdout: str, rung: str) -> None:
    """The config line first and a positive steps/s line last."""
    lines = stdout.strip().splitlines()
    workers = 2 if rung in WORKER_RUNGS else 0
    assert lines[0] == (
        f"config rung={rung} device=cpu batch_size=4 workers={workers} image_size=32 "
        "steps=2 warmup=1 pin_memory=False"
    )
    match = STEPS_PER_S.fullmatch(lines[-1])
    assert match is not None, lines[-1]
    assert float(match.group(1)) > 0


@pytest.mark.parametrize("rung", RUNGS)
def test_rung_runs_and_emits_nested_nvtx_ranges(rung, tmp_path):
    record = tmp_path / "nvtx.jsonl"
    path = os.pathsep.join([str(RECORDER), os.environ.get("PYTHONPATH", "")])
    stdout = run_rung(rung, "--device", "cpu", env={"PYTHONPATH": path, "NVTX_RECORD": str(record)})
    check_output(stdout, rung)
    assert range_tree(record) == EXPECTED_RANGES[rung]


def test_rung_runs_with_the_real_nvtx_package():
    check_output(run_rung("streams", "--device", "cpu"), "streams")


@pytest.mark.parametrize("rung", RUNGS)
def test_feed_delivers_the_loaders_batches_in_order(ladder, rung):
    import torch

    loader = torch.utils.data.DataLoader(
        ladder.SyntheticImages(length=6, image_size=8, seed=0), batch_size=2
    )
    expected = [images for images, _ in loader]
    feed = ladder.RUNGS[rung].feed(loader, torch.device("cpu"), ladder.RUNGS[rung].pinned)
    if rung == "cached":
        fed = [next(feed.batches)[0] for _ in range(3)]
        expected = [expected[0]] * 3
    else:
        fed = [images for images, _ in feed.batches]
    assert len(fed) == len(expected)
    assert all(torch.equal(a, b) for a, b in zip(fed, expected))


def test_dataset_makes_the_same_sample_for_the_same_index(ladder):
    import torch

    dataset = ladder.SyntheticImages(length=4, image_size=16, seed=7)
    image, label = dataset[3]
    assert image.shape == (3, 16, 16) and image.dtype == torch.float32
    assert label.dtype == torch.int64 and 0 <= int(label) < ladder.NUM_CLASSES
    assert torch.equal(dataset[3][0], image) and not torch.equal(dataset[2][0], image)


def test_worker_rungs_default_to_the_machines_cores_and_baseline_to_none(ladder):
    assert ladder.parse_args("baseline", []).workers == 0
    assert ladder.parse_args("multiworker", []).workers == min(8, os.cpu_count())
    assert ladder.parse_args("multiworker", ["--workers", "3"]).workers == 3


def test_cpu_shrinks_the_defaults_and_options_still_win(ladder):
    cpu = ladder.parse_args("baseline", ["--device", "cpu"])
    assert (cpu.steps, cpu.warmup, cpu.batch_size, cpu.image_size) == (5, 2, 16, 128)
    mine = ladder.parse_args("baseline", ["--device", "cpu", "--steps", "7", "--image-size", "64"])
    assert (mine.steps, mine.warmup, mine.image_size) == (7, 2, 64)


def test_zero_steps_is_refused(ladder):
    with pytest.raises(SystemExit):
        ladder.parse_args("baseline", ["--steps", "0"])


NVTX_QUERY = """
SELECT e.start, e."end", e.eventType, e.color, e.globalTid, coalesce(e.text, s.value) AS name
FROM NVTX_EVENTS AS e LEFT JOIN StringIds AS s ON s.id = e.textId
WHERE e.eventType = 59 ORDER BY e.start
"""


def test_nsys_records_the_baseline_ranges_with_names_colors_and_nesting(tmp_path):
    nsys = find_nsys()  # scripts/setup.sh installs one: a missing nsys fails here
    report = tmp_path / "baseline"
    profile = [str(nsys.path), "profile", "--trace=nvtx,osrt", "--sample=none"]
    run_rung("baseline", prefix=[*profile, "--cpuctxsw=none", "--output", str(report)])
    sqlite = tmp_path / "baseline.sqlite"
    subprocess.run(
        [
            str(nsys.path),
            "export",
            "--type",
            "sqlite",
            "--output",
            str(sqlite),
            f"{report}.nsys-rep",
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    with sqlite3.connect(sqlite) as db:
        rows = db.execute(NVTX_QUERY).fetchall()
    assert len({tid for *_, tid, _ in rows}) == 1
    steps = [row for row in rows if row[5].startswith("Batch ")]
    assert [(name, color) for *_, color, _, name in steps] == [
        (f"Batch {i}", BLUE) for i in range(3)
    ]
    for start, end, *_ in steps:
        inside = [(name, color) for s, e, _, color, _, name in rows if start < s and e < end]
        assert inside == [("get batch", RED), ("copy batch", YELLOW), ("Compute", GREEN)]
