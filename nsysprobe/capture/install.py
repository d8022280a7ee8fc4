"""Install Nsight Systems without root: ``nsysprobe doctor --install`` (scripts/setup.sh too).

Debian's non-free component ships nsys ``NSYS_VERSION`` (``nsight-systems`` and
``nsight-systems-target``, about 190 MB), which profiles and exports on a machine without a
GPU. apt-get reads a sources list of its own in a temporary folder (the system's apt sources
are never touched, and no root is needed), downloads the two packages and ``libssh-4`` of this
machine's own release, and ``dpkg -x`` unpacks them into one folder:

    HOME/2023.4.4/host-linux-x64/     QdstrmImporter, ..., libssh.so -> libssh.so.4
    HOME/2023.4.4/target-linux-x64/   nsys

HOME is ``locate.install_home()`` ($NSYSPROBE_NSYS_HOME; ``.nsys/`` in a checkout; else the
user's data folder, ``$XDG_DATA_HOME/nsysprobe/nsys``), where ``find_nsys`` looks. The
package's own ``libssh.so`` is a link to a file it does not ship: without a real one nsys's
importer cannot start and every capture stops at a ``.qdstrm`` (NSYS_FACTS.md).
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from nsysprobe.capture.export import SETUP_NSYS_VERSION as NSYS_VERSION
from nsysprobe.capture.locate import NsysInstall, install_home, probe
from nsysprobe.errors import InstallError, NsysNotFound

PACKAGES = ("nsight-systems", "nsight-systems-target")
DOWNLOAD_PAGE = "https://developer.nvidia.com/nsight-systems"
KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
MIRROR_ENV = "NSYSPROBE_DEBIAN_MIRROR"
_OS_RELEASE = Path("/etc/os-release")
_APT_SOURCES = ("/etc/apt/sources.list", "/etc/apt/sources.list.d/*.list")
_APT_DEB822 = "/etc/apt/sources.list.d/*.sources"
_DEB_LINE = re.compile(r"^\s*deb\s+(?:\[[^\]]*\]\s+)?(\S+)")
_URIS_LINE = re.compile(r"^\s*URIs:\s*(.+)$")
_TIMEOUT_S = 900


def installed_nsys(home: Path | None = None) -> Path:
    """Where the nsys of an install in ``home`` (default: ``install_home()``) is."""
    return (home or install_home()) / NSYS_VERSION / "target-linux-x64" / "nsys"


def debian_mirror(sources: tuple[str, ...] = _APT_SOURCES, deb822: str = _APT_DEB822) -> str:
    """``$NSYSPROBE_DEBIAN_MIRROR``, else the first Debian mirror in this machine's apt
    sources (a URI ending in ``/debian``), else ''."""
    if os.environ.get(MIRROR_ENV):
        return os.environ[MIRROR_ENV]
    uris: list[str] = []
    for path in sorted(glob.glob(deb822)):
        for line in _lines(path):
            found = _URIS_LINE.match(line)
            uris += found.group(1).split() if found else []
    for pattern in sources:
        for path in sorted(glob.glob(pattern)):
            uris += [m.group(1) for m in map(_DEB_LINE.match, _lines(path)) if m]
    return next((u for u in uris if u.rstrip("/").endswith("/debian")), "")


def _lines(path: str) -> list[str]:
    try:
        return Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return []


def _release_codename() -> str:
    """This machine's Debian release (libssh-4 must link against its libc)."""
    for line in _lines(str(_OS_RELEASE)):
        if line.startswith("VERSION_CODENAME="):
            return line.split("=", 1)[1].strip().strip('"') or "bookworm"
    return "bookworm"


def _other_ways(home: Path) -> str:
    return (
        f"install Nsight Systems from {DOWNLOAD_PAGE} (or a distribution package) and pass "
        f"--nsys PATH, or put an install in {home}"
    )


def _check_machine(home: Path) -> None:
    """InstallError unless this is an amd64 machine with apt-get, dpkg and Debian's keyring."""
    missing = [tool for tool in ("apt-get", "dpkg") if shutil.which(tool) is None]
    if missing:
        raise InstallError(
            f"nsysprobe doctor --install: no {' or '.join(missing)} on this machine (it "
            f"unpacks Debian's packages); {_other_ways(home)}"
        )
    arch = _run(["dpkg", "--print-architecture"], "dpkg --print-architecture").strip()
    if arch != "amd64":
        raise InstallError(
            f"nsysprobe doctor --install: Debian ships Nsight Systems for amd64 only, this is "
            f"{arch or 'an unknown architecture'}; {_other_ways(home)}"
        )
    if not KEYRING.is_file():
        raise InstallError(
            f"nsysprobe doctor --install: no {KEYRING} to check Debian's packages with; "
            f"install the debian-archive-keyring package, or {_other_ways(home)}"
        )


