#!/usr/bin/env bash
# Profile the training-mistake workloads (workloads/mistakes.py lists them) with
# `nsysprobe run`: one run folder per workload under OUT_DIR (report, SQLite export,
# analysis.json, nsys command and log, the workload's output), a scrubbed copy of each export
# as OUT_DIR/h200_NAME.sqlite, and one line per workload: exit code, seconds, steps/s, verdict.
# The run folder's *.qdstrm (nsys's raw stream, gigabytes on a GPU) is deleted. A NAME whose
# run folder exists already is skipped (exit 2), so no capture is overwritten.
#
# usage: scripts/capture_mistakes.sh OUT_DIR [NAME...]   (default: all, tiny_layers twice)
#   NAME     readback dtoh_numpy empty_cache tiny_layers tiny_layers_graph slow_loader
#            python_overhead compute_bound; tiny_layers_graph is tiny_layers.py --cuda-graph;
#            the GPU-bound loop of workloads/gpu_bound.py: gpu_bound_fp32, gpu_bound_tf32,
#            gpu_bound_bf16, gpu_bound_sync (fp32, loss.item() every 5 steps), gpu_bound_graph
#            (tf32, a CUDA graph); bursty_loader is slow_loader.py --workers 4 (batches in fours)
#            the pathologies and loops of issues 31 and 32, each its own script: cpu_optimizer
#            checkpoint worker_respawn host_postprocess cudnn_autotune gc_collect periodic_eval
#            copy_bound offload_inference init_in_capture; loops never seen by those issues'
#            rules, to try them on: grad_accumulation weight_histograms val_respawn
#   PYTHON   interpreter with torch, torchvision and nvtx<0.2.12 (default python3)
#   STEPS    profiled steps per workload (default 20); WARMUP unprofiled steps first (default 5)
#   RUN_ARGS extra options for nsysprobe run; WORKLOAD_ARGS for every workload
#            (e.g. WORKLOAD_ARGS="--device cpu" for a smoke test without a GPU)
set -uo pipefail
cd "$(dirname "$0")/.."

out="${1:?usage: scripts/capture_mistakes.sh OUT_DIR [NAME...]}"
shift
names=("$@")
[ ${#names[@]} -eq 0 ] && names=(readback dtoh_numpy empty_cache tiny_layers tiny_layers_graph
    slow_loader python_overhead compute_bound)
PYTHON=${PYTHON:-python3}
STEPS=${STEPS:-20}
WARMUP=${WARMUP:-5}
mkdir -p "$out"
status=0
for name in "${names[@]}"; do
    script=$name
    extra=()
    case $name in
        readback | dtoh_numpy | empty_cache | tiny_layers | slow_loader | python_overhead | \
            compute_bound | cpu_optimizer | checkpoint | worker_respawn | host_postprocess | \
            cudnn_autotune | gc_collect | periodic_eval | copy_bound | offload_inference | \
            init_in_capture | grad_accumulation | weight_histograms | val_respawn) ;;
        tiny_layers_graph) script=tiny_layers extra=(--cuda-graph) ;;
        gpu_bound_fp32 | gpu_bound_tf32 | gpu_bound_bf16)
            script=gpu_bound extra=(--precision "${name#gpu_bound_}")
            ;;
        gpu_bound_sync) script=gpu_bound extra=(--precision fp32 --sync-every 5) ;;
        gpu_bound_graph) script=gpu_bound extra=(--precision tf32 --cuda-graph) ;;
        bursty_loader) script=slow_loader extra=(--workers 4) ;;
        *)
            echo "$name: unknown workload (see the usage at the top of $0)"
            status=2
            continue
            ;;
    esac
    if [ -e "$out/$name" ]; then
        echo "$name: $out/$name exists; remove it or pass another OUT_DIR"
        status=2
        continue
    fi
    started=$SECONDS
    code=0
    # shellcheck disable=SC2086
    "$PYTHON" -m nsysprobe run --output "$out/$name" ${RUN_ARGS:-} \
        "workloads/$script.py" --steps "$STEPS" --warmup "$WARMUP" "${extra[@]}" \
        ${WORKLOAD_ARGS:-} > "$out/$name.txt" 2>&1 || code=$?
    mkdir -p "$out/$name" && mv "$out/$name.txt" "$out/$name/run-output.txt"
    find "$out/$name" -name '*.qdstrm' -delete
    if [ -f "$out/$name/report.sqlite" ]; then
        "$PYTHON" -m nsysprobe scrub --force "$out/$name/report.sqlite" \
            -o "$out/h200_$name.sqlite" >> "$out/$name/run-output.txt" 2>&1 || {
            scrubbed=$?
            [ "$code" -eq 0 ] && code=$scrubbed
        }
    fi
    [ "$code" -ne 0 ] && status=$code
    echo "$name: exit $code, $((SECONDS - started)) s," \
        "$(grep -oh 'steps_per_s=[0-9.]*' "$out/$name/run-output.txt" | tail -n 1)," \
        "verdict: $(grep -h '^VERDICT' "$out/$name/run-output.txt" | head -n 1)"
done
exit $status
