"""The twin's backfill passes come every ``bf_interval``; between them Slurm's main scheduler starts jobs in
priority order only."""

from __future__ import annotations

import pytest

from benchmarks.harness.backfill import Backfill
from benchmarks.harness.model import Arrival, Job, Pool, ReplayConfig, ReplayDecision
from benchmarks.harness.scheduler import Attempt, SimPartition, cluster_pass
from tests.test_replay_will_run import scene_starts

#: name: (arrival, GPUs, nodes, limit = run), on two nodes of 4 GPUs.
SCENE = {
    "a": (0.0, 4, 1, 100.0),
    "h": (1.0, 8, 2, 50.0),
    "s": (2.0, 4, 1, 30.0),
    "t": (3.0, 4, 1, 5.0),
}


@pytest.mark.parametrize(
    ("interval_s", "expected"),
    [
        # A pass at every event: s backfills on the free node at once (2-32, before h's slot at 100), t
        # when s ends (32-37).
        (0.0, {"a": 0.0, "h": 100.0, "s": 2.0, "t": 32.0}),
        # Passes at 12, 24, 36, 48 ...: a starts at its arrival (the head of the queue: the main
        # scheduler); s backfills at the pass at 12 (ends 42); at 42 the main scheduler finds the head, h,
        # not fitting and starts nothing, so t waits for the pass at 48; h, the head, starts at a's end.
        (12.0, {"a": 0.0, "h": 100.0, "s": 12.0, "t": 48.0}),
    ],
)
def test_jobs_behind_the_head_start_at_backfill_passes_only(
    interval_s: float, expected: dict[str, float]
) -> None:
    assert scene_starts(Backfill(pass_interval_s=interval_s), SCENE, nodes=2) == expected


@pytest.mark.parametrize(
    ("passes", "expected"),
    [
        # Passes at 12, 24, 36 ...: no job starts at its arrival, the head a neither; at 12 a starts on the
        # first node (ends 112), h is planned at 112 on both, s backfills beside a (ends 42) and t is planned
        # at 42; t starts at the pass at 48, h at the pass at 120 after a's end.
        (Backfill(pass_interval_s=12.0, main_scheduler=False), {"a": 12.0, "h": 120.0, "s": 12.0, "t": 48.0}),
        # The real run's own passes at 5 and 50, then every 12 s (60, 72 ... 108): a and s at 5 (s ends 35),
        # t at 50, h at 108 after a's end at 105.
        (
            Backfill(pass_interval_s=12.0, pass_times_s=(5.0, 50.0), main_scheduler=False),
            {"a": 5.0, "h": 108.0, "s": 5.0, "t": 50.0},
        ),
    ],
)
def test_with_the_main_scheduler_off_jobs_start_at_passes_only(
    passes: Backfill, expected: dict[str, float]
) -> None:
    assert scene_starts(passes, SCENE, nodes=2) == expected


def _attempt(name: str, order: int, partition: str, nodes: int, limit_s: float) -> Attempt:
    """An attempt asking ``nodes`` whole 4-GPU nodes of ``partition`` for ``limit_s`` (its run too)."""
    job = Job(
        arrival=Arrival(name=name, time_s=0.0, application="toy", gpus=4 * nodes, global_batch=32),
        steps=1,
        user_gpu_type="t4",
        user_limit_s=limit_s,
    )
    config = ReplayConfig(gpu_type="t4", gpus=4 * nodes, nodes=nodes, micro_batch=8, accumulation=1)
    decision = ReplayDecision(partition=partition, config=config, time_limit_s=limit_s)
    return Attempt(order, job, decision, limit_s, 0.0, limit_s)


@pytest.mark.parametrize(("q1_order", "started"), [(2, ["q1", "p3"]), (5, ["q1"])])
def test_a_pass_plans_the_whole_cluster_in_priority_order_so_a_walk_sees_the_jobs_started_before(
    q1_order: int, started: list[str]
) -> None:
    """p has three nodes, q one; r1 (to 100) and r2 (to 200) hold p's first two, 30-s will-run batches from
    0. p2 (two nodes) fits at 100 on p-1 and p-3 once r1 ends, and p3 (one node, 150 s) fits now on p-3
    only if p2's slot leaves it. Where q1 (q, to 110) comes before p2 it is running when p2 is planned: its
    end, within r1's batch (mark 120, + 30), carries the walk on to r2, so p2 is planned at 200 on p-1 and
    p-2 and p3 starts. Where q1 comes after p3, p2 is planned at 100 on p-1 and p-3, and p3 waits."""
    backfill = Backfill(will_run_batch_s=30.0, will_run_walk=True, main_scheduler=False)
    p = SimPartition(Pool(partition="p", gpu_type="t4", nodes=3, gpus_per_node=4), backfill)
    q = SimPartition(Pool(partition="q", gpu_type="t4", nodes=1, gpus_per_node=4), backfill)
    p.neighbours, q.neighbours = [q], [p]
    p.submit(_attempt("r1", 0, "p", 1, 100.0))
    p.submit(_attempt("r2", 1, "p", 1, 200.0))
    assert [a.job.arrival.name for a in cluster_pass([p, q], 0.0)] == ["r1", "r2"]
    p.submit(_attempt("p2", 3, "p", 2, 10.0))
    p.submit(_attempt("p3", 4, "p", 1, 150.0))
    q.submit(_attempt("q1", q1_order, "q", 1, 110.0))
    assert [a.job.arrival.name for a in cluster_pass([p, q], 0.0)] == started


def test_slurm_plans_a_running_jobs_end_from_its_start_to_the_whole_second() -> None:
    """Compression 400 with the real clock's seconds at 12, 412 ... workload s: a job started at 6,460.9 s
    has Slurm's start 6,412 s, and a 3,600-s limit is a whole minute (24,000 s): planned to end at
    30,412 s."""
    backfill = Backfill(tick_s=400.0, will_run_origin_s=12.0, limit_resolution_s=24_000.0)
    assert backfill.planned_end(6460.9, 3600.0) == pytest.approx(30_412.0)
    assert backfill.planned_end(6412.0, 3600.0) == pytest.approx(30_412.0)
    assert Backfill().planned_end(6460.9, 3600.0) == pytest.approx(10_060.9)
