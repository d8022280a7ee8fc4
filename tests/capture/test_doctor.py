"""``nsysprobe doctor``: FAIL only where no capture can be made, and then exit 1; a missing
optional tool is a warning that says what is lost without it (issue 34)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from nsysprobe.capture import doctor
from nsysprobe.capture.doctor import Check, run_checks
from nsysprobe.capture.locate import NsysInstall
from nsysprobe.cli import main


def _invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture
def machine_without_numa_tools(nsys: NsysInstall, monkeypatch):
    """The real nsys and importer, no numactl, no libnuma, no Python nvtx."""
    monkeypatch.setattr(doctor, "numactl_path", lambda: None)
    monkeypatch.setattr(doctor, "libnuma_name", lambda: None)
    monkeypatch.setattr(doctor, "nvtx_version", lambda: None)
    return nsys


def test_missing_numa_tools_and_nvtx_are_optional(machine_without_numa_tools):
    checks = {c.name: c for c in run_checks(str(machine_without_numa_tools.path))}
    assert checks["nsys"].required and checks["importer"].required
    for name in ("numactl", "libnuma", "python nvtx"):
        assert checks[name].ok is False and not checks[name].required
    assert "optional" in checks["numactl"].detail and "optional" in checks["libnuma"].detail


def test_doctor_warns_of_optional_tools_and_exits_0(machine_without_numa_tools):
    result = _invoke("doctor", "--nsys", str(machine_without_numa_tools.path))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert not [line for line in lines if line.startswith("FAIL")]
    assert (
        "warn numactl: not found (optional: only to record `numactl --hardware` for analyze "
        "--topology DIR; nsysprobe binds threads and memory itself) -> apt-get install numactl"
    ) in lines
    assert any(line.startswith("warn libnuma: not found (optional: ") for line in lines)
    assert any(line.startswith("warn python nvtx: not installed") for line in lines)


@pytest.mark.parametrize(
    "checks, code",
    [
        ([Check("nsys", True, "x", required=True), Check("numactl", False, "y")], 0),
        ([Check("nsys", False, "none", "install it", True), Check("numactl", True, "y")], 1),
    ],
)
def test_a_fail_line_always_means_exit_1(monkeypatch, checks, code):
    monkeypatch.setattr("nsysprobe.cli.run.run_checks", lambda _nsys: checks)
    result = _invoke("doctor")
    assert result.exit_code == code
    assert ("FAIL" in result.output) == (code == 1)
