from __future__ import annotations

import os
from pathlib import Path

import pytest

from nsysprobe.capture.locate import find_importer, find_nsys, list_candidates, parse_version
from nsysprobe.errors import NsysNotFound

from .capture_helpers import install_hint, write_fake


def test_parse_version_reads_nsys_and_build_strings():
    assert parse_version("NVIDIA Nsight Systems version 2023.4.4.54-234433681190v0") == (
        2023,
        4,
        4,
        54,
    )
    assert parse_version("2025.3.1") == (2025, 3, 1)
    assert parse_version("no version here") is None


def test_real_nsys_reports_its_version(nsys):
    assert nsys.path.is_file()
    assert nsys.version_tuple[:3] >= (2023, 4, 4)
    assert nsys.version.startswith(".".join(map(str, nsys.version_tuple)))


def test_explicit_path_wins_over_everything(nsys, monkeypatch, tmp_path):
    monkeypatch.setenv("NSYS", str(tmp_path / "elsewhere" / "nsys"))
    assert find_nsys(str(nsys.path)).path == nsys.path


def test_env_nsys_is_used_and_a_broken_one_is_reported(nsys, monkeypatch, tmp_path):
    monkeypatch.setenv("NSYS", str(nsys.path))
    assert find_nsys().path == nsys.path
    crashing = write_fake(tmp_path / "crash" / "nsys", "echo 'Segmentation fault' >&2\nexit 139\n")
    monkeypatch.setenv("NSYS", str(crashing))
    with pytest.raises(NsysNotFound) as caught:
        find_nsys()
    assert str(caught.value) == f"{crashing} --version failed: Segmentation fault; {install_hint()}"


def test_newest_working_nsys_wins_over_an_older_one_on_path(nsys, monkeypatch, tmp_path):
    old = write_fake(
        tmp_path / "old" / "nsys", "echo 'NVIDIA Nsight Systems version 2021.1.1.66'\n"
    )
    broken = write_fake(tmp_path / "broken" / "nsys", "exit 1\n")
    monkeypatch.delenv("NSYS", raising=False)
    monkeypatch.setenv("NSYSPROBE_NSYS_HOME", str(nsys.path.resolve().parents[1]))
    monkeypatch.setenv("PATH", os.pathsep.join([str(broken.parent), str(old.parent), "/usr/bin"]))
    candidates = {c.path: c for c in list_candidates()}
    assert candidates[old].install.version == "2021.1.1.66"
    assert candidates[broken].install is None
    assert find_nsys().path.resolve() == nsys.path.resolve()


def test_missing_nsys_names_where_it_looked_and_the_fix(monkeypatch, tmp_path):
    monkeypatch.delenv("NSYS", raising=False)
    monkeypatch.setenv("NSYSPROBE_NSYS_HOME", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(NsysNotFound) as caught:
        find_nsys()
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"no nsys found (looked in PATH, $NSYS, {tmp_path}, $NSYS_HOME, ")
    assert message.endswith(f"); {install_hint(tmp_path)}")
    assert "scripts/setup.sh" not in message


def test_importer_found_beside_the_real_nsys(nsys):
    importer = find_importer(nsys)
    assert importer is not None and importer.name == "QdstrmImporter"
    assert os.access(importer, os.X_OK)


@pytest.mark.parametrize(
    ("nsys_rel", "importer_rel"),
    [
        ("2023.4.4/target-linux-x64/nsys", "2023.4.4/host-linux-x64/QdstrmImporter"),
        (
            "nsight-compute/2025.3.1/host/target-linux-x64/nsys",
            "nsight-compute/2025.3.1/host/linux-desktop-glibc_2_11_3-x64/QdstrmImporter",
        ),
    ],
)
def test_importer_found_in_each_install_layout(tmp_path, nsys_rel, importer_rel):
    for rel in (nsys_rel, importer_rel):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).touch()
    assert find_importer(tmp_path / nsys_rel) == tmp_path / importer_rel


def test_importer_found_through_a_debian_style_bin_link(tmp_path):
    target = tmp_path / "lib" / "x86_64-linux-gnu" / "nsight-systems" / "target-linux-x64" / "nsys"
    importer = tmp_path / "lib" / "nsight-systems" / "host-linux-x64" / "QdstrmImporter"
    for path in (target, importer):
        path.parent.mkdir(parents=True)
        path.touch()
    link = tmp_path / "lib" / "nsight-systems" / "bin" / "nsys"
    link.parent.mkdir()
    link.symlink_to(target)
    assert find_importer(Path(link)) == importer
