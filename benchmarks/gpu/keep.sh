#!/usr/bin/env bash
# Keeps what a GPU run brought back (the output folder of check.sh or slice.sh) in the repository, even from
# a run that failed half way: its JSON lines as benchmarks/results/MACHINE/KIND-STAMP.jsonl (KIND: check or
# slice; STAMP: when it ran, UTC), its text files (summary, versions, plan, the job's log, speed-ups, tests)
# in one KIND-STAMP.log beside them; then rebuilds that machine's database, predictors and held-out figures
# from every committed file (rebuild.sh) and names the files to commit.
# Usage: benchmarks/gpu/keep.sh FOLDER [MACHINE]   (MACHINE: default h200; cpu-rehearsal for a CPU rehearsal)
set -euo pipefail
folder=$(realpath "$1")
machine=${2:-h200}
cd "$(dirname "$0")/../.."

kind=check
[ -f "$folder/plan.txt" ] && kind=slice
ran=$(head -n 1 "$folder/versions.txt" 2>/dev/null || date -u +%Y-%m-%dT%H:%M:%SZ)
name="benchmarks/results/$machine/$kind-$(echo "$ran" | tr -d ':-')"
if compgen -G "$name.*" >/dev/null; then
  echo "keep.sh: $name.* already kept" >&2
  exit 1
fi
mkdir -p "benchmarks/results/$machine"
texts=()
for part in summary.txt versions.txt plan.txt bench.log speedup.txt pytest.txt; do
  [ -f "$folder/$part" ] && texts+=("$folder/$part")
done
{
  # The machine has no git: the tree it ran was this checkout's, as sent by the `run` call.
  echo "kept $(date -u +%Y-%m-%dT%H:%M:%SZ) from $folder at commit $(git rev-parse --short HEAD)"
  (cd "$folder" && tail -n +1 "${texts[@]##*/}")
} >"$name.log"
kept=("$name.log")
if [ -s "$folder/bench.jsonl" ]; then
  cp "$folder/bench.jsonl" "$name.jsonl"
  kept+=("$name.jsonl")
fi
echo "kept: ${kept[*]}"
benchmarks/gpu/rebuild.sh "benchmarks/results/$machine" || echo "keep.sh: rebuild.sh failed (above)" >&2
echo "commit them: git add ${kept[*]} && git commit -m '...' -- ${kept[*]}"
