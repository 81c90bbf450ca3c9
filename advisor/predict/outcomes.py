"""What advised jobs really took: Slurm's history read into the store, and the store read as outcomes."""

from __future__ import annotations

from datetime import datetime, timedelta

from advisor.predict.calibration import Correction, Outcome, fit_corrections
from advisor.slurm.client import SlurmClient
from advisor.store import AdvisedJobs, Store

_CLOCK_SKEW = timedelta(minutes=5)


def collect_outcomes(store: Store, client: SlurmClient) -> int:
    """Marks every advised job that Slurm's history shows ended; returns how many."""
    advised = AdvisedJobs(store)
    waiting = {int(row["job_id"]): row for row in advised.unfinished()}
    if not waiting:
        return 0
    since = min(datetime.fromisoformat(row["submitted_at"]) for row in waiting.values()) - _CLOCK_SKEW
    finished = 0
    for job in client.history(since, job_ids=sorted(waiting)):
        if job.job_id in waiting and job.array_task_id is None:
            advised.finish(job.job_id, job.state, job.elapsed.total_seconds(), job.end_time, job.start_time)
            finished += 1
    return finished


def load_outcomes(store: Store) -> list[Outcome]:
    return [
        Outcome(
            job_id=row["job_id"],
            partition=row["partition"],
            machine=row.get("calibration_key") or row["machine"],  # a record from before keys: its machine
            state=row["state"],
            predicted_s=row["predicted_s"],
            predicted_p90_s=row["predicted_p90_s"],
            predicted_p10_s=row.get("predicted_p10_s") or None,  # a record from before p10s: none
            actual_s=row["elapsed_s"],
            comparable_from_s=row.get("comparable_from_s") or None,
            applied_correction=row.get("applied_correction") or 1.0,  # a record from before: none applied
            architecture=row.get("architecture") or None,
        )
        for row in AdvisedJobs(store).finished()
    ]


def corrections(store: Store) -> dict[str, Correction]:
    return fit_corrections(load_outcomes(store))
