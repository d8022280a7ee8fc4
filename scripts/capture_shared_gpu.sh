#!/usr/bin/env bash
# Two training processes sharing one GPU, captured as one report: the fp32 and the TF32 loops
# of workloads/gpu_bound.py started together under one `nsysprobe run --no-capture-range`
# (each process would start and stop its own profiler range; the whole run is captured
# instead, so each process's steps start at its first one: --warmup 0). Each process writes
# its own log and pid file, so a test can hold each process's steps to its own clock.
#
# Writes OUT_DIR/shared_gpu/ (the run folder, its .qdstrm deleted), OUT_DIR/shared_gpu/logs/
# ({fp32,tf32}.log and .pid) and OUT_DIR/h200_shared_gpu.sqlite (scrubbed); one line at the
# end: exit code, seconds, each process's pid and steps/s. An existing run folder is not
# overwritten (exit 2).
#
# usage: scripts/capture_shared_gpu.sh OUT_DIR
#   PYTHON   interpreter with torch and nvtx<0.2.12 (default python3)
#   STEPS    the fp32 loop's steps (default 20); the TF32 loop, five times faster, runs 5x as
#            many, so the two share the GPU for most of the capture
#   WORKLOAD_ARGS  more options for both (e.g. "--device cpu" for a smoke test without a GPU)
set -uo pipefail
cd "$(dirname "$0")/.."

out="${1:?usage: scripts/capture_shared_gpu.sh OUT_DIR}"
PYTHON=${PYTHON:-python3}
STEPS=${STEPS:-20}
folder="$out/shared_gpu"
if [ -e "$folder" ]; then
    echo "$folder exists; remove it or pass another OUT_DIR"
    exit 2
fi
logs="$out/shared_gpu-logs"
mkdir -p "$logs"
started=$SECONDS
# shellcheck disable=SC2016  # the inner script expands its own arguments
"$PYTHON" -m nsysprobe run --no-capture-range --no-history --output "$folder" -- bash -c '
    py=$1 logs=$2 steps=$3
    shift 3
    "$py" workloads/gpu_bound.py --precision fp32 --warmup 0 --steps "$steps" "$@" \
        > "$logs/fp32.log" 2>&1 &
    echo $! > "$logs/fp32.pid"
    "$py" workloads/gpu_bound.py --precision tf32 --warmup 0 --steps $((steps * 5)) "$@" \
        > "$logs/tf32.log" 2>&1 &
    echo $! > "$logs/tf32.pid"
    wait' bash "$PYTHON" "$logs" "$STEPS" ${WORKLOAD_ARGS:-} > "$logs/run-output.txt" 2>&1
code=$?
find "$folder" -name '*.qdstrm' -delete 2>/dev/null
if [ -f "$folder/report.sqlite" ]; then
    "$PYTHON" -m nsysprobe scrub --force "$folder/report.sqlite" -o "$out/h200_shared_gpu.sqlite" \
        >> "$logs/run-output.txt" 2>&1 || code=$?
fi
mv "$logs" "$folder/logs" 2>/dev/null || true
summary=""
for p in fp32 tf32; do
    summary+=" $p: pid $(cat "$folder/logs/$p.pid" 2>/dev/null)"
    summary+=" $(grep -oh 'steps_per_s=[0-9.]*' "$folder/logs/$p.log" 2>/dev/null | tail -n 1);"
done
echo "shared_gpu: exit $code, $((SECONDS - started)) s,$summary"
exit $code
