"""The twin's later slots where Slurm's will-run test plans them: at the end of a batch of ending jobs."""

from __future__ import annotations

import pytest

from benchmarks.harness.model import Arrival, Inventory, Job, Pool, QueueView, ReplayConfig, ReplayDecision
from benchmarks.harness.scheduler import Backfill
from benchmarks.harness.simulate import simulate

#: name: (arrival, GPUs, nodes, limit = run)
SCENE = {
    "a": (0.0, 4, 1, 100.0),
    "x": (0.0, 4, 1, 110.0),
    "w": (0.0, 4, 1, 125.0),
    "b": (1.0, 8, 2, 100.0),
    "c": (2.0, 4, 1, 20.0),
}


def _starts(backfill: Backfill) -> dict[str, float]:
    pool = Pool(partition="p", gpu_type="t4", nodes=3, gpus_per_node=4)

    def decide(job: Job, view: QueueView) -> ReplayDecision:
        _, gpus, nodes, limit = SCENE[job.arrival.name]
        config = ReplayConfig(gpu_type="t4", gpus=gpus, nodes=nodes, micro_batch=8, accumulation=1)
        return ReplayDecision(partition="p", config=config, time_limit_s=limit)

    jobs = [
        Job(
            arrival=Arrival(name=name, time_s=at, application="toy", gpus=gpus, global_batch=8 * gpus),
            steps=int(limit),
            user_gpu_type="t4",
            user_limit_s=400.0,
        )
        for name, (at, gpus, _, limit) in SCENE.items()
    ]
    outcomes = simulate(
        jobs, decide, "habits", Inventory(pools=[pool]), lambda job, _: float(job.steps), backfill=backfill
    )
    return {outcome.name: outcome.start_s for outcome in outcomes}


@pytest.mark.parametrize(
    ("batch_s", "b_start", "c_start"),
    [
        # b's slot is 110 (a's and x's nodes); c (20 s) would overlap it on a's node, so it waits for w's.
        (0.0, 110.0, 125.0),
        # Slurm frees a, x and w as one batch (ending within 30 s of 100) and plans b at 125, the batch's
        # last end: c fits before it on a's node at 100; b starts at 120, when c's node frees.
        (30.0, 120.0, 100.0),
        # a window of 5 s: a alone, then x (within 10 s): b's slot at 110 as without batches.
        (5.0, 110.0, 125.0),
    ],
)
def test_a_later_slot_begins_at_the_end_of_the_batch_that_reaches_it(
    batch_s: float, b_start: float, c_start: float
) -> None:
    starts = _starts(Backfill(will_run_batch_s=batch_s))
    assert (starts["b"], starts["c"]) == (b_start, c_start)
