"""The Philly trace as arrivals: own times, GPU counts, durations; Sia applications and per-GPU batches."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchmarks.harness.model import Arrival
from benchmarks.harness.philly import load_philly_arrivals
from benchmarks.harness.truth import StepTable
from benchmarks.harness.workload import Habits, WorkloadError, make_jobs, user_step_times

from .replay_support import write_csv, write_steps

HEADER = ["timestamp", "duration", "num_gpus", "gpu_time", "cluster"]
MIX = [
    Arrival(name="sia-0", time_s=0, application="toy", gpus=4, global_batch=128),
    Arrival(name="sia-1", time_s=5, application="big", gpus=2, global_batch=32),
]


def write_trace(path: Path, rows: list[tuple[str, float, int]]) -> Path:
    return write_csv(path, HEADER, [[t, repr(d), str(g), repr(d * g), "c"] for t, d, g in rows])


def test_philly_jobs_keep_their_times_gpus_and_durations_with_a_sias_per_gpu_batch(tmp_path: Path) -> None:
    table = StepTable.load(write_steps(tmp_path / "steps.csv"))
    trace = write_trace(
        tmp_path / "jobs.csv",
        [
            ("2017-10-09 07:05:00", 600.0, 2),
            ("2017-10-09 07:00:00", 60.0, 1),
            ("2017-10-09 07:10:00", 0.0, 1),  # never ran
            ("2017-10-09 07:20:00", 900.0, 64),  # no placement of 64 GPUs anywhere
        ],
    )
    arrivals, left_out = load_philly_arrivals(trace, MIX, table, Habits(), seed=3)
    assert [(a.time_s, a.gpus, a.duration_s) for a in arrivals] == [(0.0, 1, 60.0), (300.0, 2, 600.0)]
    assert left_out == 1
    for arrival in arrivals:
        model = next(m for m in MIX if m.application == arrival.application)
        assert arrival.global_batch == model.global_batch // model.gpus * arrival.gpus
    again, _ = load_philly_arrivals(trace, MIX, table, Habits(), seed=3)
    assert again == arrivals, "seeded"
    assert load_philly_arrivals(trace, MIX, table, Habits(), seed=3, limit=1)[0] == arrivals[:1]


def test_a_recorded_duration_is_the_jobs_length_on_its_users_gpu_type(tmp_path: Path) -> None:
    table = StepTable.load(write_steps(tmp_path / "steps.csv"))
    arrival = Arrival(name="p", time_s=0, application="toy", gpus=1, global_batch=32, duration_s=7200)
    drawn = np.asarray([1.0])  # what a drawn length would be (clipped to a minute)
    job = make_jobs([arrival], table, drawn, Habits(), seed=0)[0]
    step = user_step_times(arrival, table, Habits())[job.user_gpu_type]
    assert job.steps * step == pytest.approx(7200, rel=0.01)


def test_no_mix_is_an_error(tmp_path: Path) -> None:
    table = StepTable.load(write_steps(tmp_path / "steps.csv"))
    trace = write_trace(tmp_path / "jobs.csv", [("2017-10-09 07:05:00", 600.0, 2)])
    with pytest.raises(WorkloadError, match="no Sia arrivals"):
        load_philly_arrivals(trace, [], table, Habits(), seed=0)
