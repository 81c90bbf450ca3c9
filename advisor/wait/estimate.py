"""Both wait estimates for each candidate: Slurm's ``--test-only`` answer and the advisor's replay."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime

from advisor.slurm.client import SlurmClient
from advisor.slurm.models import FinishedJob
from advisor.slurm.options import JobResources, resource_options
from advisor.slurm.runner import SlurmError
from advisor.wait.accuracy import DEFAULT_SOURCE, WaitEstimate, WaitRecord, preferred_sources
from advisor.wait.collect import take_snapshot
from advisor.wait.remaining import estimate_runtimes, historical_ratios
from advisor.wait.simulate import BACKFILL_WINDOW, predict_starts
from advisor.wait.snapshot import QueueSnapshot, SlotRequest

#: ``sbatch --test-only`` needs a script; the scheduler reads only its directives.
PLACEHOLDER_SCRIPT = "#!/bin/sh\ntrue\n"


def sbatch_options(request: SlotRequest) -> list[str]:
    """The request as sbatch options (`slurm/options.py`): one task per node, holding all of that node's
    CPUs."""
    memory = request.memory_mb_per_node
    return resource_options(
        JobResources(
            partition=request.partitions[0],
            nodes=request.nodes,
            cpus_per_task=request.cpus_per_node,
            gpus_per_node=request.gpus_per_node,
            memory=str(memory) if memory else "",
            time_limit=request.time_limit,
        )
    )


SlurmStart = Callable[[SlotRequest], tuple[datetime | None, str | None]]
"""Slurm's start estimate for one candidate, or why it has none."""


@dataclass(frozen=True)
class QueueReading:
    """The queue as one estimate sees it: its snapshot, and Slurm's start answer for one candidate; the
    daemon shares both between requests (`ClusterView`)."""

    snapshot: QueueSnapshot
    start_estimate: SlurmStart

    @classmethod
    def now(cls, client: SlurmClient, now: datetime) -> QueueReading:
        """The queue read now, each candidate asked with ``--test-only``."""
        return cls(take_snapshot(client, now), lambda candidate: ask_test_only(client, candidate))


def estimate_waits(
    candidates: Sequence[SlotRequest],
    now: datetime,
    advisor_predictions: Mapping[int, float],
    history: Sequence[FinishedJob],
    queue: QueueReading,
    records: Sequence[WaitRecord] = (),
) -> list[WaitEstimate]:
    """One estimate per candidate (each in one partition), in order.

    ``advisor_predictions`` maps job ids the advisor advised to their predicted run time in seconds;
    ``history`` (finished jobs) calibrates everyone else's; ``records`` choose the preferred source.
    """
    several = [candidate.partitions for candidate in candidates if len(candidate.partitions) != 1]
    if several:
        raise ValueError(f"a wait is estimated in exactly one partition, not {several[0]}")
    runtimes = estimate_runtimes(queue.snapshot, now, historical_ratios(history), advisor_predictions)
    advisor_starts = predict_starts(queue.snapshot, runtimes, candidates, now, BACKFILL_WINDOW)
    choice = preferred_sources(records)
    answers = slurm_start_estimates(queue.start_estimate, candidates)
    estimates: list[WaitEstimate] = []
    for candidate, advisor_start, (slurm_start, slurm_error) in zip(
        candidates, advisor_starts, answers, strict=True
    ):
        estimates.append(
            WaitEstimate(
                slurm_wait_s=_wait(slurm_start, now),
                advisor_wait_s=_wait(advisor_start, now),
                preferred=choice.get(candidate.partitions[0], DEFAULT_SOURCE),
                slurm_error=slurm_error,
            )
        )
    return estimates


def slurm_start_estimates(
    slurm_start: SlurmStart, candidates: Sequence[SlotRequest]
) -> list[tuple[datetime | None, str | None]]:
    """Slurm's start estimate for each candidate, or why it has none.

    Each ``--test-only`` is a round trip to slurmctld; asked side by side they cost about one.
    """
    with ThreadPoolExecutor(max_workers=min(8, max(len(candidates), 1))) as pool:
        return list(pool.map(slurm_start, candidates))


def ask_test_only(
    client: SlurmClient, candidate: SlotRequest, script: str = PLACEHOLDER_SCRIPT
) -> tuple[datetime | None, str | None]:
    """One start estimate, or why none (a request Slurm refuses, an unreachable controller). ``script``'s
    directives (the job's account, QOS...) judge it too; the candidate's resources, given last, win."""
    try:
        result = client.test_only(script, sbatch_options(candidate))
    except SlurmError as error:
        return None, str(error)
    return result.start_time, None


def _wait(start: datetime | None, now: datetime) -> float | None:
    return None if start is None else max((start - now).total_seconds(), 0.0)
