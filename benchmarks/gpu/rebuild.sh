#!/usr/bin/env bash
# One machine's predictors from its committed results, with no GPU: the database rebuilt from the JSON
# lines (`advisor bench ingest`), the predictors trained (`advisor models train`), their held-out accuracy
# (`advisor models evaluate`: leave-one-model-out step MAPE, unseen batch sizes, peak memory).
# Usage: benchmarks/gpu/rebuild.sh [RESULTS_DIR] [DB]
#   RESULTS_DIR: default benchmarks/results/h200; DB: default /tmp/advisor-<its name>.db, made anew (the
#   predictors go beside it, in DB's name with .models). $ADVISOR: the advisor command (default: advisor).
set -euo pipefail
results=${1:-benchmarks/results/h200}
db=${2:-/tmp/advisor-$(basename "$results").db}
advisor=${ADVISOR:-advisor}
shopt -s nullglob
files=("$results"/*.jsonl)
if [ ${#files[@]} -eq 0 ]; then
  echo "rebuild.sh: no results (*.jsonl) in $results" >&2
  exit 2
fi
rm -f "$db"
rm -rf "${db%.db}.models"
"$advisor" bench ingest --db "$db" "${files[@]}"
"$advisor" models train --db "$db" --models-dir "${db%.db}.models"
"$advisor" models evaluate --db "$db"
