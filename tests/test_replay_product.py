"""Arm C and the oracle are the product's recommender: the daemon's parser, candidates, limit rule and
thresholds, with Sia's step times (the daemon's ``--step-times`` file) and the replayed queue at the seams;
on real Slurm arm C is a running daemon, on the sandbox's compressed clock."""

from __future__ import annotations

import getpass
import math
import sqlite3
from datetime import datetime
from pathlib import Path

import pytest

from advisor.comm.sync import Spread
from advisor.daemon.step_times import MeasuredSteps, StepPoint, StepTimes
from advisor.history.past import JobAsk
from advisor.history.predictor import RunForecast
from advisor.jobscript.rewrite import apply_advice
from advisor.jobscript.submission import ParsedSubmission, parse_submission
from advisor.policy.load import parse_policy
from advisor.policy.schema import Policy
from advisor.predict.types import Prediction
from advisor.recommend.ask import Ask, Caller, PastRuns
from advisor.recommend.choose import Recommendation
from advisor.recommend.estimator import Context, StepPredictor, Sync
from advisor.recommend.service import recommend
from advisor.sandbox.cluster import Sandbox
from benchmarks.harness.arms import habits_arm
from benchmarks.harness.compressed import compressed_policy, compressed_times, policy_toml
from benchmarks.harness.daemon import AdvisorDaemon
from benchmarks.harness.model import Arrival, Inventory, Job, Pool, ReplayDecision
from benchmarks.harness.predictor import StepModels, train_predictors
from benchmarks.harness.product import (
    TRAINED_AT,
    USER,
    job_script,
    partitions_of,
    product_arm,
    queue_estimator,
)
from benchmarks.harness.step_file import asked_batches, learned_times, true_times
from benchmarks.harness.truth import StepTable
from tests.replay_support import HOUR, INVENTORY, SetWaits, job, spiked_at, write_steps

REWRITE = Policy.model_validate({"mode": "rewrite", "tuning": {"amp": False, "channels_last": False}})
BUSY_FAST = {"fast": 20 * HOUR}


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> StepTable:
    return StepTable.load(write_steps(tmp_path_factory.mktemp("steps") / "steps.csv"))


@pytest.fixture(scope="module")
def models(table: StepTable) -> StepModels:
    return train_predictors(table, {("toy", 64)})


def test_arm_c_makes_the_choice_the_daemons_recommender_makes_for_the_users_script(
    tmp_path: Path, table: StepTable, models: StepModels
) -> None:
    """The script goes through advise-submit's own parsing here, through the replay's there."""
    the_job = job()
    decision = product_arm(INVENTORY, REWRITE, learned(models), table)(the_job, SetWaits(BUSY_FAST))

    script = tmp_path / "train.sbatch"
    script.write_text(job_script(the_job, INVENTORY.pools[0]))
    parsed = parse_submission(script, [], {})
    context = Context(REWRITE, partitions_of(INVENTORY), queue_estimator(SetWaits(BUSY_FAST)))
    found = recommend(context, _ask(parsed), toy(learned(models)))

    assert found.apply and found.chosen is not None
    chosen = found.chosen.candidate
    assert chosen.partition != "fast"  # the queue moved it: the comparison is not of two unchanged jobs
    assert decision.partition == chosen.partition
    config = decision.config
    assert (config.gpus, config.nodes, config.micro_batch, config.accumulation) == (
        chosen.gpus,
        1,
        chosen.micro_batch,
        chosen.accumulation,
    )
    assert decision.time_limit_s == found.chosen.time_limit.total_seconds()
    assert decision.predicted_run_s == pytest.approx(found.chosen.run_s)


def test_arm_c_sets_the_limit_by_the_policys_rule_from_the_models_p90(
    table: StepTable, models: StepModels
) -> None:
    the_job = job(steps=60_000)  # hours of training under a six-hour limit
    decision = arm_c(REWRITE, models, table, the_job)
    config = decision.config
    p50, p90 = models.predict("toy", config.gpu_type, config.gpus, 1, config.micro_batch)
    micro_steps = the_job.steps * config.accumulation
    rule, startup_s = REWRITE.time_limit, REWRITE.overhead.startup_minutes * 60  # steps, no epochs
    minutes = math.ceil((micro_steps * p90 + startup_s) * rule.factor / 60 + rule.margin_minutes)
    floor = math.ceil(the_job.user_limit_s * rule.min_fraction_of_request / 60)
    assert minutes > floor, "the rule, not the floor, sets this limit"
    assert decision.time_limit_s == minutes * 60
    assert decision.predicted_run_s == pytest.approx(micro_steps * p50 + startup_s)


