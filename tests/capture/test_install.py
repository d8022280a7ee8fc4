"""The installed package on its own (issue 34): how a machine without nsys gets one, where
nsysprobe then finds it, and ``run --rung NAME`` with run's own options after the workload's.

The installer test downloads Nsight Systems from Debian's mirror into a temporary folder, as
``nsysprobe doctor --install`` does for a user (about 190 MB, 30 s here).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from nsysprobe.capture import install as installer
from nsysprobe.capture import locate
from nsysprobe.capture.install import NSYS_VERSION, debian_mirror, install_nsys
from nsysprobe.capture.locate import find_nsys, install_home
from nsysprobe.cli import main
from nsysprobe.cli.run import own_options_first, run
from nsysprobe.errors import InstallError

from .capture_helpers import install_hint, write_fake

FAKE_NSYS = "echo 'NVIDIA Nsight Systems version 2023.4.4.54-234433681190v0'\n"


def nsysprobe(*args: str, cwd: Path, env: dict[str, str], timeout: int = 600):
    return subprocess.run(
        [sys.executable, "-m", "nsysprobe", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def without_nsys(tmp_path: Path, home: Path) -> dict[str, str]:
    """The environment of a machine with no nsys: PATH holds this Python only, and
    nsysprobe's own install folder is the empty ``home``."""
    env = {k: v for k, v in os.environ.items() if k not in ("NSYS", "NSYS_HOME")}
    env["PATH"] = str(Path(sys.executable).parent)
    env["NSYSPROBE_NSYS_HOME"] = str(home)
    env["PYTHONPATH"] = str(Path(locate.__file__).resolve().parents[2])
    return env


# -- the message without nsys ----------------------------------------------------------------


def test_without_nsys_run_says_how_to_get_it_not_scripts_setup(tmp_path):
    home = tmp_path / "own-nsys"
    home.mkdir()
    done = nsysprobe("run", "--rung", "baseline", cwd=tmp_path, env=without_nsys(tmp_path, home))
    assert done.returncode == 2
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line == (
        f"nsysprobe: error: no nsys found (looked in PATH, $NSYS, {home}, $NSYS_HOME, "
        "/opt/nvidia/nsight-systems, /usr/local/cuda*/bin, /usr/lib/nsight-systems, Nsight "
        f"Compute's host/target-linux-x64); {install_hint(home)}"
    )
    assert "scripts/setup.sh" not in done.stderr


def test_without_nsys_doctor_fails_with_the_same_fix(tmp_path):
    home = tmp_path / "own-nsys"
    home.mkdir()
    done = nsysprobe("doctor", cwd=tmp_path, env=without_nsys(tmp_path, home))
    assert done.returncode == 1
    [nsys_line] = [line for line in done.stdout.splitlines() if line.startswith("FAIL nsys: ")]
    assert nsys_line.endswith(f"Compute's host/target-linux-x64) -> {install_hint(home)}")


