"""Calibration from finished jobs: the pure arithmetic, then real jobs through Slurm's history."""

from __future__ import annotations

import json
import math
import sqlite3
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from advisor.cli import main
from advisor.predict.calibration import (
    ARCHITECTURE_JOBS,
    PRIOR_JOBS,
    Outcome,
    correction_for,
    fit_corrections,
    report,
    start_up_and_epoch,
)
from advisor.predict.outcomes import collect_outcomes, corrections, load_outcomes
from advisor.sandbox.cluster import Sandbox
from advisor.slurm.client import SlurmClient
from advisor.slurm.runner import LocalRunner
from advisor.store import AdvisedJobRow, AdvisedJobs, Store


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


def test_a_correction_is_fitted_against_the_predictors_own_numbers_not_the_corrected_ones() -> None:
    """Jobs advised while a x2 correction served were predicted at 2x the predictor's own time; when they
    run at that, the predictor still needs the x2. Fitted against what they were advised with (a ratio of
    1), the correction fell back toward 1 as they finished, and swung out again once it had."""
    raw = [outcome(i, 100, 200) for i in range(30)]
    served = [outcome(i, 200, 200).model_copy(update={"applied_correction": 2.0}) for i in range(30)]
    assert fit_corrections(served)["m"].factor == pytest.approx(fit_corrections(raw)["m"].factor)
    assert fit_corrections(served)["m"].factor == pytest.approx(2 ** (30 / (30 + PRIOR_JOBS)))
    (line,) = report(served)
    assert line.median_ratio == pytest.approx(1.0), "the report judges what the jobs were advised with"


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
    assert p.mape is not None and p.calibrated_mape is not None
    assert p.calibrated_mape < p.mape * 2 / 3, "learned from the other jobs"
    q = by_name["q"]
    assert q.calibrated_mape == q.mape == pytest.approx(0.25), "with no other job there is nothing to learn"


def test_jobs_that_did_not_train_as_described_are_counted_and_never_used() -> None:
    """Four 20-second stubs of jobs predicted at 5.5 h once scaled a machine by x0.003: now none is used."""
    stubs = [outcome(i, 20_000, 20) for i in range(4)]
    assert fit_corrections(stubs) == {}
    (partition,) = report(stubs)
    assert (partition.jobs, partition.not_comparable, partition.completed) == (4, 4, 0)
    assert partition.mape is None and partition.median_ratio is None and partition.within_p90 is None
    # A quarter of the predicted run is where a job counts: 25 s of 100 does, 24 s does not.
    (kept,) = report([outcome(1, 100, 25), outcome(2, 100, 24)])
    assert (kept.completed, kept.not_comparable) == (1, 1)


def test_a_job_is_comparable_from_its_predicted_start_up_and_one_epoch() -> None:
    """A 10-epoch job predicted at 1000 s with 100 s of start-up: start-up plus one epoch is 190 s. A job of
    200 s trained as described (under a quarter of 1000 s, which the share alone would have thrown out); one
    of 150 s did not, whatever share of the run that is."""
    first = start_up_and_epoch(1000.0, 100.0, 10.0)
    assert first == pytest.approx(190.0)
    assert start_up_and_epoch(1000.0, 100.0, 0.0) is None, "steps and no dataset size: no epochs known"
    assert start_up_and_epoch(1000.0, 100.0, 0.5) == pytest.approx(1000.0), "under one epoch: the whole run"
    rows = [outcome(1, 1000, 200), outcome(2, 1000, 150), outcome(3, 1000, 240)]
    described = [row.model_copy(update={"comparable_from_s": first}) for row in rows]
    (partition,) = report(described)
    assert (partition.completed, partition.not_comparable) == (2, 1)
    assert fit_corrections(described)["m"].jobs == 2
    (share_only,) = report(rows)
    assert (share_only.completed, share_only.not_comparable) == (0, 3), "no epochs recorded: the share"


