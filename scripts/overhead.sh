#!/usr/bin/env bash
# Profiling overhead of `nsysprobe run`: each rung alternately without and with nsys, REPEATS
# times, so drift on the machine hits both alike. Prints one line per run and a summary with
# the median steps/s of each mode and their ratio.
#
# usage: scripts/overhead.sh OUT_DIR [RUNG...]    (default: baseline pinned prefetch)
#   PYTHON, STEPS (default 20), WARMUP (default 5), WORKERS (default 8), REPEATS (default 2),
#   WORKLOAD_ARGS (more options for the rungs, e.g. --device cpu --image-size 32)
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: scripts/overhead.sh OUT_DIR [RUNG...]}"
shift
rungs=("$@")
[ ${#rungs[@]} -eq 0 ] && rungs=(baseline pinned prefetch)
PYTHON=${PYTHON:-python3}
STEPS=${STEPS:-20}
WARMUP=${WARMUP:-5}
WORKERS=${WORKERS:-8}
REPEATS=${REPEATS:-2}
mkdir -p "$out"
rate() { sed -n 's/^steps_per_s=//p' "$1" | tail -n 1; }
for rep in $(seq "$REPEATS"); do
    for rung in "${rungs[@]}"; do
        # shellcheck disable=SC2206
        args=(--steps "$STEPS" --warmup "$WARMUP" ${WORKLOAD_ARGS:-})
        case $rung in multiworker | pinned | streams | prefetch) args+=(--workers "$WORKERS") ;; esac
        "$PYTHON" "workloads/$rung.py" "${args[@]}" > "$out/$rung-$rep-plain.txt" 2>&1
        echo "$rung $rep plain $(rate "$out/$rung-$rep-plain.txt")"
        "$PYTHON" -m nsysprobe run --no-history --output "$out/$rung-$rep" \
            "workloads/$rung.py" "${args[@]}" > "$out/$rung-$rep-nsys.txt" 2>&1
        rm -f "$out/$rung-$rep"/*.qdstrm "$out/$rung-$rep"/*.nsys-rep
        echo "$rung $rep nsys $(rate "$out/$rung-$rep-nsys.txt")"
    done
done | tee "$out/runs.txt"
echo
echo "| rung | steps/s without nsys (median) | with nsysprobe run (median) | profiled / plain |"
echo "| --- | ---: | ---: | ---: |"
for rung in "${rungs[@]}"; do
    plain=$(awk -v r="$rung" '$1 == r && $3 == "plain" {print $4}' "$out/runs.txt" | sort -n |
        awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}')
    nsys=$(awk -v r="$rung" '$1 == r && $3 == "nsys" {print $4}' "$out/runs.txt" | sort -n |
        awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}')
    awk -v r="$rung" -v p="$plain" -v n="$nsys" \
        'BEGIN { printf "| %s | %.2f | %.2f | %.3f |\n", r, p, n, n / p }'
done
