"""First sight: when users ask advice for an architecture that a partition's machine has not measured, a
short benchmark job goes to that partition at low priority: whole steps (for a torchvision model) across
the micro-batches its candidates will use, its distinct layers at them, and the steps again until the
budget is spent (`advisor.bench.sight_plan`), so that its next submission is predicted from its own parts.

The daemon runs `FirstSight` every few minutes; it submits only where the policy enables it
(``[first_sight]``), and each run ingests what its jobs have measured so far (ingestion is idempotent).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from advisor.bench.architectures import Architectures, measured_geometries
from advisor.bench.measuring import BenchJob
from advisor.bench.night import SubmittedArchitecture, Tonight
from advisor.bench.plan import DeviceProfile, loader_workers, nightly_grid
from advisor.bench.results import read_jsonl
from advisor.bench.sight_plan import candidate_range, range_batches, sight_plan
from advisor.bench.submit import BenchRequest, device_kind, submit_benchmarks
from advisor.bench.zoo import distinct_layers
from advisor.policy.schema import FirstSightRules
from advisor.settings.validated import BenchSettings
from advisor.slurm.client import SlurmClient
from advisor.slurm.models import Partition
from advisor.slurm.runner import SlurmError
from advisor.store import Store

log = logging.getLogger("advisor.first_sight")
RECENT = timedelta(days=1)
"""Architectures first seen this recently are looked at; older ones are left to the nightly plan."""
NICE = 10_000
"""Slurm's ``--nice`` of a first-sight job: it yields to every user's job."""


@dataclass
class FirstSight:
    client: SlurmClient
    store: Callable[[], AbstractContextManager[Store]]
    rules: Callable[[], FirstSightRules]
    python: str
    results_dir: Path
    site: BenchSettings
    clock: Callable[[], datetime]
    submitted: dict[tuple[str, str], tuple[BenchJob, datetime]] = field(default_factory=dict)
    """(architecture hash, partition) -> the job measuring it there, and when: once per daemon."""

    def __call__(self) -> list[BenchJob]:
        """One look: ingest what earlier jobs measured, then submit for what is still unmeasured."""
        now, rules = self.clock(), self.rules()
        with self.store() as store:
            self._ingest(store, now)
            wanted = self._wanted(store, now) if rules.enabled else []
        if not wanted:
            return []
        try:
            partitions = {partition.name: partition for partition in self.client.partitions()}
        except SlurmError as error:
            log.warning("first sight: partitions not read: %s", error)
            return []
        jobs = []
        for architecture, name in wanted:
            partition = partitions.get(name)
            if partition is not None:  # submit_benchmarks leaves out [bench] skip_partitions
                jobs += self._submit(partition, architecture, rules, now)
        return jobs

    def _submit(
        self, partition: Partition, architecture: SubmittedArchitecture, rules: FirstSightRules, now: datetime
    ) -> list[BenchJob]:
        digest = architecture.table.architecture_hash
        request = BenchRequest(
            python=self.python,
            results_dir=self.results_dir,
            budget=timedelta(minutes=rules.minutes),
            site=self.site,
            plans={partition.name: self._night(partition, architecture, rules)},
            nice=NICE,
            tag=f"first-sight-{digest[:12]}-",
        )
        night = submit_benchmarks(self.client, [partition], request, now)
        for why in night.refused.values():
            log.warning("first sight of %s on %s: Slurm refused: %s", architecture.model, partition.name, why)
        for job in night.jobs:
            self.submitted[(digest, partition.name)] = (job, now)
            log.info("first sight of %s on %s: job %d", architecture.model, partition.name, job.job_id)
        return night.jobs

    def _wanted(self, store: Store, now: datetime) -> list[tuple[SubmittedArchitecture, str]]:
        """Each recently first seen architecture with each partition whose machine lacks one of its layer
        geometries; never a partition never benchmarked (its first night comes first), never twice."""
        recent = [a for a in Architectures(store).first_since(now - RECENT) if a.requests]
        layers = [{config for config, _ in distinct_layers(a.table)} for a in recent]
        wanted = []
        for partition, machine in sorted(store.latest_machines().items()) if recent else ():
            measured = measured_geometries(store, machine)
            for architecture, own in zip(recent, layers, strict=True):
                if (architecture.table.architecture_hash, partition) not in self.submitted and own - measured:
                    wanted.append((architecture, partition))
        return wanted

    def _night(
        self, partition: Partition, architecture: SubmittedArchitecture, rules: FirstSightRules
    ) -> Tonight:
        kind = device_kind(partition, self.site)
        grid = nightly_grid(kind, workers=loader_workers(self.site.cpus_per_job))
        batches = range_batches(grid, *candidate_range(architecture.batches, grid))
        device, steps = DeviceProfile.assumed(kind), architecture.buildable
        plan = sight_plan(grid, device, architecture.table, rules.minutes * 60, batches, steps=steps)
        return plan.night()

    def _ingest(self, store: Store, now: datetime) -> None:
        """Every job of the last day: a job still running has written what it measured so far."""
        for job, at in self.submitted.values():
            if now - at <= RECENT and job.results.exists():
                stored = store.ingest(read_jsonl(job.results))
                if stored:
                    log.info("first sight: %d new rows from job %d", stored, job.job_id)
