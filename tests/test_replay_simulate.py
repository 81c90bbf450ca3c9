"""The discrete-event replay: Slurm-like passes, backfill, kills and reruns, and both wait estimators.

Jobs run ``steps`` seconds in any configuration, so every start and end below can be checked by hand.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from benchmarks.harness.backfill import Backfill
from benchmarks.harness.model import (
    Arm,
    Arrival,
    AsRun,
    Inventory,
    Job,
    Pool,
    QueueView,
    ReplayConfig,
    ReplayDecision,
    ReplayOutcome,
    ReplayQuery,
)
from benchmarks.harness.simulate import SLURM_DEFAULTS, DaemonCaches, simulate


@dataclass(frozen=True)
class Ask:
    """What the test's arm submits for one job."""

    gpus: int
    limit_s: float
    nodes: int = 1
    predicted_run_s: float | None = None


def job(name: str, at: float, run_s: int, user_limit_s: float = 1000.0) -> Job:
    return Job(
        arrival=Arrival(name=name, time_s=at, application="cifar10", gpus=1, global_batch=64),
        steps=run_s,
        user_gpu_type="t4",
        user_limit_s=user_limit_s,
    )


def seconds_per_step(job: Job, config: ReplayConfig) -> float:
    return float(job.steps)


def planned_arm(asks: dict[str, Ask]) -> Arm:
    """Submits each job as ``asks`` says, recording both estimators' waits for that request."""

    def decide(job: Job, queue: QueueView) -> ReplayDecision:
        ask = asks[job.arrival.name]
        query = ReplayQuery(partition="p", gpus=ask.gpus, nodes=ask.nodes, time_limit_s=ask.limit_s)
        return ReplayDecision(
            partition="p",
            config=ReplayConfig(gpu_type="t4", gpus=ask.gpus, nodes=ask.nodes, micro_batch=8, accumulation=1),
            time_limit_s=ask.limit_s,
            predicted_run_s=ask.predicted_run_s,
            slurm_wait_s=queue.slurm_waits([query])[0],
            advisor_wait_s=queue.advisor_waits([query])[0],
        )

    return decide


def run(
    jobs: list[Job],
    asks: dict[str, Ask],
    nodes: int = 1,
    backfill: Backfill = SLURM_DEFAULTS,
    caches: DaemonCaches | None = None,
) -> dict[str, ReplayOutcome]:
    inventory = Inventory(pools=[Pool(partition="p", gpu_type="t4", nodes=nodes, gpus_per_node=4)])
    arm = planned_arm(asks)
    outcomes = simulate(jobs, arm, "advisor", inventory, seconds_per_step, backfill=backfill, caches=caches)
    return {outcome.name: outcome for outcome in outcomes}


def test_through_the_daemons_caches_an_answer_is_as_old_as_its_window_lets_it_be() -> None:
    """Windows of 5 s (the queue) and 30 s (``--test-only``) at compression 1: "c" asks 2 s after "b",
    "d" 40 s after it. Slurm plans each behind a's limit (1000) and the 100-second limits queued before."""
    jobs = [job("a", 0.0, 500), job("b", 10.0, 50), job("c", 12.0, 50), job("d", 50.0, 50)]
    asks = {"a": Ask(gpus=4, limit_s=1000), **{name: Ask(gpus=4, limit_s=100) for name in "bcd"}}
    fresh, cached = run(jobs, asks), run(jobs, asks, caches=DaemonCaches(1.0))
    assert [fresh[name].decision.slurm_wait_s for name in "bcd"] == [990, 1088, 1150]
    # c gets b's answer (a start at 1000, b not yet queued), d a fresh one.
    assert [cached[name].decision.slurm_wait_s for name in "bcd"] == [990, 988, 1150]
    # The queue c's own estimator replays is the one b's decision read: without b's 100 s ahead of it.
    assert fresh["c"].decision.advisor_wait_s is not None
    assert cached["c"].decision.advisor_wait_s == fresh["c"].decision.advisor_wait_s - 100
    assert cached["d"].decision.advisor_wait_s == fresh["d"].decision.advisor_wait_s


