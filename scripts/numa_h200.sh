#!/usr/bin/env bash
# NUMA measurements on a GPU machine: topology, recorded command outputs, and the DDP workload
# with and without --numa-aware on all GPUs. Usage: scripts/numa_h200.sh OUT_DIR
# Needs python3 with torch/torchvision and PYTHONPATH pointing at the repository. ~4 minutes.
set -uo pipefail

out="${1:?usage: scripts/numa_h200.sh OUT_DIR}"
mkdir -p "$out"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="${PYTHON:-python3}"
nsysprobe() { "$py" -c "from nsysprobe.cli import main; main()" "$@"; }

lscpu > "$out/lscpu.txt" 2>&1
lscpu -p > "$out/lscpu-p.txt" 2>&1
if command -v numactl > /dev/null; then
    numactl --hardware > "$out/numactl-hardware.txt" 2>&1
else
    echo "numactl not installed" > "$out/numactl-missing.txt"
fi
nvidia-smi topo -m > "$out/nvidia-smi-topo-m.txt" 2>&1
nsysprobe topo --format json > "$out/topo.json" 2> "$out/topo.err"
nsysprobe topo | tee "$out/topo.txt"
nsysprobe topo --from "$out" --format json > "$out/topo-from-recording.json" 2>&1
nsysprobe numa plan --mode node | tee "$out/plan-node.txt"

gpus="$(nvidia-smi -L | grep -c '^GPU')"
steps="${NUMA_STEPS:-30}"
for aware in "" "--numa-aware"; do
    tag="${aware:-plain}"
    tag="${tag#--}"
    echo "== $gpus GPU(s), $tag, $steps steps"
    timeout 110 "$py" -c "from nsysprobe.cli import main; main()" launch \
        --nproc-per-node "$gpus" --numa none -- \
        "$py" "$repo/workloads/numa_ddp.py" --steps "$steps" --warmup 5 $aware \
        2>&1 | tee "$out/ddp-$tag.log" | grep -E 'steps/s|bound|rror'
done
grep -h 'steps/s' "$out"/ddp-*.log
