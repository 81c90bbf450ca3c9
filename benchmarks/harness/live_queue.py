"""The queue of a real replay as an arm sees it at a decision: both wait estimators asked of the live sandbox.

Arms A and B ask Slurm anew at each decision (their ``--test-only`` is what they are). Arm C asks as a job
reaching the deployed daemon does: through the daemon's own `ClusterView`, which reads the queue once for
every request of a few seconds, shares each ``--test-only`` answer between requests for the same resources,
and lets concurrent identical questions wait on one fetch (single-flight). Its freshness windows are the
daemon's, in the workload's seconds (a compressed clock): on a real cluster a 5-second-old queue is 5
seconds old, and so it is here, not 5 x ``compression``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta

from advisor.recommend.cluster import ClusterView
from advisor.slurm.client import SlurmClient
from advisor.wait.collect import take_snapshot
from advisor.wait.estimate import WaitRequest, ask_test_only, slurm_start_estimates
from advisor.wait.remaining import MIN_REMAINING_S, RatioTable, estimate_runtimes
from advisor.wait.simulate import predict_starts
from advisor.wait.snapshot import QueueSnapshot, SlotRequest
from benchmarks.harness.model import WaitQuery

#: Real minutes the backfill scheduler (and the advisor's replay of it) looks ahead: a real day.
BACKFILL_WINDOW_MIN = 1440
#: Each job takes one CPU and this much memory per node; nodes have one CPU and this much per GPU, so
#: only GPUs constrain.
JOB_MEMORY_MB = 100


def real_limit(limit_s: float, compression: float) -> timedelta:
    """A simulated limit in real time, rounded up to Slurm's whole minutes."""
    return timedelta(minutes=max(1, math.ceil(limit_s / compression / 60)))


def job_request(query: WaitQuery, compression: float) -> SlotRequest:
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


def compressed_clock(compression: float) -> Callable[[], datetime]:
    """A clock that runs ``compression`` times faster than the real one, from now: the workload's time."""
    began = datetime.now(UTC)
    return lambda: began + (datetime.now(UTC) - began) * compression


class LiveQueue:
    """Both estimators asked of the live sandbox, in simulated seconds.

    ``predicted_run_s`` maps Slurm job ids to the simulated run time their arm predicted; the replay adds
    to it as it submits, and the advisor's estimator reads it (jobs without a prediction run to their limit).
    ``daemon``: the daemon's caches to ask through (arm C); None asks Slurm anew each time.
    """

    def __init__(
        self,
        client: SlurmClient,
        compression: float,
        predicted_run_s: Mapping[int, float],
        daemon: ClusterView | None = None,
    ) -> None:
        self._client = client
        self._compression = compression
        self._predicted_run_s = predicted_run_s
        self._daemon = daemon

    def slurm_waits(self, queries: Sequence[WaitQuery]) -> list[float | None]:
        now = datetime.now(UTC)
        candidates = [WaitRequest(request=job_request(query, self._compression)) for query in queries]
        daemon = self._daemon
        answers = slurm_start_estimates(
            (lambda candidate: ask_test_only(self._client, candidate))
            if daemon is None
            else (lambda candidate: daemon.start_estimate(candidate, None)),
            candidates,
        )
        return [simulated_wait(start, now, self._compression) for start, _ in answers]

    def advisor_waits(self, queries: Sequence[WaitQuery]) -> list[float | None]:
        now = datetime.now(UTC)
        snapshot = self._snapshot(now)
        predictions = {
            job_id: run_s / self._compression for job_id, run_s in dict(self._predicted_run_s).items()
        }
        runtimes = estimate_runtimes(
            snapshot, now, RatioTable(), predictions, minimum_s=MIN_REMAINING_S / self._compression
        )
        requests = [job_request(query, self._compression) for query in queries]
        starts = predict_starts(snapshot, runtimes, requests, now, timedelta(minutes=BACKFILL_WINDOW_MIN))
        return [simulated_wait(start, now, self._compression) for start in starts]

    def _snapshot(self, now: datetime) -> QueueSnapshot:
        """The daemon's shared reading where arm C asks through it (its ``now`` is the reading's own: a
        shared snapshot is as old as the daemon lets it be), else a fresh one."""
        if self._daemon is None:
            return take_snapshot(self._client, now)
        return self._daemon.snapshot(now)
