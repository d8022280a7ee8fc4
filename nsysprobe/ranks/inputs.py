"""Which reports: files, folders and globs expanded to the trace files, and each one's rank
label.

Inputs are files, folders (their ``*.sqlite``, ``*.nsys-rep`` and ``*.qdrep``) and globs. A
report and its own export side by side count once (the report; its export is reused).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path

from nsysprobe.capture.reportfile import REPORT_SUFFIXES, TRACE_SUFFIXES
from nsysprobe.errors import InputError

_GLOB_CHARS = re.compile(r"[*?\[]")


def expand_paths(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """Files as given, folders' traces, globs' matches: deduplicated, in natural order."""
    found: list[Path] = []
    for spec in paths:
        path = Path(spec)
        if path.is_dir():
            inside = [p for p in path.iterdir() if p.is_file() and p.suffix in TRACE_SUFFIXES]
            if not inside:
                raise InputError(
                    f"{path}: no .sqlite, .nsys-rep or .qdrep files in this folder; give the "
                    f"folder that holds the reports, or a glob such as '{path}/**/*.nsys-rep'"
                )
            found += inside
        elif path.exists():
            if not path.is_file():
                raise InputError(
                    f"{path}: {_file_kind(path)}, not a report file (reading it could wait "
                    f"forever); give .sqlite exports or .nsys-rep reports"
                )
            found.append(path)
        elif _GLOB_CHARS.search(str(spec)):
            matches = _glob(str(spec))
            if not matches:
                raise InputError(f"{spec}: the glob matches no .sqlite or .nsys-rep file")
            found += matches
        else:
            raise InputError(f"{spec}: no such file, folder or glob; give reports or exports")
    unique = {p.resolve(): p for p in found}
    reports = {p.with_suffix("") for p in unique if p.suffix in REPORT_SUFFIXES}
    kept = [
        p
        for resolved, p in unique.items()
        if not (resolved.suffix == ".sqlite" and resolved.with_suffix("") in reports)
    ]
    return sorted(kept, key=_natural_key)


def _glob(spec: str) -> list[Path]:
    """The trace files ``spec`` matches. ``**`` does not descend into links to folders (as
    pathlib's glob), so links back up the tree cannot make the walk endless."""
    parts = Path(spec).parts
    fixed = next(i for i, part in enumerate(parts) if _GLOB_CHARS.search(part))
    try:
        matches = Path(*parts[:fixed]).glob(str(Path(*parts[fixed:])))
        return [m for m in matches if m.is_file() and m.suffix in TRACE_SUFFIXES]
    except ValueError as exc:  # '**' inside a name
        raise InputError(
            f"{spec}: not a glob ({exc}); use '**' alone between slashes, e.g. 'runs/**/*.sqlite'"
        ) from None


def _file_kind(path: Path) -> str:
    mode = path.stat().st_mode
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a socket" if stat.S_ISSOCK(mode) else "not a regular file"


def rank_labels(files: Sequence[Path]) -> list[str]:
    """Each file's path below the files' common folder, without its suffix."""
    resolved = [p.resolve() for p in files]
    if len(resolved) == 1:
        return [resolved[0].with_suffix("").name]
    common = Path(os.path.commonpath([p.parent for p in resolved]))
    return [p.relative_to(common).with_suffix("").as_posix() for p in resolved]


def _natural_key(path: Path) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(path))]
