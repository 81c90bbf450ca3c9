"""Calibration from finished jobs: the pure arithmetic, then real jobs through Slurm's history."""

from __future__ import annotations

import json
import math
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from advisor.cli import main
from advisor.predict.calibration import PRIOR_JOBS, Outcome, fit_corrections, report
from advisor.predict.outcomes import collect_outcomes, load_outcomes
from advisor.sandbox.cluster import Sandbox
from advisor.slurm.client import SlurmClient
from advisor.slurm.runner import LocalRunner
from advisor.store import AdvisedJobs, Store


def outcome(
    job_id: int, predicted: float, actual: float, state: str = "COMPLETED", machine: str = "m"
) -> Outcome:
    return Outcome(
        job_id=job_id,
        partition="p" if machine == "m" else "q",
        machine=machine,
        state=state,
        predicted_s=predicted,
        predicted_p90_s=predicted * 1.2,
        actual_s=actual,
    )


def test_the_correction_follows_the_median_and_is_shrunk_while_jobs_are_few() -> None:
    few = fit_corrections([outcome(1, 100, 200)])["m"]
    assert few.jobs == 1
    assert few.factor == pytest.approx(math.exp(math.log(2) / (1 + PRIOR_JOBS)))
    many = fit_corrections([outcome(i, 100, 200) for i in range(95)] + [outcome(99, 100, 10_000)])["m"]
    assert many.factor == pytest.approx(2 ** (96 / (96 + PRIOR_JOBS))), "one outlier does not move the median"


def test_failed_and_cancelled_jobs_do_not_calibrate() -> None:
    outcomes = [outcome(1, 100, 30, state="CANCELLED"), outcome(2, 100, 60, state="FAILED")]
    assert fit_corrections(outcomes) == {}
    (partition,) = report(outcomes)
    assert (partition.jobs, partition.completed, partition.timed_out, partition.mape) == (2, 0, 0, None)
    assert partition.median_ratio is None and partition.within_p90 is None


def test_jobs_killed_at_their_limit_move_the_correction_as_lower_bounds() -> None:
    """Three jobs ran as predicted; four were killed at twice their prediction. Completions alone say 1."""
    outcomes = [outcome(i, 100, 100) for i in range(3)]
    outcomes += [outcome(10 + i, 100, 200, state="TIMEOUT") for i in range(4)]
    assert fit_corrections(outcomes[:3])["m"].factor == pytest.approx(1.0)
    # Kaplan-Meier: after the three observed ratios of 1 the survival is 6/7 * 5/6 * 4/5 = 4/7, above one
    # half, and the rest are censored: the median is at least the largest bound, 2.
    corrected = fit_corrections(outcomes)["m"]
    assert corrected.jobs == 7 and corrected.factor == pytest.approx(2 ** (7 / (7 + PRIOR_JOBS)))
    (partition,) = report(outcomes)
    assert (partition.completed, partition.timed_out) == (3, 4)
    assert partition.median_ratio == pytest.approx(2.0)
    assert partition.mape == pytest.approx(0.0), "errors are measured on completed jobs only"
    assert partition.within_p90 == pytest.approx(3 / 7), "a timeout past its p90 is a miss"


def test_the_censored_median_is_kaplan_meiers_by_hand() -> None:
    """Ratios 1 and 3 observed, 1.5 censored: S(1) = 2/3, then the one left at risk ends at 3, S = 0."""
    outcomes = [outcome(1, 100, 100), outcome(2, 100, 150, state="TIMEOUT"), outcome(3, 100, 300)]
    (partition,) = report(outcomes)
    assert partition.median_ratio == pytest.approx(3.0)
    (even,) = report([outcome(1, 100, 100), outcome(2, 100, 300)])
    assert even.median_ratio == pytest.approx(math.sqrt(3)), "between two values: their mean log-ratio"


def test_report_figures_per_partition() -> None:
    late = [outcome(i, 100, 125) for i in range(6)]
    by_name = {
        p.partition: p for p in report([*late, outcome(9, 100, 110), outcome(10, 50, 40, machine="n")])
    }
    p = by_name["p"]
    assert p.completed == 7
    assert p.mape == pytest.approx((6 * 25 / 125 + 10 / 110) / 7), "errors relative to the actual time"
    assert p.median_ratio == pytest.approx(1.25)
    assert p.within_p90 == pytest.approx(1 / 7), "1.2 x 100 covers only the job that took 110"
    assert p.calibrated_mape is not None and p.calibrated_mape < p.mape / 2, "learned from the other jobs"
    q = by_name["q"]
    assert q.calibrated_mape == q.mape == pytest.approx(0.25), "with no other job there is nothing to learn"


def record(store: Store, job_id: int, partition: str, predicted_s: float) -> None:
    AdvisedJobs(store).record(
        {
            "job_id": job_id,
            "submitted_at": datetime.now(UTC).isoformat(),
            "user": "root",
            "partition": partition,
            "machine": "machine-a",
            "model_version": 1,
            "confidence": "high",
            "predicted_s": predicted_s,
            "predicted_p90_s": predicted_s * 1.5,
            "time_limit_s": 600.0,
        }
    )


def test_finished_jobs_come_from_slurms_history_and_reach_the_report(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    client = SlurmClient(LocalRunner(env=sandbox.client_env()))
    store = Store.open(tmp_path / "advisor.db")
    short = client.submit("#!/bin/sh\nsleep 1\n", ["--partition=cpu", "--time=2", "--output=/dev/null"])
    long = client.submit("#!/bin/sh\nsleep 300\n", ["--partition=t4", "--time=10", "--output=/dev/null"])
    record(store, short.job_id, "cpu", predicted_s=4.0)
    record(store, long.job_id, "t4", predicted_s=400.0)
    record(store, long.job_id, "t4", predicted_s=400.0)  # the wrapper retried: still one job

    deadline = time.monotonic() + 60
    while collect_outcomes(store, client) == 0:
        assert time.monotonic() < deadline, "the short job never showed in Slurm's history"
        time.sleep(1)
    assert [row["job_id"] for row in AdvisedJobs(store).unfinished()] == [long.job_id], "still running"

    client.cancel(long.job_id)
    deadline = time.monotonic() + 60
    while collect_outcomes(store, client) == 0:
        assert time.monotonic() < deadline, "the cancelled job never showed in Slurm's history"
        time.sleep(1)
    outcomes = {o.job_id: o for o in load_outcomes(store)}
    assert outcomes[short.job_id].state == "COMPLETED" and 1 <= outcomes[short.job_id].actual_s <= 10
    assert outcomes[long.job_id].state == "CANCELLED"

    monkeypatch.setenv("SLURM_CONF", sandbox.client_env()["SLURM_CONF"])
    plot = tmp_path / "report.png"
    assert (
        main(["report", "--db", str(tmp_path / "advisor.db"), "--collect", "--json", "--plot", str(plot)])
        == 0
    )
    payload = json.loads(capsys.readouterr().out)
    assert {p["partition"]: p["completed"] for p in payload["partitions"]} == {"cpu": 1, "t4": 0}
    (correction,) = payload["corrections"]
    assert correction["machine"] == "machine-a" and correction["jobs"] == 1
    assert plot.stat().st_size > 0
