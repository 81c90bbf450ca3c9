"""The advisor's own sbatch options, built in one place: what a job holds (`JobResources`) and, for the jobs
the advisor runs itself (benchmarks, communication measurements), the site's ``[bench]`` terms.

GPUs are spelled one way, ``--gres=gpu:N`` per node: every select plugin takes it, and per node it says the
same on one node or many. A user's own job keeps the user's spelling (`jobscript/rewrite.py`), on purpose.
Pure: values in, argv words out (the settings are an edge: the site's terms come as a `SiteTerms`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Protocol

from advisor.slurm.values import format_duration


class SiteTerms(Protocol):
    """The site's terms for the advisor's own jobs: ``[bench]`` in the settings (`BenchSettings`)."""

    @property
    def account(self) -> str | None: ...
    @property
    def qos(self) -> str | None: ...
    @property
    def reservation(self) -> str | None: ...
    @property
    def constraint(self) -> str | None: ...
    @property
    def memory(self) -> str | None: ...


@dataclass(frozen=True)
class JobResources:
    """What one job asks Slurm for in one partition; ``memory`` is ``--mem``'s value ("" for the
    partition's default), ``time_limit`` None for the partition's."""

    partition: str
    nodes: int = 1
    tasks_per_node: int = 1
    cpus_per_task: int = 1
    gpus_per_node: int = 0
    memory: str = ""
    time_limit: timedelta | None = None


@dataclass(frozen=True)
class OwnJob:
    """A job the advisor submits for itself: its name in the queue, its log, and how it yields."""

    name: str
    log: Path
    nice: int = 0
    """Slurm's ``--nice``: a first-sight job yields to every user's job."""
    singleton: bool = False
    """One such job at a time (``--dependency=singleton``): nodes that share hardware (the sandbox) would
    disturb each other's timings."""


def resource_options(resources: JobResources) -> list[str]:
    """The resources as sbatch options.

    ``--ntasks`` always, so that it replaces a script's own task count, which would otherwise contradict
    it; ``--ntasks-per-node`` as well where a node runs several, so that they are spread evenly.
    """
    options = [
        f"--partition={resources.partition}",
        f"--nodes={resources.nodes}",
        f"--ntasks={resources.nodes * resources.tasks_per_node}",
    ]
    if resources.tasks_per_node > 1:
        options.append(f"--ntasks-per-node={resources.tasks_per_node}")
    options.append(f"--cpus-per-task={resources.cpus_per_task}")
    if resources.gpus_per_node:
        options.append(f"--gres=gpu:{resources.gpus_per_node}")
    if resources.memory:
        options.append(f"--mem={resources.memory}")
    if resources.time_limit is not None:
        options.append(f"--time={format_duration(resources.time_limit)}")
    return options


def own_job_options(resources: JobResources, site: SiteTerms, job: OwnJob) -> list[str]:
    """The options of a job the advisor runs itself: its resources (memory as the site says, unless the
    resources name it) under the site's account, QOS, reservation and constraint, as its own jobs would."""
    options = resource_options(replace(resources, memory=resources.memory or site.memory or ""))
    options += [f"--job-name={job.name}", f"--output={job.log}"]
    for option, value in (
        ("account", site.account),
        ("qos", site.qos),
        ("reservation", site.reservation),
        ("constraint", site.constraint),
    ):
        if value:
            options.append(f"--{option}={value}")
    if job.nice:
        options.append(f"--nice={job.nice}")
    if job.singleton:
        options.append("--dependency=singleton")
    return options
