"""What advice saved (`advisor.recommend.savings`): a crafted audit in a real SQLite store, by hand."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from advisor.cli import main
from advisor.recommend.candidates import baseline
from advisor.recommend.choose import Recommendation
from advisor.recommend.savings import advice_savings
from advisor.store import AdvisedJobRow, AdvisedJobs, Audit, AuditRow, Store

from .test_recommend_pure import T4, describe, estimate, recommended

SUBMITTED = datetime(2026, 12, 2, 9, tzinfo=UTC)


def advice() -> Recommendation:
    """As written: 4 h on one t4 GPU (4 GPU-hours). As advised: 1 h predicted on two a100 GPUs."""
    written = estimate(baseline(describe(), T4, 1), run=4 * 3600, wait=2 * 3600)
    two = written.candidate.model_copy(update={"partition": "a100", "gpus": 2})
    advised = estimate(two, run=3600, wait=1800)
    return recommended([advised, written], written, advised)


def audited(store: Store, number: int, offered: bool, job: tuple[int, bool] | None) -> None:
    """One audit row as the daemon writes it; ``job``: the job id reported and whether it went in as
    advised, None where none was reported (a dry run, --test-only, a failure before a job id)."""
    at = SUBMITTED + timedelta(minutes=number)
    Audit(store).record(
        AuditRow(
            request_id=f"r{number}",
            at=at,
            uid=1000,
            user="alice",
            where="job.sh",
            argv="[]",
            request="{}",
            recommendation=advice().model_dump_json(),
            offered=offered,
            latency_ms=1.0,
        )
    )
    if job is not None:
        Audit(store).attach_job(f"r{number}", job[0], job[1])


def ran(store: Store, job_id: int, state: str | None, elapsed_s: float) -> None:
    """The advised job's record, and what Slurm's history said it took (``state`` None: not ended)."""
    AdvisedJobs(store).record(
        AdvisedJobRow(
            job_id=job_id,
            submitted_at=SUBMITTED,
            user="alice",
            partition="a100",
            machine="m-a100",
            model_version=1,
            confidence="high",
            predicted_s=3600.0,
            predicted_p90_s=4320.0,
            time_limit_s=7200.0,
        )
    )
    if state is not None:
        started = SUBMITTED + timedelta(minutes=10)
        AdvisedJobs(store).finish(job_id, state, elapsed_s, started + timedelta(seconds=elapsed_s), started)


def test_a_crafted_audit_gives_the_savings_counted_by_hand(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = Store.open(tmp_path / "advisor.db")
    # Went in as advised and completed as described: 1.5 h, 0.5 h and 1 h on two GPUs (3, 1, 2 GPU-hours).
    for number, elapsed in ((1, 5400.0), (2, 1800.0), (3, 3600.0)):
        audited(store, number, offered=True, job=(100 + number, True))
        ran(store, 100 + number, "COMPLETED", elapsed)
    audited(store, 4, offered=True, job=(104, True))
    ran(store, 104, "COMPLETED", 20.0)  # a 20-second stub of a 1 h prediction: did not train as described
    audited(store, 5, offered=True, job=(105, True))
    ran(store, 105, None, 0.0)  # still running
    audited(store, 6, offered=True, job=(106, True))
    ran(store, 106, "TIMEOUT", 7200.0)  # killed at its limit: it did not finish its work
    audited(store, 7, offered=True, job=(107, False))  # declined, or the advised job refused by Slurm
    audited(store, 8, offered=True, job=None)  # a dry run
    audited(store, 9, offered=True, job=None)  # sbatch --test-only through the filter
    audited(store, 10, offered=False, job=(110, False))  # nothing to change: in no count

    saved = advice_savings(store)
    assert [job.job_id for job in saved.jobs] == [101, 102, 103]
    # As written 4 GPU-hours each (the prediction at submission); really 3, 1 and 2: saved 1, 3 and 2.
    assert [job.gpu_hours_saved for job in saved.jobs] == [1.0, 3.0, 2.0]
    assert saved.gpu_hours_saved == 6.0 and saved.median_gpu_hours_saved == 2.0
    assert (saved.did_not_train, saved.not_completed, saved.not_applied, saved.previewed) == (1, 2, 1, 2)

    assert main(["report", "--db", str(tmp_path / "advisor.db"), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)["savings"]
    assert (payload["gpu_hours_saved"], payload["median_gpu_hours_saved"], len(payload["jobs"])) == (
        6.0,
        2.0,
        3,
    )
    assert main(["report", "--db", str(tmp_path / "advisor.db")]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "advice saved 6.00 GPU-hours over 3 jobs (median 2.00 GPU-hours a job)" in text
    assert (
        "1 did not train as described, 2 not completed, 1 not applied (went in as written), 2 previewed"
        in text
    )


def test_no_offer_that_became_no_job_as_advised_is_counted_as_a_saving(tmp_path: Path) -> None:
    """Only previews and refusals: nothing saved, nothing offered, every one counted apart."""
    store = Store.open(tmp_path / "advisor.db")
    audited(store, 1, offered=True, job=None)
    audited(store, 2, offered=True, job=(202, False))
    saved = advice_savings(store)
    assert saved.jobs == [] and saved.gpu_hours_saved == 0 and saved.median_gpu_hours_saved is None
    assert (saved.previewed, saved.not_applied) == (1, 1)
