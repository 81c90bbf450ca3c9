#!/usr/bin/env bash
# The advisor's first measurements on a GPU in one command; `--device cpu` runs the same parts anywhere (CI
# does, with a budget of seconds). Every part writes to the output folder, which is all that comes back:
#   bench.jsonl   `python -m advisor.bench.job --check`: the zoo's coarse grid at 32 and 224 px, AMP and
#                 channels_last, layers (dense, grouped, depthwise) with and without cuDNN's benchmark mode;
#                 ingest it with `advisor bench ingest`, then `advisor models train` / `evaluate`
#   bench.log     its progress and run summary
#   speedup.txt   benchmarks/runtime_speedup.py: accumulation, AMP (bf16; fp16 with a GradScaler), pinned
#                 memory, alone and together, as speed-up over the plain baseline
#   pytest.txt    the suite's CUDA-only tests (`pytest -m cuda`)
#   summary.txt   the short table printed last
#   versions.txt  the Python, torch, transformers and GPU it ran on
# Usage: benchmarks/gpu/check.sh [--device cuda|cpu] [--out DIR]   (DIR: default $OUT, else ./gpu-check)
# Where the Python lacks pydantic (the GPU machine's), the wheels in .whl/ (benchmarks/gpu/wheels.sh fetches
# them) are installed first into a private target (benchmarks/gpu/python.sh). benchmarks/gpu/README.md says
# when to run it (the first GPU run; slice.sh after) and how to keep its results.
set -uo pipefail
cd "$(dirname "$0")/../.."

device=cuda
out=${OUT:-gpu-check}
while [ $# -gt 0 ]; do
  case "$1" in
    --device) device=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "usage: benchmarks/gpu/check.sh [--device cuda|cpu] [--out DIR]" >&2; exit 2 ;;
  esac
done
case "$device" in
  # About six minutes of measuring on a GPU; each part has its own hard limit within one 10-minute call.
  cuda) bench_minutes=3.5 bench_limit=285 models=resnet50,resnet18,mobilenet_v3_large size=224 batch=128
        steps=10 threads=4 speed_limit=150 test_limit=90 ;;
  cpu) bench_minutes=0.05 bench_limit=240 models=squeezenet1_1 size=32 batch=8 steps=3 threads=1
       speed_limit=240 test_limit=120 ;;
  *) echo "check.sh: --device is cuda or cpu, not $device" >&2; exit 2 ;;
esac
source benchmarks/gpu/python.sh

started=$(date +%s)
timeout "$bench_limit" "$python" -m advisor.bench.job --check --device "$device" \
  --budget-minutes "$bench_minutes" --partition gpu-check --out "$out/bench.jsonl" >"$out/bench.log" 2>&1
echo "bench: exit $? after $(($(date +%s) - started)) s" >>"$out/bench.log"

started=$(date +%s)
timeout "$speed_limit" "$python" benchmarks/runtime_speedup.py --device "$device" --models "$models" \
  --size "$size" --global-batch "$batch" --accum 4 --steps "$steps" --threads "$threads" >"$out/speedup.txt" 2>&1
echo "speedup: exit $? after $(($(date +%s) - started)) s" >>"$out/speedup.txt"

started=$(date +%s)
timeout "$test_limit" "$python" -m pytest -p no:cacheprovider --noconftest -m cuda -rA \
  tests/test_cuda.py tests/test_runtime.py >"$out/pytest.txt" 2>&1
echo "pytest: exit $? after $(($(date +%s) - started)) s" >>"$out/pytest.txt"

"$python" benchmarks/gpu/summary.py "$out" | tee "$out/summary.txt"
