"""What advice saved: each job submitted as advised, the job as written (its baseline) against the advice.

Both sides are predicted at submission; where Slurm's history has the advised job's real wait and run, its
actual completion stands beside them. The job as written never ran, so its side stays a prediction.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pydantic import BaseModel, ConfigDict

from advisor.recommend.choose import Estimate, Recommendation


class Saving(BaseModel):
    """One job submitted as advised."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    job_id: int
    user: str
    written: str
    """The partition the job asked for."""
    advised: str
    written_completion_s: float
    """Predicted wait plus run of the job as written."""
    advised_completion_s: float
    actual_completion_s: float | None
    """Submission to end, from Slurm's history; None until the job completed (a job killed at its limit, or
    cancelled, did not finish its work)."""
    written_gpu_hours: float
    advised_gpu_hours: float
    actual_gpu_hours: float | None


class Savings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    offered: int
    """Submissions the advisor offered a change for."""
    jobs: list[Saving]
    """The ones submitted as advised."""

    @property
    def completed(self) -> list[Saving]:
        return [job for job in self.jobs if job.actual_completion_s is not None]

    @property
    def completion_saved_s(self) -> float:
        return sum(job.written_completion_s - job.advised_completion_s for job in self.jobs)

    @property
    def gpu_hours_saved(self) -> float:
        return sum(job.written_gpu_hours - job.advised_gpu_hours for job in self.jobs)

    @property
    def actual_completion_saved_s(self) -> float:
        """Over completed jobs: the written job's predicted completion less the advised job's real one."""
        return sum(job.written_completion_s - (job.actual_completion_s or 0.0) for job in self.completed)

    @property
    def actual_gpu_hours_saved(self) -> float:
        return sum(job.written_gpu_hours - (job.actual_gpu_hours or 0.0) for job in self.completed)


def saving(
    job_id: int,
    recommendation: Recommendation,
    submitted_at: datetime,
    ended: tuple[datetime, float] | None,
) -> Saving | None:
    """``ended``: the start and run seconds of a job that completed. None where the advice changed
    nothing (no baseline or no choice to compare)."""
    written, advised = recommendation.baseline, recommendation.chosen
    if written is None or advised is None or written.candidate == advised.candidate:
        return None
    actual = None if ended is None else (ended[0] - submitted_at).total_seconds() + ended[1]
    return Saving(
        job_id=job_id,
        user=recommendation.user,
        written=written.candidate.partition,
        advised=advised.candidate.partition,
        written_completion_s=written.total_s,
        advised_completion_s=advised.total_s,
        actual_completion_s=actual,
        written_gpu_hours=gpu_hours(written, written.run_s),
        advised_gpu_hours=gpu_hours(advised, advised.run_s),
        actual_gpu_hours=None if ended is None else gpu_hours(advised, ended[1]),
    )


def gpu_hours(estimate: Estimate, run_s: float) -> float:
    """The GPUs a candidate holds for ``run_s``: none on a partition without GPUs."""
    return estimate.candidate.gpus * estimate.candidate.nodes * run_s / 3600


def savings(offered: int, jobs: Sequence[Saving | None]) -> Savings:
    return Savings(offered=offered, jobs=[job for job in jobs if job is not None])
