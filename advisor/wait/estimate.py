"""Both wait estimates for each candidate: Slurm's ``--test-only`` answer and the advisor's replay."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime

from pydantic import Field, field_validator

from advisor.frozen import Frozen
from advisor.slurm.client import SlurmClient
from advisor.slurm.models import FinishedJob
from advisor.slurm.options import JobResources, resource_options
from advisor.slurm.runner import SlurmError
from advisor.wait.accuracy import DEFAULT_ESTIMATOR, WaitRecord, WaitSource, preferred_estimators
from advisor.wait.collect import take_snapshot
from advisor.wait.remaining import estimate_runtimes, historical_ratios
from advisor.wait.simulate import BACKFILL_WINDOW, predict_starts
from advisor.wait.snapshot import QueueSnapshot, SlotRequest

#: ``sbatch --test-only`` needs a script; the scheduler only reads the options.
PLACEHOLDER_SCRIPT = "#!/bin/sh\ntrue\n"


class WaitRequest(Frozen):
    """What both wait estimators are asked about one candidate: its request in one partition, and the script
    and other sbatch options (account, QOS) Slurm should judge it with; the request's own options come last
    and win."""

    request: SlotRequest
    script: str = PLACEHOLDER_SCRIPT
    options: list[str] = Field(default_factory=list)

    @field_validator("request")
    @classmethod
    def _one_partition(cls, request: SlotRequest) -> SlotRequest:
        if len(request.partitions) != 1:
            raise ValueError(f"a wait request names exactly one partition, not {request.partitions}")
        return request


class WaitEstimate(Frozen):
    """Both estimators' start times (None: no estimate) and which one has been right more often here."""

    partition: str
    slurm_start: datetime | None
    slurm_error: str | None
    advisor_start: datetime | None
    slurm_wait_s: float | None
    advisor_wait_s: float | None
    preferred: WaitSource

    @property
    def wait_s(self) -> float | None:
        """The preferred estimator's wait, or the other's where it has none."""
        ranked = (self.slurm_wait_s, self.advisor_wait_s)
        first, second = ranked if self.preferred == "slurm" else ranked[::-1]
        return first if first is not None else second


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


SlurmStart = Callable[[WaitRequest], tuple[datetime | None, str | None]]
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
    candidates: Sequence[WaitRequest],
    now: datetime,
    advisor_predictions: Mapping[int, float],
    history: Sequence[FinishedJob],
    queue: QueueReading,
    records: Sequence[WaitRecord] = (),
) -> list[WaitEstimate]:
    """One estimate per candidate, in order.

    ``advisor_predictions`` maps job ids the advisor advised to their predicted run time in seconds;
    ``history`` (finished jobs) calibrates everyone else's; ``records`` choose the preferred estimator.
    """
    runtimes = estimate_runtimes(queue.snapshot, now, historical_ratios(history), advisor_predictions)
    advisor_starts = predict_starts(
        queue.snapshot, runtimes, [candidate.request for candidate in candidates], now, BACKFILL_WINDOW
    )
    choice = preferred_estimators(records)
    answers = slurm_start_estimates(queue.start_estimate, candidates)
    estimates: list[WaitEstimate] = []
    for candidate, advisor_start, (slurm_start, slurm_error) in zip(
        candidates, advisor_starts, answers, strict=True
    ):
        partition = candidate.request.partitions[0]
        estimates.append(
            WaitEstimate(
                partition=partition,
                slurm_start=slurm_start,
                slurm_error=slurm_error,
                advisor_start=advisor_start,
                slurm_wait_s=_wait(slurm_start, now),
                advisor_wait_s=_wait(advisor_start, now),
                preferred=choice.get(partition, DEFAULT_ESTIMATOR),
            )
        )
    return estimates


def slurm_start_estimates(
    slurm_start: SlurmStart, candidates: Sequence[WaitRequest]
) -> list[tuple[datetime | None, str | None]]:
    """Slurm's start estimate for each candidate, or why it has none.

    Each ``--test-only`` is a round trip to slurmctld; asked side by side they cost about one.
    """
    with ThreadPoolExecutor(max_workers=min(8, max(len(candidates), 1))) as pool:
        return list(pool.map(slurm_start, candidates))


def ask_test_only(client: SlurmClient, candidate: WaitRequest) -> tuple[datetime | None, str | None]:
    """One start estimate, or why none (a request Slurm refuses, an unreachable controller)."""
    try:
        result = client.test_only(candidate.script, [*candidate.options, *sbatch_options(candidate.request)])
    except SlurmError as error:
        return None, str(error)
    return result.start_time, None


def _wait(start: datetime | None, now: datetime) -> float | None:
    return None if start is None else max((start - now).total_seconds(), 0.0)
