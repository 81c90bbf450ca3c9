#!/usr/bin/env bash
# The next slice of the nightly CUDA grid (`advisor bench plan --device cuda --grid`) in one command, from
# where the committed results stop; `--device cpu` runs the same parts anywhere (the CPU grid, against
# benchmarks/results/cpu-rehearsal/). Every part has a hard limit inside --minutes (default 9: one 10-minute
# `run` call) and writes to the output folder, which is all that comes back:
#   versions.txt  the Python, torch, transformers and GPU it ran on
#   plan.json     the slice (`python -m benchmarks.gpu.slice_plan`: the grid's configurations that no
#                 committed result of this machine holds, coarse grid first, in the grid's order)
#   plan.txt      what the plan says it covers
#   bench.jsonl   `python -m advisor.bench.job --plan plan.json`: one JSON line per measurement, kept even
#                 when the job is killed at its limit
#   bench.log     its progress and run summary
#   summary.txt   the short table printed last
# Usage: benchmarks/gpu/slice.sh [--device cuda|cpu] [--out DIR] [--minutes M] [--results DIR] [--models A,B]
#   DIR: default $OUT, else ./gpu-slice; --results: default benchmarks/results/h200 (cuda) or
#   benchmarks/results/cpu-rehearsal (cpu); --models: only these of the grid's models (the CPU rehearsal's
#   small slices). benchmarks/gpu/README.md says how to run it and keep its results.
set -uo pipefail
cd "$(dirname "$0")/../.."

device=cuda
out=${OUT:-gpu-slice}
minutes=9
results=
models=()
usage="usage: benchmarks/gpu/slice.sh [--device cuda|cpu] [--out DIR] [--minutes M] [--results DIR] [--models A,B]"
while [ $# -gt 0 ]; do
  case "$1" in
    --device) device=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --minutes) minutes=$2; shift 2 ;;
    --results) results=$2; shift 2 ;;
    --models) models=(--models "$2"); shift 2 ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
case "$device" in
  # The planner's estimates assume 40 TFLOP/s: plan three times what the job may spend, and let its
  # budget stop it in the plan's order (what it does not reach stays unmeasured for the next slice).
  cuda) partition=h200 plan_limit=240 ;;
  cpu) partition=cpu-rehearsal plan_limit=240 ;;
  *) echo "slice.sh: --device is cuda or cpu, not $device" >&2; exit 2 ;;
esac
results=${results:-benchmarks/results/$partition}
deadline=$(($(date +%s) + $(awk -v m="$minutes" 'BEGIN { printf "%d", m * 60 }')))
source benchmarks/gpu/python.sh

started=$(date +%s)
left=$((deadline - started))
shopt -s nullglob
committed=("$results"/*.jsonl)
timeout "$plan_limit" "$python" -m benchmarks.gpu.slice_plan --device "$device" --out "$out/plan.json" "${models[@]}" \
  --budget-minutes "$(awk -v s="$left" 'BEGIN { printf "%.1f", 3 * s / 60 }')" "${committed[@]}" \
  >"$out/plan.txt" 2>&1
status=$?
echo "plan: exit $status after $(($(date +%s) - started)) s" >>"$out/plan.txt"

started=$(date +%s)
left=$((deadline - started))
if [ "$status" -eq 0 ] && [ "$left" -gt 60 ]; then
  # Measuring stops a minute before the deadline; an item that overruns its estimate is killed at it.
  timeout "$((left - 10))" "$python" -m advisor.bench.job --plan "$out/plan.json" --device "$device" \
    --partition "$partition" --budget-minutes "$(awk -v s="$left" 'BEGIN { printf "%.2f", (s - 60) / 60 }')" \
    --out "$out/bench.jsonl" >"$out/bench.log" 2>&1
  echo "bench: exit $? after $(($(date +%s) - started)) s" >>"$out/bench.log"
else
  echo "bench: not started (plan exit $status, $left s left)" >>"$out/bench.log"
fi

"$python" benchmarks/gpu/summary.py "$out" | tee "$out/summary.txt"
