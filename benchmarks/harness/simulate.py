"""The fast replay: the same arms and policies as on the real sandbox, on a discrete-event clock.

Events are job ends and arrivals (arrivals in time order; at one instant, ends first). In real time, after
every event the partition it touched gets a scheduling pass (see ``scheduler``), like Slurm's
event-triggered scheduling. The twin of a compressed real run schedules as the replay's cluster does
(`Backfill.main_scheduler` off): only backfill passes start jobs, at the real run's own pass times, each
over the whole cluster in priority order (`cluster_pass`), and each job holds its nodes past its run as
long as it did there (`AsRun`). A job killed by its time limit is resubmitted once, at that moment, with
the user's own limit.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from advisor.recommend.cluster import SNAPSHOT_FRESH_FOR, TEST_ONLY_FRESH_FOR
from advisor.wait.remaining import RatioTable, estimate_runtimes
from advisor.wait.simulate import predict_starts
from advisor.wait.snapshot import (
    Allocation,
    PendingJob,
    QueueSnapshot,
    RunningJob,
    SlotRequest,
    SnapshotNode,
)
from benchmarks.harness.backfill import Backfill
from benchmarks.harness.model import (
    Arm,
    ArmName,
    AsRun,
    Inventory,
    Job,
    QueueView,
    ReplayDecision,
    ReplayOutcome,
    ReplayQuery,
    TrueRunTime,
)
from benchmarks.harness.scheduler import Attempt, SimPartition, cluster_pass, per_node_gpus

#: Where the simulated clock's second 0 falls, for the advisor's datetime-based queue replay.
EPOCH = datetime(2000, 1, 1, tzinfo=UTC)

#: Slurm's own backfill settings.
SLURM_DEFAULTS = Backfill()

Cluster = Mapping[str, SimPartition]
"""Partition name -> its state."""


def simulate(
    jobs: Sequence[Job],
    arm: Arm,
    arm_name: ArmName,
    inventory: Inventory,
    truth: TrueRunTime,
    *,
    backfill: Backfill = SLURM_DEFAULTS,
    as_run: AsRun | None = None,
    caches: DaemonCaches | None = None,
) -> list[ReplayOutcome]:
    """Every job's outcome under one arm, in arrival order.

    ``as_run``: the twin of a real run submits each job when that run did (by job name; a real run's
    decisions took real time), and each holds its nodes past its run as long as there. ``caches``: the
    arm sees the queue through a daemon's caches, as old as they may be.
    """
    cluster = {pool.partition: SimPartition(pool, backfill) for pool in inventory.pools}
    if backfill.will_run_batch_s and backfill.will_run_walk:
        for partition in cluster.values():
            partition.neighbours = [other for other in cluster.values() if other is not partition]
    as_run = as_run or AsRun()
    delays = as_run.submitted_at
    if delays and len({job.arrival.name for job in jobs}) < len(jobs):
        raise ValueError("submission times are given by job name, and the names repeat")

    def submitted(job: Job) -> float:
        return max(job.arrival.time_s, delays.get(job.arrival.name, job.arrival.time_s))

    arrivals = sorted(jobs, key=submitted)
    events = _Events(cluster, arm_name, backfill, as_run)
    position, now = 0, 0.0
    while position < len(arrivals) or events.ends or events.next_pass(now) < math.inf:
        tick = events.next_pass(now)
        now = min(
            events.ends[0][0] if events.ends else math.inf,
            submitted(arrivals[position]) if position < len(arrivals) else math.inf,
            tick,
        )
        touched = events.end_jobs(now)
        if now == tick and not backfill.main_scheduler:
            events.started(cluster_pass(list(cluster.values()), now))
        elif now == tick:
            events.run_passes(list(cluster.values()), now)
        else:
            events.between_passes(touched, now)
        while position < len(arrivals) and submitted(arrivals[position]) == now:
            job = arrivals[position]
            position += 1
            queue = SimulatedQueue(cluster, now, backfill)
            decision = arm(job, queue if caches is None else caches.view(queue))
            events.submit(job, decision, truth(job, decision.config), now)
    return [events.outcomes[id(job)] for job in arrivals]


@dataclass
class _Events:
    """The replay's jobs in flight: their ends by time, and the passes their events call for.

    Between backfill passes (``Backfill.pass_times_s`` and ``pass_interval_s``, Slurm's ``bf_interval``;
    none: a full pass at every event) only the main scheduler starts jobs, in priority order, or none
    where it is off (``Backfill.main_scheduler``)."""

    cluster: Cluster
    arm_name: ArmName
    backfill: Backfill
    as_run: AsRun
    ends: list[tuple[float, int, Attempt]] = field(default_factory=list)
    orders: Iterator[int] = field(default_factory=itertools.count)
    outcomes: dict[int, ReplayOutcome] = field(default_factory=dict)
    """By id of the job: names need not be unique."""

    @property
    def timed(self) -> bool:
        """Whether passes come on a clock of their own rather than at every event."""
        return bool(self.backfill.pass_interval_s or self.backfill.pass_times_s)

    def next_pass(self, now: float) -> float:
        """When the next backfill pass comes after ``now``; never while no job waits."""
        if not self.timed or not any(partition.pending for partition in self.cluster.values()):
            return math.inf
        times, interval = self.backfill.pass_times_s, self.backfill.pass_interval_s
        following = bisect.bisect_right(times, now)
        if following < len(times):
            return times[following]
        return (math.floor(now / interval) + 1) * interval if interval else math.inf

    def between_passes(self, partitions: Sequence[SimPartition], now: float) -> None:
        """An event's scheduling: a full pass, or the main scheduler's in-order starts between timed
        passes, or nothing where only passes start jobs."""
        if not self.timed:
            self.run_passes(partitions, now)
        elif self.backfill.main_scheduler:
            self.run_passes(partitions, now, in_order=True)

    def run_passes(self, partitions: Sequence[SimPartition], now: float, in_order: bool = False) -> None:
        """A pass on each; a backfill pass's start replans its neighbours too."""
        waiting = list(partitions)
        while waiting:
            started = waiting.pop(0).schedule(now, in_order)
            self.started(started)
            for other in (
                _partition(self.cluster, started[0].decision.partition).neighbours if started else []
            ):
                other.forget_plan()
                if other not in waiting and not in_order:
                    waiting.append(other)

    def started(self, attempts: Sequence[Attempt]) -> None:
        for attempt in attempts:
            heapq.heappush(self.ends, (attempt.end_s, attempt.order, attempt))

    def end_jobs(self, now: float) -> list[SimPartition]:
        """The attempts that end at ``now`` leave (a killed first one is rerun); the partitions touched."""
        touched: dict[str, SimPartition] = {}
        while self.ends and self.ends[0][0] == now:
            attempt = heapq.heappop(self.ends)[2]
            partition = self.cluster[attempt.decision.partition]
            partition.finish(attempt)
            for other in [partition, *partition.neighbours]:
                other.forget_plan()
                touched[other.pool.partition] = other
            if attempt.killed and attempt.killed_start_s is None:
                partition.submit(_rerun(attempt, next(self.orders), now))  # held as long as the first
            else:
                self.outcomes[id(attempt.job)] = _outcome(attempt, self.arm_name)
        return list(touched.values())

    def submit(self, job: Job, decision: ReplayDecision, true_run_s: float, now: float) -> None:
        partition = _partition(self.cluster, decision.partition)
        attempt = Attempt(next(self.orders), job, decision, decision.time_limit_s, now, true_run_s)
        attempt.held_s = self.as_run.held(job.arrival.name)
        partition.submit(attempt)
        self.between_passes([partition], now)


