"""What a report file is, read from its bytes without running nsys.

A ``.nsys-rep`` (and the older ``.qdrep``) opens with one ASCII line naming the build that
wrote it, its version parts joined by ``@``::

    NVIDIA Tegra Profiler Report 2023@4@4@54-234433681190v0.\\n

Whole files (a report can be gigabytes) are read in blocks of ``BLOCK_BYTES``: hashing or
searching one holds that block and little more, whatever its size.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

from nsysprobe.common.files import TRACE_FIX, open_regular, read_head
from nsysprobe.errors import InputError

REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
TRACE_SUFFIXES = (".sqlite", *REPORT_SUFFIXES)  # what analyze takes
_MAGIC = b"NVIDIA Tegra Profiler Report "
_HEADER_RE = re.compile(rb"NVIDIA Tegra Profiler Report (\d{4})[@.](\d+)[@.](\d+)(?:[@.](\d+))?")
BLOCK_BYTES = 1 << 20


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


def content_digest(path: str | os.PathLike[str]) -> str:
    """The SHA-256 of the bytes of the regular file ``path``, in hex."""
    import hashlib  # here: loading OpenSSL is 3 ms of analyzing an export, which needs no hash

    digest = hashlib.sha256()
    for block in _blocks(Path(path)):
        digest.update(block)
    return digest.hexdigest()


def contains(path: str | os.PathLike[str], needle: bytes) -> bool:
    """Whether the regular file ``path`` holds ``needle`` anywhere."""
    keep = len(needle) - 1  # a needle across two blocks starts in the last ``keep`` bytes
    tail = b""
    with closing(_blocks(Path(path))) as blocks:
        for block in blocks:
            window = tail + block
            if needle in window:
                return True
            tail = window[max(0, len(window) - keep) :] if keep else b""
    return False


def _blocks(path: Path) -> Iterator[memoryview]:
    """The bytes of ``path`` in blocks of ``BLOCK_BYTES``, each valid until the next."""
    fd = open_regular(path, InputError, TRACE_FIX)
    if fd is None:
        raise InputError(f"{path}: no such file; {TRACE_FIX}")
    buffer = bytearray(BLOCK_BYTES)
    view = memoryview(buffer)
    try:
        while True:
            try:
                size = os.readv(fd, [buffer])
            except OSError as exc:
                raise InputError(
                    f"{path}: cannot read it ({exc.strerror}); check the file"
                ) from None
            if size == 0:
                return
            yield view[:size]
    finally:
        os.close(fd)
