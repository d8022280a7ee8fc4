"""Real Nsight Systems for the capture tests: the nsys that scripts/setup.sh installs.

No test here skips for want of nsys: CI runs setup.sh first, so a missing nsys is a failure.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from nsysprobe.capture.locate import NsysInstall, find_importer, find_nsys
from nsysprobe.capture.profile import CaptureResult, ProfileOptions, capture
from nsysprobe.errors import NsysNotFound

from .capture_helpers import WORKLOAD


@pytest.fixture(scope="session")
def nsys() -> NsysInstall:
    try:
        return find_nsys()
    except NsysNotFound as exc:
        pytest.fail(f"the capture tests need a real nsys (scripts/setup.sh installs one): {exc}")


@pytest.fixture(scope="session")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("workload") / "tiny_steps.py"
    path.write_text(WORKLOAD, encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def captured(
    tmp_path_factory: pytest.TempPathFactory, workload: Path, nsys: NsysInstall
) -> CaptureResult:
    """One real capture of the tiny workload, shared by the tests that only read it."""
    folder = tmp_path_factory.mktemp("captured") / "run"
    return capture([str(workload)], folder, ProfileOptions(), str(nsys.path))


@pytest.fixture(scope="session")
def nsys_without_libssh(tmp_path_factory: pytest.TempPathFactory, nsys: NsysInstall) -> Path:
    """A copy of the real install whose importer lacks libssh.so, as Debian's package ships it.

    nsys and QdstrmImporter are copied (they find their neighbours from their own real path);
    everything else is linked to the real install.
    """
    importer = find_importer(nsys)
    assert importer is not None, f"no QdstrmImporter beside {nsys.path}"
    root = tmp_path_factory.mktemp("broken-nsys")
    for real_dir, keep in ((nsys.path.resolve().parent, "nsys"), (importer.parent, importer.name)):
        farm = root / real_dir.name
        farm.mkdir()
        for entry in real_dir.iterdir():
            if entry.name == keep:
                shutil.copy2(entry, farm / entry.name)
            elif entry.name != "libssh.so":
                (farm / entry.name).symlink_to(entry)
    (root / importer.parent.name / "libssh.so").symlink_to("libssh.so.4.missing")
    return root / nsys.path.resolve().parent.name / "nsys"
