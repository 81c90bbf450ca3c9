"""`advisor bench submit`: one benchmark job per partition through the Slurm adapter, then ingestion.

Results travel as JSON lines in a folder that the login node and the compute nodes share; a job that
dies (or is cancelled) leaves every line it finished, and ingesting them twice stores them once.
"""

from __future__ import annotations

import contextlib
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from advisor.bench.night import Tonight
from advisor.bench.plan import DeviceKind
from advisor.bench.results import read_jsonl
from advisor.records import ResultLine
from advisor.settings.validated import BenchSettings
from advisor.slurm.client import SlurmClient
from advisor.slurm.models import Partition
from advisor.slurm.runner import SlurmError
from advisor.slurm.values import format_duration
from advisor.store import Store

JOB_NAME = "advisor-bench"
UNFINISHED = "UNFINISHED"
_TIME_MARGIN = timedelta(minutes=5)
_LONGEST_POLL_S = 60.0


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


@dataclass(frozen=True)
class BenchJob:
    partition: str
    job_id: int
    results: Path


@dataclass(frozen=True)
class Night:
    """The jobs a night submitted, and the partitions Slurm refused one (with its words): the others go on."""

    jobs: list[BenchJob]
    refused: dict[str, str]


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
    """One GPU of the partition and a few CPUs, not a whole node, under the site's account, QOS,
    reservation and constraint; a limit just above the budget."""
    site = request.site
    cpus = min(site.cpus_per_job, partition.cpus_per_node or site.cpus_per_job)
    options = [
        f"--partition={partition.name}",
        f"--job-name={JOB_NAME}",
        f"--time={format_duration(request.budget + _TIME_MARGIN)}",
        "--nodes=1",
        "--ntasks=1",
        f"--cpus-per-task={cpus}",
        f"--output={request.results_dir / f'{stamp}-{partition.name}.log'}",
    ]
    for option, value in (
        ("mem", site.memory),
        ("account", site.account),
        ("qos", site.qos),
        ("reservation", site.reservation),
        ("constraint", site.constraint),
    ):
        if value:
            options.append(f"--{option}={value}")
    if partition.gpus_per_node:
        options.append("--gpus=1")
    if request.nice:
        options.append(f"--nice={request.nice}")
    if request.one_at_a_time:
        # Nodes that share hardware (the sandbox) would disturb each other's timings.
        options.append("--dependency=singleton")
    return options


def submit_benchmarks(
    client: SlurmClient, partitions: Sequence[Partition], request: BenchRequest, now: datetime
) -> Night:
    """One job per partition not skipped; a partition Slurm refuses is reported, and the others go on."""
    request.results_dir.mkdir(parents=True, exist_ok=True)
    stamp = request.tag + now.strftime("%Y%m%dT%H%M%S")
    night = Night(jobs=[], refused={})
    for partition in partitions:
        if partition.name in request.site.skip_partitions:
            continue
        results = request.results_dir / f"{stamp}-{partition.name}.jsonl"
        plan = None
        if partition.name in request.plans:
            plan = request.results_dir / f"{stamp}-{partition.name}.plan.json"
            plan.write_text(request.plans[partition.name].model_dump_json(), encoding="utf-8")
        try:
            submitted = client.submit(
                job_script(request, partition, results, plan), job_options(request, partition, stamp)
            )
        except SlurmError as error:
            night.refused[partition.name] = " ".join(error.stderr.split()) or str(error)
            continue
        night.jobs.append(BenchJob(partition=partition.name, job_id=submitted.job_id, results=results))
    return night


def cancel_leftovers(client: SlurmClient, states: dict[int, str]) -> list[int]:
    """The jobs still pending or running when the night's window closed: cancelled, so that none holds a
    GPU into the day; what they measured so far is ingested like the rest."""
    leftovers = [job_id for job_id, state in states.items() if state == UNFINISHED]
    for job_id in leftovers:
        with contextlib.suppress(SlurmError):  # it may have ended meanwhile
            client.cancel(job_id)
    return leftovers


def wait_for_jobs(
    client: SlurmClient,
    jobs: Sequence[BenchJob],
    timeout: timedelta,
    *,
    poll_s: float = 2.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[int, str]:
    """Final Slurm state per job; jobs still unfinished at the timeout say so. slurmctld's word while it
    still lists the job, accounting's once it has forgotten it: slurmdbd hears of an end later than
    slurmctld, and not at all while their connection is down.

    The first look comes after ``poll_s``, each later one after twice the wait before, up to a minute: a
    short job is seen ending at once, and a night's hours read the whole queue about once a minute."""
    since = datetime.now(UTC) - timedelta(days=1)
    wanted = {job.job_id for job in jobs}
    deadline = clock() + timeout.total_seconds()
    states: dict[int, str] = {}
    interval = poll_s
    while True:
        states |= {job.job_id: job.state for job in client.jobs() if job.job_id in wanted and job.ended}
        if missing := sorted(wanted - set(states)):
            states |= {record.job_id: record.state for record in client.history(since, job_ids=missing)}
        if set(states) >= wanted or clock() >= deadline:
            return {job_id: states.get(job_id, UNFINISHED) for job_id in sorted(wanted)}
        sleep(min(interval, max(deadline - clock(), 0.0)))
        interval = min(2 * interval, _LONGEST_POLL_S)


def ingest_results(store: Store, jobs: Sequence[BenchJob]) -> int:
    lines: list[ResultLine] = []
    for job in jobs:
        if job.results.exists():
            lines.extend(read_jsonl(job.results))
    return store.ingest(lines)
