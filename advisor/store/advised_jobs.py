"""The ``advised_jobs`` table and `AdvisedJobs`: each advised job's prediction, and later what Slurm's
history says it really took."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from advisor.frozen import Frozen
from advisor.store.table import Table
from advisor.wait.accuracy import WaitRecord, WaitSource

if TYPE_CHECKING:
    from advisor.store.database import Store


class AdvisedJobRow(Frozen):
    job_id: int
    submitted_at: datetime
    user: str
    partition: str
    machine: str
    model_version: int | None = None
    confidence: str | None = None
    predicted_s: float
    predicted_p90_s: float
    predicted_p10_s: float | None = None
    """None where the prediction had no p10."""
    calibration_key: str | None = None
    """The correction the job feeds: its machine, or scaled:PARTITION; None in a record from before keys."""
    architecture: str | None = None
    """The layer table's hash, for a correction per architecture."""
    comparable_from_s: float | None = None
    """Predicted start-up plus one epoch: a job ending sooner did not train."""
    applied_correction: float | None = None
    """The calibration already in predicted_s; None before it was kept: none."""
    time_limit_s: float | None = None
    slurm_start: datetime | None = None
    advisor_start: datetime | None = None
    state: str | None = None
    """None until the job ended."""
    started_at: datetime | None = None
    elapsed_s: float | None = None
    ended_at: datetime | None = None


ADVISED_JOBS = Table("advised_jobs", AdvisedJobRow, "job_id")


class AdvisedJobs:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.db = store.db

    def record(self, row: AdvisedJobRow) -> None:
        """Idempotent: a job id is one job, recorded once however often the wrapper retries."""
        with self.db.conn:
            self.db.table(ADVISED_JOBS.name).upsert(ADVISED_JOBS.values(row), pk="job_id")

    def unfinished(self) -> list[AdvisedJobRow]:
        return self.store.rows(ADVISED_JOBS, "state IS NULL", order_by="job_id")

    def finish(
        self, job_id: int, state: str, elapsed_s: float, ended_at: datetime, started_at: datetime | None
    ) -> None:
        row = {
            "state": state,
            "elapsed_s": elapsed_s,
            "ended_at": ended_at.isoformat(),
            "started_at": None if started_at is None else started_at.isoformat(),
        }
        with self.db.conn:
            self.db.table(ADVISED_JOBS.name).update(job_id, row)

    def finished(self) -> list[AdvisedJobRow]:
        return self.store.rows(ADVISED_JOBS, "state IS NOT NULL", order_by="job_id")

    def of_user(self, user: str, limit: int) -> list[AdvisedJobRow]:
        """The user's advised jobs, newest first."""
        return self.store.rows(ADVISED_JOBS, "user = ?", [user], order_by="job_id DESC", limit=limit)

    def wait_records(self) -> list[WaitRecord]:
        """Each estimator's predicted start of every advised job that started, beside the real start. Read
        column by column, not as rows: every advice request reads them all, and they only grow."""
        records = []
        for partition, started_at, slurm_start, advisor_start in self.db.execute(
            "SELECT partition, started_at, slurm_start, advisor_start FROM advised_jobs "
            "WHERE started_at IS NOT NULL"
        ):
            starts: tuple[tuple[WaitSource, str | None], ...] = (
                ("slurm", slurm_start),
                ("advisor", advisor_start),
            )
            records += [
                WaitRecord(
                    estimator=estimator,
                    partition=partition,
                    predicted_start=datetime.fromisoformat(predicted),
                    actual_start=datetime.fromisoformat(started_at),
                )
                for estimator, predicted in starts
                if predicted
            ]
        return records
