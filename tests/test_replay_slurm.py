"""The real-Slurm replay: sleep jobs on a sandbox of the replay's own, in time compressed 60-fold."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError

from advisor.sandbox.render import Identity, Layout, render_slurm_conf
from advisor.sandbox.spec import SchedulerSpec
from benchmarks.harness.live_queue import real_limit, simulated_wait
from benchmarks.harness.model import (
    Arrival,
    Inventory,
    Job,
    Pool,
    QueueView,
    ReplayConfig,
    ReplayDecision,
    ReplayOutcome,
    ReplayQuery,
)
from benchmarks.harness.slurm import replay_spec, run_on_slurm

from .conftest import free_port_block

COMPRESSION = 60.0  # a real second is a simulated minute
INVENTORY = Inventory(
    pools=[
        Pool(partition="t4", gpu_type="t4", nodes=1, gpus_per_node=2),
        Pool(partition="v100", gpu_type="v100", nodes=2, gpus_per_node=2),
    ]
)
SECONDS_PER_STEP = {"t4": 2.0, "v100": 1.0}
#: name -> (arrival, GPUs, nodes, steps); every job runs where its user habitually goes.
WORKLOAD = {
    # Fills t4 for 20 simulated minutes under a limit of an hour.
    "first": (0.0, 2, 1, 600, "t4"),
    # Two-node job whose arm gives it 5 minutes for a 15-minute run: killed, then rerun under the user's hour.
    "short": (60.0, 4, 2, 900, "v100"),
    # Arrives while "first" holds t4: Slurm expects it to wait out first's limit, the advisor its run.
    "queued": (300.0, 2, 1, 300, "t4"),
    "late": (1200.0, 1, 1, 300, "v100"),
}
ARM_LIMITS = {"short": 300.0}
#: Real seconds the arm takes to decide "short": "queued", arriving 4 s after it, must not wait for it.
SLOW_DECISION_S = 8.0


def truth(job: Job, config: ReplayConfig) -> float:
    return job.steps * SECONDS_PER_STEP[config.gpu_type]


def jobs() -> list[Job]:
    return [
        Job(
            arrival=Arrival(name=name, time_s=time_s, application="toy", gpus=gpus, global_batch=64),
            steps=steps,
            user_gpu_type=gpu_type,
            user_limit_s=3600.0,
        )
        for name, (time_s, gpus, _, steps, gpu_type) in WORKLOAD.items()
    ]


def habit_arm(job: Job, queue: QueueView) -> ReplayDecision:
    """The user's partition and request, a known run time, and what both estimators said of it; slow to
    decide "short"."""
    if job.arrival.name == "short":
        time.sleep(SLOW_DECISION_S)
    _, gpus, nodes, _, _ = WORKLOAD[job.arrival.name]
    config = ReplayConfig(gpu_type=job.user_gpu_type, gpus=gpus, nodes=nodes, micro_batch=32, accumulation=1)
    limit_s = ARM_LIMITS.get(job.arrival.name, job.user_limit_s)
    query = ReplayQuery(partition=job.user_gpu_type, gpus=gpus, nodes=nodes, time_limit_s=limit_s)
    (slurm_wait,) = queue.slurm_waits([query])
    (advisor_wait,) = queue.advisor_waits([query])
    return ReplayDecision(
        partition=job.user_gpu_type,
        config=config,
        time_limit_s=limit_s,
        predicted_run_s=truth(job, config),
        slurm_wait_s=slurm_wait,
        advisor_wait_s=advisor_wait,
    )


def test_the_replay_sandbox_schedules_by_backfill_every_second_and_plans_a_day_ahead() -> None:
    spec = replay_spec(INVENTORY, base_port=19000)
    conf = render_slurm_conf(spec, Layout(Path("/srv/replay")), Identity(user="u", hostname="h"))
    assert (
        "SchedulerParameters=sched_interval=-1,bf_interval=1,bf_resolution=1,bf_window=1440,bf_continue\n"
        in conf
    )
    assert "MinJobAge=30\n" in conf
    assert "NodeName=v100-2 " in conf and "CPUs=2 RealMemory=200 Gres=gpu:v100:2" in conf
    assert "PartitionName=t4 Nodes=t4-1 " in conf


@pytest.mark.parametrize("interval_s", [0, -2])
def test_a_main_scheduler_period_is_whole_seconds_or_off(interval_s: int) -> None:
    assert SchedulerSpec(sched_interval_s=-1).parameters().startswith("sched_interval=-1,")
    with pytest.raises(ValidationError, match="sched_interval_s"):
        SchedulerSpec(sched_interval_s=interval_s)


def test_a_wait_from_slurm_is_whole_real_seconds_so_now_is_now_on_every_partition() -> None:
    now = datetime(2026, 1, 1, 12, 0, 0, 700_000, tzinfo=UTC)
    truncated_now, next_second = now.replace(microsecond=0), now.replace(microsecond=0) + timedelta(seconds=1)
    assert simulated_wait(truncated_now, now, COMPRESSION) == 0
    assert simulated_wait(next_second, now, COMPRESSION) == 0
    assert simulated_wait(now + timedelta(seconds=10), now, COMPRESSION) == 10 * COMPRESSION
    assert simulated_wait(None, now, COMPRESSION) is None


def test_a_simulated_limit_becomes_whole_real_minutes_rounded_up() -> None:
    assert real_limit(3600, COMPRESSION) == timedelta(minutes=1)
    assert real_limit(3601, COMPRESSION) == timedelta(minutes=2)
    assert real_limit(5, COMPRESSION) == timedelta(minutes=1)


@pytest.mark.slurm
def test_each_job_runs_its_true_time_after_arrival_and_a_killed_one_is_rerun(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Each arrival decided as it comes: "short"'s slow decision holds back no job behind it."""
    port = free_port_block(replay_spec(INVENTORY, base_port=19000).port_count())
    root = tmp_path_factory.mktemp("replay")
    outcomes = run_on_slurm(jobs(), habit_arm, "advisor", INVENTORY, truth, COMPRESSION, root, port)

    by_name = {outcome.name: outcome for outcome in outcomes}
    assert sorted(by_name) == sorted(WORKLOAD)
    # Slurm's clock ticks in seconds and launching takes one or two: a few real seconds of slack.
    slack = 4 * COMPRESSION
    for outcome in outcomes:
        assert outcome.arm == "advisor"
        assert outcome.start_s >= outcome.arrival_s - COMPRESSION
        assert outcome.submitted_s is not None
        assert outcome.arrival_s - COMPRESSION <= outcome.submitted_s <= outcome.start_s + COMPRESSION
        # The harness's own sbatch times: after the arrival, and Slurm's second (its middle) holds the
        # moment between them when the controller accepted the job, give or take the 10 ms by which the
        # harness's monotonic clock and the controller's wall clock can part (CI saw 1.3 ms).
        assert outcome.sbatch_s is not None
        sent, answered = outcome.sbatch_s
        assert outcome.arrival_s <= sent <= answered
        accepted = COMPRESSION / 2 + 0.01 * COMPRESSION
        assert sent - accepted <= outcome.submitted_s <= answered + accepted
        delay = outcome.submitted_s - outcome.arrival_s
        if outcome.name == "short":
            assert delay >= (SLOW_DECISION_S - 1) * COMPRESSION
        else:  # decided at once, whatever "short"'s decision still takes
            assert delay <= 2 * COMPRESSION
        assert outcome.timed_out == (outcome.name == "short")
        assert outcome.end_s - outcome.start_s == pytest.approx(outcome.true_run_s, abs=slack)
    short = by_name["short"]
    # Killed after its five minutes, then run again in full.
    assert short.killed_start_s is not None and short.killed_start_s >= short.arrival_s - COMPRESSION
    assert short.start_s >= short.killed_start_s + 300 - slack
    assert all(outcome.killed_start_s is None for outcome in outcomes if outcome is not short)

    first, queued = by_name["first"], by_name["queued"]
    assert queued.start_s >= first.end_s - slack
    assert_estimates(first, queued)
    assert not Layout(root).record.exists(), "the sandbox was taken down"


def assert_estimates(first: ReplayOutcome, queued: ReplayOutcome) -> None:
    """On an idle cluster both estimators say now; behind "first" Slurm waits for its limit, the advisor
    for its predicted end."""
    assert first.decision.slurm_wait_s is not None and first.decision.slurm_wait_s <= 2 * COMPRESSION
    assert first.decision.advisor_wait_s is not None and first.decision.advisor_wait_s <= 2 * COMPRESSION
    waited = queued.arrival_s - first.start_s
    assert queued.decision.slurm_wait_s == pytest.approx(3600 - waited, abs=3 * COMPRESSION)
    assert queued.decision.advisor_wait_s == pytest.approx(first.true_run_s - waited, abs=3 * COMPRESSION)
