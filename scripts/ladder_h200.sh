#!/usr/bin/env bash
# Run every optimization-ladder rung once on the GPU, without nsys, and print a table of
# steps/s, speed-up over the baseline and share of the cached ceiling. These are the
# unprofiled numbers; the profiled runs (and so the profiling overhead) are nsysprobe run's job.
#
# usage: scripts/ladder_h200.sh [ARGS...]   (ARGS go to every rung, e.g. --image-size 64)
#   PYTHON   interpreter with torch, torchvision and nvtx   (default python3)
#   STEPS    measured steps per rung                          (default 30)
#   WARMUP   unmeasured steps first                           (default 10)
#   WORKERS  loader workers for the rungs that use them       (default 8, as in NSYS_FACTS.md)
#   DEVICE   where the rungs train                            (default cuda; cpu for a dry run)
# About 2 minutes on an H200: 40 baseline steps at ~2.5 steps/s plus ~10 s start-up per rung.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
STEPS=${STEPS:-30}
WARMUP=${WARMUP:-10}
WORKERS=${WORKERS:-8}
DEVICE=${DEVICE:-cuda}
RUNGS=(baseline multiworker pinned streams prefetch cached)

"$PYTHON" -c 'import torch
gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA device"
print(f"torch {torch.__version__}, {gpu}")'

declare -A rate
for rung in "${RUNGS[@]}"; do
    # baseline and cached define themselves by having no workers: leave them their default, 0.
    workers=()
    case $rung in multiworker | pinned | streams | prefetch) workers=(--workers "$WORKERS") ;; esac
    started=$SECONDS
    output=$(timeout 300 "$PYTHON" "workloads/$rung.py" --device "$DEVICE" \
        --steps "$STEPS" --warmup "$WARMUP" "${workers[@]}" "$@")
    echo "$output" | head -n 1
    rate[$rung]=$(echo "$output" | sed -n 's/^steps_per_s=//p' | tail -n 1)
    if [[ -z ${rate[$rung]} ]]; then
        echo "$rung printed no steps_per_s line:" >&2
        echo "$output" >&2
        exit 1
    fi
    echo "$rung: ${rate[$rung]} steps/s ($((SECONDS - started)) s wall)"
done

echo
echo "| rung | steps/s | speed-up over baseline | share of cached ceiling |"
echo "| --- | ---: | ---: | ---: |"
for rung in "${RUNGS[@]}"; do
    awk -v rung="$rung" -v r="${rate[$rung]}" -v base="${rate[baseline]}" -v ceil="${rate[cached]}" \
        'BEGIN { printf "| %s | %.2f | %.2fx | %.1f %% |\n", rung, r, r / base, 100 * r / ceil }'
done