def test_a_shortened_limit_keeps_the_policys_share_of_the_users_own(
    table: StepTable, models: StepModels
) -> None:
    the_job = job(steps=200)  # minutes of training under a six-hour limit
    decision = arm_c(REWRITE, models, table, the_job)
    rule = REWRITE.time_limit
    assert decision.time_limit_s == math.ceil(the_job.user_limit_s * rule.min_fraction_of_request / 60) * 60
    unfloored = REWRITE.model_copy(
        update={"time_limit": rule.model_copy(update={"min_fraction_of_request": 0})}
    )
    assert arm_c(unfloored, models, table, the_job).time_limit_s < decision.time_limit_s / 2


def arm_c(policy: Policy, models: StepModels, table: StepTable, the_job: Job) -> ReplayDecision:
    return product_arm(INVENTORY, policy, learned(models), table)(the_job, SetWaits(BUSY_FAST))


def test_the_oracle_sees_the_held_out_truth_that_arm_c_cannot(tmp_path: Path) -> None:
    """Micro-batch 64 is ten times slower in the truth; the models never saw it, the oracle reads it."""
    truth = StepTable.load(write_steps(tmp_path / "steps.csv", spiked_at(64)))
    the_job = job()  # 4 A100s, global batch 256: micro-batch 64 as submitted
    idle = SetWaits({})
    blind = product_arm(INVENTORY, REWRITE, learned(train_predictors(truth, {("toy", 64)})), truth)
    sighted = product_arm(INVENTORY, REWRITE, true_times(truth, [job().arrival], TRAINED_AT), truth)
    kept, moved = blind(the_job, idle), sighted(the_job, SetWaits({}))
    as_users_run_it = habits_arm(INVENTORY, truth)(the_job, SetWaits({}))
    assert kept.model_copy(update={"advisor_wait_s": None}) == as_users_run_it
    assert moved.config.micro_batch != 64
    assert truth.true_run_s(the_job, moved.config) < truth.true_run_s(the_job, kept.config) / 2


def test_an_advise_only_policy_leaves_every_job_as_its_user_runs_it(
    table: StepTable, models: StepModels
) -> None:
    advise = REWRITE.model_copy(update={"mode": "advise"})
    arm = product_arm(INVENTORY, advise, learned(models), table)
    kept = arm(job(), SetWaits(BUSY_FAST))
    assert kept.advisor_wait_s == BUSY_FAST["fast"], "the job as is, with the advisor's own wait for it"
    assert kept.model_copy(update={"advisor_wait_s": None}) == habits_arm(INVENTORY, table)(
        job(), SetWaits(BUSY_FAST)
    )


def test_a_multi_node_request_is_advised_over_every_spread_as_the_product_does(
    table: StepTable, models: StepModels
) -> None:
    eight_t4s = job(user_gpu_type="t4", gpus=8)  # two nodes of the 4-GPU partition
    arm = product_arm(INVENTORY, REWRITE, learned(models), table)
    kept = habits_arm(INVENTORY, table)(eight_t4s, SetWaits({"slow": 20 * HOUR}))
    assert kept.config.nodes == 2 and kept.partition == "slow"
    moved = arm(eight_t4s, SetWaits({"slow": 20 * HOUR}))
    # Twenty hours' wait for two t4 nodes: the same eight GPUs on one idle a100 node start now.
    assert moved.partition == "fast" and (moved.config.gpus, moved.config.nodes) == (8, 1)
    assert moved.predicted_run_s is not None and moved.slurm_wait_s == 0


