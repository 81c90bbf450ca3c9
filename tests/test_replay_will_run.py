"""The twin's later slots where Slurm's will-run test plans them: at the end of a batch of ending jobs."""

from __future__ import annotations

import pytest

from benchmarks.harness.backfill import Backfill
from benchmarks.harness.model import (
    Arrival,
    Inventory,
    Job,
    Pool,
    QueueView,
    ReplayConfig,
    ReplayDecision,
    ReplayQuery,
)
from benchmarks.harness.simulate import simulate

#: name: (arrival, GPUs, nodes, limit = run)
SCENE = {
    "a": (0.0, 4, 1, 100.0),
    "x": (0.0, 4, 1, 110.0),
    "w": (0.0, 4, 1, 125.0),
    "b": (1.0, 8, 2, 100.0),
    "c": (2.0, 4, 1, 20.0),
}


def scene_starts(
    backfill: Backfill,
    scene: dict[str, tuple[float, int, int, float]] = SCENE,
    elsewhere: str = "",
    nodes: int = 3,
) -> dict[str, float]:
    """Start of each job of ``scene`` (name: arrival, GPUs, nodes, limit = run); the job named
    ``elsewhere`` runs in partition q (one node), the rest in p (``nodes`` nodes); 4 GPUs a node."""
    pools = [
        Pool(partition="p", gpu_type="t4", nodes=nodes, gpus_per_node=4),
        Pool(partition="q", gpu_type="t4", nodes=1, gpus_per_node=4),
    ]

    def decide(job: Job, view: QueueView) -> ReplayDecision:
        _, gpus, count, limit = scene[job.arrival.name]
        config = ReplayConfig(gpu_type="t4", gpus=gpus, nodes=count, micro_batch=8, accumulation=1)
        partition = "q" if job.arrival.name == elsewhere else "p"
        return ReplayDecision(partition=partition, config=config, time_limit_s=limit)

    jobs = [
        Job(
            arrival=Arrival(name=name, time_s=at, application="toy", gpus=gpus, global_batch=8 * gpus),
            steps=int(limit),
            user_gpu_type="t4",
            user_limit_s=400.0,
        )
        for name, (at, gpus, _, limit) in scene.items()
    ]
    outcomes = simulate(
        jobs, decide, "habits", Inventory(pools=pools), lambda job, _: float(job.steps), backfill=backfill
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
    starts = scene_starts(Backfill(will_run_batch_s=batch_s))
    assert (starts["b"], starts["c"]) == (b_start, c_start)


#: x ends at 155, w at 190: whether x shares a batch depends on where the marks fall.
MARKS = {**SCENE, "x": (0.0, 4, 1, 155.0), "w": (0.0, 4, 1, 190.0), "c": (2.0, 4, 1, 60.0)}


@pytest.mark.parametrize(
    ("origin_s", "b_start", "c_start"),
    [
        # Marks at 120 (a's end 100 rounded up to the clock's 30 s), then 150, 180, 240. At 1: a, then x
        # alone: b's slot at 155 on a's and x's nodes; c (60 s) would overlap it on a's node, and is
        # planned on w's at 190. At 100 (a ended) the marks are 180 (x's 155 rounded up), then 210: x and w
        # are one batch, b's slot moves to 190, and c fits before it on a's node: it starts at 100; b
        # waits for c's node and starts at 160.
        (0.0, 160.0, 100.0),
        # The clock 7 s later: marks 127, 157 at 1 (a and x one batch: b at 155), and at 100 157, 187: x
        # alone, b's slot stays at 155 and c waits for w's node (190).
        (7.0, 155.0, 190.0),
    ],
)
def test_the_batches_end_at_marks_on_the_clock(origin_s: float, b_start: float, c_start: float) -> None:
    starts = scene_starts(Backfill(will_run_batch_s=30.0, will_run_origin_s=origin_s), MARKS)
    assert (starts["b"], starts["c"]) == (b_start, c_start)


def test_a_job_of_another_partition_carries_the_walk_on() -> None:
    """Clock as in the second case above, and z (q's node, ends at 170) between x (155) and w (190) in the
    walk over the cluster's running jobs. At 1 the job after x is z, past the mark 157: a and x are one
    batch, b's slot 155. At 100 (marks 157, 187) the job after x is z, within 187, so the walk goes on to w
    and frees it too, though 190 is past the mark: b's slot 190, c fits before it at 100, b starts at 160."""
    scene = {**MARKS, "z": (0.0, 4, 1, 170.0)}
    walking = Backfill(will_run_batch_s=30.0, will_run_origin_s=7.0, will_run_walk=True)
    starts = scene_starts(walking, scene, elsewhere="z")
    assert (starts["b"], starts["c"], starts["z"]) == (160.0, 100.0, 0.0)
    # Walking this partition's jobs only, x is a batch of its own as without z: b at 155, c at 190.
    alone = scene_starts(walking.model_copy(update={"will_run_walk": False}), scene, elsewhere="z")
    assert (alone["b"], alone["c"]) == (155.0, 190.0)


def test_the_walk_frees_no_job_on_a_node_an_earlier_slot_holds() -> None:
    """Four nodes, each held whole by a job ending at 100 (a), 130 (x), 200 (w), 230 (y); b (one node,
    1000 s) waits, its slot on a's node from 130 (marks 120, 150: a and x one batch). At 3, ``--test-only``
    for two nodes for 100 s: the earliest two are x's and w's at 200. The walk leaves a out (its node is
    b's over 200-300), so its marks are x's 130 rounded up, 150, then 180, 210: x alone, then w alone
    (y's 230 is past 210): 200. Walking a too, the marks would be 120, 150, 180, 240: w and y together,
    230."""
    pool = Pool(partition="p", gpu_type="t4", nodes=4, gpus_per_node=4)
    scene = {"a": (0.0, 100.0), "x": (0.0, 130.0), "w": (0.0, 200.0), "y": (0.0, 230.0), "b": (1.0, 1000.0)}
    scene["probe"] = (3.0, 10.0)
    asked: list[float | None] = []

    def decide(job: Job, view: QueueView) -> ReplayDecision:
        if job.arrival.name == "probe":
            asked.extend(view.slurm_waits([ReplayQuery(partition="p", gpus=8, nodes=2, time_limit_s=100.0)]))
        config = ReplayConfig(gpu_type="t4", gpus=4, nodes=1, micro_batch=8, accumulation=1)
        return ReplayDecision(partition="p", config=config, time_limit_s=scene[job.arrival.name][1])

    jobs = [
        Job(
            arrival=Arrival(name=name, time_s=at, application="toy", gpus=4, global_batch=32),
            steps=int(limit),
            user_gpu_type="t4",
            user_limit_s=2000.0,
        )
        for name, (at, limit) in scene.items()
    ]
    backfill = Backfill(will_run_batch_s=30.0)
    simulate(
        jobs, decide, "habits", Inventory(pools=[pool]), lambda job, _: float(job.steps), backfill=backfill
    )
    assert asked == [200.0 - 3.0]
