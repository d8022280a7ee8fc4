#!/usr/bin/env bash
# Set up (idempotent) and run the test suite; arguments go to pytest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/install_chromium.sh"  # for the HTML report's browser tests
cd "$root"
exec .venv/bin/python -m pytest "$@"