def test_start_up_and_each_epoch_add_the_policys_overhead_to_every_candidate(
    tmp_path: Path, models: StepModels
) -> None:
    script = tmp_path / "train.sbatch"
    text = job_script(job(), INVENTORY.pools[0])
    assert "--steps 20000" in text
    # 20000 steps of 256 over 512000 samples: ten epochs.
    script.write_text(text.replace("--steps 20000", "--epochs 10 --dataset-size 512000"))
    parsed = parse_submission(script, [], {})
    assert parsed.description is not None

    def run_times(overhead: dict[str, float]) -> dict[tuple[str, int, int], float]:
        policy = REWRITE.model_copy(update={"overhead": REWRITE.overhead.model_validate(overhead)})
        context = Context(policy, partitions_of(INVENTORY), queue_estimator(SetWaits({})))
        found = recommend(context, _ask(parsed), toy(learned(models)))
        return {
            (e.candidate.partition, e.candidate.gpus, e.candidate.micro_batch): e.run_s
            for e in found.candidates
        }

    bare = run_times({"startup_minutes": 0, "per_epoch_seconds": 0})
    loaded = run_times({"startup_minutes": 3, "per_epoch_seconds": 30})
    assert loaded.keys() == bare.keys() and len(bare) > 3
    assert all(loaded[key] == pytest.approx(bare[key] + 3 * 60 + 10 * 30) for key in bare)


def advise(tmp_path: Path, text: str, models: StepModels, waits: dict[str, float]) -> Recommendation:
    script = tmp_path / "train.sbatch"
    script.write_text(text)
    parsed = parse_submission(script, [], {})
    context = Context(REWRITE, partitions_of(INVENTORY), queue_estimator(SetWaits(waits)))
    steps = toy(learned(models))
    return recommend(context, _ask(parsed), steps)


def test_a_request_for_several_partitions_is_reordered_not_shrunk(tmp_path: Path, models: StepModels) -> None:
    text = job_script(job(gpus=4, steps=60_000), INVENTORY.pools[0])
    assert "--partition=fast\n" in text
    several = advise(
        tmp_path, text.replace("--partition=fast\n", "--partition=fast,slow\n"), models, BUSY_FAST
    )
    assert several.apply and several.advice is not None and several.chosen is not None
    chosen = several.chosen.candidate
    assert chosen.partition == "mid", "the busy A100s lose to the idle V100s"
    assert [several.advice.partition, *several.advice.other_partitions] == ["mid", "fast", "slow"]
    # The limit covers the slowest partition the job may start on: the same configuration on the T4s.
    (on_t4,) = [
        e for e in several.candidates if e.candidate == chosen.model_copy(update={"partition": "slow"})
    ]
    assert several.advice.time_limit == on_t4.time_limit > several.chosen.time_limit
    single = advise(tmp_path, text, models, BUSY_FAST)
    assert single.advice is not None and single.advice.other_partitions == []
    assert single.advice.time_limit == several.chosen.time_limit
    words = apply_advice(
        parse_submission(tmp_path / "train.sbatch", [], {}).request,
        None,
        ["train.sbatch"],
        several.advice,
        {"fast", "mid", "slow"},
    ).argv
    assert "--partition=mid,fast,slow" in words


def test_a_partition_the_advised_configuration_cannot_run_on_is_left_out_and_said(
    tmp_path: Path, models: StepModels
) -> None:
    """Eight GPUs per node on the V100s; the T4 nodes have four."""
    text = job_script(job(gpus=8, steps=60_000), INVENTORY.pools[0])
    several = advise(
        tmp_path, text.replace("--partition=fast\n", "--partition=fast,slow\n"), models, BUSY_FAST
    )
    assert several.advice is not None and several.chosen is not None
    assert several.chosen.candidate.gpus == 8 and several.chosen.candidate.partition == "mid"
    assert [several.advice.partition, *several.advice.other_partitions] == ["mid", "fast"]
    assert any("does not run there: slow" in reason for reason in several.reasons)


class _Unsure:
    """The learned steps, as a predictor that is not sure of them (another machine's, scaled)."""

    def __init__(self, steps: StepPredictor) -> None:
        self.steps = steps

    def step(
        self, partition: str, gpus: int, nodes: int, micro_batch: int, amp: bool, channels_last: bool
    ) -> Prediction:
        found = self.steps.step(partition, gpus, nodes, micro_batch, amp, channels_last)
        return found.model_copy(update={"confidence": "low"})

    def sync(self, partition: str, spread: Spread, micro_step_s: float) -> Sync:
        return self.steps.sync(partition, spread, micro_step_s)

    def trained_at(self, machine: str, version: int) -> datetime | None:
        return self.steps.trained_at(machine, version)


