#!/usr/bin/env bash
# Set up (idempotent) and run the test suite; arguments go to pytest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
# The HTML report's browser tests need Chromium, which only root can install (apt-get).
# Without it and without root they are skipped, each with this message, and the rest runs.
# (The tests look it up as shutil.which does: an executable file named chromium on PATH.)
has_chromium() { local path; path="$(command -v chromium || true)"; [ -n "$path" ] && [ -x "$path" ]; }
if has_chromium || [ "$(id -u)" -eq 0 ]; then
    "$root/scripts/install_chromium.sh"
else
    export NSYSPROBE_SKIP_BROWSER_TESTS="no chromium on PATH and no root to install it: the \
HTML report's browser tests are skipped; run 'sudo scripts/install_chromium.sh' to run them"
    echo "test.sh: $NSYSPROBE_SKIP_BROWSER_TESTS" >&2
fi
cd "$root"
exec .venv/bin/python -m pytest "$@"
