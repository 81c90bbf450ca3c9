"""One replay experiment from files to outcomes: the jobs of a workload, the arms, and either mode.

Every arm sees the same jobs (seeded); arm C's predictors are trained with the workload's own batch sizes
held out, so it predicts them as it would a job it never saw benchmarked, and their predictions are the
step times its daemon is handed (`benchmarks.harness.step_file`). The oracle, the same recommender fed the
truth, runs in the simulator only: it bounds what any predictor could reach.
"""

from __future__ import annotations

import tomllib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from advisor.daemon.step_times import StepTimes
from advisor.policy.schema import Policy
from benchmarks.harness.arms import habits_arm, slurm_arm
from benchmarks.harness.backfill import Backfill
from benchmarks.harness.daemon import AdvisorDaemon
from benchmarks.harness.live_queue import BACKFILL_WINDOW_MIN
from benchmarks.harness.model import (
    Arm,
    ArmLog,
    ArmName,
    Arrival,
    AsRun,
    Inventory,
    Job,
    QueueView,
    ReplayDecision,
    ReplayOutcome,
)
from benchmarks.harness.predictor import HeldOutError, held_out_batches, held_out_error, train_predictors
from benchmarks.harness.product import TRAINED_AT, product_arm
from benchmarks.harness.simulate import DaemonCaches, simulate
from benchmarks.harness.slurm import MAIN_SCHEDULER_OFF, REPLAY_SCHEDULER, run_arms_on_slurm
from benchmarks.harness.step_file import learned_times, true_times
from benchmarks.harness.truth import StepTable
from benchmarks.harness.workload import Habits, load_durations, make_jobs


class InventoryError(ValueError):
    """An inventory file that does not describe a cluster; the message names the file."""


def load_inventory(path: Path) -> Inventory:
    try:
        return Inventory.model_validate(tomllib.loads(path.read_text(encoding="utf-8")))
    except OSError as error:
        raise InventoryError(f"{path}: cannot read: {error.strerror}") from error
    except tomllib.TOMLDecodeError as error:
        raise InventoryError(f"{path}: not valid TOML: {error}") from error
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
        raise InventoryError(f"{path}: {problems}") from error


@dataclass(frozen=True)
class Experiment:
    table: StepTable
    jobs: list[Job]
    inventory: Inventory
    policy: Policy
    learned: StepTimes
    """Arm C's step times: its models' predictions, trained without the workload's own batch sizes."""
    truth: StepTimes
    """The oracle's: the measured truth."""
    predictor_error: HeldOutError

    def arms(self, compression: float = 1.0) -> dict[ArmName, Arm]:
        """Every arm, the advising ones deciding on a clock ``compression`` times faster (a real run's)."""
        inventory, policy, table = self.inventory, self.policy, self.table
        return {
            "habits": habits_arm(inventory, table),
            "slurm": slurm_arm(inventory, table),
            "advisor": product_arm(inventory, policy, self.learned, table, compression),
            "oracle": product_arm(inventory, policy, self.truth, table, compression),
        }


def prepare(
    data: Path,
    arrivals: Sequence[Arrival],
    inventory: Inventory,
    seed: int,
    policy: Policy,
    habits: Habits | None = None,
) -> Experiment:
    """``data`` is the public data folder (``sia/step_times.csv``, ``philly/jobs.csv``); ``policy`` is the
    admin policy arm C and the oracle decide under."""
    table = StepTable.load(data / "sia" / "step_times.csv")
    jobs = make_jobs(arrivals, table, load_durations(data / "philly" / "jobs.csv"), habits or Habits(), seed)
    held_out = held_out_batches(arrivals)
    predictors = train_predictors(table, held_out)
    return Experiment(
        table=table,
        jobs=jobs,
        inventory=inventory,
        policy=policy,
        learned=learned_times(predictors, arrivals, TRAINED_AT),
        truth=true_times(table, arrivals, TRAINED_AT),
        predictor_error=held_out_error(predictors, table, held_out),
    )


