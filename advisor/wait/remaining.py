"""How long queued jobs will really run, which is usually much less than the time limit they asked for.

The advisor's own prediction wins for jobs it advised; other jobs get their limit scaled by how much of
their limit similar jobs used in Slurm's history.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict, Field

from advisor.slurm.models import FinishedJob
from advisor.wait.snapshot import QueueSnapshot

#: Below this many finished jobs a median says too little, and the next coarser group is used.
MIN_HISTORY = 5
#: A job never ends sooner than this: a prediction already overrun still leaves the job running now.
MIN_REMAINING_S = 60.0


class RatioTable(BaseModel):
    """Median actual/limit ratios, finest group first: user within partition, partition, cluster."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: partition -> user -> ratio
    by_user: dict[str, dict[str, float]] = {}
    by_partition: dict[str, float] = {}
    overall: float = Field(default=1.0, ge=0.0, le=1.0)

    def ratio(self, user: str, partition: str) -> float:
        return self.by_user.get(partition, {}).get(user, self.by_partition.get(partition, self.overall))


class RuntimeEstimates(BaseModel):
    """Seconds per job id; None means the job may run forever (no time limit, no prediction)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: running jobs: from ``now`` until the job ends
    remaining_s: dict[int, float | None]
    #: pending jobs: from their start until they end
    runtime_s: dict[int, float | None]


def historical_ratios(history: Sequence[FinishedJob], min_jobs: int = MIN_HISTORY) -> RatioTable:
    """Median elapsed/limit of jobs that ran under a limit; a group under ``min_jobs`` falls back."""
    ratios: list[tuple[str, str, float]] = [
        (job.partition, job.user, min(job.elapsed / job.time_limit, 1.0))
        for job in history
        if job.start_time is not None and job.time_limit
    ]
    by_partition: dict[str, list[float]] = defaultdict(list)
    by_user: dict[tuple[str, str], list[float]] = defaultdict(list)
    for partition, user, ratio in ratios:
        by_partition[partition].append(ratio)
        by_user[partition, user].append(ratio)
    user_table: dict[str, dict[str, float]] = defaultdict(dict)
    for (partition, user), values in by_user.items():
        if len(values) >= min_jobs:
            user_table[partition][user] = statistics.median(values)
    return RatioTable(
        by_user=dict(user_table),
        by_partition={
            partition: statistics.median(values)
            for partition, values in by_partition.items()
            if len(values) >= min_jobs
        },
        overall=statistics.median(ratio for *_, ratio in ratios) if len(ratios) >= min_jobs else 1.0,
    )


def remaining_seconds(
    *,
    time_limit: timedelta | None,
    elapsed: timedelta,
    ratio: float,
    predicted_total_s: float | None,
    minimum_s: float = MIN_REMAINING_S,
) -> float | None:
    """Predicted seconds left: at least ``minimum_s``, never past the limit (where Slurm kills the job)."""
    if predicted_total_s is not None:
        expected = predicted_total_s
    elif time_limit is not None:
        expected = time_limit.total_seconds() * ratio
    else:
        return None
    left = max(expected - elapsed.total_seconds(), minimum_s)
    if time_limit is None:
        return left
    return max(min(left, (time_limit - elapsed).total_seconds()), 0.0)


def estimate_runtimes(
    snapshot: QueueSnapshot,
    now: datetime,
    ratios: RatioTable,
    advisor_predictions: Mapping[int, float],
    minimum_s: float = MIN_REMAINING_S,
) -> RuntimeEstimates:
    """Remaining time of every running job and run time of every pending one, as seen at ``now``."""
    remaining = {
        job.job_id: remaining_seconds(
            time_limit=job.time_limit,
            elapsed=max(now - job.start_time, timedelta(0)),
            ratio=ratios.ratio(job.user, job.partition),
            predicted_total_s=advisor_predictions.get(job.job_id),
            minimum_s=minimum_s,
        )
        for job in snapshot.running
    }
    runtime = {
        job.job_id: remaining_seconds(
            time_limit=job.request.time_limit,
            elapsed=timedelta(0),
            ratio=ratios.ratio(job.user, job.request.partitions[0]),
            predicted_total_s=advisor_predictions.get(job.job_id),
            minimum_s=minimum_s,
        )
        for job in snapshot.pending
    }
    return RuntimeEstimates(remaining_s=remaining, runtime_s=runtime)
