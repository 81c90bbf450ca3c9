"""The measuring-jobs use case, shared by the night's benchmarks (`bench/submit.py`), the communication
measurements (`comm/cli.py`) and first sight (its submission): one job per partition, each a partition
Slurm may refuse while the others go on; then wait for them, cancel those the window leaves running, and
ingest what every one of them wrote (a cancelled job's lines too: ingestion is idempotent)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from advisor.slurm.client import SlurmClient
from advisor.slurm.runner import SlurmError

UNFINISHED = "UNFINISHED"
_LONGEST_POLL_S = 60.0


@dataclass(frozen=True)
class JobToSubmit:
    """One measuring job, ready for sbatch: its script, its options, and where it writes its results."""

    partition: str
    script: str
    options: list[str]
    results: Path


@dataclass(frozen=True)
class BenchJob:
    """A measuring job Slurm took."""

    partition: str
    job_id: int
    results: Path


@dataclass(frozen=True)
class Night:
    """The jobs a night submitted, and the partitions Slurm refused one (with its words): the others go on."""

    jobs: list[BenchJob]
    refused: dict[str, str]


@dataclass(frozen=True)
class Pace:
    """How the wait tells time and sleeps: the real clock, or a test's."""

    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep


@dataclass(frozen=True)
class Watch:
    """What a command is told while its jobs go: what Slurm took (``submitted``), and each look at the
    queue's states so far (``polled``: job id -> a final state, for those that ended), e.g. for progress."""

    submitted: Callable[[Night], None] = lambda night: None
    polled: Callable[[dict[int, str]], None] = lambda states: None


UNWATCHED = Watch()


@dataclass(frozen=True)
class Measured:
    """How the night's jobs ended (`UNFINISHED` for those cancelled at the window's end) and the rows
    ingested."""

    night: Night
    states: dict[int, str]
    cancelled: list[int]
    stored: int

    @property
    def failed(self) -> bool:
        """A partition refused, or a job that did not complete."""
        return bool(self.night.refused) or any(state != "COMPLETED" for state in self.states.values())


def submit_jobs(client: SlurmClient, planned: Sequence[JobToSubmit]) -> Night:
    """Each job once; a refusal is noted in Slurm's words and the rest go on."""
    night = Night(jobs=[], refused={})
    for job in planned:
        try:
            submitted = client.submit(job.script, job.options)
        except SlurmError as error:
            night.refused[job.partition] = " ".join(error.stderr.split()) or str(error)
            continue
        night.jobs.append(BenchJob(partition=job.partition, job_id=submitted.job_id, results=job.results))
    return night


def finish_jobs(
    client: SlurmClient,
    night: Night,
    window: timedelta,
    ingest: Callable[[Sequence[BenchJob]], int],
    watch: Watch = UNWATCHED,
) -> Measured:
    """Wait up to ``window``, cancel what still runs then, and ingest every job's results."""
    states = wait_for_jobs(client, night.jobs, timeout=window, polled=watch.polled)
    cancelled = cancel_leftovers(client, states)
    return Measured(night=night, states=states, cancelled=cancelled, stored=ingest(night.jobs))


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
    pace: Pace = Pace(),
    polled: Callable[[dict[int, str]], None] = lambda states: None,
) -> dict[int, str]:
    """Final Slurm state per job; jobs still unfinished at the timeout say so. slurmctld's word while it
    still lists the job, accounting's once it has forgotten it: slurmdbd hears of an end later than
    slurmctld, and not at all while their connection is down.

    The first look comes after ``poll_s``, each later one after twice the wait before, up to a minute: a
    short job is seen ending at once, and a night's hours read the whole queue about once a minute; each
    look's states so far go to ``polled``."""
    clock, sleep = pace.clock, pace.sleep
    since = datetime.now(UTC) - timedelta(days=1)
    wanted = {job.job_id for job in jobs}
    deadline = clock() + timeout.total_seconds()
    states: dict[int, str] = {}
    interval = poll_s
    while True:
        states |= {job.job_id: job.state for job in client.jobs() if job.job_id in wanted and job.ended}
        if missing := sorted(wanted - set(states)):
            found = client.history(since, job_ids=missing)
            states |= {record.job_id: record.state for record in found if record.job_id in wanted}
        polled(dict(states))
        if set(states) >= wanted or clock() >= deadline:
            return {job_id: states.get(job_id, UNFINISHED) for job_id in sorted(wanted)}
        sleep(min(interval, max(deadline - clock(), 0.0)))
        interval = min(2 * interval, _LONGEST_POLL_S)
