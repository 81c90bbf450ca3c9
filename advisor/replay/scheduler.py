"""Slurm's scheduling of one partition, as the discrete-event replay runs it.

Priority is submission order. A pass plans the pending jobs in that order on time limits (running jobs
end at start + limit, as far as Slurm knows): each job takes the earliest slot where it fits without
touching the slots of the jobs before it, and starts if that slot begins now. That is the main
scheduler (jobs in order while they fit) and conservative backfill (a later job starts only where it
delays no earlier one's planned start) in one sweep. Like Slurm's ``bf_window``, a slot that begins
after the window holds no reservation, and like ``bf_max_job_test`` a pass looks at the first jobs of the
queue only (per partition here; Slurm counts over all). Nodes are chosen first-fit in index order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from advisor.replay.model import Decision, Job, Pool, WaitQuery
from advisor.wait.profile import INF, Amount, Profile
from advisor.wait.simulate import BACKFILL_WINDOW


class Backfill(BaseModel):
    """How far a pass plans: Slurm's ``bf_window`` (in the workload's seconds) and ``bf_max_job_test``.

    A replay compared with a real-Slurm one must use that cluster's window in simulated time (its real
    window times the compression).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    window_s: float = Field(default=BACKFILL_WINDOW.total_seconds(), gt=0)
    max_jobs: int = Field(default=500, ge=1)
    limit_resolution_s: float = Field(default=0.0, ge=0)
    """Slurm keeps time limits in whole minutes; in a replay compressed c times a minute is 60c workload
    seconds, so the twin of a compressed run plans on limits rounded up to that (jobs still end at their
    own limit). Zero: limits as given."""

    def planned(self, limit_s: float) -> float:
        """The limit the scheduler plans with."""
        step = self.limit_resolution_s
        return limit_s if step == 0 else math.ceil(limit_s / step - 1e-9) * step


def per_node_gpus(gpus: int, nodes: int) -> int:
    """A job asks whole GPUs on each of its nodes, spread evenly."""
    return math.ceil(gpus / nodes)


@dataclass(slots=True)
class Attempt:
    """One submission of a job: the first, or the rerun after its time limit killed the first."""

    order: int
    """Submission sequence over the whole cluster: the job's priority (lower goes first)."""
    job: Job
    decision: Decision
    limit_s: float
    submitted_s: float
    true_run_s: float
    killed_start_s: float | None = None
    """For a rerun, when the killed first attempt started."""
    start_s: float | None = None
    nodes: list[int] = field(default_factory=list)
    ask: tuple[int, int] = field(init=False)
    """(nodes, GPUs on each)."""

    def __post_init__(self) -> None:
        config = self.decision.config
        self.ask = config.nodes, per_node_gpus(config.gpus, config.nodes)

    @property
    def query(self) -> WaitQuery:
        """What the attempt asks of its partition."""
        config = self.decision.config
        return WaitQuery(
            partition=self.decision.partition, gpus=config.gpus, nodes=config.nodes, time_limit_s=self.limit_s
        )

    @property
    def killed(self) -> bool:
        return self.true_run_s > self.limit_s

    @property
    def end_s(self) -> float:
        """When it really ends: done, or killed at its limit."""
        assert self.start_s is not None, "an attempt ends only after it started"
        return self.start_s + min(self.true_run_s, self.limit_s)


class Partition:
    """One pool's nodes, its running attempts and its queue."""

    def __init__(self, pool: Pool) -> None:
        self.pool = pool
        self.running: list[Attempt] = []
        self.pending: list[Attempt] = []

    def submit(self, attempt: Attempt) -> None:
        """Queue an attempt; one that could never fit is the arm's error, not a job to wait forever."""
        count, gpus = attempt.ask
        if count > self.pool.nodes or gpus > self.pool.gpus_per_node:
            raise ValueError(
                f"{attempt.job.arrival.name} asks {count} node(s) x {gpus} GPUs; "
                f"partition {self.pool.partition} has {self.pool.nodes} x {self.pool.gpus_per_node}"
            )
        self.pending.append(attempt)

    def finish(self, attempt: Attempt) -> None:
        self.running.remove(attempt)

    def schedule(self, now: float, backfill: Backfill) -> list[Attempt]:
        """One scheduling pass at ``now``; returns the attempts it started."""
        profile, free_now = self._profile(now, backfill)
        started: list[Attempt] = []
        for attempt in self.pending[: backfill.max_jobs]:
            if not any(free_now):
                # Nothing can start now, and later slots change nobody's start in this pass.
                break
            begin, nodes = self._reserve(profile, attempt.ask, attempt.limit_s, now, backfill)
            if begin == now:
                attempt.start_s, attempt.nodes = now, nodes
                for node in nodes:
                    free_now[node] -= attempt.ask[1]
                started.append(attempt)
        self.pending = [attempt for attempt in self.pending if attempt.start_s is None]
        self.running.extend(started)
        return started

    def test_only(self, query: WaitQuery, now: float, backfill: Backfill) -> float | None:
        """The start ``sbatch --test-only`` reports: after the slots of the pending jobs a pass plans,
        planned on limits; None when the request never fits the partition."""
        profile, _ = self._profile(now, backfill)
        for attempt in self.pending[: backfill.max_jobs]:
            self._reserve(profile, attempt.ask, attempt.limit_s, now, backfill)
        ask = (query.nodes, per_node_gpus(query.gpus, query.nodes))
        begin, _ = self._earliest(profile, ask, backfill.planned(query.time_limit_s), now)
        return None if begin == INF else begin

    def _profile(self, now: float, backfill: Backfill) -> tuple[Profile, list[int]]:
        """Free GPUs per node over time with running jobs held to their limits, and free GPUs now."""
        capacity = self.pool.gpus_per_node
        held: list[list[tuple[float, Amount]]] = [[] for _ in range(self.pool.nodes)]
        free_now = [capacity] * self.pool.nodes
        for attempt in self.running:
            assert attempt.start_s is not None
            _, gpus = attempt.ask
            for node in attempt.nodes:
                held[node].append((attempt.start_s + backfill.planned(attempt.limit_s), (gpus, 0, 0)))
                free_now[node] -= gpus
        return Profile([(capacity, 0, 0)] * self.pool.nodes, now, held), free_now

    def _reserve(
        self, profile: Profile, ask: tuple[int, int], limit_s: float, now: float, backfill: Backfill
    ) -> tuple[float, list[int]]:
        """The earliest slot, held in the profile when it begins within the window."""
        planned = backfill.planned(limit_s)
        begin, nodes = self._earliest(profile, ask, planned, now)
        if begin <= now + backfill.window_s:
            for node in nodes:
                profile.reserve(node, begin, begin + planned, (ask[1], 0, 0))
        return begin, nodes

    def _earliest(
        self, profile: Profile, ask: tuple[int, int], limit_s: float, now: float
    ) -> tuple[float, list[int]]:
        count, gpus = ask
        if count > self.pool.nodes or gpus > self.pool.gpus_per_node:
            return INF, []
        floors = [now] * self.pool.nodes
        return profile.earliest_on(range(self.pool.nodes), count, (gpus, 0, 0), limit_s, floors, INF)
