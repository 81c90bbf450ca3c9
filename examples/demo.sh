#!/usr/bin/env bash
# The whole product on the sandbox cluster: `./dev demo` runs this after installing what is missing.
# Sandbox up, daemon up, a quick benchmark on every partition, models trained, the example job advised
# and submitted with advise-submit, and its prediction shown beside the queue.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
export PATH="$(realpath "$VENV")/bin:$PATH"
export ADVISOR_STATE_DIR=${ADVISOR_STATE_DIR:-$HOME/.local/state/advisor}
export ADVISOR_SOCKET="$ADVISOR_STATE_DIR/advisor.sock"
export ADVISOR_POLICY="$PWD/policies/sandbox.toml"
export COLUMNS=${COLUMNS:-150}  # the candidates table is wide
mkdir -p "$ADVISOR_STATE_DIR" && chmod 700 "$ADVISOR_STATE_DIR"

advisor sandbox up
SLURM_CONF="$(python -c 'from advisor import paths; print(paths.sandbox_dir())')/etc/slurm.conf"
export SLURM_CONF

has_models='from advisor import paths; from advisor.store import ModelRegistry, Store
raise SystemExit(0 if ModelRegistry(Store.open(paths.database())).versions() else 1)'
if ! python -c "$has_models"; then
  echo "== a quick benchmark on every partition (one at a time: the sandbox's nodes share this host)"
  advisor bench submit --quick --one-at-a-time --cpu-only --budget-minutes 4
  echo "== per-machine predictors"
  advisor models train
fi

echo "== the daemon (its log: $ADVISOR_STATE_DIR/daemon.log)"
if ! advisor status >/dev/null 2>&1; then
  # The service runs as its own unprivileged user (systemd/advisor.service); a demo as root says so.
  [ "$(id -u)" -eq 0 ] && export ADVISOR_ALLOW_ROOT=1
  nohup advisor daemon >"$ADVISOR_STATE_DIR/daemon.log" 2>&1 &
  for _ in $(seq 120); do [ -S "$ADVISOR_SOCKET" ] && break; sleep 0.5; done
fi
advisor status

echo "== advise-submit examples/demo.sbatch"
output=$(advise-submit --yes --explain --output="$ADVISOR_STATE_DIR/demo-%j.out" examples/demo.sbatch)
echo "$output"
job_id=${output##* }
echo "== the queue, and the prediction for job $job_id"
squeue --format='%.8i %.10P %.20j %.8T %.10M %.12l %R'
advisor explain "$job_id"
echo "Stop everything with: kill \$(pgrep -f 'advisor daemon'); advisor sandbox down"
