"""What callers may read besides advice: their own advised jobs, and for the admins the whole picture.

Each view reads the store and Slurm once and returns an `advisor.api` message; who may see it is the
caller's business (`AdviceService`), not the view's.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import cast

from advisor.api import (
    MY_JOBS,
    AdvisedJob,
    Coverage,
    ModelVersion,
    MyJobs,
    NightPlan,
    Overview,
    QueueRow,
)
from advisor.bench.architectures import NightOn, plan_tonight
from advisor.bench.plan import loader_workers
from advisor.bench.submit import device_kind
from advisor.machines import machine_names
from advisor.predict.calibration import report
from advisor.predict.outcomes import load_outcomes
from advisor.recommend.cluster import ClusterView
from advisor.recommend.savings import advice_savings
from advisor.settings.validated import BenchSettings
from advisor.slurm.models import Partition, QueuedJob
from advisor.slurm.runner import SlurmError
from advisor.store import AdvisedJobRow, AdvisedJobs, ModelRegistry, ModelVersionRow, Store

TONIGHT_FRESH_FOR = timedelta(minutes=10)
"""How long the admin view shows the same plans for tonight's benchmarks before planning them again."""
log = logging.getLogger("advisor.daemon")


class TonightPlans:
    """Tonight's plans for the admin view, made on a thread of their own (the first takes seconds) and kept
    in the daemon's cache; a view while they are being made shows the rest without them."""

    def __init__(self, cluster: ClusterView, plan: Callable[[], list[NightPlan]]) -> None:
        self.cluster, self.plan = cluster, plan
        self._planning = threading.Lock()
        """Held by the one thread making the plans: a view while it works starts no other."""

    def ready(self) -> list[NightPlan] | None:
        plans = self.cluster.peek("tonight", TONIGHT_FRESH_FOR)
        if plans is None and self._planning.acquire(blocking=False):
            threading.Thread(target=self._make, name="tonight", daemon=True).start()
        return cast(list[NightPlan] | None, plans)

    def _make(self) -> None:
        try:
            self.cluster.cached("tonight", TONIGHT_FRESH_FOR, self.plan)
        except (SlurmError, sqlite3.Error) as error:
            log.warning("tonight's benchmark plans not made: %s", error)
        finally:
            self._planning.release()


def my_jobs(store: Store, user: str) -> MyJobs:
    rows = AdvisedJobs(store).of_user(user, MY_JOBS)
    return MyJobs(user=user, jobs=[_advised_job(row) for row in rows])


def overview(store: Store, cluster: ClusterView, tonight: list[NightPlan] | None, now: datetime) -> Overview:
    """``tonight``: `nights`, or None while they are being planned. The partitions as every request sees
    them (the daemon's cache), the jobs as they are now. Slurm not answering costs the queue, not the
    page."""
    problems = []
    try:
        queue = queue_summary(cluster.partitions(), cluster.client.jobs())
    except SlurmError as error:
        queue = []
        problems.append(f"Slurm did not answer: {' '.join(str(error).split())[:200]}")
    outcomes = load_outcomes(store)
    names = machine_names(store.fingerprints())
    return Overview(
        at=now,
        models=[_model_version(row, names) for row in ModelRegistry(store).versions()],
        accuracy=report(outcomes),
        finished=outcomes,
        coverage=[
            Coverage.model_validate({**row.model_dump(), "name": names.get(row.machine)})
            for row in store.benchmark_coverage()
        ],
        tonight=tonight,
        queue=queue,
        savings=advice_savings(store),
        problems=problems,
    )


def queue_summary(partitions: Sequence[Partition], jobs: Sequence[QueuedJob]) -> list[QueueRow]:
    """Per partition: GPUs in use of all, jobs running and pending."""
    return [
        QueueRow(
            partition=partition.name,
            gpus_used=sum(node.gpus_used for node in partition.nodes),
            gpus=sum(node.gpus.count for node in partition.nodes if node.gpus),
            running=sum(job.partition == partition.name and job.state == "RUNNING" for job in jobs),
            pending=sum(job.partition == partition.name and job.state == "PENDING" for job in jobs),
        )
        for partition in partitions
    ]


def nights(
    store: Store, partitions: Sequence[Partition], bench: BenchSettings, now: datetime
) -> list[NightPlan]:
    """Tonight's plan on every partition the nightly benchmark measures. Slow the first time in a process
    (the zoo's layer tables are introspected once), so the daemon makes it off the request's path."""
    measured = [p for p in partitions if p.name not in bench.skip_partitions]
    return [_night(store, partition, bench, now) for partition in measured]


def _night(store: Store, partition: Partition, bench: BenchSettings, now: datetime) -> NightPlan:
    budget_s = bench.budget_minutes * 60
    kind, workers = device_kind(partition, bench), loader_workers(bench.cpus_per_job)
    night = plan_tonight(store, NightOn(partition.name, kind, workers), budget_s, now)
    names = machine_names(store.fingerprints())
    return NightPlan(
        partition=partition.name,
        machine=night.machine,
        name=None if night.machine is None else names.get(night.machine),
        measurements=len(night.entries),
        estimate_s=night.estimate_s,
        budget_s=night.budget_s,
        covered=night.covered,
        grid_items=night.grid_items,
    )


def _model_version(row: ModelVersionRow, names: dict[str, str]) -> ModelVersion:
    return ModelVersion(
        machine=row.machine,
        name=names.get(row.machine),
        version=row.version,
        created_at=row.created_at,
        active=row.active,
        heldout_mape=row.heldout_mape,
        step_rows=row.step_rows,
    )


def _advised_job(row: AdvisedJobRow) -> AdvisedJob:
    return AdvisedJob(
        job_id=row.job_id,
        submitted_at=row.submitted_at,
        partition=row.partition,
        predicted_s=row.predicted_s,
        predicted_p90_s=row.predicted_p90_s,
        predicted_start=row.slurm_start or row.advisor_start,
        started_at=row.started_at,
        elapsed_s=row.elapsed_s,
        state=row.state,
    )
