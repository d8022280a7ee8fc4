"""Binding with real system calls on this machine (needs 2 CPUs), in child processes so the
test runner itself stays unbound."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap
import warnings

import pytest

from nsysprobe.numa import Binding, NumaBindingWarning, apply_binding

pytestmark = pytest.mark.skipif(
    len(os.sched_getaffinity(0)) < 2, reason="binding tests need two usable CPUs"
)


def run_python(code: str, tmp_path, name: str = "child.py") -> str:
    script = tmp_path / name
    script.write_text(textwrap.dedent(code))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_bound_parent_binds_all_threads(tmp_path):
    out = run_python(
        """
        import os, threading, time
        from nsysprobe.numa import Binding, apply_binding
        stop = threading.Event()
        worker = threading.Thread(target=stop.wait)
        worker.start()
        outcome = apply_binding(Binding(frozenset({1}), frozenset(), "none"))
        for tid in sorted(os.listdir("/proc/self/task")):
            status = open(f"/proc/self/task/{tid}/status").read()
            line = [l for l in status.splitlines() if l.startswith("Cpus_allowed_list")][0]
            print(line.split()[1])
        print("threads", outcome.threads_bound)
        stop.set()
        """,
        tmp_path,
    )
    *affinities, label, bound = out.split()
    assert len(affinities) >= 2 and set(affinities) == {"1"}
    assert (label, int(bound)) == ("threads", len(affinities))


DATALOADER = """
import functools, os, sys
import torch
from torch.utils.data import DataLoader, Dataset
from nsysprobe.numa import Binding, NumaWorkerInit, apply_binding

def allowed():
    for line in open("/proc/self/status"):
        if line.startswith("Cpus_allowed_list"):
            return line.split()[1]

def mark(tag, worker_id):
    os.environ["USER_INIT"] = f"{tag}{worker_id}"

class Probe(Dataset):
    def __len__(self):
        return 4
    def __getitem__(self, i):
        return f"{os.getpid()} {allowed()} {os.environ.get('USER_INIT', '-')}"

if __name__ == "__main__":
    method = sys.argv[1]
    apply_binding(Binding(frozenset({0}), frozenset(), "none"))
    then = functools.partial(mark, "u")
    init = NumaWorkerInit(Binding(frozenset({1}), frozenset(), "none"), then)
    for use_init in (False, True):
        loader = DataLoader(Probe(), batch_size=None, num_workers=2,
                            multiprocessing_context=method,
                            worker_init_fn=init if use_init else None)
        for item in loader:
            print(use_init, item)
    print("parent", allowed())
"""


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_dataloader_workers_rebound(tmp_path, method):
    script = tmp_path / "loader.py"
    script.write_text(DATALOADER)
    done = subprocess.run(
        [sys.executable, str(script), method], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines()]
    plain = [row for row in rows if row[0] == "False"]
    bound = [row for row in rows if row[0] == "True"]
    assert len(plain) == 4 and len(bound) == 4
    # Fork inherits the parent's binding; spawn/forkserver workers need not, and are not checked.
    if method == "fork":
        assert {row[2] for row in plain} == {"0"}
    assert {row[2] for row in bound} == {"1"}
    assert {row[3] for row in bound} <= {"u0", "u1"}
    assert len({row[1] for row in bound}) == 2  # two distinct worker processes
    assert rows[-1] == ["parent", "0"]


def test_memory_policy_real_call_applies_or_warns(tmp_path):
    out = run_python(
        """
        import warnings
        from nsysprobe.numa import Binding, apply_binding
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            outcome = apply_binding(Binding(frozenset({0, 1}), frozenset({0}), "preferred"))
        policies = {line.split()[1] for line in open("/proc/self/numa_maps")}
        print(outcome.memory_bound, outcome.cpus_bound, len(caught))
        print(" ".join(sorted(policies)))
        print(" | ".join(str(w.message) for w in caught))
        """,
        tmp_path,
    )
    status, policies, messages = (out.splitlines() + [""])[:3]
    memory_bound, cpus_bound, warned = status.split()
    assert cpus_bound == "True"
    if memory_bound == "True":
        assert "prefer:0" in policies.split() and warned == "0"
    else:
        assert "set_mempolicy(preferred, node 0) refused" in messages


def test_refused_memory_policy_warns_and_keeps_cpus():
    before = os.sched_getaffinity(0)
    try:
        with pytest.warns(NumaBindingWarning, match="container forbids it"):
            outcome = apply_binding(
                Binding(frozenset(before), frozenset({0}), "bind"),
                set_mempolicy=lambda mode, mask, maxnode: errno.EPERM,
            )
    finally:
        os.sched_setaffinity(0, before)
    assert outcome.cpus_bound and not outcome.memory_bound
    assert "CPUs stay bound" in outcome.warnings[0]


def test_memory_mask_and_mode_passed_to_kernel():
    seen = []

    def fake(mode, mask, maxnode):
        seen.append((mode, [mask[0], mask[1]], maxnode))
        return 0

    before = os.sched_getaffinity(0)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            apply_binding(
                Binding(frozenset(before), frozenset({1, 65}), "bind"), set_mempolicy=fake
            )
            apply_binding(
                Binding(frozenset(before), frozenset({3}), "preferred"), set_mempolicy=fake
            )
            apply_binding(Binding(frozenset(before), frozenset({3}), "none"), set_mempolicy=fake)
    finally:
        os.sched_setaffinity(0, before)
    # MPOL_BIND = 2 with bits 1 and 65; MPOL_PREFERRED = 1 with bit 3; "none" makes no call.
    assert seen == [(2, [0b10, 0b10], 1025), (1, [0b1000, 0], 1025)]


def test_refused_cpu_binding_does_not_raise():
    with pytest.warns(NumaBindingWarning, match="sched_setaffinity to CPUs 4095 refused"):
        outcome = apply_binding(Binding(frozenset({4095}), frozenset(), "none"))
    assert not outcome.cpus_bound
