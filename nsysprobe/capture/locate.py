"""Find an Nsight Systems ``nsys`` wherever installers put it, and say which version it is.

Order: an explicit ``--nsys PATH``, then ``$NSYS``; if neither is given, every candidate on
PATH and in the installers' folders is tried and the newest one that answers ``--version``
wins (PATH first among equals).
"""

from __future__ import annotations

import functools
import glob
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from nsysprobe.errors import NsysNotFound

_VERSION_RE = re.compile(r"(\d{4})\.(\d+)\.(\d+)(?:\.(\d+))?")
# A checkout (scripts/setup.sh beside the package) keeps nsysprobe's own install of nsys in
# <repo>/.nsys/<version>/target-linux-x64; an installed package in the user's data folder.
_REPO_ROOT = Path(__file__).resolve().parents[2]
_DATA_FOLDER = ("nsysprobe", "nsys")
_INSTALLER_GLOBS = (
    "/opt/nvidia/nsight-systems/*/bin/nsys",
    "/opt/nvidia/nsight-systems/*/target-linux-x64/nsys",
    "/opt/nvidia/nsight-systems-cli/*/target-linux-x64/nsys",
    "/usr/local/cuda*/bin/nsys",
    "/usr/lib/nsight-systems/bin/nsys",
    "/usr/lib/nsight-systems/target-linux-x64/nsys",
    "/usr/lib/x86_64-linux-gnu/nsight-systems/target-linux-x64/nsys",
    "/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys",
    "/usr/local/NVIDIA-Nsight-Compute*/host/target-linux-x64/nsys",
)
_HOME_GLOBS = ("target-linux-x64/nsys", "bin/nsys", "*/target-linux-x64/nsys", "*/bin/nsys")


def parse_version(text: str) -> tuple[int, ...] | None:
    """``(2023, 4, 4, 54)`` from text such as ``2023.4.4.54-234433681190v0``; None if absent."""
    match = _VERSION_RE.search(text)
    if match is None:
        return None
    return tuple(int(part) for part in match.groups() if part is not None)


@dataclass(frozen=True)
class NsysInstall:
    """An ``nsys`` executable that answered ``--version``."""

    path: Path
    version: str

    @property
    def version_tuple(self) -> tuple[int, ...]:
        return parse_version(self.version) or ()

    def can_read(self, report_version: str) -> bool:
        """Whether this nsys can import/export a report written by ``report_version``.

        nsys refuses reports from a newer release; builds within one release read each other,
        so only year.minor.patch is compared.
        """
        wanted = parse_version(report_version)
        return wanted is None or self.version_tuple[:3] >= wanted[:3]


@dataclass(frozen=True)
class NsysCandidate:
    """A place an nsys was looked for and found, with its version or why it did not work."""

    path: Path
    source: str
    install: NsysInstall | None
    problem: str | None


def install_home() -> Path:
    """The folder of nsysprobe's own install of nsys (``nsysprobe doctor --install``,
    scripts/setup.sh): ``$NSYSPROBE_NSYS_HOME`` when set; in a checkout, ``.nsys/`` at the
    repository root; installed as a package, ``$XDG_DATA_HOME/nsysprobe/nsys`` (default
    ``~/.local/share/nsysprobe/nsys``)."""
    if os.environ.get("NSYSPROBE_NSYS_HOME"):
        return Path(os.environ["NSYSPROBE_NSYS_HOME"])
    if (_REPO_ROOT / "scripts" / "setup.sh").is_file():
        return _REPO_ROOT / ".nsys"
    data = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(data).joinpath(*_DATA_FOLDER)


def install_hint() -> str:
    """How to get an nsys, for the end of every message that found none: nothing here needs
    the repository."""
    return (
        f"install one with `nsysprobe doctor --install` (Nsight Systems from Debian's packages "
        f"into {install_home()}, no root needed) or from NVIDIA "
        f"(https://developer.nvidia.com/nsight-systems), or pass --nsys PATH"
    )


def nsys_homes() -> list[Path]:
    """Folders holding a local install: ``$NSYS_HOME`` and nsysprobe's own
    (``install_home``)."""
    homes = [Path(os.environ["NSYS_HOME"])] if os.environ.get("NSYS_HOME") else []
    homes.append(install_home())
    return homes


