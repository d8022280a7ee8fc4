"""nsysprobe installed as a package, the way users install a profiler: the wheel built from
this checkout, installed into a fresh venv with its ``workloads`` extra, run from an empty
directory with the repository nowhere on the path. ``nsysprobe ladder``, ``nsysprobe run
--rung`` and ``nsysprobe analyze`` must work there, under the nsys that set-up installs, and
the wheel must hold the workloads and neither tests nor sample traces. Without nsys, what it
prints must lead to a profiled, diagnosed run."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import tomllib

from nsysprobe.capture.locate import find_nsys

REPO = Path(__file__).resolve().parents[1]


def test_the_listed_packages_are_every_package_of_the_tree():
    listed = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = {
        ".".join(p.parent.relative_to(REPO).parts)
        for p in (REPO / "nsysprobe").rglob("__init__.py")
    }
    assert sorted(listed["packages"]) == sorted(found | {"nsysprobe.workloads"})
    assert listed["package-dir"]["nsysprobe.workloads"] == "workloads"


def torch_pins() -> list[str]:
    """The torch/torchvision builds scripts/setup.sh installs on this machine kind."""
    setup = (REPO / "scripts" / "setup.sh").read_text()
    arch = os.uname().machine
    found = re.search(rf"^\s*{arch}\) torch_pins=\(([^)]*)\)", setup, re.MULTILINE)
    return found.group(1).split() if found else ["torch", "torchvision"]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(venv's bin folder, an empty working folder, the wheel)."""
    base = tmp_path_factory.mktemp("installed")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
        + ["-w", str(base / "dist"), str(REPO)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    [wheel] = (base / "dist").glob("nsysprobe-*.whl")
    subprocess.run([sys.executable, "-m", "venv", str(base / "venv")], check=True, timeout=120)
    bin_dir = base / "venv" / "bin"
    pip = subprocess.run(
        [str(bin_dir / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        + [f"{wheel}[workloads]", *torch_pins()],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert pip.returncode == 0, pip.stderr[-3000:]
    empty = base / "empty"
    empty.mkdir()
    yield bin_dir, empty, wheel
    shutil.rmtree(base / "venv", ignore_errors=True)  # gigabytes of torch


def run_installed(bin_dir: Path, cwd: Path, *args: str, timeout: int = 600):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(
        [str(bin_dir / "nsysprobe"), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_without_nsys_what_it_prints_leads_to_a_diagnosed_run(installed, tmp_path):
    """A machine with no nsys and no repository (issue 34): the installed package says how
    to get Nsight Systems; doing what it says, then the same command, profiles and diagnoses.
    nsysprobe doctor --install downloads Nsight Systems from Debian's mirror (about 190 MB)."""
    bin_dir, empty, _ = installed
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "VIRTUAL_ENV", "NSYS", "NSYS_HOME", "NSYSPROBE_NSYS_HOME")
    }
    env["PATH"] = os.pathsep.join([str(bin_dir), "/usr/sbin", "/usr/bin", "/sbin", "/bin"])
    env["XDG_DATA_HOME"] = str(tmp_path / "data")
    home = tmp_path / "data" / "nsysprobe" / "nsys"

    def nsysprobe(*args: str):
        return subprocess.run(
            [str(bin_dir / "nsysprobe"), *args],
            cwd=empty,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )

    tiny = ["--device", "cpu", "--image-size", "32", "--batch-size", "4", "--steps", "2"]
    command = ["run", "--rung", "baseline", *tiny, "--warmup", "1", "--output", "alone"]
    first = nsysprobe(*command)
    assert first.returncode == 2, first.stderr[-3000:]
    [line] = first.stderr.splitlines()
    assert line.startswith("nsysprobe: error: no nsys found (looked in PATH, ")
    assert "scripts/setup.sh" not in line and str(home) in line
    fix = re.search(r"`(nsysprobe [^`]+)`", line).group(1)
    assert fix == "nsysprobe doctor --install"

    installed_now = nsysprobe(*fix.split()[1:])
    assert installed_now.returncode == 0, installed_now.stdout + installed_now.stderr[-3000:]
    assert f"installed nsys 2023.4.4.54-234433681190v0 at {home}/" in installed_now.stderr

    then = nsysprobe(*command)
    assert then.returncode == 0, then.stderr[-3000:]
    assert (empty / "alone" / "report.sqlite").is_file()
    # On a machine without a GPU: the steps on the CPU, and the capture's verdict.
    assert "\nVERDICT: " in then.stdout and "step range 'Batch #'" in then.stdout
    assert then.stderr.splitlines()[-1] == "nsysprobe: run files in alone"


def test_the_wheel_holds_the_workloads_and_no_tests_or_traces(installed):
    _, _, wheel = installed
    names = zipfile.ZipFile(wheel).namelist()
    assert "nsysprobe/workloads/baseline.py" in names
    assert "nsysprobe/workloads/ladder.py" in names
    assert not [n for n in names if n.startswith(("tests/", "sample_traces/", "workloads/"))]
    assert not [n for n in names if n.endswith((".sqlite", ".nsys-rep"))]


def test_installed_ladder_run_and_analyze_from_an_empty_directory(installed):
    bin_dir, empty, _ = installed
    nsys = str(find_nsys().path)
    where = subprocess.run(
        [str(bin_dir / "python"), "-c", "import nsysprobe.workloads as w; print(w.FOLDER)"],
        cwd=empty,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(bin_dir.parent)  # not the checkout's

    tiny = ["--device", "cpu", "--image-size", "32", "--batch-size", "4", "--steps", "2"]
    ladder = run_installed(
        bin_dir,
        empty,
        "ladder",
        "--rungs",
        "baseline,multiworker",
        *tiny,
        "--warmup",
        "1",
        "--workers",
        "1",
        "--nsys",
        nsys,
        "--output",
        "ladder",
        "--format",
        "json",
    )
    assert ladder.returncode == 0, ladder.stderr[-3000:]
    rows = json.loads((empty / "ladder" / "ladder.json").read_text())["rows"]
    assert [r["rung"] for r in rows] == ["baseline", "multiworker"]
    assert all(r["steps_per_s"] and r["profiled_steps_per_s"] for r in rows)

    run = run_installed(
        bin_dir,
        empty,
        "run",
        "--rung",
        "baseline",
        "--nsys",
        nsys,
        "--no-capture-range",
        "--output",
        "run",
        *tiny,
        "--warmup",
        "1",
    )
    assert run.returncode == 0, run.stderr[-3000:]
    [export] = (empty / "run").glob("*.sqlite")
    analyzed = run_installed(bin_dir, empty, "analyze", str(export), "--format", "json")
    assert analyzed.returncode == 0, analyzed.stderr[-3000:]
    assert json.loads(analyzed.stdout)["trace"]["path"] == export.name

    module = subprocess.run(
        [str(bin_dir / "python"), "-m", "nsysprobe.workloads.baseline", *tiny, "--warmup", "0"],
        cwd=empty,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert module.returncode == 0, module.stderr[-3000:]
    assert re.search(r"^steps_per_s=\d", module.stdout, re.MULTILINE)
