#!/usr/bin/env bash
# Profile the optimization ladder with `nsysprobe run`: one run folder per rung under OUT_DIR
# (report, SQLite export, analysis.json, nsys command and log). The unprofiled figures come from
# scripts/ladder_h200.sh; the difference is the profiling overhead.
#
# usage: scripts/capture_ladder.sh OUT_DIR [RUNG...]     (default: all six rungs)
#   PYTHON   interpreter with torch, torchvision and nvtx<0.2.12 (default python3)
#   STEPS    profiled steps per rung (default 20); WARMUP unprofiled steps first (default 5)
#   WORKERS  loader workers for the rungs that use them (default 8)
#   RUN_ARGS extra options for nsysprobe run (e.g. --cpuctxsw); WORKLOAD_ARGS for the rungs
set -uo pipefail
cd "$(dirname "$0")/.."

out="${1:?usage: scripts/capture_ladder.sh OUT_DIR [RUNG...]}"
shift
rungs=("$@")
[ ${#rungs[@]} -eq 0 ] && rungs=(baseline multiworker pinned streams prefetch cached)
PYTHON=${PYTHON:-python3}
STEPS=${STEPS:-20}
WARMUP=${WARMUP:-5}
WORKERS=${WORKERS:-8}
status=0
for rung in "${rungs[@]}"; do
    workers=()
    case $rung in multiworker | pinned | streams | prefetch) workers=(--workers "$WORKERS") ;; esac
    started=$SECONDS
    # shellcheck disable=SC2086
    "$PYTHON" -m nsysprobe run --output "$out/$rung" ${RUN_ARGS:-} \
        "workloads/$rung.py" --steps "$STEPS" --warmup "$WARMUP" "${workers[@]}" ${WORKLOAD_ARGS:-} \
        > "$out.$rung.txt" 2>&1 || status=$?
    mkdir -p "$out/$rung" && mv "$out.$rung.txt" "$out/$rung/run-output.txt"
    echo "$rung: exit $status, $((SECONDS - started)) s," \
        "$(grep -h '^steps_per_s=' "$out/$rung/run-output.txt" | tail -n 1)," \
        "verdict: $(grep -h '^VERDICT' "$out/$rung/run-output.txt" | head -n 1)"
done
exit $status
