"""Kernel time by class and the lever a GPU-bound loop has (``analyses/kernels.py``), held to
what each workload is known to run (``sample_traces/manifest.json``: its precision) and to
SQL over the export: the figure the verdict prints is the share of kernel time, by SQL, of
the kernels that workload's precision makes."""

from __future__ import annotations

import json
import re
import statistics

import numpy as np
import pytest
from independent import (
    completion_windows,
    final_count,
    nvtx_ranges,
    query,
    row_count,
    startup_count,
)

import nsysprobe
from nsysprobe.analyses.kernels import TINY_NS, _by_group, classify

from conftest import SAMPLE_TRACES, shared_trace
from exports import Export

_MANIFEST = json.loads((SAMPLE_TRACES / "manifest.json").read_text())
ALL = {**_MANIFEST["traces"], **_MANIFEST["pathologies"]["traces"]}
PRECISION = {
    n: re.search(r"--precision (\w+)", t.get("args", "")).group(1)
    for n, t in ALL.items()
    if t.get("workload") == "gpu_bound" and "--cuda-graph" not in t.get("args", "")
    and "two processes" not in t.get("args", "") and "untraced" not in t.get("args", "")
}  # fmt: skip


def kernel_share(path, pid: int, device: int, like: str) -> float:
    """Share of the process's kernel time on the device spent in kernels named like ``like``
    (an SQL LIKE pattern), by SQL."""
    (part, whole), = query(
        path,
        "SELECT sum(CASE WHEN s.value LIKE ? THEN k.end - k.start ELSE 0 END), "
        "sum(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k "
        "JOIN StringIds s ON s.id = k.shortName "
        "WHERE ((k.globalPid >> 24) & 16777215) = ? AND k.deviceId = ?",
        (like, pid, device),
    )  # fmt: skip
    return part / whole


def percent_in(reason: str) -> int:
    return int(re.search(r"the largest lever: (\d+)%", reason).group(1))


@pytest.mark.parametrize("name", sorted(PRECISION))
def test_a_gpu_bound_loop_gets_the_lever_its_precision_leaves(name):
    """fp32 loops multiply on CUDA cores (cuBLAS's ..._f32f32_f32f32_f32... kernels): TF32 is
    the lever, at their share of kernel time; TF32 loops: bf16, at the tf32 kernels' share;
    bf16 loops have no precision lever left (their fused optimizer and elementwise work is)."""
    path = SAMPLE_TRACES / name
    report = nsysprobe.analyze(path)
    rec = report.verdict
    assert rec.id == "gpu_bound"
    a = report.account.main
    precision = PRECISION[name]
    if precision == "fp32":
        share = kernel_share(path, a.pid, a.device_id, "%gemm_f32f32_f32f32_f32%")
        assert rec.evidence["lever"] == "tf32" and "allow_tf32" in rec.advice
    elif precision == "tf32":
        share = kernel_share(path, a.pid, a.device_id, "%gemm%tf32%")
        assert rec.evidence["lever"] == "bf16" and "bfloat16" in rec.advice
    else:
        assert rec.evidence["lever"] not in ("tf32", "bf16")
        return
    assert percent_in(rec.reason) == round(100 * share)


def test_every_gpu_bound_verdict_names_its_lever_with_a_figure():
    """On every sample and shared trace: a gpu_bound verdict says its largest lever with the
    share of kernel time behind it, or that the trace has no kernel rows to read one from."""
    paths = [*SAMPLE_TRACES.glob("*.sqlite"), *SAMPLE_TRACES.glob("h200_ladder/*.sqlite")]
    paths += [shared_trace(n) for n in ("nsysai_mfu_2gpu_before_nsys2026.2.sqlite",)]
    seen = 0
    for path in paths:
        rec = nsysprobe.analyze(path).verdict
        if rec is None or rec.id != "gpu_bound":
            continue
        seen += 1
        kernels = row_count(path, "CUPTI_ACTIVITY_KIND_KERNEL")
        if kernels:
            assert re.search(r"the largest lever: [^;]*?\d+%", rec.reason), path.name
            assert rec.evidence["lever"]
        else:
            assert "no kernel rows" in rec.reason and "--cuda-graph-trace=node" in rec.advice
    assert seen >= 8


@pytest.mark.parametrize(
    "names, lever",
    [
        (["triton_poi_fused_add_mul_0"] * 3 + ["sm90_xmma_gemm_bf16bf16_bf16f32"], "fusion"),
        (["my_kernel"] * 4, "cuda_graphs"),
        (["ampere_sgemm_128x64_nn"] * 2 + ["my_kernel"] * 2, "tf32"),
        (["flash_fwd_kernel"] * 3 + ["my_kernel"], "fused_attention"),
    ],
)
def test_the_lever_follows_the_rules_on_made_kernels(build, names, lever):
    """A GPU-bound loop of 40 steps of 1 ms, each running the kernels ``names`` back to back
    (each 240 us, or 5 us when the lever is tiny kernels): the lever is the first rule of
    the module docstring that applies."""
    ex = Export()
    us = 1_000
    width = 5 * us if lever == "cuda_graphs" else 240 * us
    for i in range(40):
        lo = i * 1_000 * us
        ex.nvtx(lo, lo + 1_000 * us, "step")
        for j, name in enumerate(names):
            s = lo + j * width
            ex.kernel(s, s + width, launch_at=lo, name=name)
        ex.kernel(lo + len(names) * width, lo + 1_000 * us, launch_at=lo, name="my_big_kernel")
    report = nsysprobe.analyze(build(ex))
    if lever == "cuda_graphs":  # 4 of each step's 5 kernels are under TINY_NS
        assert width < TINY_NS and report.verdict.evidence["tiny_kernel_ratio"] == 0.8
    assert report.verdict.evidence["lever"] == lever


