"""One replay experiment from files to outcomes: the jobs of a workload, the arms, and either mode.

Every arm sees the same jobs (seeded); arm C's predictors are trained with the workload's own batch sizes
held out, so it predicts them as it would a job it never saw benchmarked. The oracle, the same recommender
fed the truth, runs in the simulator only: it bounds what any predictor could reach.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from advisor.policy.schema import Policy
from benchmarks.harness.arms import habits_arm, slurm_arm
from benchmarks.harness.live_queue import BACKFILL_WINDOW_MIN
from benchmarks.harness.model import Arm, ArmName, Arrival, Inventory, Job, Outcome
from benchmarks.harness.predictor import HeldOutError, held_out_batches, held_out_error, train_predictors
from benchmarks.harness.product import learned_steps, product_arm, true_steps
from benchmarks.harness.scheduler import Backfill
from benchmarks.harness.simulate import simulate
from benchmarks.harness.slurm import run_arms_on_slurm
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
    arms: dict[ArmName, Arm]
    predictor_error: HeldOutError


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
    arms: dict[ArmName, Arm] = {
        "habits": habits_arm(inventory, table),
        "slurm": slurm_arm(inventory, table),
        "advisor": product_arm(inventory, policy, learned_steps(predictors, inventory), table),
        "oracle": product_arm(inventory, policy, true_steps(table, inventory), table),
    }
    return Experiment(table, jobs, arms, held_out_error(predictors, table, held_out))


def run_simulated(experiment: Experiment, inventory: Inventory) -> dict[ArmName, list[Outcome]]:
    """Every arm on a simulated cluster in real time."""
    return _simulate_arms(experiment, inventory, REAL_TIME, {})


def run_twin(
    experiment: Experiment, inventory: Inventory, compression: float, real: dict[ArmName, list[Outcome]]
) -> dict[ArmName, list[Outcome]]:
    """The simulated twin of a real run: its scheduler in compressed time, and each job submitted when the
    real run submitted it (a decision's real second is ``compression`` workload seconds there)."""
    submitted = {
        name: {o.name: o.submitted_s for o in outcomes if o.submitted_s is not None}
        for name, outcomes in real.items()
    }
    return _simulate_arms(experiment, inventory, matching_backfill(compression), submitted)


def _simulate_arms(
    experiment: Experiment,
    inventory: Inventory,
    backfill: Backfill,
    submitted: dict[ArmName, dict[str, float]],
) -> dict[ArmName, list[Outcome]]:
    truth = experiment.table.true_run_s
    return {
        name: simulate(
            experiment.jobs, arm, name, inventory, truth, backfill=backfill, submitted_at=submitted.get(name)
        )
        for name, arm in experiment.arms.items()
    }


def run_real(
    experiment: Experiment, inventory: Inventory, compression: float, root: Path, base_port: int
) -> dict[ArmName, list[Outcome]]:
    """All arms but the oracle at once, each on a sandbox of its own."""
    arms = [(name, arm) for name, arm in experiment.arms.items() if name != "oracle"]
    truth = experiment.table.true_run_s
    return run_arms_on_slurm(experiment.jobs, arms, inventory, truth, compression, root, base_port)


REAL_TIME = Backfill(limit_resolution_s=60)
"""A cluster in real time: Slurm's one-minute limits and its default one-day backfill window."""


def matching_backfill(compression: float) -> Backfill:
    """The simulated twin of the real replay's scheduler: its backfill window and its whole-minute time
    limits, in the workload's seconds."""
    return Backfill(window_s=BACKFILL_WINDOW_MIN * 60 * compression, limit_resolution_s=60 * compression)
