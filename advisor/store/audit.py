"""The ``audit`` table and `Audit`: one row per advice request: who asked (by uid), what they asked, every
candidate, the choice, whether a rewrite was offered, and once the wrapper reports the job it became,
whether that job went in as advised (``applied``, from what was submitted, not from what was offered)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from advisor.frozen import Frozen
from advisor.store.table import Table

if TYPE_CHECKING:
    from advisor.store.database import Store


class AuditRow(Frozen):
    request_id: str
    at: datetime
    uid: int
    user: str
    where: str | None = None
    """None (as ``argv`` and ``request``) in a row from before they were kept."""
    argv: str | None = None
    """The sbatch options asked with, as a JSON list."""
    request: str | None = None
    """What was asked, as JSON."""
    recommendation: str
    """The `Recommendation`, as JSON."""
    offered: bool | None = None
    """None in a row from before it was kept."""
    applied: bool | None = None
    """None until the wrapper reports the job."""
    latency_ms: float | None = None
    job_id: int | None = None
    architecture_hash: str | None = None
    """The layer table advised on, which the job's advised_jobs row keeps."""


AUDIT = Table("audit", AuditRow, "request_id", indexes=("job_id",))


class Audit:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.db = store.db

    def record(self, row: AuditRow) -> None:
        with self.db.conn:
            self.db.table(AUDIT.name).insert(AUDIT.values(row))

    def get(self, request_id: str) -> AuditRow | None:
        return next(iter(self.store.rows(AUDIT, "request_id = ?", [request_id])), None)

    def attach_job(self, request_id: str, job_id: int, applied: bool) -> None:
        with self.db.conn:
            self.db.table(AUDIT.name).update(request_id, {"job_id": job_id, "applied": int(applied)})

    def purge(self, before: datetime) -> int:
        """Forgets every request older than ``before``; returns how many went."""
        with self.db.conn:
            cursor = self.db.execute("DELETE FROM audit WHERE at < ?", [before.isoformat()])
        return int(cursor.rowcount)

    def by_job(self, job_id: int) -> AuditRow | None:
        return next(iter(self.store.rows(AUDIT, "job_id = ?", [job_id], order_by="at desc", limit=1)), None)

    def unapplied_offers(self) -> tuple[int, int]:
        """Requests answered with a change that did not go in as advised (within the retention window, like
        every row): (not applied: a job went in as written, previewed: no job was reported: a dry run,
        ``--test-only``, a failure before Slurm gave a job id)."""
        table = self.db.table(AUDIT.name)
        not_applied = table.count_where("offered = 1 AND job_id IS NOT NULL AND NOT applied")
        return not_applied, table.count_where("offered = 1 AND job_id IS NULL")

    def applied(self) -> list[AuditRow]:
        """The requests whose job went in as advised, oldest first."""
        return self.store.rows(AUDIT, "applied = 1 AND job_id IS NOT NULL", order_by="at")
