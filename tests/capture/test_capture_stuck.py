"""A run whose nsys leaves a child behind holding the output open must still end, instead of
waiting on the pipes forever."""

from __future__ import annotations

import io
import time

import pytest

from nsysprobe.capture import profile
from nsysprobe.errors import NothingCaptured

from .capture_helpers import write_fake


def test_an_orphan_holding_the_output_open_is_stopped(tmp_path, monkeypatch):
    monkeypatch.setattr(profile, "DRAIN_S", 0.5)
    marker = tmp_path / "orphan-alive"
    nsys = write_fake(
        tmp_path / "kit" / "target-linux-x64" / "nsys",
        'case "$1" in\n'
        "  --version) echo 'NVIDIA Nsight Systems version 2023.4.4.54-234433681190v0' ;;\n"
        # the "workload" keeps stdout open and would outlive nsys by five minutes
        f"  profile) (sleep 300; touch {marker}) & echo started; exit 0 ;;\n"
        "esac\n",
    )
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    started = time.monotonic()
    with pytest.raises(NothingCaptured):
        profile.capture(
            [str(script)],
            tmp_path / "run",
            nsys=str(nsys),
            stdout=io.BytesIO(),
            stderr=io.BytesIO(),
        )
    assert time.monotonic() - started < 30
    assert (tmp_path / "run" / "nsys.log").read_text().startswith("started")
