"""What advised jobs really took: Slurm's history read into the store, and the store read as outcomes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta

from advisor.predict.array_outcome import array_outcome
from advisor.predict.calibration import Correction, Outcome, fit_corrections
from advisor.slurm.client import SlurmClient
from advisor.slurm.models import FinishedJob, QueuedJob
from advisor.store import AdvisedJobs, Store

_CLOCK_SKEW = timedelta(minutes=5)


def collect_outcomes(store: Store, client: SlurmClient) -> int:
    """Marks every advised job that Slurm's history shows ended, and every advised array none of whose
    tasks still waits or runs; returns how many."""
    advised = AdvisedJobs(store)
    waiting = {row.job_id: row for row in advised.unfinished()}
    if not waiting:
        return 0
    since = min(row.submitted_at for row in waiting.values()) - _CLOCK_SKEW
    history = client.history(since, job_ids=sorted(waiting))
    ended = [job for job in history if job.job_id in waiting and job.array_task_id is None]
    for job in ended:
        advised.finish(job.job_id, job.state, job.elapsed.total_seconds(), job.end_time, job.start_time)
    tasks = _tasks_of(waiting, history)
    queue = client.jobs() if tasks else []
    arrays = [array_outcome(job_id, done) for job_id, done in tasks.items() if _settled(job_id, done, queue)]
    for outcome in arrays:
        advised.finish(*outcome)
    return len(ended) + len(arrays)


def _tasks_of(waiting: Mapping[int, object], history: Sequence[FinishedJob]) -> dict[int, list[FinishedJob]]:
    """The ended tasks of each advised array, by the array's id."""
    tasks: dict[int, list[FinishedJob]] = {}
    for job in history:
        array = job.array_job_id
        if array is not None and array in waiting and job.array_task_id is not None:
            tasks.setdefault(array, []).append(job)
    return tasks


def _settled(job_id: int, done: Sequence[FinishedJob], queue: Sequence[QueuedJob]) -> bool:
    """No task of the array waits or runs, and each one squeue still shows ended is in accounting too
    (slurmdbd records an end moments after squeue shows it)."""
    recorded = {task.array_task_id for task in done}
    return not any(
        job.array_job_id == job_id and (not job.ended or job.array_task_id not in recorded) for job in queue
    )


def load_outcomes(store: Store) -> list[Outcome]:
    return [
        Outcome(
            job_id=row.job_id,
            partition=row.partition,
            machine=row.calibration_key or row.machine,  # a record from before keys: its machine
            state=row.state,
            predicted_s=row.predicted_s,
            predicted_p90_s=row.predicted_p90_s,
            predicted_p10_s=row.predicted_p10_s or None,  # a record from before p10s: none
            actual_s=row.elapsed_s,
            comparable_from_s=row.comparable_from_s or None,
            applied_correction=row.applied_correction or 1.0,  # a record from before: none applied
            architecture=row.architecture or None,
        )
        for row in AdvisedJobs(store).finished()
        if row.state is not None and row.elapsed_s is not None  # finished: both are
    ]


def corrections(store: Store) -> dict[str, Correction]:
    return fit_corrections(load_outcomes(store))
