"""Arms A and B's decisions against a queue whose waits the test sets (a QueueView is an arm's input)."""

from __future__ import annotations

import pytest

from benchmarks.harness.arms import habits_arm, slurm_arm
from benchmarks.harness.model import ReplayConfig, ReplayQuery
from benchmarks.harness.truth import StepTable
from tests.replay_support import HOUR, INVENTORY, SetWaits, job, write_steps


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> StepTable:
    return StepTable.load(write_steps(tmp_path_factory.mktemp("steps") / "steps.csv"))


def test_habits_arm_submits_the_users_own_request_and_asks_slurm_once(table: StepTable) -> None:
    view = SetWaits({"slow": 50.0})
    decision = habits_arm(INVENTORY, table)(job(user_gpu_type="t4", global_batch=1024), view)
    assert decision.partition == "slow"
    assert decision.config == ReplayConfig(gpu_type="t4", gpus=4, nodes=1, micro_batch=128, accumulation=2)
    assert decision.time_limit_s == 6 * HOUR
    assert (decision.slurm_wait_s, decision.advisor_wait_s, decision.predicted_run_s) == (50.0, None, None)
    assert view.slurm_asked == [ReplayQuery(partition="slow", gpus=4, nodes=1, time_limit_s=6 * HOUR)]


def test_slurm_arm_takes_the_earliest_test_only_start_with_the_users_configuration(table: StepTable) -> None:
    view = SetWaits({"fast": 5 * HOUR, "mid": 2 * HOUR, "slow": 3 * HOUR})
    decision = slurm_arm(INVENTORY, table)(job(user_gpu_type="a100"), view)
    assert decision.partition == "mid"
    assert decision.config == ReplayConfig(gpu_type="v100", gpus=4, nodes=1, micro_batch=64, accumulation=1)
    assert decision.time_limit_s == 6 * HOUR
    assert decision.slurm_wait_s == 2 * HOUR
    assert {q.partition for q in view.slurm_asked} == {"fast", "mid", "slow"}


def test_slurm_arm_breaks_ties_by_the_users_type_and_skips_never(table: StepTable) -> None:
    tie = SetWaits({"fast": 0.0, "mid": 0.0, "slow": 0.0})
    assert slurm_arm(INVENTORY, table)(job(user_gpu_type="t4"), tie).partition == "slow"
    never_fast = SetWaits({"fast": None, "mid": 10.0, "slow": 20.0})
    assert slurm_arm(INVENTORY, table)(job(user_gpu_type="a100"), never_fast).partition == "mid"
