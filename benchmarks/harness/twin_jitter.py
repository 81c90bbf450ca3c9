"""How far the twin's agreement moves with where a submission falls inside its real second.

Slurm records each submission to the whole second (sacct's `ReplayOutcome.submitted_s`, that second's
middle): at compression 400, anywhere within 200 workload seconds of the truth. The harness now times its
own sbatch calls to the millisecond (`ReplayOutcome.sbatch_s`), which the twin takes where recorded, as it
takes the backfill passes' times and the jobs' holds from the controller's log (`ArmLog`). Replaying the
twin with each submission moved within a real second shows how much a second's timings move its
agreement: what a harness that knew them only to the second would be off by.
"""

from __future__ import annotations

import random

from benchmarks.harness.experiment import Experiment, RunLogs, run_twin
from benchmarks.harness.model import ArmName, Inventory, ReplayOutcome
from benchmarks.harness.report import agreement

JITTER_DRAWS = 5
"""Twins with moved submissions in each report: enough to show the spread, about a minute of CPU."""


def jittered(
    real: dict[ArmName, list[ReplayOutcome]], compression: float, seed: int
) -> dict[ArmName, list[ReplayOutcome]]:
    """The real run with each submission moved by a uniform draw within half a real second either way
    (``compression`` workload seconds a real one), never before its arrival."""
    draw, half = random.Random(seed), compression / 2  # noqa: S311 (where a submission lands, not a secret)
    return {
        arm: [_moved(outcome, draw.uniform(-half, half)) for outcome in outcomes]
        for arm, outcomes in real.items()
    }


def _moved(outcome: ReplayOutcome, by_s: float) -> ReplayOutcome:
    """The outcome with its submission (Slurm's second, and the harness's sbatch times where recorded)
    ``by_s`` later, never before its arrival."""
    if outcome.submitted_s is None:
        return outcome
    update: dict[str, object] = {"submitted_s": max(outcome.arrival_s, outcome.submitted_s + by_s)}
    if outcome.sbatch_s is not None:
        sent, answered = (max(outcome.arrival_s, when + by_s) for when in outcome.sbatch_s)
        update["sbatch_s"] = (sent, answered)
    return outcome.model_copy(update=update)


def jitter_gaps(
    experiment: Experiment,
    inventory: Inventory,
    compression: float,
    real: dict[ArmName, list[ReplayOutcome]],
    logs: RunLogs | None = None,
    draws: int = JITTER_DRAWS,
) -> dict[ArmName, list[float]]:
    """Each arm's twin-against-real gap (`agreement`) over ``draws`` jittered replays, seeds 0 on, on
    the real run's passes and holds where given."""
    gaps: dict[ArmName, list[float]] = {arm: [] for arm in real}
    for seed in range(draws):
        twin = run_twin(experiment, inventory, compression, jittered(real, compression, seed), logs=logs)
        for arm in real:
            gaps[arm].append(agreement(twin[arm], real[arm]))
    return gaps
