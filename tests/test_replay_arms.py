"""The three arms' decisions against a queue whose waits the test sets (a QueueView is an arm's input)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from advisor.replay.arms import LimitRule, advisor_arm, gpu_counts, habits_arm, slurm_arm
from advisor.replay.model import Arrival, Config, Inventory, Job, Pool, WaitQuery
from advisor.replay.predictor import Predictors, train_predictors
from advisor.replay.truth import StepTable
from tests.replay_support import spiked_at, write_steps

HOUR = 3600.0
INVENTORY = Inventory(
    pools=[
        Pool(partition="fast", gpu_type="a100", nodes=2, gpus_per_node=8),
        Pool(partition="mid", gpu_type="v100", nodes=2, gpus_per_node=8),
        Pool(partition="slow", gpu_type="t4", nodes=2, gpus_per_node=4),
    ]
)


class SetWaits:
    """A queue whose waits per partition are given; records what each estimator was asked."""

    def __init__(self, slurm: Mapping[str, float | None], advisor: Mapping[str, float | None] | None = None):
        self.slurm = slurm
        self.advisor = advisor if advisor is not None else slurm
        self.slurm_asked: list[WaitQuery] = []
        self.advisor_asked: list[WaitQuery] = []

    def slurm_waits(self, queries: Sequence[WaitQuery]) -> list[float | None]:
        self.slurm_asked.extend(queries)
        return [self.slurm.get(q.partition, 0.0) for q in queries]

    def advisor_waits(self, queries: Sequence[WaitQuery]) -> list[float | None]:
        self.advisor_asked.extend(queries)
        return [self.advisor.get(q.partition, 0.0) for q in queries]


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> StepTable:
    return StepTable.load(write_steps(tmp_path_factory.mktemp("steps") / "steps.csv"))


@pytest.fixture(scope="module")
def predictors(table: StepTable) -> Predictors:
    return train_predictors(table, {("toy", 64)})


def job(user_gpu_type: str = "a100", gpus: int = 4, global_batch: int = 256, steps: int = 20_000) -> Job:
    arrival = Arrival(name="j", time_s=0.0, application="toy", gpus=gpus, global_batch=global_batch)
    return Job(arrival=arrival, steps=steps, user_gpu_type=user_gpu_type, user_limit_s=6 * HOUR)


def test_habits_arm_submits_the_users_own_request_and_asks_slurm_once(table: StepTable) -> None:
    view = SetWaits({"slow": 50.0})
    decision = habits_arm(INVENTORY, table)(job(user_gpu_type="t4", global_batch=1024), view)
    assert decision.partition == "slow"
    assert decision.config == Config(gpu_type="t4", gpus=4, nodes=1, micro_batch=128, accumulation=2)
    assert decision.time_limit_s == 6 * HOUR
    assert (decision.slurm_wait_s, decision.advisor_wait_s, decision.predicted_run_s) == (50.0, None, None)
    assert view.slurm_asked == [WaitQuery(partition="slow", gpus=4, nodes=1, time_limit_s=6 * HOUR)]


def test_slurm_arm_takes_the_earliest_test_only_start_with_the_users_configuration(table: StepTable) -> None:
    view = SetWaits({"fast": 5 * HOUR, "mid": 2 * HOUR, "slow": 3 * HOUR})
    decision = slurm_arm(INVENTORY, table)(job(user_gpu_type="a100"), view)
    assert decision.partition == "mid"
    assert decision.config == Config(gpu_type="v100", gpus=4, nodes=1, micro_batch=64, accumulation=1)
    assert decision.time_limit_s == 6 * HOUR
    assert decision.slurm_wait_s == 2 * HOUR
    assert {q.partition for q in view.slurm_asked} == {"fast", "mid", "slow"}


def test_slurm_arm_breaks_ties_by_the_users_type_and_skips_never(table: StepTable) -> None:
    tie = SetWaits({"fast": 0.0, "mid": 0.0, "slow": 0.0})
    assert slurm_arm(INVENTORY, table)(job(user_gpu_type="t4"), tie).partition == "slow"
    never_fast = SetWaits({"fast": None, "mid": 10.0, "slow": 20.0})
    assert slurm_arm(INVENTORY, table)(job(user_gpu_type="a100"), never_fast).partition == "mid"


def test_gpu_counts_are_powers_of_two_and_the_request_within_the_pool() -> None:
    assert gpu_counts(12, INVENTORY.pools[0]) == [1, 2, 4, 8, 12]
    assert gpu_counts(12, INVENTORY.pools[2]) == [1, 2, 4, 8]


def test_advisor_prefers_a_free_slower_pool_over_a_long_wait_on_a_fast_one(predictors: Predictors) -> None:
    arm = advisor_arm(INVENTORY, predictors)
    idle = SetWaits({})
    assert arm(job(), idle).partition == "fast"
    busy_fast = SetWaits({"fast": 20 * HOUR}, advisor={"fast": 20 * HOUR})
    decision = arm(job(), busy_fast)
    assert decision.partition in {"mid", "slow"}
    assert decision.advisor_wait_s == 0.0
    asked = busy_fast.advisor_asked
    assert len(asked) == len(set(asked))
    assert busy_fast.slurm_asked == [
        WaitQuery(
            partition=decision.partition,
            gpus=decision.config.gpus,
            nodes=decision.config.nodes,
            time_limit_s=decision.time_limit_s,
        )
    ]


def test_advisor_predicts_from_its_models_and_sets_the_limit_by_its_rule(predictors: Predictors) -> None:
    rule = LimitRule(factor=1.5, margin_s=300, partition_max_s=48 * HOUR)
    the_job = job()
    decision = advisor_arm(INVENTORY, predictors, rule)(the_job, SetWaits({}))
    config = decision.config
    p50, p90 = predictors.predict("toy", config.gpu_type, config.gpus, config.nodes, config.micro_batch)
    per_run = the_job.steps * config.accumulation
    assert decision.predicted_run_s == pytest.approx(per_run * p50)
    assert decision.time_limit_s == pytest.approx(per_run * p90 * 1.5 + 300)
    assert config.gpus * config.micro_batch * config.accumulation == pytest.approx(256, rel=0.05)


def test_advisor_never_sees_the_truth_of_a_held_out_batch(tmp_path: Path) -> None:
    """The truth makes micro-batch 64 ten times slower; the advisor, not trained on it, cannot know."""
    truth = StepTable.load(write_steps(tmp_path / "steps.csv", spiked_at(64)))
    arm = advisor_arm(INVENTORY, train_predictors(truth, {("toy", 64)}))
    the_job = job()
    decision = arm(the_job, SetWaits({}))
    assert (decision.partition, decision.config.micro_batch) == ("fast", 64)
    assert decision.predicted_run_s is not None
    assert decision.predicted_run_s < truth.true_run_s(the_job, decision.config) / 3


def test_advisor_keeps_micro_batches_it_has_seen_fit(predictors: Predictors) -> None:
    only_t4 = SetWaits({"fast": None, "mid": None})
    decision = advisor_arm(INVENTORY, predictors)(job(gpus=1, global_batch=512), only_t4)
    assert decision.partition == "slow"
    assert decision.config.micro_batch <= 128


def test_advisor_falls_back_to_the_users_request_when_nothing_can_start(predictors: Predictors) -> None:
    nowhere = SetWaits({"fast": None, "mid": None, "slow": None})
    decision = advisor_arm(INVENTORY, predictors)(job(user_gpu_type="v100"), nowhere)
    assert decision.partition == "mid"
    assert decision.config == Config(gpu_type="v100", gpus=4, nodes=1, micro_batch=64, accumulation=1)
    assert decision.time_limit_s == 6 * HOUR
    assert decision.advisor_wait_s is None