@dataclass(frozen=True, slots=True)
class SimulatedQueue:
    """The ``QueueView`` an arm gets at a submission: both estimators over the simulator's state."""

    cluster: Cluster
    now: float
    backfill: Backfill

    def slurm_waits(self, queries: Sequence[ReplayQuery]) -> list[float | None]:
        starts = [_partition(self.cluster, query.partition).test_only(query, self.now) for query in queries]
        return [None if start is None else start - self.now for start in starts]

    def advisor_waits(self, queries: Sequence[ReplayQuery]) -> list[float | None]:
        """The advisor's own backfill replay on a snapshot of this instant, the same function the
        real-Slurm runner calls on a real snapshot."""
        return self.replayed(snapshot_of(self.cluster, self.now, self.backfill), queries)

    def replayed(self, snapshot: QueueSnapshot, queries: Sequence[ReplayQuery]) -> list[float | None]:
        """The advisor's waits from ``snapshot`` (taken now or earlier), from now on."""
        now = _clock(self.now)
        predictions = predictions_of(self.cluster, self.backfill.max_jobs)
        runtimes = estimate_runtimes(snapshot, now, RatioTable(), predictions)
        requests = [_request(query, self.backfill) for query in queries]
        window = timedelta(seconds=self.backfill.window_s)
        starts = predict_starts(snapshot, runtimes, requests, now, window)
        return [None if start is None else (start - now).total_seconds() for start in starts]


