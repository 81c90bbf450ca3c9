"""An advised job array is finished in the store once none of its tasks waits or runs: before, every task
was skipped (it is not the array's own id) and the array stayed unfinished for ever, never reaching the
report or the calibration."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from advisor.predict.array_outcome import ENDED, array_outcome
from advisor.predict.outcomes import collect_outcomes, load_outcomes
from advisor.slurm.client import SlurmClient
from advisor.store import AdvisedJobRow, AdvisedJobs, Store

from .test_web_jobs import NOW, ended


def test_an_ended_array_is_its_tasks_median_run_from_the_first_start_to_the_last_end() -> None:
    tasks = [
        ended(10, "COMPLETED", 10, 0).model_copy(update={"elapsed": timedelta(seconds=10)}),
        ended(11, "COMPLETED", 10, 1).model_copy(
            update={"elapsed": timedelta(seconds=60), "start_time": NOW - timedelta(minutes=5)}
        ),
        ended(12, "COMPLETED", 10, 2).model_copy(
            update={"elapsed": timedelta(seconds=20), "end_time": NOW + timedelta(hours=3)}
        ),
    ]
    assert array_outcome(10, tasks) == (
        10,
        "COMPLETED",
        20.0,
        NOW + timedelta(hours=3),
        NOW - timedelta(minutes=5),
    )
    failed = [*tasks[:2], tasks[2].model_copy(update={"state": "FAILED"})]
    assert array_outcome(10, failed)[1] == ENDED


@pytest.mark.slurm
def test_an_advised_array_is_finished_once_its_last_task_ends(
    local_slurm: SlurmClient, tmp_path: Path
) -> None:
    store = Store.open(tmp_path / "advisor.db")
    submitted = local_slurm.submit(
        "#!/bin/sh\nsleep 1\n", ["--array=0-2%1", "--partition=cpu", "--time=1", "--output=/dev/null"]
    )
    AdvisedJobs(store).record(
        AdvisedJobRow(
            job_id=submitted.job_id,
            submitted_at=datetime.now(UTC),
            user="root",
            partition="cpu",
            machine="machine-a",
            model_version=1,
            confidence="high",
            predicted_s=2.0,
            predicted_p90_s=3.0,
            time_limit_s=60.0,
        )
    )
    deadline = time.monotonic() + 60
    while collect_outcomes(store, local_slurm) == 0:
        assert time.monotonic() < deadline, "the array never finished in the store"
        time.sleep(0.5)
    (outcome,) = load_outcomes(store)
    assert outcome.state == "COMPLETED" and 1 <= outcome.actual_s <= 10
    tasks = local_slurm.history(NOW - timedelta(days=1), job_ids=[submitted.job_id])
    assert sorted(task.array_task_id or 0 for task in tasks) == [0, 1, 2]
    (row,) = AdvisedJobs(store).finished()
    assert row.ended_at == max(task.end_time for task in tasks), "it waited for the last"
