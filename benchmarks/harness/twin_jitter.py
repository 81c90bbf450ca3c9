"""How far the twin's agreement moves with its inputs' resolution alone.

A real run knows each submission to the whole second (sacct), and `ReplayOutcome.submitted_s` is that
second's middle: at compression 400, anywhere within 200 workload seconds of the truth. The twin
replays each job from there, and at this compression a few hundred seconds can reorder a partition's
queue. Replaying the twin with each submission moved within its second shows the spread of gaps that
its inputs cannot tell apart (benchmarks/README.md: arm C's gap spanned up to 30 points so).
"""

from __future__ import annotations

import random

from benchmarks.harness.experiment import Experiment, run_twin
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
    moved = {}
    for arm, outcomes in real.items():
        moved[arm] = [
            outcome
            if outcome.submitted_s is None
            else outcome.model_copy(
                update={
                    "submitted_s": max(outcome.arrival_s, outcome.submitted_s + draw.uniform(-half, half))
                }
            )
            for outcome in outcomes
        ]
    return moved


def jitter_gaps(
    experiment: Experiment,
    inventory: Inventory,
    compression: float,
    real: dict[ArmName, list[ReplayOutcome]],
    draws: int = JITTER_DRAWS,
) -> dict[ArmName, list[float]]:
    """Each arm's twin-against-real gap (`agreement`) over ``draws`` jittered replays, seeds 0 on."""
    gaps: dict[ArmName, list[float]] = {arm: [] for arm in real}
    for seed in range(draws):
        twin = run_twin(experiment, inventory, compression, jittered(real, compression, seed))
        for arm in real:
            gaps[arm].append(agreement(twin[arm], real[arm]))
    return gaps
