#!/usr/bin/env bash
# Set up nsysprobe on a fresh machine, without root, idempotently:
#   .venv/        the package with its test tools and the workloads' torch/torchvision/nvtx
#   .nsys/        Nsight Systems 2023.4.4 from Debian's non-free packages, only when no usable
#                 nsys is found ($NSYSPROBE_NSYS_HOME overrides the folder)
# System apt sources are never touched: apt-get reads a sources file of its own in a temp folder.
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

arch="$(dpkg --print-architecture 2>/dev/null || true)"
if [ "$arch" != amd64 ]; then
    say "no nsys found and Debian ships Nsight Systems only for amd64 (this is '${arch:-not Debian}');"
    say "install it from https://developer.nvidia.com/nsight-systems and pass --nsys PATH or set NSYS"
    exit 1
fi

say "no usable nsys found; installing Nsight Systems $NSYS_VERSION from Debian non-free into $nsys_home"
started=$(date +%s)
mkdir -p "$nsys_home"
work="$(mktemp -d "$nsys_home/.download.XXXXXX")"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/sources" "$work/lists/partial" "$work/cache/archives/partial" "$work/debs" "$work/x"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
# libssh-4 comes from this machine's own Debian release so that it links against its libc.
codename="$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")"
# The Debian mirror this machine already uses (or $NSYSPROBE_DEBIAN_MIRROR).
mirror="${NSYSPROBE_DEBIAN_MIRROR:-$(
    { sed -n 's/^URIs:[[:space:]]*//p' /etc/apt/sources.list.d/*.sources 2>/dev/null
      sed -n 's/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]*\).*/\2/p' \
          /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null
    } | tr ' ' '\n' | grep -m1 '/debian/\?$' || true)}"
if [ -z "$mirror" ]; then
    say "no Debian mirror found in the apt sources; set NSYSPROBE_DEBIAN_MIRROR to one"
    exit 1
fi
cat >"$work/sources/nsysprobe.list" <<LIST
deb [signed-by=$keyring] $mirror trixie non-free
deb [signed-by=$keyring] $mirror $codename main
LIST
apt_opts=(-q -o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$work/sources"
    -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache"
    -o "APT::Sandbox::User=$(id -un)")
say "apt-get update (private sources list: trixie non-free, $codename main)"
apt-get "${apt_opts[@]}" update >"$work/apt.log" 2>&1 || { cat "$work/apt.log"; exit 1; }
say "downloading nsight-systems, nsight-systems-target (about 190 MB) and libssh-4"
(cd "$work/debs" && apt-get "${apt_opts[@]}" download nsight-systems nsight-systems-target \
    "libssh-4/$codename") >"$work/apt.log" 2>&1 || { cat "$work/apt.log"; exit 1; }
say "unpacking"
for deb in "$work"/debs/*.deb; do dpkg -x "$deb" "$work/x"; done

stage="$work/$NSYS_VERSION"
mkdir -p "$stage"
mv "$work/x/usr/lib/nsight-systems/host-linux-x64" "$stage/host-linux-x64"
mv "$work/x/usr/lib/x86_64-linux-gnu/nsight-systems/target-linux-x64" "$stage/target-linux-x64"
# The package's libssh.so points at a libssh.so.4 that is not in the package: without a real
# one QdstrmImporter cannot load and every capture stops at a .qdstrm.
rm -f "$stage/host-linux-x64/libssh.so" "$stage/host-linux-x64/libssh.so.4"
cp -L "$work/x/usr/lib/x86_64-linux-gnu/libssh.so.4" "$stage/host-linux-x64/libssh.so.4"
ln -s libssh.so.4 "$stage/host-linux-x64/libssh.so"

rm -rf "${nsys_home:?}/$NSYS_VERSION"
mv "$stage" "$nsys_home/$NSYS_VERSION"
"$nsys_home/$NSYS_VERSION/target-linux-x64/nsys" --version
say "installed $nsys_home/$NSYS_VERSION/target-linux-x64/nsys in $(($(date +%s) - started)) s"