def test_an_installed_package_keeps_its_nsys_in_the_users_data_folder(monkeypatch, tmp_path):
    """No checkout around the package (a wheel): the install folder is
    $XDG_DATA_HOME/nsysprobe/nsys, the message names it, and an install there is found."""
    monkeypatch.setattr(locate, "_REPO_ROOT", tmp_path / "site-packages")
    monkeypatch.delenv("NSYSPROBE_NSYS_HOME", raising=False)
    monkeypatch.delenv("NSYS", raising=False)
    monkeypatch.delenv("NSYS_HOME", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    home = tmp_path / "data" / "nsysprobe" / "nsys"
    assert install_home() == home
    assert locate.install_hint() == install_hint(home)
    nsys = write_fake(home / NSYS_VERSION / "target-linux-x64" / "nsys", FAKE_NSYS)
    assert find_nsys().path == nsys
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    assert install_home() == tmp_path / "user" / ".local" / "share" / "nsysprobe" / "nsys"


# -- doctor --install ---------------------------------------------------------------------------


def test_doctor_install_installs_nsys_where_run_finds_it(tmp_path):
    home = tmp_path / "own-nsys"
    env = without_nsys(tmp_path, home)
    env["PATH"] = os.pathsep.join([env["PATH"], "/usr/sbin", "/usr/bin", "/sbin", "/bin"])
    done = nsysprobe("doctor", "--install", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    nsys = home / NSYS_VERSION / "target-linux-x64" / "nsys"
    said = done.stderr.splitlines()
    assert said[0].startswith("nsysprobe: apt-get update (a private sources list: trixie non-free")
    assert said[-1] == f"nsysprobe: installed nsys 2023.4.4.54-234433681190v0 at {nsys}"
    checks = done.stdout.splitlines()
    assert f"ok   nsys: 2023.4.4.54-234433681190v0 at {nsys}" in checks
    assert any(line.startswith("ok   importer: ") for line in checks)
    assert (home / NSYS_VERSION / "host-linux-x64" / "libssh.so").resolve().is_file()
    assert not [p for p in home.iterdir() if p.name.startswith(".download")]

    again = nsysprobe("doctor", "--install", cwd=tmp_path, env=env, timeout=120)
    assert again.returncode == 0
    assert again.stderr.splitlines() == [
        f"nsysprobe: already installed: nsys 2023.4.4.54-234433681190v0 at {nsys}"
    ]


def test_install_refuses_a_machine_debian_has_no_nsys_for(monkeypatch, tmp_path):
    tools = tmp_path / "bin"
    write_fake(tools / "dpkg", "echo arm64\n")
    write_fake(tools / "apt-get", "exit 0\n")
    monkeypatch.setenv("PATH", str(tools))
    with pytest.raises(InstallError) as caught:
        install_nsys(tmp_path / "home")
    assert str(caught.value) == (
        "nsysprobe doctor --install: Debian ships Nsight Systems for amd64 only, this is arm64; "
        "install Nsight Systems from https://developer.nvidia.com/nsight-systems (or a "
        f"distribution package) and pass --nsys PATH, or put an install in {tmp_path / 'home'}"
    )
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(InstallError, match="^nsysprobe doctor --install: no apt-get or dpkg "):
        install_nsys(tmp_path / "home")


def test_the_debian_mirror_comes_from_the_apt_sources(monkeypatch, tmp_path):
    monkeypatch.delenv(installer.MIRROR_ENV, raising=False)
    (tmp_path / "a.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm\n\n"
        "Types: deb\nURIs: http://mirror.example/debian/\nSuites: bookworm\n"
    )
    (tmp_path / "b.list").write_text(
        "# deb http://commented.example/debian bookworm main\n"
        "deb [arch=amd64 signed-by=/k.gpg] http://other.example/debian bookworm main\n"
    )
    deb822 = str(tmp_path / "*.sources")
    lists = (str(tmp_path / "*.list"),)
    assert debian_mirror(lists, deb822) == "http://mirror.example/debian/"
    assert debian_mirror(lists, str(tmp_path / "none")) == "http://other.example/debian"
    assert debian_mirror((), str(tmp_path / "none")) == ""
    monkeypatch.setenv(installer.MIRROR_ENV, "http://chosen.example/debian")
    assert debian_mirror(lists, deb822) == "http://chosen.example/debian"


# -- run --rung NAME, then run's options --------------------------------------------------------


@pytest.mark.parametrize(
    "args, parsed",
    [
        (
            ["--rung", "baseline", "--device", "cpu", "--nsys", "N"],
            ["--rung", "baseline", "--nsys", "N", "--", "--device", "cpu"],
        ),
        (
            ["--rung=baseline", "--steps", "2", "-o", "out", "--no-capture-range", "--format=json"],
            ["--rung=baseline", "-o", "out", "--no-capture-range", "--format=json", "--"]
            + ["--steps", "2"],
        ),
        # after --, everything is the workload's, run's names too
        (
            ["--rung", "gpu_bound", "--steps", "2", "--", "--width", "64", "--trace", "x"],
            ["--rung", "gpu_bound", "--", "--steps", "2", "--width", "64", "--trace", "x"],
        ),
        # a script's arguments are the script's, as before
        (["train.py", "--nsys", "N"], ["train.py", "--nsys", "N"]),
        (
            ["--nsys", "N", "train.py", "--output", "o"],
            ["--nsys", "N", "train.py", "--output", "o"],
        ),
        (["--rung", "baseline"], ["--rung", "baseline"]),
    ],
)
def test_runs_options_after_the_rung_are_runs(args, parsed):
    assert own_options_first(run, args) == parsed


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), prog_name="nsysprobe")


def test_nsys_after_the_workloads_options_is_the_nsys_used(tmp_path):
    missing = tmp_path / "no" / "nsys"
    result = invoke("run", "--rung", "baseline", "--device", "cpu", "--nsys", str(missing))
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"nsysprobe: error: no nsys at {missing}; {install_hint()}"
    ]


@pytest.mark.parametrize(
    "args",
    [
        ["--rung", "gpu_bound", "--width", "64"],
        ["--rung", "gpu_bound", "--steps", "2", "--width=64"],
    ],
)
def test_a_width_after_the_rung_is_refused_with_the_fix(args):
    result = invoke("run", *args)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "nsysprobe: error: --width after --rung gpu_bound: run's --width or the workload's? "
        "Give run's before --rung and the workload's after --: nsysprobe run --width 100 --rung "
        "gpu_bound -- --width 64; see `nsysprobe run --help`"
    ]


def test_an_option_of_run_without_its_value_after_the_rung(tmp_path):
    result = invoke("run", "--rung", "baseline", "--steps", "2", "--output")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "nsysprobe: error: Option '--output' requires an argument; see `nsysprobe run --help`"
    ]


def test_a_real_run_of_a_rung_with_runs_options_last(nsys, tmp_path):
    """The issue's command: run --rung baseline --device cpu ... --nsys PATH --output DIR."""
    folder = tmp_path / "run"
    tiny = ["--device", "cpu", "--image-size", "32", "--batch-size", "4", "--steps", "2"]
    result = invoke(
        "run", "--rung", "baseline", *tiny, "--warmup", "1", "--nsys", str(nsys.path),
        "--output", str(folder), "--format", "json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    command = (folder / "nsys-command.txt").read_text().strip()
    assert command.startswith(f"{nsys.path} profile ")
    assert command.endswith(f"baseline.py {' '.join(tiny)} --warmup 1")
    assert (folder / "report.sqlite").is_file() and (folder / "analysis.json").is_file()
    assert '"schema_version": 3' in result.stdout
