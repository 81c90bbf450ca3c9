"""Replays Sia workloads on a heterogeneous GPU cluster under three arms and reports what the advice is worth.

Arms, on the same seeded jobs: (A) users' habits (the partition each user prefers, favouring the newest GPU,
their own configuration and time limit), (B) Slurm's ``--test-only`` estimate picks the partition, the
configuration unchanged, (C) the advisor: the daemon's own recommender (``advisor.recommend``) under the
policy file ``--policy`` names, with step-time models trained on Sia's table with the workload's own batch
sizes held out, and (oracle, simulated only) the same recommender fed the true step times.

Modes: ``sim`` (the discrete-event replay of a cluster in real time, seconds per workload), ``slurm`` (sleep
jobs on real sandbox Slurm clusters, one per arm side by side, in compressed time; each arrival decided as
it comes, arm C's by a running ``advisor daemon`` asked over its socket, and each arm's decision delay
reported beside its JCT), ``both`` (the real run and its simulated twin, which plans like the compressed
cluster: whole-minute limits and the backfill window in compressed time, each job submitted when and as the
real run submitted it; their agreement validates the simulator).

    python -m benchmarks.replay saturn/workload-1.csv --mode both
    python -m benchmarks.replay 'saturn/*.csv'
    python -m benchmarks.replay --philly 0      # the whole Philly trace, simulated (0: every job)

Workloads are paths under ``DATA/sia/workloads`` (globs allowed). Each gets ``OUT/NAME/MODE/report.md`` with
its plots; ``OUT/summary.md`` compares them all.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from advisor.policy.load import PolicyError, load_policy
from benchmarks.harness.backfill_log import run_logs
from benchmarks.harness.experiment import (
    Experiment,
    InventoryError,
    LeftOut,
    RunLogs,
    load_inventory,
    prepare,
    redecided,
    run_real,
    run_simulated,
    run_twin,
)
from benchmarks.harness.model import ArmName, Arrival, Inventory, ReplayOutcome
from benchmarks.harness.philly import load_philly_arrivals
from benchmarks.harness.report import agreement, disagreement, write_report
from benchmarks.harness.slurm import __doc__ as COMPRESSION_LIMITS
from benchmarks.harness.truth import StepTable
from benchmarks.harness.twin_jitter import JITTER_DRAWS, jitter_gaps
from benchmarks.harness.workload import Habits, WorkloadError, load_arrivals

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "data"


def main(argv: Sequence[str] | None = None) -> int:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("workloads", nargs="*", default=["saturn/workload-1.csv"])
    parser.add_argument("--mode", choices=("sim", "slurm", "both"), default="sim")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument(
        "--inventory",
        type=Path,
        help="the cluster (default: etc/replay-cluster.toml; with --philly, etc/replay-philly.toml)",
    )
    parser.add_argument(
        "--policy",
        type=Path,
        default=ROOT / "etc" / "replay-policy.toml",
        help="the admin policy arm C and the oracle decide under (default: etc/replay-policy.toml)",
    )
    parser.add_argument("--compression", type=float, default=400.0, help="workload seconds per real second")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--base-port", type=int, default=19000, help="the real sandboxes' first port")
    parser.add_argument("--out", type=Path, default=Path("replay-report"))
    parser.add_argument(
        "--jobs",
        type=int,
        metavar="N",
        help="replay only each workload's first N arrivals (a slice that fits a short real run)",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="keep each real run's sandboxes (their slurmctld logs, with each backfill pass's plan, and "
        "slurm.conf) in DIR/WORKLOAD/ARM, a new folder, for `python -m benchmarks.harness.twin_nodes` and "
        "`backfill_log` (default: a temporary folder)",
    )
    parser.add_argument(
        "--philly",
        type=int,
        metavar="N",
        help="replay the first N jobs of the Philly trace (0: all) instead of Sia workloads; sim mode only",
    )
    words = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(words)
    args.words = words
    try:
        return _run(parser, args)
    except (InventoryError, WorkloadError, PolicyError, OSError) as error:
        parser.exit(2, f"replay: error: {error}\n")


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """Bad input files stop the run with their own message (file and line), before any arm runs."""
    default = "replay-cluster.toml" if args.philly is None else "replay-philly.toml"
    inventory = load_inventory(args.inventory or ROOT / "etc" / default)
    args.policy_model = load_policy(args.policy)
    folder = args.data / "sia" / "workloads"
    if args.jobs is not None and args.jobs < 1:
        parser.error(f"--jobs {args.jobs}: a slice has at least one job")
    if args.keep is not None and args.keep.exists() and any(args.keep.iterdir()):
        parser.error(f"--keep {args.keep}: not empty; the sandboxes need a new folder")
    if args.philly is not None:
        if args.mode != "sim":
            parser.error("--philly replays in the discrete-event mode only (--mode sim)")
        rows = [_replay_philly(folder, inventory, args)]
    else:
        paths = sorted({path for pattern in args.workloads for path in folder.glob(pattern)})
        if not paths:
            parser.error(f"no workload matches {args.workloads} under {folder}")
        rows = [
            _replay(path.relative_to(folder), load_arrivals(path)[: args.jobs], inventory, args)
            for path in paths
        ]
    summary = args.out / "summary.md"
    summary.write_text(
        _summary(rows, shlex.join(["python", "-m", "benchmarks.replay", *args.words]), args.compression),
        encoding="utf-8",
    )
    print(summary.read_text(encoding="utf-8"))
    return 0


def _replay_philly(folder: Path, inventory: Inventory, args: argparse.Namespace) -> dict[str, Any]:
    """Philly's jobs with applications and per-GPU batches drawn from the Sia saturn workloads."""
    mix = [arrival for path in sorted(folder.glob("saturn/*.csv")) for arrival in load_arrivals(path)]
    table = StepTable.load(args.data / "sia" / "step_times.csv")
    limit = args.philly or None
    arrivals, left_out = load_philly_arrivals(
        args.data / "philly" / "jobs.csv", mix, table, Habits(), args.seed, limit
    )
    label = Path(f"philly-{limit or 'all'}")
    return _replay(label, arrivals, inventory, args, [f"{left_out} Philly jobs left out: they run nowhere"])


