"""Start one process per local rank with torchrun's environment, each bound before it starts.

Each rank is forked, bound (CPUs and memory policy for its GPU under the chosen mode) and then
executes the command, so the command's first instruction already runs in place. A rank whose
GPU's node has no CPU in this job's cpuset starts unbound, and the launcher says why. SIGINT,
SIGTERM and SIGHUP are forwarded to every rank; when one rank fails the others are stopped
(their collectives would hang otherwise). The exit status is the worst of the ranks that
ended on their own (a rank stopped because another failed does not count; it would report the
stop, 143, instead of the failure): a rank killed by signal N counts as 128 + N.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence

from nsysprobe.errors import TopologyError
from nsysprobe.numa.bind import Binding, apply_binding
from nsysprobe.numa.cpulist import MAX_CPUS
from nsysprobe.numa.rank import binding_for_rank
from nsysprobe.numa.topology import Topology

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
STOP_GRACE_S = 5.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def rank_env(
    base: dict[str, str], rank: int, nproc: int, master_addr: str, master_port: int
) -> dict[str, str]:
    env = dict(base)
    env.update(
        LOCAL_RANK=str(rank),
        RANK=str(rank),
        WORLD_SIZE=str(nproc),
        LOCAL_WORLD_SIZE=str(nproc),
        GROUP_RANK="0",
        MASTER_ADDR=master_addr,
        MASTER_PORT=str(master_port),
    )
    return env


def launch(
    command: Sequence[str],
    nproc: int,
    *,
    topology: Topology | None = None,
    mode: str | None = "node",
    memory: str = "preferred",
    master_addr: str = "127.0.0.1",
    master_port: int | None = None,
) -> int:
    """Run ``nproc`` ranks of ``command``; return the worst exit status; mode None binds nothing."""
    if not command:
        raise TopologyError("no command to launch: put it after --, e.g. -- python train.py")
    if nproc < 1:
        raise TopologyError(f"--nproc-per-node {nproc} must be at least 1")
    if nproc > MAX_CPUS:
        raise TopologyError(
            f"--nproc-per-node {nproc} is more ranks than Linux has CPUs ({MAX_CPUS} at most): "
            "start one rank per GPU"
        )
    port = master_port or free_port()
    bindings: list[Binding | None] = [None] * nproc
    if mode is not None:
        if topology is None:
            raise TopologyError("a NUMA mode needs a topology")
        bindings = [
            binding_for_rank(topology, mode, rank, memory, os.environ) for rank in range(nproc)
        ]
    ranks: list[subprocess.Popen] = []
    previous = {sig: signal.getsignal(sig) for sig in FORWARDED}

    def forward(signum: int, _frame: object) -> None:
        for proc in ranks:
            if proc.poll() is None:
                proc.send_signal(signum)

    for sig in FORWARDED:
        signal.signal(sig, forward)
    try:
        for rank, binding in enumerate(bindings):
            env = rank_env(dict(os.environ), rank, nproc, master_addr, port)
            if binding is not None:
                print(f"nsysprobe: rank {rank}: {binding.describe()}", file=sys.stderr)
            ranks.append(
                subprocess.Popen(
                    list(command),
                    env=env,
                    preexec_fn=None if binding is None else _Preexec(binding),
                )
            )
        return _wait(ranks)
    except FileNotFoundError:
        raise TopologyError(f"cannot run {command[0]!r}: not found on PATH") from None
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class _Preexec:
    """Runs in the forked child before exec: bind, and never raise."""

    def __init__(self, binding: Binding) -> None:
        self.binding = binding

    def __call__(self) -> None:
        apply_binding(self.binding)


def exit_status(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def _wait(ranks: list[subprocess.Popen]) -> int:
    """The worst exit status of the ranks that ended on their own: a rank stopped here because
    another failed would report the stop (143), not the failure."""
    stop_at = None
    stopped: set[int] = set()
    while True:
        codes = [proc.poll() for proc in ranks]
        if all(code is not None for code in codes):
            own = [exit_status(c) for i, c in enumerate(codes) if i not in stopped]
            return max(own or [exit_status(c) for c in codes])
        failed = any(code not in (None, 0) for code in codes)
        if failed and stop_at is None:
            stop_at = time.monotonic() + STOP_GRACE_S
            for i, proc in enumerate(ranks):
                if proc.poll() is None:
                    stopped.add(i)
                    proc.terminate()
        elif stop_at is not None and time.monotonic() > stop_at:
            for proc in ranks:
                if proc.poll() is None:
                    proc.kill()
        time.sleep(0.05)