class DaemonCaches:
    """The daemon's freshness windows (`advisor.recommend.cluster`) over the simulated queue: one queue
    reading serves every decision for ``SNAPSHOT_FRESH_FOR``, each ``--test-only`` start every decision
    asking the same resources for ``TEST_ONLY_FRESH_FOR``, in real seconds that are ``compression``
    workload seconds each (a real run's daemon keeps them so)."""

    def __init__(self, compression: float) -> None:
        self.snapshot_s = SNAPSHOT_FRESH_FOR.total_seconds() * compression
        self.test_only_s = TEST_ONLY_FRESH_FOR.total_seconds() * compression
        self.starts: dict[ReplayQuery, tuple[float, float | None]] = {}
        """Query -> (when asked, the start it got)."""
        self.snapshot: tuple[float, QueueSnapshot] | None = None

    def view(self, queue: SimulatedQueue) -> QueueView:
        return _Cached(self, queue)


@dataclass(frozen=True, slots=True)
class _Cached:
    caches: DaemonCaches
    queue: SimulatedQueue

    def slurm_waits(self, queries: Sequence[ReplayQuery]) -> list[float | None]:
        """A start asked within the window stands, however the queue moved since (none before now)."""
        now, starts, window = self.queue.now, self.caches.starts, self.caches.test_only_s
        stale = [q for q in dict.fromkeys(queries) if q not in starts or now - starts[q][0] >= window]
        for query, wait in zip(stale, self.queue.slurm_waits(stale), strict=True):
            starts[query] = (now, None if wait is None else now + wait)
        found = [starts[query][1] for query in queries]
        return [None if start is None else max(start - now, 0.0) for start in found]

    def advisor_waits(self, queries: Sequence[ReplayQuery]) -> list[float | None]:
        queue, kept = self.queue, self.caches.snapshot
        if kept is None or queue.now - kept[0] >= self.caches.snapshot_s:
            kept = self.caches.snapshot = (queue.now, snapshot_of(queue.cluster, queue.now, queue.backfill))
        return queue.replayed(kept[1], queries)


