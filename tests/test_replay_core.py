"""The replay's ground truth, jobs and the advisor's step-time models, on small tables written here."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from benchmarks.harness.model import Arrival, Job, ReplayConfig
from benchmarks.harness.predictor import held_out_batches, held_out_error, train_predictors
from benchmarks.harness.truth import StepTable, feasible_configs, user_config
from benchmarks.harness.workload import Habits, WorkloadError, load_arrivals, load_durations, make_jobs
from tests.replay_support import (
    STEP_COLUMNS,
    smooth_step,
    spiked_at,
    write_csv,
    write_philly,
    write_steps,
    write_workload,
)

SIA = Path("/work/shared/data/sia")
PHILLY = Path("/work/shared/data/philly/jobs.csv")


@pytest.fixture
def table(tmp_path: Path) -> StepTable:
    return StepTable.load(write_steps(tmp_path / "steps.csv"))


def arrival(application: str = "toy", gpus: int = 4, global_batch: int = 128) -> Arrival:
    return Arrival(name="j", time_s=0.0, application=application, gpus=gpus, global_batch=global_batch)


def test_step_time_interpolates_linearly_between_measured_batches(table: StepTable) -> None:
    low, high = smooth_step("toy", "aws", 2, 1, 16), smooth_step("toy", "aws", 2, 1, 32)
    assert table.micro_step_s("toy", "t4", 2, 1, 16) == pytest.approx(low)
    assert table.micro_step_s("toy", "t4", 2, 1, 20) == pytest.approx(low + (high - low) * 4 / 16)


def test_outside_the_measured_range_or_placement_there_is_no_step_time(table: StepTable) -> None:
    assert table.micro_step_s("toy", "t4", 2, 1, 129) is None
    assert table.micro_step_s("toy", "t4", 2, 1, 7) is None
    assert table.micro_step_s("toy", "t4", 8, 1, 16) is None
    assert table.micro_step_s("toy", "a100", 8, 1, 256) is not None


def test_placements_with_the_same_node_count_are_one_median_curve(tmp_path: Path) -> None:
    rows = [
        ["toy", "azure", "13", "2", "4", "16", "1.0", "0"],
        ["toy", "azure", "22", "2", "4", "16", "2.0", "0"],
        ["toy", "azure", "31", "2", "4", "16", "6.0", "0"],
        ["toy", "quad", "4", "1", "4", "16", "9.0", "0"],
        ["toy", "dgx", "4", "1", "4", "16", "9.0", "0"],
    ]
    table = StepTable.load(write_csv(tmp_path / "steps.csv", STEP_COLUMNS, rows))
    assert table.micro_step_s("toy", "v100", 4, 2, 16) == 2.0
    assert table.gpu_types() == {"v100"}


def test_a_bad_step_row_is_named_by_file_and_line(tmp_path: Path) -> None:
    rows = [
        ["toy", "aws", "1", "1", "1", "16", "0.1", "0"],
        ["toy", "aws", "1", "1", "one", "16", "0.1", "0"],
    ]
    path = write_csv(tmp_path / "steps.csv", STEP_COLUMNS, rows)
    with pytest.raises(ValueError, match=r"steps\.csv:3"):
        StepTable.load(path)


def test_accumulation_multiplies_the_micro_step_and_the_run_is_steps_times_that(table: StepTable) -> None:
    micro = table.micro_step_s("toy", "a100", 4, 1, 32)
    assert micro is not None
    config = ReplayConfig(gpu_type="a100", gpus=4, nodes=1, micro_batch=32, accumulation=3)
    assert table.optimizer_step_s("toy", config) == pytest.approx(3 * micro)
    job = Job(arrival=arrival(), steps=1000, user_gpu_type="a100", user_limit_s=3600)
    assert table.true_run_s(job, config) == pytest.approx(3000 * micro)
    with pytest.raises(ValueError, match="no measured step time"):
        table.true_run_s(job, config.model_copy(update={"micro_batch": 512}))


def test_feasible_configs_keep_the_global_batch_and_stay_measured(table: StepTable) -> None:
    job = arrival(gpus=4, global_batch=1024)
    configs = feasible_configs(table, job, "t4", 4)
    assert {(c.gpus, c.nodes) for c in configs} == {(1, 1), (2, 1), (4, 1), (8, 2)}
    for config in configs:
        product = config.gpus * config.micro_batch * config.accumulation
        assert abs(product - 1024) <= 0.05 * 1024
        assert table.optimizer_step_s("toy", config) is not None
    assert min(c.accumulation for c in configs if c.gpus == 1) == 8


def test_the_user_accumulates_only_as_much_as_memory_forces(table: StepTable) -> None:
    job = arrival(gpus=2, global_batch=512)
    on_a100 = user_config(job, "a100", 8, table.fits("toy"))
    on_t4 = user_config(job, "t4", 4, table.fits("toy"))
    assert on_a100 == ReplayConfig(gpu_type="a100", gpus=2, nodes=1, micro_batch=256, accumulation=1)
    assert on_t4 == ReplayConfig(gpu_type="t4", gpus=2, nodes=1, micro_batch=128, accumulation=2)
    assert user_config(arrival(gpus=3), "t4", 4, table.fits("toy")) is None


def test_arrivals_load_and_a_bad_line_is_named(tmp_path: Path) -> None:
    good = write_workload(tmp_path / "w.csv", [(10.0, "toy", 4, 128), (20.5, "big", 2, 64)])
    assert [(a.time_s, a.gpus, a.global_batch) for a in load_arrivals(good)] == [
        (10.0, 4, 128),
        (20.5, 2, 64),
    ]
    bad = write_csv(
        tmp_path / "bad.csv",
        ["name", "time", "application", "num_replicas", "batch_size"],
        [["a", "1", "toy", "4", "128"], ["b", "2", "toy", "0", "128"]],
    )
    with pytest.raises(WorkloadError, match=r"bad\.csv:3"):
        load_arrivals(bad)


def jobs_for(
    tmp_path: Path, table: StepTable, count: int, seed: int, habits: Habits | None = None
) -> list[Job]:
    arrivals = load_arrivals(
        write_workload(tmp_path / "w.csv", [(float(i), "toy", 4, 256) for i in range(count)])
    )
    durations = load_durations(write_philly(tmp_path / "philly.csv", [0.0, 30.0, 600.0, 5000.0, 90_000.0]))
    return make_jobs(arrivals, table, durations, habits or Habits(), seed)


def test_jobs_are_the_same_for_a_seed_and_differ_across_seeds(tmp_path: Path, table: StepTable) -> None:
    first = jobs_for(tmp_path, table, 50, seed=7)
    assert first == jobs_for(tmp_path, table, 50, seed=7)
    assert first != jobs_for(tmp_path, table, 50, seed=8)
    assert first[:20] == jobs_for(tmp_path, table, 20, seed=7)


def test_habits_favour_the_a100_among_the_types_where_the_job_fits(tmp_path: Path, table: StepTable) -> None:
    counts = Counter(job.user_gpu_type for job in jobs_for(tmp_path, table, 600, seed=1))
    assert set(counts) == {"a100", "v100", "t4"}
    assert counts["a100"] > counts["v100"] > counts["t4"]
    t4_lovers = Habits(type_shares={"t4": 1.0, "a100": 1e-9})
    only_on_a100 = [arrival(gpus=16, global_batch=16 * 64)]
    assert make_jobs(only_on_a100, table, np.asarray([600.0]), t4_lovers, 0)[0].user_gpu_type == "a100"


def test_lengths_and_limits_follow_the_habits(tmp_path: Path, table: StepTable) -> None:
    habits = Habits(min_duration_s=60, max_duration_s=7200, partition_max_s=4 * 3600)
    for job in jobs_for(tmp_path, table, 100, seed=3, habits=habits):
        config = user_config(
            job.arrival, job.user_gpu_type, table.gpus_per_node(job.user_gpu_type), table.fits("toy")
        )
        assert config is not None
        run = table.true_run_s(job, config)
        step = run / job.steps
        assert 60 - step <= run <= 7200 + step
        assert job.user_limit_s % 3600 == 0
        assert min(1.5 * run, 4 * 3600) <= job.user_limit_s <= min(math.ceil(4 * run / 3600) * 3600, 4 * 3600)


def test_habits_reject_a_duration_cap_above_the_partition_maximum() -> None:
    with pytest.raises(ValueError, match="partition_max_s"):
        Habits(max_duration_s=30 * 3600)


def test_held_out_batches_are_unseen_by_the_advisor(tmp_path: Path) -> None:
    table = StepTable.load(write_steps(tmp_path / "steps.csv", spiked_at(32)))
    held_out = held_out_batches([arrival(gpus=4, global_batch=128)])
    assert held_out == {("toy", 32)}
    blind = train_predictors(table, held_out)
    sighted = train_predictors(table, set())
    measured = spiked_at(32)("toy", "aws", 2, 1, 32)
    assert blind.predict("toy", "t4", 2, 1, 32)[0] < measured / 3
    assert sighted.predict("toy", "t4", 2, 1, 32)[0] == pytest.approx(measured, rel=0.3)
    assert blind.predict("big", "t4", 2, 1, 32)[0] == pytest.approx(
        smooth_step("big", "aws", 2, 1, 32), rel=0.3
    )


def test_the_largest_batch_the_advisor_trusts_is_the_largest_it_trained_on(table: StepTable) -> None:
    predictors = train_predictors(table, {("toy", 256)})
    assert predictors.batch_range("toy", "a100", 4, 1) == (8, 128)
    assert predictors.batch_range("big", "a100", 4, 1) == (8, 256)
    assert predictors.batch_range("toy", "a100", 3, 1) is None


def test_held_out_error_is_measured_on_the_held_out_rows_only(table: StepTable) -> None:
    held_out = {("toy", 32)}
    predictors = train_predictors(table, held_out)
    error = held_out_error(predictors, table, held_out)
    assert error.rows == sum(1 for row in table.rows if (row.application, row.local_batch) == ("toy", 32))
    assert 0 < error.mape < 1
    assert set(error.mape_by_type) == {"t4", "v100", "a100"}
    p50, p90 = predictors.predict("toy", "v100", 4, 1, 48)
    assert 0 < p50 <= p90


@pytest.mark.skipif(not SIA.exists(), reason="the shared Sia data is not on this machine")
def test_saturn_workload_replays_with_a_finite_held_out_error() -> None:
    table = StepTable.load(SIA / "step_times.csv")
    arrivals = load_arrivals(SIA / "workloads" / "saturn" / "workload-1.csv")
    held_out = held_out_batches(arrivals)
    error = held_out_error(train_predictors(table, held_out), table, held_out)
    assert error.rows > 100
    assert math.isfinite(error.mape)
    if PHILLY.exists():
        jobs = make_jobs(arrivals, table, load_durations(PHILLY), Habits(), seed=0)
        assert len(jobs) == 160
        assert Counter(job.user_gpu_type for job in jobs).most_common(1)[0][0] == "a100"
