#!/usr/bin/env bash
# Issue 47's next step on the GPU machine, as one unchanging command: the check (check.sh) while no check's
# results are committed under benchmarks/results/h200/ (check-*.jsonl), then the next slice of the nightly
# grid (slice.sh) each time. `--device cpu` does the same against benchmarks/results/cpu-rehearsal/.
# Usage: benchmarks/gpu/next.sh [--device cuda|cpu] [--out DIR]   (arguments go on to the script it runs)
set -uo pipefail
cd "$(dirname "$0")/../.."
machine=h200
previous=
for argument in "$@"; do
  [ "$previous" = --device ] && [ "$argument" = cpu ] && machine=cpu-rehearsal
  previous=$argument
done
if compgen -G "benchmarks/results/$machine/check-*.jsonl" >/dev/null; then
  exec benchmarks/gpu/slice.sh "$@"
fi
exec benchmarks/gpu/check.sh "$@"