def test_a_job_that_fits_starts_at_arrival_and_runs_its_true_time() -> None:
    outcomes = run([job("a", 5.0, 30)], {"a": Ask(gpus=2, limit_s=100)})
    assert (outcomes["a"].start_s, outcomes["a"].end_s, outcomes["a"].timed_out) == (5.0, 35.0, False)


def test_a_full_pool_starts_jobs_in_submission_order_as_others_end() -> None:
    jobs = [job("a", 0, 100), job("b", 1, 40), job("c", 2, 10)]
    outcomes = run(jobs, {name: Ask(gpus=4, limit_s=200) for name in "abc"})
    assert [(outcomes[n].start_s, outcomes[n].end_s) for n in "abc"] == [(0, 100), (100, 140), (140, 150)]


def test_backfill_fills_a_gap_without_delaying_the_head_job() -> None:
    asks = {
        "running": Ask(gpus=2, limit_s=100),
        "head": Ask(gpus=4, limit_s=100),
        "short": Ask(gpus=1, limit_s=60),
        "long": Ask(gpus=1, limit_s=200),
    }
    jobs = [job("running", 0, 100), job("head", 1, 50), job("short", 2, 50), job("long", 3, 20)]
    outcomes = run(jobs, asks)
    head = outcomes["head"]
    # The head's planned start when it was submitted: the running job's limit.
    assert head.decision.slurm_wait_s == 99
    assert head.start_s == head.arrival_s + head.decision.slurm_wait_s
    assert outcomes["short"].start_s == 2
    # A GPU is free from the start, but a 200 s limit would run into the head's slot.
    assert outcomes["long"].start_s == head.end_s == 150


def test_a_head_job_planned_past_the_window_holds_no_reservation() -> None:
    asks = {
        "running": Ask(gpus=2, limit_s=100),
        "head": Ask(gpus=4, limit_s=100),
        "long": Ask(gpus=1, limit_s=200),
    }
    jobs = [job("running", 0, 100), job("head", 1, 50), job("long", 3, 20)]
    outcomes = run(jobs, asks, backfill=Backfill(window_s=50))
    assert outcomes["long"].start_s == 3
    assert outcomes["head"].start_s == 100


def test_a_pass_looks_at_the_first_jobs_of_the_queue_only() -> None:
    asks = {"a": Ask(gpus=2, limit_s=100), "b": Ask(gpus=4, limit_s=100), "c": Ask(gpus=1, limit_s=10)}
    jobs = [job("a", 0, 50), job("b", 1, 50), job("c", 2, 10)]
    assert run(jobs, asks)["c"].start_s == 2
    # Looking at the head job only, the pass never sees that c would fit beside a.
    outcomes = run(jobs, asks, backfill=Backfill(max_jobs=1))
    assert (outcomes["b"].start_s, outcomes["c"].start_s) == (50, 100)


def test_a_job_ending_before_its_limit_lets_the_queue_start_early() -> None:
    jobs = [job("a", 0, 30), job("b", 1, 10)]
    outcomes = run(jobs, {"a": Ask(gpus=4, limit_s=100), "b": Ask(gpus=4, limit_s=100)})
    assert outcomes["b"].start_s == 30


def test_a_too_short_limit_kills_the_job_and_the_user_reruns_it_at_the_back_of_the_queue() -> None:
    jobs = [job("a", 0, 80, user_limit_s=200), job("b", 10, 30)]
    outcomes = run(jobs, {"a": Ask(gpus=4, limit_s=50), "b": Ask(gpus=4, limit_s=30)})
    assert (outcomes["b"].start_s, outcomes["b"].end_s) == (50, 80)
    a = outcomes["a"]
    assert (a.arrival_s, a.killed_start_s, a.start_s, a.end_s) == (0, 0, 80, 160)
    assert a.timed_out and not outcomes["b"].timed_out


def test_slurm_waits_are_zero_on_an_empty_cluster_and_the_earliest_limit_end_on_a_full_one() -> None:
    asks = {"a": Ask(gpus=4, limit_s=300), "b": Ask(gpus=4, limit_s=200), "c": Ask(gpus=4, limit_s=100)}
    outcomes = run([job("a", 0, 50), job("b", 0, 50), job("c", 10, 5)], asks, nodes=2)
    assert outcomes["a"].decision.slurm_wait_s == 0
    assert outcomes["c"].decision.slurm_wait_s == 190