def test_an_architecture_with_enough_jobs_gets_its_own_correction_the_rest_the_machines() -> None:
    """Ten jobs of architecture a ran twice their prediction, ten of b as predicted, on one machine."""
    slow = [outcome(i, 100, 200).model_copy(update={"architecture": "a"}) for i in range(ARCHITECTURE_JOBS)]
    exact = [outcome(50 + i, 100, 100).model_copy(update={"architecture": "b"}) for i in range(10)]
    few = [outcome(90 + i, 100, 400).model_copy(update={"architecture": "c"}) for i in range(3)]
    fitted = fit_corrections([*slow, *exact, *few])
    own = correction_for(fitted, "m", "a")
    assert own is not None and own.architecture == "a" and own.jobs == ARCHITECTURE_JOBS
    assert own.factor == pytest.approx(2 ** (10 / (10 + PRIOR_JOBS)))
    b = correction_for(fitted, "m", "b")
    assert b is not None and b.factor == pytest.approx(1.0)
    machine = fitted["m"]
    assert machine.architecture is None and machine.jobs == 23
    assert correction_for(fitted, "m", "c") == machine, "three jobs are too few: the machine's correction"
    assert correction_for(fitted, "m", None) == machine and correction_for(fitted, "n", "a") is None
    # One fewer than the minimum: the machine's correction serves architecture a too.
    assert correction_for(fit_corrections(slow[1:]), "m", "a") == fit_corrections(slow[1:])["m"]


def test_the_correction_is_held_within_its_bound_until_many_jobs_agree() -> None:
    """Shrinkage: median log-ratio x n / (n + 10). Beyond 0.5-2x only with >= 20 jobs, 80% on its side."""
    few = fit_corrections([outcome(i, 100, 500) for i in range(15)])["m"]
    # 5 ** (15 / 25) = 2.63: beyond 2x, and 15 jobs are too few: held at 2.
    assert few.shrunk == pytest.approx(5 ** (15 / 25)) and few.factor == pytest.approx(2.0)
    assert few.held and not few.beyond_bound
    slow = fit_corrections([outcome(i, 100, 300) for i in range(30)])["m"]
    # 30 jobs, each 3x its prediction: 3 ** (30 / 40) = 2.2795, beyond 2x and flagged.
    assert slow.factor == pytest.approx(3**0.75) and slow.factor == pytest.approx(2.2795, abs=1e-4)
    assert slow.beyond_bound and not slow.held and slow.agreeing == 30
    split = [outcome(i, 100, 300) for i in range(20)] + [outcome(20 + i, 100, 90) for i in range(10)]
    mixed = fit_corrections(split)["m"]
    # The median is still 3 (20 of 30 above), shrunk 2.28, but only 20 of 30 (67% < 80%) agree: held.
    assert mixed.shrunk == pytest.approx(3**0.75) and mixed.factor == pytest.approx(2.0) and mixed.held
    inside = fit_corrections([outcome(i, 100, 150) for i in range(5)])["m"]
    assert inside.factor == pytest.approx(1.5 ** (5 / 15)) and not (inside.held or inside.beyond_bound)


def test_coverage_is_two_sided_per_partition_with_counts() -> None:
    """p10 = 50, p50 = 100, p90 = 120 for each; actual 40, 90, 110, 130, and a timeout at 200 (past all)."""
    rows = [
        outcome(1, 100, 40).model_copy(update={"predicted_p10_s": 50.0}),
        outcome(2, 100, 90).model_copy(update={"predicted_p10_s": 50.0}),
        outcome(3, 100, 110),
        outcome(4, 100, 130),
        outcome(5, 100, 200, state="TIMEOUT").model_copy(update={"predicted_p10_s": 50.0}),
    ]
    (partition,) = report(rows)
    under = {c.quantile: (c.under, c.judged) for c in partition.coverage}
    assert under == {"p10": (1, 3), "p50": (2, 5), "p90": (3, 5)}, "the p10 only where it was recorded"
    assert [c.expected for c in partition.coverage] == [0.1, 0.5, 0.9]


