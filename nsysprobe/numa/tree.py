"""Files of a machine's ``/sys`` and ``/proc`` below a root, read as input that may be hostile.

``root`` is ``/`` on the live machine, or a saved or fake tree (``--root``). Every file goes
through ``nsysprobe.common.files``: opened without blocking, read only when it is a regular
file, and only up to a size bound. Below a root other than ``/``, a path that symbolic links
lead out of the root (an absolute link copied from a live machine, a link to ``/dev/zero`` or
to a 64 GB file elsewhere) is not read either: it would describe another machine. Folders are
listed with a bound on the entries looked at.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from nsysprobe.common.files import open_regular, read_text
from nsysprobe.errors import NsysprobeError


@dataclass(frozen=True)
class Numbered:
    """``ids``: sorted; ``looked``: entries looked at; ``more``: whether more were left."""

    ids: list[int]
    looked: int
    more: bool


def outside(path: Path, root: Path) -> str | None:
    """Where symbolic links take ``path`` when that is out of ``root``, else None (always
    None for the root ``/``)."""
    real_root = _real(str(root))
    if real_root == os.sep:
        return None
    real = os.path.realpath(path)
    if os.path.commonpath([real_root, real]) == real_root:
        return None
    return real


def open_in(path: Path, root: Path, *, fix: str, error: type[NsysprobeError]) -> int | None:
    """A descriptor of the regular file ``path`` inside ``root`` (see ``open_regular``); None
    when it does not exist; ``error`` when links take it out of ``root`` or it is no file."""
    check_inside(path, root, fix, error)
    return open_regular(path, error, fix)


def read_in(
    path: Path, root: Path, *, limit: int, fix: str, error: type[NsysprobeError]
) -> str | None:
    """The text of the regular file ``path`` inside ``root``, at most ``limit`` bytes (see
    ``read_text``); None when it does not exist."""
    check_inside(path, root, fix, error)
    return read_text(path, limit=limit, fix=fix, error=error)


def listed(folder: Path, limit: int) -> tuple[list[str], bool]:
    """The names in ``folder``, at most ``limit`` of them, and whether more were left unlooked
    at; a folder that cannot be listed (absent, not a folder) holds none."""
    names: list[str] = []
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if len(names) == limit:
                    return names, True
                names.append(entry.name)
    except OSError:
        return [], False
    return names, False


def numbered(folder: Path, limit: int) -> Numbered:
    """The entries of ``folder`` named by a number (``/proc``'s pids, a ``task`` folder's
    tids) among the first ``limit`` listed."""
    names, more = listed(folder, limit)
    ids = sorted(int(name) for name in names if is_number(name))
    return Numbered(ids, len(names), more)


def is_number(name: str) -> bool:
    """A pid or tid as ``/proc`` names it: ASCII digits, fewer than 10."""
    return name.isascii() and name.isdigit() and len(name) <= 9


def check_inside(path: Path, root: Path, fix: str, error: type[NsysprobeError]) -> None:
    """``error`` when symbolic links take ``path`` out of ``root``."""
    real = outside(path, root)
    if real is not None:
        raise error(f"{path}: links lead out of {root} (to {real}), not read; {fix}")


@lru_cache(maxsize=8)
def _real(root: str) -> str:
    return os.path.realpath(root)