def run_simulated(experiment: Experiment, inventory: Inventory) -> dict[ArmName, list[ReplayOutcome]]:
    """Every arm on a simulated cluster in real time."""
    truth = experiment.table.true_run_s
    return {
        name: simulate(experiment.jobs, arm, name, inventory, truth, backfill=REAL_TIME)
        for name, arm in experiment.arms().items()
    }


def run_twin(
    experiment: Experiment,
    inventory: Inventory,
    compression: float,
    real: dict[ArmName, list[ReplayOutcome]],
    without: Collection[LeftOut] = (),
    logs: RunLogs | None = None,
) -> dict[ArmName, list[ReplayOutcome]]:
    """The simulated twin of a real run: its scheduler in compressed time, each job submitted when and as
    the real run submitted it (a decision's real second is ``compression`` workload seconds there), so the
    twin checks the simulator's scheduling of the same jobs. Decisions rest on the queue at the moment
    they were asked (arm C's on its daemon's caches, whose fill times no simulator reproduces); what
    deciding anew in the twin does is `redecided`. The oracle, simulated only, decides in the twin.
    ``without``: what of Slurm's the twin leaves out, to see what it is worth (`LeftOut`); ``logs``: each
    arm's backfill passes and its jobs' holds in the real run, from its controller's log (`RunLogs`)."""
    arms = experiment.arms(compression)
    arms.update({name: as_decided(outcomes) for name, outcomes in real.items()})
    return _simulate_arms(experiment, inventory, arms, compression, real, RealClock(without, logs or {}))


def redecided(
    experiment: Experiment,
    inventory: Inventory,
    compression: float,
    real: dict[ArmName, list[ReplayOutcome]],
    name: ArmName,
    logs: RunLogs | None = None,
) -> list[ReplayOutcome]:
    """Arm ``name`` in the twin deciding anew on the compressed clock, its jobs submitted when the real run
    submitted them: arm B asks the twin's ``--test-only``, arm C the daemon's caches (`DaemonCaches`,
    filled when the twin's decisions ask). How far the decisions alone part the twin from the real run."""
    caches = DaemonCaches(compression) if name == "advisor" else None
    return simulate(
        _in_real_order(experiment.jobs, real.get(name, [])),
        experiment.arms(compression)[name],
        name,
        inventory,
        experiment.table.true_run_s,
        backfill=_twin_backfill(compression, real, name, RealClock((), logs or {})),
        as_run=_as_run(real, name, RealClock((), logs or {})),
        caches=caches,
    )


def as_decided(outcomes: Sequence[ReplayOutcome]) -> Arm:
    """An arm that submits each job as a real run did (by job name)."""
    decisions = {outcome.name: outcome.decision for outcome in outcomes}

    def decide(job: Job, view: QueueView) -> ReplayDecision:
        return decisions[job.arrival.name]

    return decide


def submitted_at(outcome: ReplayOutcome) -> float | None:
    """When a real run's job reached Slurm, as the twin submits it: when its sbatch returned (timed by the
    harness to the millisecond; the controller's log puts the acceptance a few milliseconds before), else
    Slurm's own whole second (`ReplayOutcome.submitted_s`)."""
    return outcome.submitted_s if outcome.sbatch_s is None else outcome.sbatch_s[1]


def _as_run(real: dict[ArmName, list[ReplayOutcome]], name: ArmName, clock: RealClock) -> AsRun:
    """Arm ``name``'s submissions in the real run, and its jobs' holds there where its log was read."""
    logs = clock.logs
    submitted = {o.name: when for o in real.get(name, []) if (when := submitted_at(o)) is not None}
    held = logs[name].held_s if name in logs and "holds" not in clock.without else {}
    return AsRun(submitted_at=submitted, held_s=held)


def _twin_backfill(
    compression: float,
    real: dict[ArmName, list[ReplayOutcome]],
    name: ArmName,
    clock: RealClock,
) -> Backfill:
    passes = clock.logs[name].passes_s if name in clock.logs else ()
    return matching_backfill(compression, _real_zero(real.get(name, [])), clock.without, passes)


def _in_real_order(jobs: Sequence[Job], outcomes: Sequence[ReplayOutcome]) -> list[Job]:
    """The jobs in the order the real run submitted them (its job ids), so that the twin gives jobs
    submitted in one real second Slurm's priorities; arrival order where the run has no ids."""
    ids = {o.name: o.job_id for o in outcomes if o.job_id is not None}
    return sorted(jobs, key=lambda job: ids.get(job.arrival.name, 0))