def snapshot_of(cluster: Cluster, now: float, backfill: Backfill) -> QueueSnapshot:
    """The queue at ``now`` as the advisor's wait estimator reads it from Slurm (limits as Slurm keeps
    them); node ``i`` of a partition is ``<partition>-<i>``, job ids are submission orders and users are
    job names.

    Pending jobs: the first ``max_jobs`` of each partition, as deep as a backfill pass (Slurm's
    ``bf_max_job_test``) and ``--test-only`` look. Replaying the whole queue at every arrival made long
    queues quadratic (the Philly trace queues tens of thousands); a deeper queue's waits come out short.
    """
    return QueueSnapshot(
        taken_at=_clock(now),
        nodes=[
            SnapshotNode(
                name=node, gpus=partition.pool.gpus_per_node, cpus=partition.pool.gpus_per_node, memory_mb=0
            )
            for partition in cluster.values()
            for node in _node_names(partition)
        ],
        partitions={name: _node_names(partition) for name, partition in cluster.items()},
        running=[
            _running(attempt, backfill) for partition in cluster.values() for attempt in partition.running
        ],
        pending=[
            PendingJob(
                job_id=attempt.order, user=attempt.job.arrival.name, request=_request(attempt.query, backfill)
            )
            for attempt in sorted(
                (
                    attempt
                    for partition in cluster.values()
                    for attempt in partition.pending[: backfill.max_jobs]
                ),
                key=lambda attempt: attempt.order,
            )
        ],
    )


def predictions_of(cluster: Cluster, depth: int) -> dict[int, float]:
    """Run times the arms predicted, by snapshot job id: what the advisor knows of the jobs it advised
    (running, and the first ``depth`` pending of each partition, as the snapshot holds them)."""
    return {
        attempt.order: attempt.decision.predicted_run_s
        for partition in cluster.values()
        for attempt in [*partition.running, *partition.pending[:depth]]
        if attempt.decision.predicted_run_s is not None
    }


def _node_names(partition: SimPartition) -> list[str]:
    return [f"{partition.pool.partition}-{index}" for index in range(partition.pool.nodes)]


def _running(attempt: Attempt, backfill: Backfill) -> RunningJob:
    assert attempt.start_s is not None, "a running attempt has started"
    partition = attempt.decision.partition
    _, gpus = attempt.ask
    return RunningJob(
        job_id=attempt.order,
        user=attempt.job.arrival.name,
        partition=partition,
        start_time=_clock(attempt.start_s),
        time_limit=timedelta(seconds=backfill.planned(attempt.limit_s)),
        allocations=[
            Allocation(node=f"{partition}-{node}", gpus=gpus, cpus=1, memory_mb=0) for node in attempt.nodes
        ],
    )


def _request(query: ReplayQuery, backfill: Backfill) -> SlotRequest:
    return SlotRequest(
        partitions=[query.partition],
        nodes=query.nodes,
        gpus_per_node=per_node_gpus(query.gpus, query.nodes),
        time_limit=timedelta(seconds=backfill.planned(query.time_limit_s)),
    )


def _partition(cluster: Cluster, name: str) -> SimPartition:
    if name not in cluster:
        raise ValueError(f"no partition {name!r} in the inventory ({', '.join(cluster)})")
    return cluster[name]


def _rerun(killed: Attempt, order: int, now: float) -> Attempt:
    """The user resubmits the killed job from the start, with the limit they usually write."""
    return Attempt(
        order,
        killed.job,
        killed.decision,
        killed.job.user_limit_s,
        now,
        killed.true_run_s,
        killed_start_s=killed.start_s,
        held_s=killed.held_s,
    )


def _outcome(attempt: Attempt, arm_name: ArmName) -> ReplayOutcome:
    assert attempt.start_s is not None
    return ReplayOutcome(
        name=attempt.job.arrival.name,
        arm=arm_name,
        arrival_s=attempt.job.arrival.time_s,
        start_s=attempt.start_s,
        end_s=attempt.end_s,
        decision=attempt.decision,
        true_run_s=attempt.true_run_s,
        timed_out=attempt.killed or attempt.killed_start_s is not None,
        killed_start_s=attempt.killed_start_s,
    )


def _clock(seconds: float | None) -> datetime:
    assert seconds is not None
    return EPOCH + timedelta(seconds=seconds)