def test_the_twin_of_a_compressed_run_plans_on_whole_minute_limits_yet_ends_jobs_on_time() -> None:
    """At compression 10 Slurm's one-minute limit step is 600 workload seconds."""
    asks = {"a": Ask(gpus=4, limit_s=300), "b": Ask(gpus=4, limit_s=100)}
    twin = Backfill(limit_resolution_s=600)
    outcomes = run([job("a", 0, 50), job("b", 10, 5)], asks, backfill=twin)
    assert outcomes["b"].decision.slurm_wait_s == 590, "a's limit of 300 s is planned as 600"
    assert outcomes["b"].decision.advisor_wait_s == 590, "without a prediction, the limit as Slurm keeps it"
    assert outcomes["b"].start_s == 50, "a still ends after its true run"
    assert not outcomes["a"].timed_out


def test_a_late_submission_is_decided_and_queued_then_but_waits_from_its_arrival() -> None:
    asks = {"a": Ask(gpus=4, limit_s=100), "b": Ask(gpus=4, limit_s=100)}
    inventory = Inventory(pools=[Pool(partition="p", gpu_type="t4", nodes=1, gpus_per_node=4)])
    jobs = [job("a", 0, 50), job("b", 10, 5)]
    arm = planned_arm(asks)
    late = AsRun(submitted_at={"a": 30.0})
    found = simulate(jobs, arm, "advisor", inventory, seconds_per_step, as_run=late)
    outcomes = {outcome.name: outcome for outcome in found}
    assert (outcomes["b"].start_s, outcomes["a"].start_s) == (10, 30), "a starts once submitted, b first"
    assert outcomes["a"].arrival_s == 0 and outcomes["a"].decision.slurm_wait_s == 0
    with pytest.raises(ValueError, match="names repeat"):
        again = [*jobs, job("a", 20, 5)]
        simulate(again, arm, "advisor", inventory, seconds_per_step, as_run=AsRun(submitted_at={"a": 1}))


def test_slurm_waits_place_the_request_after_every_pending_job() -> None:
    asks = {"a": Ask(gpus=4, limit_s=100), "b": Ask(gpus=4, limit_s=100), "c": Ask(gpus=1, limit_s=10)}
    outcomes = run([job("a", 0, 100), job("b", 1, 100), job("c", 2, 10)], asks)
    # One GPU would be free only after b's slot: a's limit (100) plus b's (100).
    assert outcomes["c"].decision.slurm_wait_s == 198


def test_advisor_waits_end_running_jobs_at_their_predicted_run_times() -> None:
    asks = {
        "a": Ask(gpus=4, limit_s=300, predicted_run_s=100),
        "b": Ask(gpus=4, limit_s=200, predicted_run_s=100),
        "c": Ask(gpus=4, limit_s=100),
    }
    outcomes = run([job("a", 0, 100), job("b", 0, 100), job("c", 10, 5)], asks, nodes=2)
    decision = outcomes["c"].decision
    assert decision.advisor_wait_s == 90
    assert decision.slurm_wait_s == 190
    assert outcomes["c"].start_s - outcomes["c"].arrival_s == 90


def test_multi_node_jobs_take_the_gpus_they_ask_on_each_node() -> None:
    asks = {
        "spread": Ask(gpus=6, nodes=2, limit_s=100),
        "whole": Ask(gpus=4, limit_s=100),
        "pair": Ask(gpus=2, nodes=2, limit_s=100),
        "one": Ask(gpus=1, limit_s=100),
    }
    jobs = [job("spread", 0, 100), job("whole", 1, 100), job("pair", 2, 100), job("one", 3, 10)]
    outcomes = run(jobs, asks, nodes=3)
    # 3 GPUs on each of two nodes leave one free on each: the pair fits there, the whole node elsewhere.
    assert [outcomes[name].start_s for name in ("spread", "whole", "pair")] == [0, 1, 2]
    assert outcomes["one"].start_s == 100


def test_a_request_larger_than_the_partition_is_the_arms_error() -> None:
    with pytest.raises(ValueError, match="asks 1 node"):
        run([job("a", 0, 10)], {"a": Ask(gpus=8, limit_s=100)})