def test_history_sets_the_level_of_predictions_the_model_is_not_sure_of(
    tmp_path: Path, models: StepModels
) -> None:
    script = tmp_path / "train.sbatch"
    script.write_text(job_script(job(gpus=4, steps=60_000), INVENTORY.pools[0]))
    parsed = parse_submission(script, [], {})
    context = Context(REWRITE, partitions_of(INVENTORY), queue_estimator(SetWaits({})))
    unsure = _Unsure(toy(learned(models)))
    alone = recommend(context, _ask(parsed), unsure)
    assert alone.baseline is not None and alone.baseline.confidence == "low"
    predicted = alone.baseline.run_s
    ask = JobAsk(user=USER, script="train.sbatch", partition="fast", submit_s=0, limit_s=None, cpus=1, gpus=4)
    runs = (1.9 * predicted, 2.1 * predicted, 2.0 * predicted)
    forecast = RunForecast(p50_s=2.0 * predicted, upper_s=2.2 * predicted, source="history", runs=runs)
    told = recommend(context, _ask(parsed, PastRuns(ask, forecast)), unsure)
    assert told.baseline is not None and told.baseline.run_s == pytest.approx(2.0 * predicted)
    before = {
        (e.candidate.partition, e.candidate.gpus, e.candidate.micro_batch): e.run_s for e in alone.candidates
    }
    after = {
        (e.candidate.partition, e.candidate.gpus, e.candidate.micro_batch): e.run_s for e in told.candidates
    }
    assert after.keys() == before.keys() and all(after[k] == pytest.approx(2 * before[k]) for k in before)
    assert (
        "history: the low-confidence predictions are scaled by 2.00 to this script's earlier runs"
        in told.reasons
    )
    # A prediction the model is sure of keeps its own level; history is only cross-checked.
    sure = toy(learned(models))
    kept = recommend(context, _ask(parsed, PastRuns(ask, forecast)), sure)
    assert kept.baseline is not None and kept.baseline.confidence != "low"
    assert not any("scaled by" in reason for reason in kept.reasons)
    assert any(reason.startswith("history: your last 3 runs of train.sbatch took") for reason in kept.reasons)


def learned(models: StepModels) -> StepTimes:
    """Arm C's step times at every micro-batch the test jobs' candidates ask for (global batch 256)."""
    return learned_times(models, [job().arrival], TRAINED_AT)


def toy(times: StepTimes) -> StepPredictor:
    """The daemon's predictor of the toy application over ``times``."""
    return MeasuredSteps(times, "toy", partitions_of(INVENTORY))


def _ask(parsed: ParsedSubmission, history: PastRuns | None = None) -> Ask:
    """A replayed submission, as the harness asks (`benchmarks.harness.product`)."""
    return Ask(parsed.request, parsed.description, Caller(USER), TRAINED_AT, history=history)


def test_the_file_holds_every_micro_batch_a_candidate_can_ask_for() -> None:
    twelve = Arrival(name="j", time_s=0, application="toy", gpus=4, global_batch=12)
    # 12 samples over 1, 2, 3, 4, 6 or 12 devices, each split into micro-batches: the divisors, and 1.
    assert asked_batches([twelve]) == {"toy": [1, 2, 3, 4, 6, 12]}


def test_the_learned_curves_are_the_models_own_numbers_and_shrink_with_the_clock(models: StepModels) -> None:
    times = learned(models)
    point = at_64_on_four_a100s(times)
    assert (point.step_s, point.step_p90_s) == models.predict("toy", "a100", 4, 1, 64)
    shorter = at_64_on_four_a100s(compressed_times(times, 400))
    assert (shorter.step_s, shorter.step_p90_s) == (point.step_s / 400, point.step_p90_s / 400)