def _replay(
    label: Path,
    arrivals: list[Arrival],
    inventory: Inventory,
    args: argparse.Namespace,
    more_notes: list[str] | None = None,
) -> dict[str, Any]:
    name = str(label.with_suffix("")).replace("/", "-")
    began = time.monotonic()
    experiment = prepare(args.data, arrivals, inventory, args.seed, args.policy_model)
    error = experiment.predictor_error
    notes = [
        f"workload {label}: {len(experiment.jobs)} jobs, seed {args.seed}, policy {args.policy}",
        *(more_notes or []),
        "inventory: " + ", ".join(f"{p.partition} {p.nodes}x{p.gpus_per_node}" for p in inventory.pools),
        f"the advisor's step-time models on the held-out batch sizes: MAPE {error.mape:.1%} over "
        f"{error.rows} rows, {error.within_p90:.0%} within p90",
    ]
    row: dict[str, Any] = {"workload": name, "prepare_s": time.monotonic() - began}
    results: dict[str, dict[ArmName, list[ReplayOutcome]]] = {}
    logs: RunLogs = {}
    if args.mode in ("slurm", "both"):
        began = time.monotonic()
        with _sandboxes(args.keep, name) as root:
            results["slurm"] = run_real(experiment, inventory, args.compression, Path(root), args.base_port)
            logs = run_logs(Path(root), results["slurm"], args.compression)
        row["slurm_s"] = time.monotonic() - began
    if args.mode in ("sim", "both"):
        began = time.monotonic()
        results["sim"] = (
            run_twin(experiment, inventory, args.compression, results["slurm"], logs=logs)
            if args.mode == "both"
            else run_simulated(experiment, inventory)
        )
        row["sim_s"] = time.monotonic() - began
    if len(results) == 2:
        notes += _agreement(experiment, inventory, args.compression, (results, logs), row)
    for mode, outcomes in results.items():
        title, said = f"{name} ({mode})", notes + _notes(mode, args)
        report = write_report(outcomes, args.out / name / mode, title, said)
        row[mode] = json.loads((report.parent / "report.json").read_text(encoding="utf-8"))
        if mode == "slurm":  # the twin of these outcomes replays them on the run's own passes and holds
            every = {arm: log.model_dump(mode="json") for arm, log in logs.items()}
            (report.parent / "logs.json").write_text(json.dumps(every) + "\n", encoding="utf-8")
    return row


