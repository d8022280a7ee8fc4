"""What this machine offers a capture: a CUDA GPU, numactl/libnuma, the Python nvtx package."""

from __future__ import annotations

import ctypes.util
import importlib.metadata
import shutil
import subprocess
from pathlib import Path

from nsysprobe.capture.locate import parse_version

# nvtx 0.2.12+ records no ranges under nsys 2023.x (measured with 2023.4.4, reported upstream
# for 2023.2); under nsys 2025.3, 0.2.17 records them. 2024.x was not measured.
NVTX_BAD_FROM = (0, 2, 12)
NVTX_GOOD_NSYS_FROM = (2025, 3)
NVTX_FIX = "pip install 'nvtx>=0.2.10,<0.2.12' (the workloads extra pins it)"


def cuda_gpu_visible() -> bool:
    """A CUDA GPU is visible through the driver (the package never imports torch)."""
    gpus = Path("/proc/driver/nvidia/gpus")
    if gpus.is_dir() and any(gpus.iterdir()):
        return True
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False
    try:
        done = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and "GPU " in done.stdout


def nvtx_version() -> str | None:
    """The Python ``nvtx`` package's version in this interpreter, or None if absent."""
    try:
        return importlib.metadata.version("nvtx")
    except importlib.metadata.PackageNotFoundError:
        return None


def nvtx_records_ranges(nvtx: str, nsys: str) -> bool | None:
    """Whether Python nvtx ``nvtx`` records push/pop ranges under ``nsys``; None if unknown."""
    nvtx_tuple = tuple(int(p) for p in nvtx.split(".")[:3] if p.isdigit())
    if nvtx_tuple < NVTX_BAD_FROM:
        return True
    nsys_tuple = parse_version(nsys) or ()
    if nsys_tuple[:1] and nsys_tuple[0] <= 2023:
        return False
    if nsys_tuple[:2] >= NVTX_GOOD_NSYS_FROM:
        return True
    return None


def numactl_path() -> str | None:
    return shutil.which("numactl")


def libnuma_name() -> str | None:
    return ctypes.util.find_library("numa")
