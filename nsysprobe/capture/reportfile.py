"""What a report file is, read from its first bytes without running nsys.

A ``.nsys-rep`` (and the older ``.qdrep``) opens with one ASCII line naming the build that
wrote it, its version parts joined by ``@``::

    NVIDIA Tegra Profiler Report 2023@4@4@54-234433681190v0.\\n
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from nsysprobe.common.files import read_head

REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
TRACE_SUFFIXES = (".sqlite", *REPORT_SUFFIXES)  # what analyze takes
_MAGIC = b"NVIDIA Tegra Profiler Report "
_HEADER_RE = re.compile(rb"NVIDIA Tegra Profiler Report (\d{4})[@.](\d+)[@.](\d+)(?:[@.](\d+))?")


def read_header(path: str | os.PathLike[str], size: int = 128) -> bytes:
    return read_head(path, size)


def is_report(path: str | os.PathLike[str]) -> bool:
    """Whether the file starts like an Nsight Systems report."""
    return read_header(path, len(_MAGIC)) == _MAGIC


def report_version(path: str | os.PathLike[str]) -> str | None:
    """The nsys version that wrote the report, e.g. ``"2023.4.4.54"``; None if unknown."""
    match = _HEADER_RE.match(read_header(Path(path)))
    if match is None:
        return None
    return ".".join(part.decode() for part in match.groups() if part is not None)
