#!/usr/bin/env bash
# Set up nsysprobe on a fresh machine, without root, idempotently:
#   .venv/        the package with its test tools and the workloads' torch/torchvision/nvtx
#   .nsys/        Nsight Systems 2023.4.4 from Debian's non-free packages, only when no usable
#                 nsys is found ($NSYSPROBE_NSYS_HOME overrides the folder)
# System apt sources are never touched: apt-get reads a sources file of its own in a temp folder
# (nsysprobe doctor --install, which users of the installed package run too).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
say() { echo "setup: $*"; }

NSYS_VERSION=2023.4.4
nsys_home="${NSYSPROBE_NSYS_HOME:-$root/.nsys}"

# torch/torchvision builds that pip finds on this machine kind's local disk (see the env notes).
case "$(uname -m)" in
    x86_64) torch_pins=(torch==2.14.1 torchvision==0.29.1) ;;
    aarch64) torch_pins=(torch==2.9.1 torchvision==0.24.1) ;;
    *) torch_pins=(torch torchvision) ;;
esac

if [ ! -x .venv/bin/python ]; then
    say "creating .venv"
    python3 -m venv .venv
fi

# pip is slow even when there is nothing to do, so skip it while pyproject.toml and the pins
# are unchanged since the last successful install and the package imports from elsewhere
# (an editable install made before nsysprobe/__init__.py existed maps it to nothing).
stamp=.venv/.nsysprobe-setup
want="$(sha256sum pyproject.toml | cut -d' ' -f1) ${torch_pins[*]}"
imports() { (cd / && "$root/.venv/bin/python" -c 'import nsysprobe, sys; sys.exit(not nsysprobe.__file__)') 2>/dev/null; }
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] || ! imports; then
    say "installing nsysprobe[test,workloads] and ${torch_pins[*]} into .venv (first time: minutes)"
    .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test,workloads]' "${torch_pins[@]}"
    echo "$want" >"$stamp"
else
    say ".venv is up to date"
fi

found="$(.venv/bin/python -c 'from nsysprobe.capture.locate import find_nsys
i = find_nsys()
print(f"{i.version} at {i.path}")' 2>/dev/null || true)"
if [ -n "$found" ]; then
    say "using nsys $found"
    exit 0
fi

# One installer for set-up and users alike: nsysprobe doctor --install (nsysprobe/capture/
# install.py) downloads the packages with a private apt sources list, unpacks them with dpkg -x
# into $nsys_home/<version>/, gives the importer the libssh it needs, then runs the checks.
say "no usable nsys found; installing Nsight Systems $NSYS_VERSION into $nsys_home"
started=$(date +%s)
NSYSPROBE_NSYS_HOME="$nsys_home" .venv/bin/python -m nsysprobe doctor --install
say "installed in $(($(date +%s) - started)) s"