def probe(path: Path) -> NsysInstall:
    """Run ``path --version``; raise NsysNotFound saying why if it is not a working nsys."""
    path = Path(path)
    if not path.is_file():
        raise NsysNotFound(f"no nsys at {path}; {install_hint()}")
    stat = path.stat()
    return _probe_cached(str(path.absolute()), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=64)
def _probe_cached(path: str, mtime_ns: int, size: int) -> NsysInstall:
    try:
        done = subprocess.run(
            [path, "--version"], capture_output=True, text=True, errors="replace", timeout=60
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NsysNotFound(f"{path} --version did not run ({exc}); {install_hint()}") from exc
    output = done.stdout + done.stderr
    version = _VERSION_RE.search(output)
    if done.returncode != 0 or version is None:
        first = output.strip().splitlines()[:1] or [f"exit code {done.returncode}"]
        raise NsysNotFound(f"{path} --version failed: {first[0]}; {install_hint()}")
    full = re.search(r"\d{4}\.\d+\.\d+[\w.\-]*", output)
    return NsysInstall(path=Path(path), version=full.group(0) if full else version.group(0))


def _discovered() -> list[tuple[Path, str]]:
    found: list[tuple[Path, str]] = []
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        if folder and (Path(folder) / "nsys").is_file():
            found.append((Path(folder) / "nsys", "PATH"))
    for home in nsys_homes():
        for pattern in _HOME_GLOBS:
            found += [
                (Path(p), f"local install {home}") for p in sorted(glob.glob(str(home / pattern)))
            ]
    for pattern in _INSTALLER_GLOBS:
        found += [(Path(p), "installer location") for p in sorted(glob.glob(pattern))]
    unique: dict[Path, tuple[Path, str]] = {}
    for path, source in found:
        unique.setdefault(path.resolve(), (path, source))
    return list(unique.values())


def list_candidates() -> list[NsysCandidate]:
    """Every nsys found on this machine, in search order, each probed (for ``doctor``)."""
    candidates = []
    if os.environ.get("NSYS"):
        candidates.append((Path(os.environ["NSYS"]), "$NSYS"))
    candidates += _discovered()
    result = []
    for path, source in candidates:
        try:
            result.append(NsysCandidate(path, source, probe(path), None))
        except NsysNotFound as exc:
            result.append(NsysCandidate(path, source, None, str(exc)))
    return result


def find_nsys(explicit: str | os.PathLike[str] | None = None) -> NsysInstall:
    """The nsys to use: ``explicit``, else ``$NSYS``, else the newest working one found."""
    if explicit:
        return probe(Path(explicit))
    if os.environ.get("NSYS"):
        return probe(Path(os.environ["NSYS"]))
    working = [c.install for c in list_candidates() if c.install is not None]
    if not working:
        raise NsysNotFound(
            f"no nsys found (looked in PATH, $NSYS, {install_home()}, $NSYS_HOME, "
            f"/opt/nvidia/nsight-systems, /usr/local/cuda*/bin, /usr/lib/nsight-systems, "
            f"Nsight Compute's host/target-linux-x64); {install_hint()}"
        )
    return max(working, key=lambda install: install.version_tuple)


def find_importer(nsys: NsysInstall | Path) -> Path | None:
    """The ``QdstrmImporter`` shipped beside an nsys, or None.

    Installs differ: ``<ver>/host-linux-x64/`` next to ``target-linux-x64/`` (standalone and
    Debian), ``host/linux-desktop-glibc_2_11_3-x64/`` inside Nsight Compute; Debian's
    ``bin/nsys`` is a link into another tree, so both the link's and the target's
    neighbourhoods are searched.
    """
    path = nsys.path if isinstance(nsys, NsysInstall) else Path(nsys)
    on_path = shutil.which("QdstrmImporter", path=str(path.parent))
    if on_path:
        return Path(on_path)
    for base in dict.fromkeys([path.absolute().parent.parent, path.resolve().parent.parent]):
        hits = sorted(
            base.glob("*/QdstrmImporter"), key=lambda p: not p.parent.name.startswith("host")
        )
        if hits:
            return hits[0]
    return None