def _real_zero(outcomes: Sequence[ReplayOutcome]) -> float | None:
    return next((o.real_zero_s for o in outcomes if o.real_zero_s is not None), None)


def _simulate_arms(
    experiment: Experiment,
    inventory: Inventory,
    arms: dict[ArmName, Arm],
    compression: float,
    real: dict[ArmName, list[ReplayOutcome]],
    clock: RealClock,
) -> dict[ArmName, list[ReplayOutcome]]:
    """Every arm in the twin, each on the clock (its backfill passes, its jobs' holds) of its own real run."""
    return {
        name: simulate(
            _in_real_order(experiment.jobs, real.get(name, [])),
            arm,
            name,
            inventory,
            experiment.table.true_run_s,
            backfill=_twin_backfill(compression, real, name, clock),
            as_run=_as_run(real, name, clock),
        )
        for name, arm in arms.items()
    }


def run_real(
    experiment: Experiment, inventory: Inventory, compression: float, root: Path, base_port: int
) -> dict[ArmName, list[ReplayOutcome]]:
    """Arms A and B at once, each on a sandbox of its own, and arm C on its own through a running daemon
    (`AdvisorDaemon`); the oracle runs in the simulator only."""
    arms = experiment.arms(compression)
    daemon = AdvisorDaemon(inventory, experiment.policy, experiment.learned, experiment.table, compression)
    chosen: list[tuple[ArmName, Arm | AdvisorDaemon]] = [
        ("habits", arms["habits"]),
        ("slurm", arms["slurm"]),
        ("advisor", daemon),
    ]
    truth = experiment.table.true_run_s
    return run_arms_on_slurm(experiment.jobs, chosen, inventory, truth, compression, root, base_port)


REAL_TIME = Backfill(limit_resolution_s=60)
"""A cluster in real time: Slurm's one-minute limits and its default one-day backfill window."""


RunLogs = Mapping[ArmName, ArmLog]
"""Per arm, what the real run's controller log says beyond its outcomes (`backfill_log.run_logs`)."""

LeftOut = Literal["walk", "holds"]
"""What the twin can leave out of what Slurm does, each printed in the report beside the twin as it is:
``walk``, the will-run test's walk over every partition's running jobs (it then walks the job's own
partition's); ``holds``, each job holding its nodes past its run as long as in the real run (it then holds
them for its run alone)."""


@dataclass(frozen=True)
class RealClock:
    """What the twin takes of a real run's scheduler: what of Slurm's it leaves out, and each arm's
    controller log (its backfill passes, its jobs' holds)."""

    without: Collection[LeftOut]
    logs: RunLogs


def matching_backfill(
    compression: float,
    real_zero_s: float | None = None,
    without: Collection[LeftOut] = (),
    pass_times_s: Sequence[float] = (),
) -> Backfill:
    """The simulated twin of the real replay's scheduler: its backfill window, its whole-minute time
    limits and its will-run test's batches of ending jobs, in the workload's seconds; ``real_zero_s`` (the
    real run's clock at workload second 0, `ReplayOutcome.real_zero_s`) places the batches' marks. The
    replay's cluster starts jobs by backfill passes alone (`REPLAY_SCHEDULER`): the twin's come at the
    real run's ``pass_times_s`` (`backfill_log.arm_log`), then every ``bf_interval``."""
    main = REPLAY_SCHEDULER.sched_interval_s != MAIN_SCHEDULER_OFF
    return Backfill(
        window_s=BACKFILL_WINDOW_MIN * 60 * compression,
        limit_resolution_s=60 * compression,
        will_run_batch_s=30 * compression,
        will_run_origin_s=0.0 if real_zero_s is None else compression * (-real_zero_s % 30),
        tick_s=compression,
        will_run_walk="walk" not in without,
        pass_interval_s=0.0 if main else REPLAY_SCHEDULER.bf_interval_s * compression,
        pass_times_s=() if main else tuple(pass_times_s),
        main_scheduler=main,
    )