def at_64_on_four_a100s(times: StepTimes) -> StepPoint:
    where = ("toy", "a100", 4, 1)
    (curve,) = [c for c in times.curves if (c.model, c.gpu_type, c.gpus_per_node, c.nodes) == where]
    (point,) = [p for p in curve.points if p.micro_batch == 64]
    return point


def test_the_daemons_policy_file_is_the_policy_on_the_compressed_clock() -> None:
    policy = compressed_policy(REWRITE, 400)
    assert policy.rewrite.min_gain_minutes * 60 == pytest.approx(1.5)  # 10 minutes of workload
    assert policy.time_limit.margin_minutes * 60 == pytest.approx(2.25)  # 15 minutes
    assert policy.overhead.startup_minutes * 60 == pytest.approx(0.3)  # 2 minutes
    assert policy.rewrite.max_model_age_days == REWRITE.rewrite.max_model_age_days, "real days stay"
    assert parse_policy(policy_toml(policy), "daemon.toml") == policy


def test_on_the_compressed_clock_the_advice_is_the_same_and_its_limit_whole_real_minutes(
    table: StepTable, models: StepModels
) -> None:
    times = learned(models)
    busy = SetWaits({"fast": 20 * HOUR})
    real_time = product_arm(INVENTORY, REWRITE, times, table)(job(steps=60_000), busy)
    compressed = product_arm(INVENTORY, REWRITE, times, table, compression=400)(job(steps=60_000), busy)
    assert (compressed.partition, compressed.config) == (real_time.partition, real_time.config)
    assert compressed.predicted_run_s == pytest.approx(real_time.predicted_run_s)
    assert compressed.time_limit_s % (60 * 400) == 0 and compressed.time_limit_s >= real_time.time_limit_s


#: The session sandbox's GPU partitions (advisor/data/sandbox.toml), as a replay's inventory.
SANDBOX = Inventory(
    pools=[
        Pool(partition="a100", gpu_type="a100", nodes=2, gpus_per_node=4),
        Pool(partition="v100", gpu_type="v100", nodes=2, gpus_per_node=4),
        Pool(partition="t4", gpu_type="t4", nodes=2, gpus_per_node=2),
    ]
)


@pytest.mark.slurm
def test_arm_c_is_advised_by_a_running_daemon_and_links_the_job_it_submits(
    sandbox: Sandbox, tmp_path: Path, table: StepTable, models: StepModels
) -> None:
    """The daemon process the replay starts, asked over its socket as advise-submit asks it. Under a
    policy that only advises, the job goes in as written whatever the session sandbox's queue."""
    on_t4 = job(user_gpu_type="t4", gpus=2, steps=60_000)
    times = learned_times(models, [on_t4.arrival], TRAINED_AT)
    gpus_only = {getpass.getuser(): {"partitions": [pool.partition for pool in SANDBOX.pools]}}
    advise = Policy.model_validate({**REWRITE.model_dump(), "mode": "advise", "users": gpus_only})
    daemon = AdvisorDaemon(SANDBOX, advise, times, table, compression=60)
    daemon.start(sandbox, tmp_path)
    try:
        decision = daemon.decide(on_t4, SetWaits({}))  # the view is never asked: the daemon reads Slurm
        assert decision.request_id is not None and decision.predicted_run_s is None
        assert (decision.partition, decision.config.gpus, decision.time_limit_s) == ("t4", 2, 6 * HOUR)
        submitted = sandbox.client.submit("#!/bin/sh\nexit 0\n", ["--partition=t4", "--output=/dev/null"])
        daemon.submitted(decision, submitted.job_id)
    finally:
        daemon.stop()
    with sqlite3.connect(tmp_path / "advisor.db") as db:
        audited = db.execute("SELECT request_id, job_id, applied FROM audit").fetchall()
        linked = db.execute("SELECT job_id, partition, predicted_s FROM advised_jobs").fetchall()
    assert audited == [(decision.request_id, submitted.job_id, 0)]
    # The job as written, predicted on the compressed clock: 60,000 steps of 128 samples on each t4, and the
    # policy's 2 minutes of start-up, each a 60th as long.
    step_s, _ = models.predict("toy", "t4", 2, 1, 128)
    assert linked == [(submitted.job_id, "t4", pytest.approx((60_000 * step_s + 120) / 60))]
