"""What the service keeps beside the measurements: which predictor version serves each machine, each
advised job's prediction and outcome, and the audit of every advice request."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from advisor.store.database import Store
from advisor.wait.accuracy import WaitRecord


class ModelRegistry:
    """Which predictor file serves each machine: the active version's row, every earlier one kept."""

    def __init__(self, store: Store) -> None:
        self.db = store.db

    def add_version(self, machine: str, write: Callable[[int], dict[str, Any]], activate: bool) -> int:
        """Numbers, writes and records a new version under the database's write lock, so two trainers
        (the timer, an admin) never take one number; ``write(version)`` writes the file and returns the
        row. A crash inside leaves no row: the number is taken again and its file overwritten."""
        connection = self.db.conn
        connection.execute("BEGIN IMMEDIATE")
        try:
            rows = connection.execute("SELECT MAX(version) FROM model_versions WHERE machine = ?", [machine])
            latest = rows.fetchone()[0]
            version = 1 if latest is None else int(latest) + 1
            row = write(version)
            if activate:
                connection.execute("UPDATE model_versions SET active = 0 WHERE machine = ?", [machine])
            self.db.table("model_versions").insert({**row, "machine": machine, "version": version})
            connection.execute(
                "UPDATE model_versions SET active = ? WHERE machine = ? AND version = ?",
                [int(activate), machine, version],
            )
        except BaseException:
            connection.rollback()
            raise
        connection.commit()
        return version

    def set_active(self, machine: str, version: int) -> None:
        """Makes ``version`` the machine's only active one (a rollback, or a version the gate held back)."""
        with self.db.conn:
            found = self.db.execute(
                "SELECT 1 FROM model_versions WHERE machine = ? AND version = ?", [machine, version]
            ).fetchone()
            if found is None:
                raise LookupError(f"{machine} has no version {version}")
            why = self.quarantined(machine, version)
            if why is not None:
                raise LookupError(f"{machine} version {version} {why}: quarantined; train a new one")
            self.db.execute(
                "UPDATE model_versions SET active = (version = ?) WHERE machine = ?", [version, machine]
            )

    def quarantined(self, machine: str, version: int) -> str | None:
        row = self.db.execute(
            "SELECT quarantined FROM model_versions WHERE machine = ? AND version = ?", [machine, version]
        ).fetchone()
        return None if row is None else row[0]

    def quarantine(self, machine: str, version: int, why: str) -> None:
        """Marks a version whose file failed its check; the first reason found stays."""
        with self.db.conn:
            self.db.execute(
                "UPDATE model_versions SET quarantined = ? "
                "WHERE machine = ? AND version = ? AND quarantined IS NULL",
                [why, machine, version],
            )

    def record_sha256(self, machine: str, version: int, sha256: str) -> None:
        """A version trained before digests were kept, once a check process has loaded it whole."""
        with self.db.conn:
            self.db.execute(
                "UPDATE model_versions SET sha256 = ? WHERE machine = ? AND version = ? AND sha256 IS NULL",
                [sha256, machine, version],
            )

    def active(self, machine: str) -> dict[str, Any] | None:
        rows = self.db.table("model_versions").rows_where("machine = ? AND active = 1", [machine], limit=1)
        return next(iter(rows), None)

    def all_active(self) -> list[dict[str, Any]]:
        return list(self.db.table("model_versions").rows_where("active = 1", order_by="machine"))

    def versions(self, machine: str | None = None) -> list[dict[str, Any]]:
        where = None if machine is None else "machine = ?"
        table = self.db.table("model_versions")
        return list(table.rows_where(where, [machine] if machine else [], order_by="machine, version"))


class AdvisedJobs:
    """Each advised job's prediction, and later what Slurm's history says it really took."""

    def __init__(self, store: Store) -> None:
        self.db = store.db

    def record(self, row: dict[str, Any]) -> None:
        """Idempotent: a job id is one job, recorded once however often the wrapper retries."""
        with self.db.conn:
            self.db.table("advised_jobs").upsert(row, pk="job_id")

    def unfinished(self) -> list[dict[str, Any]]:
        return list(self.db.table("advised_jobs").rows_where("state IS NULL", order_by="job_id"))

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
            self.db.table("advised_jobs").update(job_id, row)

    def finished(self) -> list[dict[str, Any]]:
        return list(self.db.table("advised_jobs").rows_where("state IS NOT NULL", order_by="job_id"))

    def of_user(self, user: str, limit: int) -> list[dict[str, Any]]:
        """The user's advised jobs, newest first."""
        rows = self.db.table("advised_jobs").rows_where(
            "user = ?", [user], order_by="job_id DESC", limit=limit
        )
        return list(rows)

    def wait_records(self) -> list[WaitRecord]:
        """Each estimator's predicted start of every advised job that started, beside the real start."""
        records = []
        for row in self.db.table("advised_jobs").rows_where("started_at IS NOT NULL"):
            for estimator in ("slurm", "advisor"):
                predicted = row[f"{estimator}_start"]
                if predicted:
                    records.append(
                        WaitRecord(
                            estimator=estimator,
                            partition=row["partition"],
                            predicted_start=datetime.fromisoformat(predicted),
                            actual_start=datetime.fromisoformat(row["started_at"]),
                        )
                    )
        return records


class Audit:
    """One row per advice request: who asked (by uid), what they asked, every candidate, the choice, whether
    a rewrite was offered, and once the wrapper reports the job it became, whether that job went in as
    advised (``applied``, from what was submitted, not from what was offered)."""

    def __init__(self, store: Store) -> None:
        self.db = store.db

    def record(self, row: dict[str, Any]) -> None:
        with self.db.conn:
            self.db.table("audit").insert(row)

    def get(self, request_id: str) -> dict[str, Any] | None:
        return next(iter(self.db.table("audit").rows_where("request_id = ?", [request_id])), None)

    def attach_job(self, request_id: str, job_id: int, applied: bool) -> None:
        with self.db.conn:
            self.db.table("audit").update(request_id, {"job_id": job_id, "applied": int(applied)})

    def purge(self, before: datetime) -> int:
        """Forgets every request older than ``before``; returns how many went."""
        with self.db.conn:
            cursor = self.db.execute("DELETE FROM audit WHERE at < ?", [before.isoformat()])
        return int(cursor.rowcount)

    def by_job(self, job_id: int) -> dict[str, Any] | None:
        rows = self.db.table("audit").rows_where("job_id = ?", [job_id], order_by="at desc", limit=1)
        return next(iter(rows), None)

    def unapplied_offers(self) -> tuple[int, int]:
        """Requests answered with a change that did not go in as advised (within the retention window, like
        every row): (not applied: a job went in as written, previewed: no job was reported: a dry run,
        ``--test-only``, a failure before Slurm gave a job id)."""
        table = self.db.table("audit")
        not_applied = table.count_where("offered = 1 AND job_id IS NOT NULL AND NOT applied")
        return not_applied, table.count_where("offered = 1 AND job_id IS NULL")

    def applied(self) -> list[dict[str, Any]]:
        """The requests whose job went in as advised, oldest first."""
        return list(self.db.table("audit").rows_where("applied = 1 AND job_id IS NOT NULL", order_by="at"))
