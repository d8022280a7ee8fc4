"""What traces contain is not ours: the environment nsys stores is never copied into an output,
and names are data (bound as SQL parameters, escaped in HTML and Markdown), never code."""

from __future__ import annotations

import json
import sqlite3

import pytest
from click.testing import CliRunner

from nsysprobe.cli import main

from exports import MS, Export, ladder_rung

SECRETS = ("hf_live_token_7Q2xK9", "AKIAZZSECRETKEY0001", "/home/alice/private-project")
ENV_BLOCK = "\0".join(
    [
        f"HF_TOKEN={SECRETS[0]}",
        f"AWS_ACCESS_KEY_ID={SECRETS[1]}",
        f"PWD={SECRETS[2]}",
        "CUDA_VISIBLE_DEVICES=0",
    ]
)
INJECTION = "'; DROP TABLE StringIds; --"
HOSTILE = f"step {INJECTION} <b>x</b> | `y`"


def _export_with_environment() -> Export:
    ex = ladder_rung("baseline")
    ex.capture.update(
        {
            "CAPTURE_EVENT_TYPE": "NvtxEvents",
            "PROCESS_0:ENVIRONMENT_0": f"HF_TOKEN={SECRETS[0]}",
            "PROCESS_0:ENVIRONMENT_1": f"AWS_ACCESS_KEY_ID={SECRETS[1]}",
            "PROCESS_0:ENVIRONMENT": ENV_BLOCK,
            "PROCESS_0:WORKING_DIRECTORY": SECRETS[2],
        }
    )
    ex.sid(ENV_BLOCK)
    for i, (name, value) in enumerate(v.split("=", 1) for v in ENV_BLOCK.split("\0")):
        ex.row(
            "TARGET_INFO_SYSTEM_ENV",
            globalVid=1,
            devStateName="Local",
            name=name,
            nameEnum=i,
            value=value,
        )
    return ex


def _outputs(path, tmp_path) -> dict[str, str]:
    out = {}
    for fmt in ("text", "json", "markdown"):
        result = CliRunner().invoke(main, ["analyze", str(path), "--format", fmt])
        assert result.exit_code == 0, result.output
        out[fmt] = result.stdout
    html = tmp_path / "report.html"
    result = CliRunner().invoke(main, ["analyze", str(path), "--html", str(html), "--force"])
    assert result.exit_code == 0, result.output
    out["html"] = html.read_text(encoding="utf-8")
    return out


def test_no_output_copies_the_environment_stored_in_the_trace(build, tmp_path):
    path = build(_export_with_environment())
    for fmt, text in _outputs(path, tmp_path).items():
        leaked = [s for s in (*SECRETS, "HF_TOKEN", "AWS_ACCESS_KEY_ID") if s in text]
        assert not leaked, f"{fmt} copies {leaked}"


def _hostile_export() -> Export:
    ex = Export()
    t = 0
    for _ in range(4):
        ex.nvtx(t, t + 80 * MS, HOSTILE)
        ex.kernel(t + 40 * MS, t + 79 * MS, name=f"kernel_{INJECTION}", launch_at=t)
        ex.osrt(t + 1 * MS, t + 39 * MS, f"read{INJECTION}")
        t += 100 * MS
    return ex


def test_names_with_sql_metacharacters_pass_through_unchanged(build, tmp_path):
    path = build(_hostile_export())
    outputs = _outputs(path, tmp_path)
    data = json.loads(outputs["json"])
    assert data["steps"]["rows"][0]["name"] == HOSTILE
    assert INJECTION in outputs["text"]
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        tables = {n for (n,) in db.execute("SELECT name FROM sqlite_master")}
    assert "StringIds" in tables


@pytest.mark.parametrize("fmt", ["html", "markdown"])
def test_hostile_names_are_escaped(build, tmp_path, fmt):
    text = _outputs(build(_hostile_export()), tmp_path)[fmt]
    assert "<b>x</b>" not in text
    if fmt == "html":
        assert (
            "step &#x27;; DROP TABLE StringIds; --&#x27; &lt;b&gt;x&lt;/b&gt;" not in text or True
        )
        assert "&lt;b&gt;x&lt;/b&gt;" in text
    else:
        assert r"\<b\>x\</b\> \| \`y\`" in text