def _sandboxes(keep: Path | None, name: str) -> contextlib.AbstractContextManager[str]:
    """Where a real run's sandboxes live: ``keep/name``, kept, or a temporary folder."""
    if keep is None:
        return tempfile.TemporaryDirectory(prefix="advisor-replay-")
    (keep / name).mkdir(parents=True)
    return contextlib.nullcontext(str(keep / name))


def _agreement(
    experiment: Experiment,
    inventory: Inventory,
    compression: float,
    run: tuple[dict[str, dict[ArmName, list[ReplayOutcome]]], RunLogs],
    row: dict[str, Any],
) -> list[str]:
    """The twin against the real run, arm by arm (into ``row``), and what deciding anew in the twin does;
    the report's lines for them."""
    (results, logs), sim = run, run[0]["sim"]
    real = results["slurm"]
    row["agreement"] = {arm: agreement(sim[arm], real[arm]) for arm in real}
    row["redecided"] = {}
    row["disagreement"] = {arm: disagreement(sim[arm], real[arm]) for arm in real}
    lines = [
        "the twin against the real run, mean JCT (goal: within 10%): "
        + ", ".join(f"{arm} {gap:+.1%}{_beyond(gap)}" for arm, gap in row["agreement"].items()),
        "the twin against the real run job by job, mean |twin - real| completion over the real mean JCT "
        "(early and late jobs do not cancel here): "
        + ", ".join(f"{arm} {miss:.0%}" for arm, miss in row["disagreement"].items()),
    ]
    for left_out, what in _LEFT_OUT:
        twin = run_twin(experiment, inventory, compression, real, without=[left_out], logs=logs)
        lines.append(
            f"the twin with {what}: "
            + ", ".join(f"{arm} {agreement(twin[arm], real[arm]):+.1%}" for arm in real)
        )
    lines.append(_jitter_spread(experiment, inventory, compression, (real, logs)))
    for arm, how in _DECIDING_ANEW:
        anew = redecided(experiment, inventory, compression, real, arm, logs)
        row["redecided"][arm] = agreement(anew, real[arm])
        mean_s = statistics.fmean(o.end_s - o.arrival_s for o in anew)
        lines.append(
            f"arm {_LETTER[arm]} deciding anew in the twin, {how} (not its real answers): mean JCT "
            f"{mean_s:,.0f} s, {row['redecided'][arm]:+.1%} against the real run"
        )
    return lines


def _jitter_spread(
    experiment: Experiment,
    inventory: Inventory,
    compression: float,
    run: tuple[dict[ArmName, list[ReplayOutcome]], RunLogs],
) -> str:
    gaps = jitter_gaps(experiment, inventory, compression, *run)
    return (
        f"the twin with each submission moved within a real second ({JITTER_DRAWS} draws; how far a "
        "submission's place in its second moves it: the twin takes them to the millisecond): "
        + ", ".join(f"{arm} {min(found):+.1%} to {max(found):+.1%}" for arm, found in gaps.items())
    )


_LETTER: dict[str, str] = {"habits": "A", "slurm": "B", "advisor": "C"}
_LEFT_OUT: tuple[tuple[LeftOut, str], ...] = (
    ("walk", "its will-run walk over the job's own partition only, not every partition"),
    ("holds", "each job holding its nodes for its run alone, not as long as in the real run"),
)
_DECIDING_ANEW: tuple[tuple[ArmName, str], ...] = (
    ("slurm", "asking the twin's `--test-only`"),
    ("advisor", "from the daemon's cache windows"),
)


def _beyond(gap: float) -> str:
    return " (beyond 10%)" if abs(gap) > TWIN_WITHIN else ""


TWIN_WITHIN = 0.10
"""The twin is trusted where its mean JCT is within this share of the real run's, arm by arm."""


