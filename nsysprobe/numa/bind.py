"""Bind the current process: CPU affinity for all its threads, and a memory policy.

CPU binding uses ``sched_setaffinity`` on every thread that still has the process's original
affinity (threads someone pinned on purpose are left alone). The memory policy is set with
``set_mempolicy(2)``, through libnuma when it is installed and the raw system call otherwise:

- ``preferred`` (default): allocate on the bound nodes, fall back to others when they are full,
  so binding never turns into an out-of-memory kill.
- ``bind``: allocate only on the bound nodes (``numactl --membind``).
- ``none``: leave the memory policy alone, as torchrun does.

Containers commonly refuse ``set_mempolicy`` (Docker's default seccomp profile needs
``CAP_SYS_NICE``). Binding never raises: a refusal becomes a :class:`NumaBindingWarning` and
the CPU binding stays in place.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import platform
import warnings
from collections.abc import Callable
from dataclasses import dataclass

from nsysprobe.numa.cpulist import format_cpulist

MEMORY_POLICIES = ("preferred", "bind", "none")
_MPOL_PREFERRED, _MPOL_BIND, _MPOL_PREFERRED_MANY = 1, 2, 5
_SET_MEMPOLICY_SYSCALL = {"x86_64": 238, "aarch64": 237, "ppc64le": 261, "s390x": 270}
_MASK_WORDS = 16  # 1024 nodes; the kernel ignores bits past its own limit when they are zero

SetMempolicy = Callable[[int, "ctypes.Array[ctypes.c_ulong]", int], int]


class NumaBindingWarning(UserWarning):
    """A binding step was refused; the job carries on without it."""


@dataclass(frozen=True)
class Binding:
    """What to bind to. Picklable, so it can travel to DataLoader workers."""

    cpus: frozenset[int]
    nodes: frozenset[int]
    memory: str = "preferred"
    note: str = ""  # why a binding with no CPUs leaves the process alone

    def describe(self) -> str:
        if not self.cpus:
            return f"unbound: {self.note}"
        nodes = format_cpulist(self.nodes) or "-"
        return f"CPUs {format_cpulist(self.cpus)} (node {nodes}), memory {self.memory}"


@dataclass(frozen=True)
class BindOutcome:
    binding: Binding
    cpus_bound: bool
    memory_bound: bool
    threads_bound: int
    warnings: tuple[str, ...] = ()


def apply_binding(binding: Binding, *, set_mempolicy: SetMempolicy | None = None) -> BindOutcome:
    """Bind this process's threads and memory policy; warn and continue on any refusal.

    A binding with no CPUs (see ``Binding.note``) changes nothing."""
    if not binding.cpus:
        return BindOutcome(binding, False, False, 0)
    problems: list[str] = []
    threads = _bind_threads(binding.cpus, problems)
    memory = False
    if binding.memory != "none" and binding.nodes:
        memory = _set_policy(binding, set_mempolicy or _default_set_mempolicy(), problems)
    for problem in problems:
        warnings.warn(problem, NumaBindingWarning, stacklevel=2)
    return BindOutcome(binding, threads > 0, memory, threads, tuple(problems))


def _bind_threads(cpus: frozenset[int], problems: list[str]) -> int:
    try:
        original = os.sched_getaffinity(0)
        os.sched_setaffinity(0, cpus)
    except OSError as exc:
        problems.append(
            f"sched_setaffinity to CPUs {format_cpulist(cpus)} refused ({exc.strerror}); "
            "running unbound: check the container's cpuset"
        )
        return 0
    bound = 1
    main = os.getpid()
    for name in os.listdir("/proc/self/task"):
        tid = int(name)
        if tid == main:
            continue
        try:
            if os.sched_getaffinity(tid) == original:
                os.sched_setaffinity(tid, cpus)
                bound += 1
        except OSError:
            continue  # the thread exited between listing and binding
    return bound


def _set_policy(binding: Binding, call: SetMempolicy | None, problems: list[str]) -> bool:
    nodes = format_cpulist(binding.nodes)
    if call is None:
        problems.append(
            f"no libnuma and no known set_mempolicy system call on {platform.machine()}: memory "
            f"not bound to node {nodes}; install libnuma (numactl) to bind it"
        )
        return False
    if max(binding.nodes) >= _MASK_WORDS * 64:
        problems.append(f"node {max(binding.nodes)} is past the 1024 nodes nsysprobe can bind")
        return False
    mask = (ctypes.c_ulong * _MASK_WORDS)()
    for node in binding.nodes:
        mask[node // 64] |= 1 << (node % 64)
    if binding.memory == "bind":
        mode = _MPOL_BIND
    else:
        mode = _MPOL_PREFERRED if len(binding.nodes) == 1 else _MPOL_PREFERRED_MANY
    err = call(mode, mask, _MASK_WORDS * 64 + 1)
    if err == 0:
        return True
    why = os.strerror(err)
    if err == errno.EPERM:
        why += ": the container forbids it (needs CAP_SYS_NICE under Docker's seccomp profile)"
    elif err == errno.EINVAL and mode == _MPOL_PREFERRED_MANY:
        why += ": the kernel predates MPOL_PREFERRED_MANY (5.15); use --memory bind"
    problems.append(
        f"set_mempolicy({binding.memory}, node {nodes}) refused ({why}); CPUs stay bound"
    )
    return False


def _default_set_mempolicy() -> SetMempolicy | None:
    """A callable returning 0 or an errno: libnuma's wrapper, else the raw system call."""
    name = ctypes.util.find_library("numa")
    if name:
        try:
            libnuma = ctypes.CDLL(name, use_errno=True)
            return _errno_call(libnuma.set_mempolicy)
        except (OSError, AttributeError):
            pass
    number = _SET_MEMPOLICY_SYSCALL.get(platform.machine())
    if number is None:
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    return _errno_call(lambda mode, mask, maxnode: libc.syscall(number, mode, mask, maxnode))


def _errno_call(function: Callable[..., int]) -> SetMempolicy:
    def call(mode: int, mask: ctypes.Array[ctypes.c_ulong], maxnode: int) -> int:
        result = function(ctypes.c_int(mode), mask, ctypes.c_ulong(maxnode))
        return ctypes.get_errno() if result != 0 else 0

    return call
