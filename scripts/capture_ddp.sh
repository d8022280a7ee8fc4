#!/usr/bin/env bash
# Two-rank DDP captures for the cross-rank view (issue: two-GPU captures on the H200 x2):
# workloads/numa_ddp.py on every GPU, one nsys report per rank (`-o rank%q{RANK}`), each rank
# capturing the same timed steps (cudaProfilerStart/Stop in the workload), then the reports
# imported, exported to SQLite and scrubbed into OUT_DIR/h200x2_NAME/rankN.sqlite, and one
# line per run: exit code, seconds, each rank's steps/s, and nsysprobe's straggler verdict.
#
# usage: scripts/capture_ddp.sh OUT_DIR [NAME...]
#   NAME      balanced       nsysprobe launch, every rank alike
#             torchrun       the same through torchrun --no-python (the other launch path)
#             slow_workers   rank 1 with SLOW_WORKERS loader workers (default 1)
#             pageable       rank 1 copies from pageable memory, blocking
#             numa_bound     nsysprobe launch --numa node with --numa-aware (binding on)
#   NSYS      nsys to profile with (default: nsys on PATH)
#   PYTHON    interpreter with torch, torchvision and nvtx (default python3)
#   STEPS, WARMUP   timed and warm-up steps (default 12 and 5); GPUS (default: nvidia-smi -L)
#   TRACE     nsys --trace (default cuda,nvtx,osrt); RANGE=none profiles the whole run (a CPU
#             smoke test has no CUDA profiler range); WORKLOAD_ARGS extra workload options,
#             e.g. "--device cpu --image-size 32 --batch-size 2" for a smoke test under gloo
# A NAME whose folder exists is skipped (exit 2): no capture is overwritten.
set -uo pipefail
cd "$(dirname "$0")/.."

out="${1:?usage: scripts/capture_ddp.sh OUT_DIR [NAME...]}"
shift
names=("$@")
[ ${#names[@]} -eq 0 ] && names=(balanced torchrun slow_workers pageable numa_bound)
PYTHON=${PYTHON:-python3}
NSYS=${NSYS:-nsys}
STEPS=${STEPS:-12}
WARMUP=${WARMUP:-5}
TRACE=${TRACE:-cuda,nvtx,osrt}
GPUS=${GPUS:-$(nvidia-smi -L 2> /dev/null | grep -c '^GPU' || echo 2)}
[ "$GPUS" -ge 1 ] 2> /dev/null || GPUS=2
range=(--capture-range=cudaProfilerApi --capture-range-end=stop)
[ "${RANGE:-}" = none ] && range=()
nsysprobe() { "$PYTHON" -m nsysprobe "$@"; }
importer=$("$PYTHON" -c 'import sys
from nsysprobe.capture.locate import find_importer, find_nsys
print(find_importer(find_nsys(sys.argv[1])) or "")' "$NSYS" 2> /dev/null)
mkdir -p "$out"
status=0
for name in "${names[@]}"; do
    folder="$out/h200x2_$name"
    if [ -e "$folder" ]; then
        echo "$name: $folder exists; remove it or pass another OUT_DIR"
        status=2
        continue
    fi
    args=()
    launcher=(nsysprobe launch --nproc-per-node "$GPUS" --numa none --)
    case $name in
        balanced) ;;
        torchrun) launcher=("$PYTHON" -m torch.distributed.run --nproc-per-node "$GPUS" --no-python) ;;
        slow_workers) args=(--rank-workers "1=${SLOW_WORKERS:-1}") ;;
        pageable) args=(--pageable-rank 1) ;;
        numa_bound)
            launcher=(nsysprobe launch --nproc-per-node "$GPUS" --numa node --)
            args=(--numa-aware)
            ;;
        *)
            echo "$name: unknown run (see the usage at the top of $0)"
            status=2
            continue
            ;;
    esac
    mkdir -p "$folder/raw"
    started=$SECONDS
    code=0
    # shellcheck disable=SC2086
    "${launcher[@]}" "$NSYS" profile --trace="$TRACE" "${range[@]}" --force-overwrite=false \
        -o "$folder/raw/rank%q{RANK}" "$PYTHON" workloads/numa_ddp.py --steps "$STEPS" \
        --warmup "$WARMUP" "${args[@]}" ${WORKLOAD_ARGS:-} > "$folder/run-output.txt" 2>&1 ||
        code=$?
    for stream in "$folder"/raw/*.qdstrm; do
        [ -e "$stream" ] || continue
        [ -n "$importer" ] && "$importer" -i "$stream" >> "$folder/run-output.txt" 2>&1
        rm -f "$stream"
    done
    for rep in "$folder"/raw/rank*.nsys-rep; do
        [ -e "$rep" ] || continue
        rank=$(basename "$rep" .nsys-rep)
        "$NSYS" export --type sqlite --force-overwrite=true -o "$folder/raw/$rank.sqlite" "$rep" \
            >> "$folder/run-output.txt" 2>&1 &&
            nsysprobe scrub "$folder/raw/$rank.sqlite" -o "$folder/$rank.sqlite" \
                >> "$folder/run-output.txt" 2>&1 || { [ "$code" -eq 0 ] && code=1; }
    done
    rates=$(grep -ho 'rank [0-9]*: [0-9.]* steps/s' "$folder/run-output.txt" | sort | tr '\n' ' ')
    verdict=$(nsysprobe analyze "$folder" --no-history --format json 2> /dev/null |
        "$PYTHON" -c 'import json,sys; d=json.load(sys.stdin); print("stragglers", d["stragglers"] or "none")' 2> /dev/null ||
        echo "not analyzed")
    echo "$name: exit $code, $((SECONDS - started)) s, ${rates:-no steps/s printed}, $verdict"
    [ "$code" -ne 0 ] && status=1
done
exit $status
