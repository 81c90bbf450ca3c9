#!/usr/bin/env bash
# The whole product on the sandbox cluster: `./dev demo` runs this after installing what is missing.
# The sandbox's partitions run at their own speeds (a100 1.0, v100 0.7, t4 0.4 of a CPU: the kernel's CPU
# controller, as root); each is benchmarked, a predictor is trained per machine, the daemon starts, and three
# jobs are advised and submitted: one whose objective is the earliest completion, one the lowest cost, and
# one submitted with plain sbatch, advised by the cli_filter. A quick benchmark (18 steps a machine) earns
# only `low` confidence (held-out errors of 30-100%), below policies/sandbox.toml's min_confidence, so
# every job is kept as submitted: the tables show what would be chosen, and the kill warning that job 1's
# 4-hour limit is shorter than its p90 run on t4. A nightly plan's pass (143 steps on a CPU) earns `medium`
# (benchmarks/README.md, bands by evidence).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
export PATH="$(realpath "$VENV")/bin:$PATH"
export ADVISOR_STATE_DIR=${ADVISOR_STATE_DIR:-$HOME/.local/state/advisor}
export ADVISOR_SOCKET="$ADVISOR_STATE_DIR/advisor.sock"
export ADVISOR_POLICY="$PWD/policies/sandbox.toml"
export COLUMNS=${COLUMNS:-120}
mkdir -p "$ADVISOR_STATE_DIR" && chmod 700 "$ADVISOR_STATE_DIR"
pidfile="$ADVISOR_STATE_DIR/daemon.pid"

settings='import os; from advisor.settings import load_settings; settings = load_settings(os.environ)'
advisor sandbox up
SLURM_CONF="$(python -c "$settings; print(settings.sandbox_dir / 'etc' / 'slurm.conf')")"
export SLURM_CONF

has_models="$settings; from advisor.store import ModelRegistry, Store
raise SystemExit(0 if ModelRegistry(Store.open(settings.database)).versions() else 1)"
if ! python -c "$has_models"; then
  echo "== a quick benchmark on every partition (one at a time: the sandbox's nodes share this host)"
  advisor bench submit --quick --one-at-a-time --cpu-only --budget-minutes 3
  echo "== a predictor per machine"
  advisor models train
fi

echo "== the daemon (its log: $ADVISOR_STATE_DIR/daemon.log)"
if ! advisor status >/dev/null 2>&1; then
  # The service runs as its own unprivileged user (systemd/advisor.service); a demo as root says so.
  [ "$(id -u)" -eq 0 ] && export ADVISOR_ALLOW_ROOT=1
  nohup advisor daemon >"$ADVISOR_STATE_DIR/daemon.log" 2>&1 &
  echo $! >"$pidfile"
  for _ in $(seq 120); do [ -S "$ADVISOR_SOCKET" ] && break; sleep 0.5; done
fi
advisor status

echo "== job 1, examples/demo.sbatch: asks for a t4; the policy's objective is the earliest completion"
output=$(advise-submit --yes --explain --output="$ADVISOR_STATE_DIR/demo-%j.out" examples/demo.sbatch)
echo "$output"
first=${output##* }

echo "== job 2, examples/demo-cost.sbatch: asks for an a100, under account lab, whose objective is cost"
output=$(advise-submit --yes --explain --output="$ADVISOR_STATE_DIR/demo-%j.out" examples/demo-cost.sbatch)
echo "$output"
second=${output##* }

echo "== job 3, plain sbatch examples/demo.sbatch, with the cli_filter an admin enables (docs/admin-guide.md)"
filter_dir="$ADVISOR_STATE_DIR/cli-filter"
mkdir -p "$filter_dir"
{ cat "$SLURM_CONF"; echo "CliFilterPlugins=cli_filter/lua"; } >"$filter_dir/slurm.conf"
advisor cli-filter install --slurm-conf-dir "$filter_dir"
output=$(SLURM_CONF="$filter_dir/slurm.conf" sbatch --output="$ADVISOR_STATE_DIR/demo-%j.out" examples/demo.sbatch)
echo "$output"
third=${output##* }

echo "== the queue"
squeue --format='%.6i %.9P %.12j %.8T %.10l %R'
echo "== why job $first went where it did (advisor explain)"
advisor explain "$first"
echo "(and jobs $second's and $third's: advisor explain $second; advisor explain $third)"
echo "Stop everything with: kill $(cat "$pidfile" 2>/dev/null || echo '<the daemon pid>'); advisor sandbox down"
