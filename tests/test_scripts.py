"""The repository's scripts as a user meets them (issue 34): ``benchmarks/scale.py`` never
writes the user's history; ``scripts/test.sh`` skips the browser tests, saying why, for a user
who is not root and has no Chromium."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_the_scale_benchmark_keeps_out_of_the_users_history(tmp_path):
    """The autouse fixture points $NSYSPROBE_HISTORY and $XDG_DATA_HOME at this test's folder:
    the user's history, as far as the benchmark can tell. It stays unwritten."""
    user_history = Path(os.environ["NSYSPROBE_HISTORY"])
    cmd = [sys.executable, str(ROOT / "benchmarks" / "scale.py"), "--sizes", "1e4"]
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert result.returncode == 0, result.stderr
    assert "| 16,720 |" in result.stdout  # it analyzed the export it built
    assert not user_history.exists()
    assert not Path(os.environ["XDG_DATA_HOME"]).exists()


def _can_hide_files() -> bool:
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return False
    return subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0


@pytest.mark.skipif(not _can_hide_files(), reason="hides chromium in a private mount (root)")
def test_test_sh_skips_the_browser_tests_for_a_user_without_root_or_chromium(tmp_path):
    """Chromium hidden (a file that cannot run bound over it, in a private mount) and ``id -u``
    answering 1000: test.sh installs nothing, says why, and pytest skips the browser tests
    with that reason and runs the others."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "id").write_text(
        '#!/bin/sh\n[ "$1" = "-u" ] && { echo 1000; exit 0; }\nexec /usr/bin/id "$@"\n'
    )
    (fake / "id").chmod(0o755)
    blank = tmp_path / "not-chromium"
    blank.write_text("")
    chromium = shutil.which("chromium")
    hide = f"mount --bind {blank} {chromium} && " if chromium else ""
    script = f"{hide}exec {ROOT}/scripts/test.sh tests/render/test_html.py -q -rs"
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}
    env.pop("NSYSPROBE_SKIP_BROWSER_TESTS", None)
    result = subprocess.run(
        ["unshare", "-m", "bash", "-c", script],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    why = (
        "no chromium on PATH and no root to install it: the HTML report's browser tests are skipped"
    )
    assert f"test.sh: {why}" in result.stderr
    assert "install_chromium:" not in result.stdout + result.stderr  # its own lines
    assert "SKIPPED [" in result.stdout and why in result.stdout
    tail = result.stdout.strip().splitlines()[-1]
    assert " passed" in tail and " skipped" in tail and "error" not in tail and "failed" not in tail
