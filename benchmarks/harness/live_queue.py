"""The queue of a real replay as an arm sees it at a decision: both wait estimators asked of the live sandbox.

Arms A and B ask Slurm anew at each decision (their ``--test-only`` is what they are). Arm C does not ask
here: a running daemon reads the queue for it (`benchmarks.harness.daemon`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta

from advisor.slurm.client import SlurmClient
from advisor.wait.collect import take_snapshot
from advisor.wait.estimate import ask_test_only, slurm_start_estimates
from advisor.wait.remaining import MIN_REMAINING_S, RatioTable, estimate_runtimes
from advisor.wait.simulate import predict_starts
from advisor.wait.snapshot import SlotRequest
from benchmarks.harness.model import ReplayQuery

#: Real minutes the backfill scheduler (and the advisor's replay of it) looks ahead: a real day.
BACKFILL_WINDOW_MIN = 1440
#: Each job takes one CPU and this much memory per node; nodes have one CPU and this much per GPU, so
#: only GPUs constrain.
JOB_MEMORY_MB = 100


def real_limit(limit_s: float, compression: float) -> timedelta:
    """A simulated limit in real time, rounded up to Slurm's whole minutes."""
    return timedelta(minutes=max(1, math.ceil(limit_s / compression / 60)))


def job_request(query: ReplayQuery, compression: float) -> SlotRequest:
    """What a replayed job asks Slurm for: GPUs spread evenly over its nodes, one CPU and a little memory."""
    return SlotRequest(
        partitions=[query.partition],
        nodes=query.nodes,
        gpus_per_node=math.ceil(query.gpus / query.nodes),
        cpus_per_node=1,
        memory_mb_per_node=JOB_MEMORY_MB,
        time_limit=real_limit(query.time_limit_s, compression),
    )


def simulated_wait(start: datetime | None, now: datetime, compression: float) -> float | None:
    """Whole real seconds, as Slurm reports starts: a start "now" may print a second early or late, and
    compressed that jitter would be ``compression`` seconds of made-up difference between partitions."""
    return None if start is None else max(round((start - now).total_seconds()), 0) * compression


class LiveQueue:
    """Both estimators asked of the live sandbox, in simulated seconds.

    ``predicted_run_s`` maps Slurm job ids to the simulated run time their arm predicted; the replay adds
    to it as it submits, and the advisor's estimator reads it (jobs without a prediction run to their limit).
    """

    def __init__(
        self,
        client: SlurmClient,
        compression: float,
        predicted_run_s: Mapping[int, float],
    ) -> None:
        self._client = client
        self._compression = compression
        self._predicted_run_s = predicted_run_s

    def slurm_waits(self, queries: Sequence[ReplayQuery]) -> list[float | None]:
        now = datetime.now(UTC)
        candidates = [job_request(query, self._compression) for query in queries]
        answers = slurm_start_estimates(lambda candidate: ask_test_only(self._client, candidate), candidates)
        return [simulated_wait(start, now, self._compression) for start, _ in answers]

    def advisor_waits(self, queries: Sequence[ReplayQuery]) -> list[float | None]:
        now = datetime.now(UTC)
        snapshot = take_snapshot(self._client, now)
        predictions = {
            job_id: run_s / self._compression for job_id, run_s in dict(self._predicted_run_s).items()
        }
        runtimes = estimate_runtimes(
            snapshot, now, RatioTable(), predictions, minimum_s=MIN_REMAINING_S / self._compression
        )
        requests = [job_request(query, self._compression) for query in queries]
        starts = predict_starts(snapshot, runtimes, requests, now, timedelta(minutes=BACKFILL_WINDOW_MIN))
        return [simulated_wait(start, now, self._compression) for start in starts]