def _run(command: list[str], what: str, cwd: Path | None = None) -> str:
    """Run ``command``; its output, or InstallError with its last lines."""
    try:
        done = subprocess.run(
            command,
            cwd=cwd,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InstallError(f"nsysprobe doctor --install: {what} did not run ({exc})") from exc
    if done.returncode != 0:
        tail = " | ".join((done.stdout + done.stderr).strip().splitlines()[-3:])
        raise InstallError(
            f"nsysprobe doctor --install: {what} failed (exit code {done.returncode}: {tail}); "
            f"check the network and ${MIRROR_ENV}, then run it again"
        )
    return done.stdout


def install_nsys(
    home: Path | None = None, progress: Callable[[str], None] = lambda line: None
) -> NsysInstall:
    """Install nsys ``NSYS_VERSION`` into ``home`` (default ``install_home()``) as the module
    docstring says, replacing an install of that version there; return it, probed."""
    home = Path(home or install_home())
    _check_machine(home)
    mirror = debian_mirror()
    if not mirror:
        raise InstallError(
            f"nsysprobe doctor --install: no Debian mirror in this machine's apt sources; set "
            f"{MIRROR_ENV} to one (http://deb.debian.org/debian), or {_other_ways(home)}"
        )
    codename = _release_codename()
    home.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".download.", dir=home) as scratch:
        work = Path(scratch)
        for sub in ("sources", "lists/partial", "cache/archives/partial", "debs", "x"):
            (work / sub).mkdir(parents=True)
        (work / "sources" / "nsysprobe.list").write_text(
            f"deb [signed-by={KEYRING}] {mirror} trixie non-free\n"
            f"deb [signed-by={KEYRING}] {mirror} {codename} main\n"
        )
        apt = [
            "apt-get",
            "-q",
            "-o",
            "Dir::Etc::SourceList=/dev/null",
            "-o",
            f"Dir::Etc::SourceParts={work / 'sources'}",
            "-o",
            f"Dir::State::Lists={work / 'lists'}",
            "-o",
            f"Dir::Cache={work / 'cache'}",
            "-o",
            f"APT::Sandbox::User={_user()}",
        ]
        progress(f"apt-get update (a private sources list: trixie non-free, {codename} main)")
        _run([*apt, "update"], "apt-get update")
        progress(f"downloading {', '.join(PACKAGES)} (about 190 MB) and libssh-4 from {mirror}")
        _run(
            [*apt, "download", *PACKAGES, f"libssh-4/{codename}"], "apt-get download", work / "debs"
        )
        progress("unpacking")
        for deb in sorted((work / "debs").glob("*.deb")):
            _run(["dpkg", "-x", str(deb), str(work / "x")], f"dpkg -x {deb.name}")
        stage = work / NSYS_VERSION
        stage.mkdir()
        x = work / "x" / "usr" / "lib"
        host = stage / "host-linux-x64"
        (x / "nsight-systems" / "host-linux-x64").rename(host)
        (x / "x86_64-linux-gnu" / "nsight-systems" / "target-linux-x64").rename(
            stage / "target-linux-x64"
        )
        for link in ("libssh.so", "libssh.so.4"):
            (host / link).unlink(missing_ok=True)
        shutil.copy(x / "x86_64-linux-gnu" / "libssh.so.4", host / "libssh.so.4")
        (host / "libssh.so").symlink_to("libssh.so.4")
        final = home / NSYS_VERSION
        shutil.rmtree(final, ignore_errors=True)
        stage.rename(final)
    try:
        return probe(installed_nsys(home))
    except NsysNotFound as exc:
        raise InstallError(f"nsysprobe doctor --install: installed, but {exc}") from exc


def _user() -> str:
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError):
        return os.environ.get("USER", "root")


def ensure_nsys(
    home: Path | None = None, progress: Callable[[str], None] = lambda line: None
) -> tuple[NsysInstall, bool]:
    """The install in ``home`` (default ``install_home()``) when it works, else a new one
    (``install_nsys``); and whether it is new."""
    try:
        return probe(installed_nsys(home)), False
    except NsysNotFound:
        return install_nsys(home, progress), True