def _notes(mode: str, args: argparse.Namespace) -> list[str]:
    """What a mode's report says of how it was run."""
    if args.mode == "sim":
        return ["simulated in real time: whole-minute limits, Slurm's default one-day backfill window"]
    compressed = [
        f"1 s of Slurm = {args.compression:g} s of workload",
        *_limits(),
        "decision delay: arrival to submission in the real run (the arm's decision in real time, times the "
        "compression; arm C's by a running `advisor daemon`, asked over its socket as arrivals come, on the "
        "sandbox's compressed clock: its caches keep a queue reading 5 real seconds, a `--test-only` answer "
        "30)",
    ]
    if mode == "slurm":
        return compressed
    twin = (
        "the simulated twin of the compressed real run: its scheduler (Slurm's backfill with its node "
        "choice), each job submitted when and as the real run submitted it (arm C's as its daemon answered)"
    )
    return [twin, *compressed]


def _limits() -> list[str]:
    """The real replay's own account of what compression costs (its module docstring's list)."""
    text = COMPRESSION_LIMITS or ""
    items = text.split("\n- ")[1:]
    return [" ".join(item.split()) for item in items]


def _summary(rows: list[dict[str, Any]], command: str, compression: float) -> str:
    lines = [
        "# Replay summary",
        "",
        f"Command: `{command}`",
        "",
        "| workload | mode | mean JCT A / B / C / oracle (s) | mean decision delay A / B / C (real s) "
        "| C vs A | C vs B | C vs oracle | wait error (queued median) --test-only / advisor (s) "
        "| C advised: p90 beyond limit / killed | sim vs real mean JCT | wall (s) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        for mode in ("sim", "slurm"):
            if mode not in row:
                continue
            figures = row[mode]
            arms = figures["arms"]
            jct = " / ".join(f"{arms[a]['mean_jct_s']:.0f}" if a in arms else "-" for a in ARM_ORDER)
            waits = figures["wait_errors"].get("advisor", {})
            wait = " / ".join(_seconds(waits.get(e, {}).get("queued_median_abs_error_s")) for e in ESTIMATORS)
            reductions = figures["reductions"]
            agree = row.get("agreement", {}) if mode == "slurm" else {}
            agreed = ", ".join(f"{arm} {value:+.1%}{_beyond(value)}" for arm, value in agree.items()) or "-"
            anew = row.get("redecided", {}) if mode == "slurm" else {}
            if anew:
                agreed += (
                    " (deciding anew: " + ", ".join(f"{_LETTER[a]} {v:+.1%}" for a, v in anew.items()) + ")"
                )
            wall = row.get(f"{mode}_s", 0.0)
            lines.append(
                f"| {row['workload']} | {mode} | {jct} | {_delays(arms, compression)} | "
                f"{_percent(reductions['vs_habits'])} | {_percent(reductions['vs_slurm'])} | "
                f"{_percent(reductions['vs_oracle'])} | {wait} | {_advised(arms.get('advisor'))} | "
                f"{agreed} | {wall:.0f} |"
            )
    return "\n".join(lines) + "\n"


ARM_ORDER: tuple[ArmName, ...] = ("habits", "slurm", "advisor", "oracle")
ESTIMATORS = ("slurm", "advisor")


def _delays(arms: dict[str, Any], compression: float) -> str:
    """Each real arm's mean decision delay in real seconds, marked where it is a harness artefact (above
    5% of the arm's median wait: `ArmSummary.delay_is_artefact`)."""
    shown = []
    for arm in ARM_ORDER[:3]:
        delay = arms.get(arm, {}).get("mean_decision_delay_s")
        if delay is None:
            shown.append("-")
            continue
        artefact = " (artefact)" if arms[arm]["delay_is_artefact"] else ""
        shown.append(f"{delay / compression:.1f}{artefact}")
    return " / ".join(shown)


def _advised(figures: dict[str, Any] | None) -> str:
    if not figures or not figures["advised"]:
        return "-"
    return f"{figures['advised_p90_over_limit']} / {figures['advised_killed']} of {figures['advised']}"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


if __name__ == "__main__":
    sys.exit(main())