def test_classes_read_the_names_cublas_cudnn_and_triton_give():
    assert classify("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize256x64x8") == "GEMM/conv fp32"
    assert classify("sm90_xmma_gemm_f32f32_tf32f32_f32_nt_n") == "GEMM/conv TF32"
    assert classify("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA") == "GEMM/conv 16/8-bit"
    assert classify("sm80_xmma_wgrad_implicit_gemm_indexed_tf32f32") == "GEMM/conv TF32"
    assert classify("ncclDevKernel_AllReduce_Sum_f32_RING_LL") == "NCCL"
    assert classify("bn_bw_1C11_kernel_new") == "normalization/reduction"
    assert classify("vectorized_elementwise_kernel") == "elementwise/layout"
    assert classify("Kernel2") == "other"


def slowdown_by_sql(path, pid: int) -> float:
    """Kernel time beyond the median of the same kernel (name, place in its step's launch
    order) over the steady steps (completion windows of the workload's 'step #' ranges,
    start-up apart), over their kernel time: SQL and a dict, no nsysprobe."""
    ranges = [("", s, e) for s, e in nvtx_ranges(path, "step %", pid)]
    windows = completion_windows(path, ranges, pid)
    walls = [e - s for _, s, e in windows]
    k = startup_count(walls)
    steady = windows[k : len(windows) - final_count(walls, k)]
    rows = query(
        path,
        "SELECT start, end - start, shortName, correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL "
        "WHERE ((globalPid >> 24) & 16777215) = ? ORDER BY start",
        (pid,),
    )
    per_step: dict[int, list] = {}
    for start, dur, name, corr in rows:
        i = next((j for j, (_, s, e) in enumerate(steady) if s <= start < e), None)
        if i is not None:
            per_step.setdefault(i, []).append((corr, name, dur))
    groups: dict[tuple, list[int]] = {}
    for kernels in per_step.values():
        for place, (_, name, dur) in enumerate(sorted(kernels)):
            groups.setdefault((name, place), []).append(dur)
    total = sum(d for ds in groups.values() for d in ds)
    excess = sum(
        max(0, d - statistics.median(ds)) for ds in groups.values() if len(ds) >= 4 for d in ds
    )
    return excess / total


@pytest.mark.parametrize(
    "values, groups",
    [
        ([5, -3, 7, 7, 0, 2], [1, 0, 1, 0, 0, 2]),  # negative values, ties, a group of one
        ([], []),
        ([1 << 40, 3, -(1 << 40)], [1 << 30, 1 << 30, 0]),  # no 62-bit key: two sort keys
        (np.array([127, -128, 0], np.int8), [0, 0, 1]),  # other types: two sort keys
        (np.array([2**31 - 1, -(2**31), 0], np.int32), [0, 0, 0]),
        (np.array([2**63 + 5, 2**63 + 1, 2**63 + 3], np.uint64), [0, 1, 0]),
    ],
)
def test_the_slowdowns_sort_puts_each_groups_durations_in_order(values, groups):
    # By hand: the durations of group 0, in order, then group 1's ...
    values = values if isinstance(values, np.ndarray) else np.array(values, dtype=np.int64)
    groups = np.array(groups, dtype=np.int64)
    expected = [v for _, v in sorted(zip(groups.tolist(), values.tolist()))]
    got = _by_group(values, groups)
    assert got.tolist() == expected and got.dtype == values.dtype


def test_a_gpu_shared_with_another_process_is_named_and_no_other_trace_is():
    """h200_contention ran gpu_bound.py --precision tf32 beside an untraced copy of itself:
    36.2 steps/s against 83.2 alone (manifest). Its kernels ran far beyond their own median
    (by SQL); on no other sample trace is the GPU called shared that way."""
    path = SAMPLE_TRACES / "h200_contention.sqlite"
    report = nsysprobe.analyze(path)
    rec = report.verdict
    assert rec.evidence["lever"] == "shared_gpu"
    share = slowdown_by_sql(path, report.account.main.pid)
    assert share > 0.2
    assert int(re.search(r"kernels ran (\d+)%", rec.reason).group(1)) == round(100 * share)
    for other in SAMPLE_TRACES.glob("*.sqlite"):
        if other.name != path.name:
            assert nsysprobe.analyze(other).verdict.evidence.get("lever") != "shared_gpu", other
