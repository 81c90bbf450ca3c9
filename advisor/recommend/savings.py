"""What advice saved: each job that went in as advised and completed, its prediction as written against
what it really took.

The job as written never ran, so its side is the prediction made at submission (calibrated as calibration
stood then); the advised side is Slurm's record of the run. Only jobs that completed and ran as described
count: a job that ended in under `COMPARABLE_SHARE` of its predicted run (a stub, a smoke test) did not
run the work its prediction was of, and one 20-second stub once claimed 47,283.7 GPU-hours. Offers that
never became a job as advised are counted apart, never as savings: previewed (a dry run, ``--test-only``,
a failure before Slurm gave a job id) and not applied (declined, or the advised job refused by Slurm).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from advisor.predict.calibration import COMPARABLE_SHARE, COMPLETED
from advisor.recommend.choose import Estimate, Recommendation

if TYPE_CHECKING:  # the API's messages load on a base install, where the database's packages are not
    from advisor.store import Store


class Saving(BaseModel):
    """One job that went in as advised and completed as described."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    job_id: int
    user: str
    written: str
    """The partition the job asked for."""
    advised: str
    written_run_s: float
    """The run predicted at submission for the job as written."""
    actual_run_s: float
    """The advised job's run, from Slurm's history."""
    written_gpu_hours: float
    actual_gpu_hours: float

    @property
    def gpu_hours_saved(self) -> float:
        return self.written_gpu_hours - self.actual_gpu_hours


class Savings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    jobs: list[Saving]
    """Went in as advised and completed as described: the only jobs the figures count."""
    did_not_train: int
    """Went in as advised and completed in under `COMPARABLE_SHARE` of the advised run predicted."""
    not_completed: int
    """Went in as advised and are running, or ended otherwise (failed, cancelled, killed at the limit)."""
    not_applied: int
    """Offered a change, and the job went in as written (declined, or the advised job refused by Slurm)."""
    previewed: int
    """Offered a change, and no job was reported: dry runs, ``--test-only``, failures before a job id."""

    @property
    def gpu_hours_saved(self) -> float:
        return sum(job.gpu_hours_saved for job in self.jobs)

    @property
    def median_gpu_hours_saved(self) -> float | None:
        return statistics.median(job.gpu_hours_saved for job in self.jobs) if self.jobs else None


def saving(job_id: int, recommendation: Recommendation, actual_run_s: float) -> Saving | None:
    """None where the advice changed nothing (no baseline or no choice to compare)."""
    written, advised = recommendation.baseline, recommendation.chosen
    if written is None or advised is None or written.candidate == advised.candidate:
        return None
    return Saving(
        job_id=job_id,
        user=recommendation.user,
        written=written.candidate.partition,
        advised=advised.candidate.partition,
        written_run_s=written.run_s,
        actual_run_s=actual_run_s,
        written_gpu_hours=gpu_hours(written, written.run_s),
        actual_gpu_hours=gpu_hours(advised, actual_run_s),
    )


def gpu_hours(estimate: Estimate, run_s: float) -> float:
    """The GPUs a candidate holds for ``run_s``: none on a partition without GPUs."""
    return estimate.candidate.gpus * estimate.candidate.nodes * run_s / 3600


def savings(
    applied: Sequence[tuple[int, Recommendation, str | None, float | None]], not_applied: int, previewed: int
) -> Savings:
    """``applied``: each job that went in as advised, with its state and run from Slurm's history (None
    until it ended)."""
    jobs, did_not_train, not_completed = [], 0, 0
    for job_id, recommendation, state, run_s in applied:
        chosen = recommendation.chosen
        if state != COMPLETED or run_s is None or chosen is None:
            not_completed += 1
        elif run_s < COMPARABLE_SHARE * chosen.run_s:
            did_not_train += 1
        else:
            found = saving(job_id, recommendation, run_s)
            jobs.extend([found] if found else [])
    return Savings(
        jobs=jobs,
        did_not_train=did_not_train,
        not_completed=not_completed,
        not_applied=not_applied,
        previewed=previewed,
    )


def advice_savings(store: Store) -> Savings:
    """Every offer in the audit's retention window, with Slurm's history of the jobs that went in."""
    from advisor.store import AdvisedJobs, Audit

    audit = Audit(store)
    ended = {row.job_id: row for row in AdvisedJobs(store).finished()}
    applied = []
    for row in audit.applied():
        if row.job_id is None:
            continue  # never: only rows with a job are applied
        job = ended.get(row.job_id)
        recommendation = Recommendation.model_validate_json(row.recommendation)
        state, elapsed_s = (None, None) if job is None else (job.state, job.elapsed_s)
        applied.append((row.job_id, recommendation, state, elapsed_s))
    not_applied, previewed = audit.unapplied_offers()
    return savings(applied, not_applied, previewed)
