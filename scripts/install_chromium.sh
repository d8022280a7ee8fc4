#!/usr/bin/env bash
# Install Debian's Chromium for nsysprobe's HTML report tests (tests/render/test_html.py),
# idempotently. Needs root (apt-get). Without chromium the browser tests fail, unless
# $NSYSPROBE_SKIP_BROWSER_TESTS says why they are skipped (scripts/test.sh sets it for a user
# who is not root).
set -euo pipefail

say() { echo "install_chromium: $*"; }

if command -v chromium >/dev/null 2>&1; then
    say "chromium is installed: $(chromium --version 2>/dev/null || echo 'version unknown')"
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    say "needs root to run apt-get; run: sudo $0" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# A fresh container has empty package lists: update them first, and again if the install
# fails on lists that went stale.
if [ -z "$(ls -A /var/lib/apt/lists 2>/dev/null | grep -v -e '^lock$' -e '^partial$')" ]; then
    say "apt-get update"
    apt-get update -q
fi
if ! apt-get install -y -q --no-install-recommends chromium; then
    say "apt-get update, then retrying"
    apt-get update -q
    apt-get install -y -q --no-install-recommends chromium
fi
say "installed $(chromium --version)"
