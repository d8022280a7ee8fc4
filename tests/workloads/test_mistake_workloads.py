"""The training-mistake workloads (workloads/mistakes.py), run for real on the CPU, tiny.

Each script runs as a subprocess the way a user runs it, with its CPU defaults (a few steps of
tiny sizes); the ones that use the ``nvtx`` package record their ranges through the recording
stand-in (tests/workloads/recorder), except readback, which runs with the real package.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_ladder_workloads import range_tree

REPO = Path(__file__).resolve().parents[2]
WORKLOADS = REPO / "workloads"
RECORDER = Path(__file__).resolve().parent / "recorder"
TINY = ["--device", "cpu", "--steps", "2", "--warmup", "1"]
SCRIPTS = [
    "readback",
    "dtoh_numpy",
    "empty_cache",
    "tiny_layers",
    "slow_loader",
    "python_overhead",
    "compute_bound",
    "gpu_bound",
    "grad_accumulation",
    "weight_histograms",
    "val_respawn",
]
BLUE, RED, YELLOW, GREEN = 0x0000FF, 0xFF0000, 0xFFFF00, 0x008000
# (step range, its color, its children with colors) for the scripts recorded through the stand-in
RECORDED = {
    "dtoh_numpy": ("Batch {}", [("train", GREEN), ("metrics on host", RED)]),
    "slow_loader": ("Batch {}", [("data", RED), ("step", GREEN)]),
    "python_overhead": ("train_step {}", [("forward_backward", GREEN), ("log metrics", YELLOW)]),
}
STEPS_PER_S = re.compile(r"steps_per_s=(\d+\.\d{3})")


def run_script(script: str, *args: str, env: dict[str, str] | None = None):
    command = [sys.executable, str(WORKLOADS / f"{script}.py"), *TINY, *args]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})}
    )


@pytest.mark.parametrize("script", SCRIPTS)
def test_script_runs_on_the_cpu_and_prints_config_first_and_steps_per_s_last(script, tmp_path):
    env = None
    if script in RECORDED:
        path = os.pathsep.join([str(RECORDER), os.environ.get("PYTHONPATH", "")])
        env = {"PYTHONPATH": path, "NVTX_RECORD": str(tmp_path / "nvtx.jsonl")}
    done = run_script(script, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert lines[0].startswith(f"config script={script} device=cpu steps=2 warmup=1 "), lines[0]
    match = STEPS_PER_S.fullmatch(lines[-1])
    assert match is not None, lines[-1]
    assert float(match.group(1)) > 0
    if script in RECORDED:
        step, children = RECORDED[script]
        expected = [(step.format(i), BLUE, [(n, c, []) for n, c in children]) for i in range(3)]
        assert range_tree(tmp_path / "nvtx.jsonl") == expected
    if script == "readback":
        # The mistake itself: a log line per step, read back from the device.
        assert len([line for line in lines if line.startswith("step ")]) == 3


def test_cuda_graph_on_the_cpu_is_refused_in_one_line():
    done = run_script("tiny_layers", "--cuda-graph")
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "tiny_layers.py: error: --cuda-graph needs a CUDA device; run it without --device cpu"
    ]


@pytest.fixture(scope="module")
def mistakes():
    spec = importlib.util.spec_from_file_location("mistakes", WORKLOADS / "mistakes.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["mistakes"] = module
    spec.loader.exec_module(module)
    return module


def test_cpu_shrinks_the_defaults_and_options_still_win(mistakes):
    sizes = {"batch_size": mistakes.Size(256, 8, "rows")}
    cpu = mistakes.parse_args("x", "x", sizes, ["--device", "cpu"])
    assert (cpu.steps, cpu.warmup, cpu.batch_size, cpu.seed) == (3, 1, 8, 0)
    mine = mistakes.parse_args("x", "x", sizes, ["--device", "cpu", "--batch-size", "5"])
    assert mine.batch_size == 5
    assert mine.describe() == "config script=x device=cpu steps=3 warmup=1 batch_size=5 seed=0"


@pytest.mark.parametrize(
    "argv", [["--steps", "0"], ["--warmup", "-1"], ["--batch-size", "0"], ["--device", "meta"]]
)
def test_bad_options_are_refused(mistakes, argv):
    sizes = {"batch_size": mistakes.Size(256, 8, "rows")}
    with pytest.raises(SystemExit) as exit_info:
        mistakes.parse_args("x", "x", sizes, ["--device", "cpu", *argv])
    assert exit_info.value.code == 2


def test_gpu_bound_options_go_into_its_config_and_bad_ones_are_one_line():
    done = run_script("gpu_bound", "--precision", "bf16", "--sync-every", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert lines[0].endswith(" sync_every=2 seed=0 cuda_graph=False precision=bf16"), lines[0]
    # loss.item() printed every 2nd step of the 3 (warm-up included): steps 1
    assert [line.split()[:2] for line in lines[1:-1]] == [["step", "1"]]
    bad = run_script("gpu_bound", "--precision", "fp16")
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.strip().splitlines()[-1] == (
        "gpu_bound.py: error: argument --precision: invalid choice: 'fp16' (choose from "
        "'fp32', 'tf32', 'bf16')"
    )
    graph = run_script("gpu_bound", "--cuda-graph")
    assert graph.returncode == 2
    assert graph.stderr.strip().splitlines() == [
        "gpu_bound.py: error: --cuda-graph needs a CUDA device; run it without --device cpu"
    ]
