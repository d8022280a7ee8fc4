"""Check what a capture needs on this machine; each check says what it found and the fix.

A check is *required* when no capture can be made without it (nsys and its importer): doctor
marks its failure ``FAIL`` and exits 1. Every other check is optional, its failure a ``warn``
that says what is lost without it: the Python nvtx package (NVTX ranges, so steps, and
nsysprobe's own workloads, which import it), numactl (only to record ``numactl --hardware``
for ``analyze --topology DIR``: nsysprobe binds threads and memory itself) and libnuma (memory
binding falls back to the ``set_mempolicy`` system call).
"""

from __future__ import annotations

from dataclasses import dataclass

from nsysprobe.capture.importer import importer_status, library_fix
from nsysprobe.capture.locate import find_nsys, install_hint, list_candidates
from nsysprobe.capture.machine import (
    NVTX_FIX,
    cuda_gpu_visible,
    libnuma_name,
    numactl_path,
    nvtx_records_ranges,
    nvtx_version,
)
from nsysprobe.errors import NsysNotFound


@dataclass(frozen=True)
class Check:
    """One line of ``doctor``: ``ok`` is None for information that needs no fix; a failed
    check that is not ``required`` is a warning (see the module docstring)."""

    name: str
    ok: bool | None
    detail: str
    fix: str | None = None
    required: bool = False


def run_checks(nsys: str | None = None) -> list[Check]:
    checks = []
    try:
        install = find_nsys(nsys)
    except NsysNotFound as exc:
        install = None
        checks.append(Check("nsys", False, str(exc).split(";")[0], install_hint(), True))
    if install is not None:
        checks.append(Check("nsys", True, f"{install.version} at {install.path}", required=True))
        others = [c for c in list_candidates() if c.path != install.path]
        for other in others:
            found = other.install.version if other.install else f"unusable: {other.problem}"
            checks.append(Check("nsys (other)", None, f"{other.path} ({other.source}): {found}"))
        status = importer_status(install)
        fix = None
        if status.missing_library:
            fix = library_fix(status.missing_library)
        elif not status.loads:
            fix = "captures will stop at a .qdstrm; reinstall: nsysprobe doctor --install"
        checks.append(Check("importer", status.loads, status.detail, fix, required=True))

    nvtx = nvtx_version()
    no_ranges = "captures work, without steps; nsysprobe's own workloads need it"
    if nvtx is None:
        detail = f"not installed: no NVTX ranges ({no_ranges})"
        checks.append(Check("python nvtx", False, detail, NVTX_FIX))
    elif install is None:
        checks.append(Check("python nvtx", None, f"{nvtx} (no nsys to check it against)"))
    else:
        records = nvtx_records_ranges(nvtx, install.version)
        if records is False:
            detail = f"{nvtx} records no NVTX ranges under nsys {install.version} ({no_ranges})"
            checks.append(Check("python nvtx", False, detail, NVTX_FIX))
        elif records is None:
            detail = f"{nvtx}: not known whether it records ranges under nsys {install.version}"
            checks.append(Check("python nvtx", None, detail, NVTX_FIX))
        else:
            checks.append(Check("python nvtx", True, f"{nvtx} records ranges under this nsys"))

    if cuda_gpu_visible():
        checks.append(Check("CUDA GPU", True, "visible; run traces cuda,nvtx,osrt"))
    else:
        detail = "none visible (nvidia-smi, /proc/driver/nvidia): run traces nvtx,osrt only"
        checks.append(Check("CUDA GPU", None, detail, "run on a machine with an NVIDIA driver"))

    numactl, libnuma = numactl_path(), libnuma_name()
    checks.append(
        Check(
            "numactl",
            numactl is not None,
            numactl
            or "not found (optional: only to record `numactl --hardware` for analyze "
            "--topology DIR; nsysprobe binds threads and memory itself)",
            None if numactl else "apt-get install numactl",
        )
    )
    checks.append(
        Check(
            "libnuma",
            libnuma is not None,
            libnuma
            or "not found (optional: memory binding uses the set_mempolicy system call without it)",
            None if libnuma else "apt-get install libnuma1",
        )
    )
    return checks
