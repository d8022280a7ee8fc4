"""``nsysprobe scrub``: the environment and local paths leave, the events stay."""

from __future__ import annotations

import hashlib
import sqlite3

from click.testing import CliRunner

import nsysprobe
from nsysprobe.cli import main

from exports import Export

TOKEN = "hf_SECRETTOKEN0123456789"


def export_with_environment(build):
    ex = Export()
    ex.capture = {
        "PROCESS_0:ENVIRONMENT_VARIABLE": f'HF_TOKEN="{TOKEN}"',
        "PROCESS_0:WORKING_DIR": "/home/alice/project",
        "DEVICE_DISPLAY_NAME": "alice-workstation",
    }
    ex.sid(f"HOME=/home/alice\x00HF_TOKEN={TOKEN}\x00PATH=/usr/bin")
    ex.sid(f"WANDB_API_KEY={TOKEN}")
    ex.sid("/tmp/alice/run/train.py")
    ex.row(
        "TARGET_INFO_SYSTEM_ENV",
        globalVid=1,
        devStateName="Local",
        name="Host",
        nameEnum=1,
        value="alice-workstation",
    )
    for i in range(2):
        ex.nvtx(i * 100, i * 100 + 90, f"Batch {i}")
        ex.nvtx(i * 100, i * 100 + 10, "phase=forward")
    ex.kernel(0, 50, launch_at=0)
    return build(ex)


def test_scrubbed_copy_holds_no_secret_and_the_same_events(build, tmp_path):
    src = export_with_environment(build)
    before = hashlib.sha256(src.read_bytes()).hexdigest()
    out = tmp_path / "shared.sqlite"
    result = CliRunner().invoke(main, ["scrub", str(src), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert result.output == (
        f"wrote {out}: removed 2 environment rows, blanked 3 strings and 2 metadata paths\n"
    )
    raw = out.read_bytes()
    for secret in (TOKEN.encode(), b"alice"):
        assert secret not in raw
    assert hashlib.sha256(src.read_bytes()).hexdigest() == before  # input untouched
    db = sqlite3.connect(out)
    assert db.execute("SELECT count(*) FROM TARGET_INFO_SYSTEM_ENV").fetchone() == (0,)
    meta = dict(db.execute("SELECT name, value FROM META_DATA_CAPTURE"))
    db.close()
    assert meta == {"PROCESS_0:WORKING_DIR": "<local path>", "DEVICE_DISPLAY_NAME": "<host>"}
    a, b = nsysprobe.analyze(src), nsysprobe.analyze(out)
    assert a.steps == b.steps and a.gaps == b.gaps
    assert {c.name for c in b.steps.children} == {"phase=forward"}  # NVTX text is not environment


def test_scrub_never_overwrites(build, tmp_path):
    src = export_with_environment(build)
    out = tmp_path / "exists.sqlite"
    out.write_text("keep me")
    result = CliRunner().invoke(main, ["scrub", str(src), "-o", str(out)])
    assert result.exit_code == 2
    assert result.output == (
        f"nsysprobe: error: {out}: already exists; choose another name or pass --force\n"
    )
    assert out.read_text() == "keep me"
    same = CliRunner().invoke(main, ["scrub", str(src), "-o", str(src), "--force"])
    assert same.output == (
        f"nsysprobe: error: {src}: is the input; write the scrubbed copy to another file\n"
    )