def test_a_database_from_before_the_calibration_columns_gains_them_and_its_jobs_still_count(
    tmp_path: Path,
) -> None:
    """Schema 4: an advised job with its machine and no key, p10, architecture or start-up and epoch."""
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE advised_jobs (job_id INTEGER PRIMARY KEY, submitted_at TEXT, user TEXT, "
            "partition TEXT, machine TEXT, model_version INTEGER, confidence TEXT, predicted_s FLOAT, "
            "predicted_p90_s FLOAT, time_limit_s FLOAT, state TEXT, elapsed_s FLOAT, ended_at TEXT)"
        )
        db.execute(
            "INSERT INTO advised_jobs VALUES (7, '2026-12-01T00:00:00+00:00', 'alice', 'a100', 'm', 1, "
            "'high', 100.0, 120.0, 600.0, 'COMPLETED', 30.0, '2026-12-01T01:00:00+00:00')"
        )
        db.execute("PRAGMA user_version = 4")
    store = Store.open(path)
    columns = store.db.table("advised_jobs").columns_dict
    assert {"calibration_key", "architecture", "predicted_p10_s", "comparable_from_s"} <= set(columns)
    assert "applied_correction" in columns
    (old,) = load_outcomes(store)
    assert (old.machine, old.architecture, old.predicted_p10_s, old.comparable_from_s) == (
        "m",
        None,
        None,
        None,
    )
    assert old.applied_correction == 1.0, "a record from before: no correction in its prediction"
    assert old.comparable, "30 s of a 100-s prediction: over the share that stands in for its epochs"


def record(store: Store, job_id: int, partition: str, predicted_s: float, machine: str = "machine-a") -> None:
    AdvisedJobs(store).record(
        AdvisedJobRow(
            job_id=job_id,
            submitted_at=datetime.now(UTC),
            user="root",
            partition=partition,
            machine=machine,
            model_version=1,
            confidence="high",
            predicted_s=predicted_s,
            predicted_p90_s=predicted_s * 1.5,
            time_limit_s=600.0,
        )
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
    assert [row.job_id for row in AdvisedJobs(store).unfinished()] == [long.job_id], "still running"

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


def test_stubs_on_the_sandbox_are_not_comparable_and_thirty_slower_jobs_move_their_machine(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Real jobs through Slurm's history. Four stubs of jobs predicted at 5.5 h on machine-stub that end in
    seconds (as the ones that poisoned the calibration did: under a quarter of the prediction, however far
    under); 30 jobs that each run 4 s or so where 1.5 s was predicted, on machine-slow. All run at once on
    the a100 partition's 64 CPUs."""
    client = SlurmClient(LocalRunner(env=sandbox.client_env()))
    store = Store.open(tmp_path / "advisor.db")
    options = ["--partition=a100", "--time=5", "--mem=100", "--cpus-per-task=1", "--output=/dev/null"]
    for _ in range(4):
        stub = client.submit("#!/bin/sh\nsleep 6\n", options)
        record(store, stub.job_id, "a100", predicted_s=20_000.0, machine="machine-stub")
    for _ in range(30):
        slow = client.submit("#!/bin/sh\nsleep 4\n", options)
        record(store, slow.job_id, "a100", predicted_s=1.5, machine="machine-slow")
    deadline = time.monotonic() + 120
    while AdvisedJobs(store).unfinished():
        assert time.monotonic() < deadline, "the jobs never all showed in Slurm's history"
        collect_outcomes(store, client)
        time.sleep(2)

    outcomes = load_outcomes(store)
    assert {o.state for o in outcomes} == {"COMPLETED"}
    fitted = corrections(store)  # what `Predictors.load` multiplies the machines' step times by
    assert "machine-stub" not in fitted, "the stubs do not move their machine's predictions at all"
    slow_ratios = [o.actual_s / o.predicted_s for o in outcomes if o.machine == "machine-slow"]
    assert min(slow_ratios) >= 2, slow_ratios
    # By hand: the median ratio (no censoring: the plain median) to the power 30 / (30 + 10).
    expected = statistics.median(slow_ratios) ** (30 / (30 + PRIOR_JOBS))
    moved = fitted["machine-slow"]
    assert moved.jobs == 30 and moved.factor == pytest.approx(expected)
    assert moved.beyond_bound and moved.factor > 2, "30 jobs, all slower: past the bound, and flagged"

    monkeypatch.setenv("SLURM_CONF", sandbox.client_env()["SLURM_CONF"])
    assert main(["report", "--db", str(tmp_path / "advisor.db"), "--json"]) == 0
    (partition,) = json.loads(capsys.readouterr().out)["partitions"]
    assert (partition["not_comparable"], partition["completed"]) == (4, 30)
    assert main(["report", "--db", str(tmp_path / "advisor.db")]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "a100: 4 jobs did not train as described" in text
    assert f"machine-slow: times x {expected:.3f} from 30 comparable jobs" in text and "FLAGGED" in text
