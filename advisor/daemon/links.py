"""``POST /submitted``: a job linked to the advice it was submitted with, once Slurm confirms the job is the
caller's. The link is what `advisor explain` reads and what calibration later compares with the job's real
run, so it is made only for the job's real owner, by the uid Slurm has for it."""

from __future__ import annotations

import pwd
from collections.abc import Callable
from datetime import datetime, timedelta

from advisor.api import Submitted
from advisor.daemon.metrics import Metrics
from advisor.daemon.transport import Peer
from advisor.recommend.choose import Estimate, Recommendation
from advisor.slurm.client import SlurmClient
from advisor.store import AdvisedJobRow, AdvisedJobs, Audit, AuditRow, Store


class Forbidden(PermissionError):
    """The caller asked about something that is not theirs."""


class JobLinks:
    def __init__(self, client: SlurmClient, clock: Callable[[], datetime], metrics: Metrics) -> None:
        self.client = client
        self.clock = clock
        self.metrics = metrics

    def link(self, store: Store, peer: Peer, message: Submitted) -> None:
        """The audit row gets its job; ``advised_jobs`` the prediction for what went in (the advice if it was
        applied, else the job as written)."""
        audit = Audit(store)
        row = audit.get(message.request_id)
        if row is None or row.uid != peer.uid:
            raise Forbidden(f"request {message.request_id} is not yours")
        if not self._owns(peer.uid, message.job_id):
            raise Forbidden(f"job {message.job_id} does not belong to uid {peer.uid}")
        audit.attach_job(message.request_id, message.job_id, message.applied)
        if row.offered:
            self.metrics.rewrites.labels("applied" if message.applied else "declined").inc()
        recommendation = Recommendation.model_validate_json(row.recommendation)
        chosen = recommendation.chosen if message.applied else recommendation.baseline
        if chosen is not None:
            AdvisedJobs(store).record(_advised(message.job_id, row, chosen))

    def _owns(self, uid: int, job_id: int) -> bool:
        """The owner's uid alone from the controller (`SlurmClient.job_owner`: a job's own name or comment
        cannot pose as it); accounting for a job the controller has forgotten."""
        owner = self.client.job_owner(job_id)
        if owner is not None:
            return owner == uid
        finished = self.client.history(self.clock() - timedelta(days=1), job_ids=[job_id])
        return any(job.user == user_name(uid) for job in finished)


def _advised(job_id: int, row: AuditRow, chosen: Estimate) -> AdvisedJobRow:
    """What calibration compares the job's real run with: the prediction and the correction it feeds."""

    def start(wait_s: float | None) -> datetime | None:
        return None if wait_s is None else row.at + timedelta(seconds=wait_s)

    return AdvisedJobRow(
        job_id=job_id,
        submitted_at=row.at,
        user=row.user,
        partition=chosen.candidate.partition,
        machine=chosen.machine,
        calibration_key=chosen.calibration_key or chosen.machine,
        architecture=row.architecture_hash,
        model_version=chosen.model_version,
        confidence=chosen.confidence,
        predicted_s=chosen.run_s,
        predicted_p90_s=chosen.run_p90_s,
        predicted_p10_s=chosen.run_p10_s,
        comparable_from_s=chosen.comparable_from_s,
        applied_correction=chosen.applied_correction,
        time_limit_s=chosen.time_limit.total_seconds(),
        slurm_start=start(chosen.slurm_wait_s),
        advisor_start=start(chosen.advisor_wait_s),
    )


def user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)
