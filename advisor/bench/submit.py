"""The night (`run_night`, `advisor bench submit`): one benchmark job per partition through the Slurm
adapter, then ingestion.

Results travel as JSON lines in a folder that the login node and the compute nodes share; a job that
dies (or is cancelled) leaves every line it finished, and ingesting them twice stores them once.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path

from advisor.bench.architectures import NightOn, plan_tonight
from advisor.bench.measuring import (
    UNWATCHED,
    BenchJob,
    JobToSubmit,
    Measured,
    Night,
    Watch,
    finish_jobs,
    submit_jobs,
)
from advisor.bench.night import Tonight
from advisor.bench.plan import DeviceKind, loader_workers
from advisor.bench.results import read_jsonl
from advisor.records import ResultLine
from advisor.settings.validated import BenchSettings
from advisor.slurm.client import SlurmClient
from advisor.slurm.models import Partition
from advisor.slurm.options import JobResources, OwnJob, own_job_options
from advisor.store import Store

JOB_NAME = "advisor-bench"
_TIME_MARGIN = timedelta(minutes=5)


@dataclass(frozen=True)
class BenchRequest:
    """What to run on each partition; `extra` goes to `python -m advisor.bench.job` unchanged."""

    python: str
    results_dir: Path
    budget: timedelta
    quick: bool = False
    one_at_a_time: bool = False
    extra: tuple[str, ...] = ()
    site: BenchSettings = field(default_factory=BenchSettings)
    tag: str = ""
    """Begins each job's file names (results, plan, log), so jobs submitted in one second stay apart."""
    nice: int = 0
    """Slurm's ``--nice``: a first-sight job yields to every user's job."""
    plans: Mapping[str, Tonight] = field(default_factory=dict)
    """Tonight's plan per partition (`bench/night.py`); a partition without one runs its device kind's grid
    (or the quick plan) in the budget."""


def device_kind(partition: Partition, site: BenchSettings) -> DeviceKind:
    """On a GPU partition the job measures the GPU or fails: a CPU's timings under a GPU partition's name
    would mislead (unless the site says its GPUs are not real)."""
    return "cuda" if partition.gpus_per_node and not site.cpu_only else "cpu"


def job_script(request: BenchRequest, partition: Partition, results: Path, plan: Path | None = None) -> str:
    """The batch script: the benchmark entry point and nothing else, its argv quoted word by word."""
    device = device_kind(partition, request.site)
    argv = [
        request.python,
        "-m",
        "advisor.bench.job",
        "--out",
        str(results),
        "--partition",
        partition.name,
        "--device",
        device,
        "--budget-minutes",
        f"{request.budget.total_seconds() / 60:g}",
        *(["--quick"] if request.quick else []),
        *(["--plan", str(plan)] if plan is not None else []),
        *request.extra,
    ]
    return f"#!/bin/sh\nexec {shlex.join(argv)}\n"


def job_options(request: BenchRequest, partition: Partition, stamp: str) -> list[str]:
    """One GPU of the partition and a few CPUs, not a whole node, under the site's terms
    (`slurm/options.py`); a limit just above the budget."""
    site = request.site
    resources = JobResources(
        partition=partition.name,
        cpus_per_task=min(site.cpus_per_job, partition.cpus_per_node or site.cpus_per_job),
        gpus_per_node=1 if partition.gpus_per_node else 0,
        time_limit=request.budget + _TIME_MARGIN,
    )
    log = request.results_dir / f"{stamp}-{partition.name}.log"
    own = OwnJob(name=JOB_NAME, log=log, nice=request.nice, singleton=request.one_at_a_time)
    return own_job_options(resources, site, own)


def submit_benchmarks(
    client: SlurmClient, partitions: Sequence[Partition], request: BenchRequest, now: datetime
) -> Night:
    """One job per partition not skipped (`measuring.submit_jobs`); a partition Slurm refuses is reported,
    and the others go on."""
    request.results_dir.mkdir(parents=True, exist_ok=True)
    stamp = request.tag + now.strftime("%Y%m%dT%H%M%S")
    planned = []
    for partition in partitions:
        if partition.name in request.site.skip_partitions:
            continue
        results = request.results_dir / f"{stamp}-{partition.name}.jsonl"
        plan = None
        if partition.name in request.plans:
            plan = request.results_dir / f"{stamp}-{partition.name}.plan.json"
            plan.write_text(request.plans[partition.name].model_dump_json(), encoding="utf-8")
        script = job_script(request, partition, results, plan)
        options = job_options(request, partition, stamp)
        planned.append(JobToSubmit(partition=partition.name, script=script, options=options, results=results))
    return submit_jobs(client, planned)


def run_night(
    client: SlurmClient,
    store: Store,
    partitions: Sequence[Partition],
    request: BenchRequest,
    now: datetime,
    watch: Watch = UNWATCHED,
) -> Measured:
    """The night (`advisor bench submit`): tonight's plan per partition (the quick plan: none), one job
    each, ``watch`` told what Slurm took and of each look at the queue, then the measuring jobs' end
    (`measuring.finish_jobs`): a window of the budget per job and half an hour, the leftovers cancelled,
    every result ingested."""
    if not request.quick:
        request = replace(request, plans=tonights_plans(store, partitions, request, now))
    night = submit_benchmarks(client, partitions, request, now)
    watch.submitted(night)
    window = request.budget * len(night.jobs) + timedelta(minutes=30)
    return finish_jobs(client, night, window, lambda jobs: ingest_results(store, jobs), watch)


def tonights_plans(
    store: Store, partitions: Sequence[Partition], request: BenchRequest, now: datetime
) -> dict[str, Tonight]:
    """Each partition's plan for tonight, for its device kind, its budget and the site's CPUs."""
    workers = loader_workers(request.site.cpus_per_job)
    budget_s = request.budget.total_seconds()
    return {
        partition.name: plan_tonight(
            store, NightOn(partition.name, device_kind(partition, request.site), workers), budget_s, now
        )
        for partition in partitions
    }


def ingest_results(store: Store, jobs: Sequence[BenchJob]) -> int:
    lines: list[ResultLine] = []
    for job in jobs:
        if job.results.exists():
            lines.extend(read_jsonl(job.results))
    return store.ingest(lines)
