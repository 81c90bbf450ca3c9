"""Slurm's scheduling of one partition, as the discrete-event replay runs it.

Priority is submission order. A pass plans the pending jobs in that order on time limits (running jobs
end at start + limit, as far as Slurm knows): each job takes the earliest slot where it fits without
touching the slots of the jobs before it, and starts if that slot begins now. That is the main
scheduler (jobs in order while they fit) and conservative backfill (a later job starts only where it
delays no earlier one's planned start) in one sweep. Like Slurm's ``bf_window``, a slot that begins
after the window holds no reservation, and like ``bf_max_job_test`` a pass looks at the first jobs of the
queue only (per partition here; Slurm counts over all). Nodes are chosen as ``select/cons_tres`` chooses
them for these jobs (`best_fit`). Where only backfill passes start jobs, a pass goes over every
partition's queue in one priority order (`cluster_pass`), as Slurm's does: a job's will-run walk then sees
the jobs started before it in the pass, in any partition, and not those after it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from advisor.wait.profile import INF, Amount, Profile
from benchmarks.harness.backfill import Backfill
from benchmarks.harness.model import Job, Pool, ReplayDecision, ReplayQuery


def per_node_gpus(gpus: int, nodes: int) -> int:
    """A job asks whole GPUs on each of its nodes, spread evenly."""
    return math.ceil(gpus / nodes)


@dataclass(slots=True)
class Attempt:
    """One submission of a job: the first, or the rerun after its time limit killed the first."""

    order: int
    """Submission sequence over the whole cluster: the job's priority (lower goes first)."""
    job: Job
    decision: ReplayDecision
    limit_s: float
    submitted_s: float
    true_run_s: float
    killed_start_s: float | None = None
    """For a rerun, when the killed first attempt started."""
    held_s: float = 0.0
    """How long past its run it holds its nodes (Slurm launching and reaping it)."""
    start_s: float | None = None
    nodes: list[int] = field(default_factory=list)
    ask: tuple[int, int] = field(init=False)
    """(nodes, GPUs on each)."""

    def __post_init__(self) -> None:
        config = self.decision.config
        self.ask = config.nodes, per_node_gpus(config.gpus, config.nodes)

    @property
    def query(self) -> ReplayQuery:
        """What the attempt asks of its partition."""
        return self.decision.query(self.limit_s)

    @property
    def killed(self) -> bool:
        return self.true_run_s > self.limit_s

    @property
    def end_s(self) -> float:
        """When it really ends: done, or killed at its limit."""
        assert self.start_s is not None, "an attempt ends only after it started"
        return self.start_s + min(self.true_run_s, self.limit_s) + self.held_s


class SimPartition:
    """One pool's nodes, its running attempts and its queue.

    A pass and ``--test-only`` read the same plan: the slots of the first ``max_jobs`` pending attempts.
    It is kept between events, since it changes only when a job ends, or when the queue's first jobs
    change (a start, a submission within the depth), or as time moves a slot into the window; a start
    keeps it (a started job holds what it reserved), and jobs that move up into the depth are planned on
    top. On a long queue most events then cost a few slots rather than a whole pass.
    """

    def __init__(self, pool: Pool, backfill: Backfill) -> None:
        self.pool = pool
        self.backfill = backfill
        self.running: list[Attempt] = []
        self.pending: list[Attempt] = []
        self._used = [0] * pool.nodes
        self._plan: _Plan | None = None
        self._whole: Amount = (pool.gpus_per_node, pool.gpus_per_node, 0)
        """A node's GPUs and CPUs (the sandbox gives a node a CPU per GPU)."""
        self._slots: list[tuple[float, float, list[int]]] = []
        """The kept plan's later slots (begin, end, nodes): the will-run test leaves their nodes out."""
        self.neighbours: list[SimPartition] = []
        """The cluster's other partitions, whose running jobs Slurm's will-run test walks past (see
        ``_batched``): a start or an end there can move this partition's later slots."""

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
        for node in attempt.nodes:
            self._used[node] -= attempt.ask[1]
        self._plan = None

    def forget_plan(self) -> None:
        """A neighbour's running jobs changed: the next pass plans anew."""
        self._plan = None

    def schedule(self, now: float, in_order: bool = False) -> list[Attempt]:
        """One scheduling pass at ``now``; returns the attempts it started. ``in_order``: Slurm's main
        scheduler, which starts jobs in priority order while they fit now and backfills none."""
        if all(used == self.pool.gpus_per_node for used in self._used):
            return []  # nothing can start now
        if in_order:
            starting = self._in_order(now)
        else:
            plan = self._plan_at(now, until_full=True)
            starting = plan.starting
        started = []
        for attempt, nodes in starting:
            attempt.start_s, attempt.nodes = now, nodes
            for node in nodes:
                self._used[node] += attempt.ask[1]
            started.append(attempt)
        if started:
            # Started attempts are at the head of the queue or among the planned ones. The plan goes: its
            # earlier slots were chosen before these held their nodes, and Slurm's next pass plans with them
            # running (a later slot's best fit can differ).
            self.pending = [attempt for attempt in self.pending if attempt.start_s is None]
            self.running.extend(started)
            self._plan = None
        return started

    def open_pass(self, now: float) -> list[Attempt]:
        """A backfill pass's queue here, to be planned job by job (`plan_next`) in the cluster's priority
        order (`cluster_pass`)."""
        self._plan, self._slots = _Plan(self._profile(now), now), []
        return self.pending[: self.backfill.max_jobs]

    def plan_next(self, attempt: Attempt, now: float) -> bool:
        """Plan ``attempt``, the next of this pass's queue, and start it if its slot begins now."""
        plan = self._plan
        assert plan is not None, "a pass is open"
        begin, nodes = self._reserve(plan.profile, attempt.ask, attempt.limit_s, now)
        plan.add(attempt, begin, nodes, now, self.backfill.window_s)
        if now < begin <= now + self.backfill.window_s:
            self._slots.append((begin, begin + self.backfill.planned(attempt.limit_s), nodes))
        if begin != now:
            return False
        attempt.start_s, attempt.nodes = now, nodes
        for node in nodes:
            self._used[node] += attempt.ask[1]
        self.running.append(attempt)
        return True

    def close_pass(self) -> None:
        self.pending = [attempt for attempt in self.pending if attempt.start_s is None]
        self._plan = None

    def _in_order(self, now: float) -> list[tuple[Attempt, list[int]]]:
        profile, starting = self._profile(now), []
        for attempt in self.pending[: self.backfill.max_jobs]:
            begin, nodes = self._reserve(profile, attempt.ask, attempt.limit_s, now)
            if begin != now:
                break
            starting.append((attempt, nodes))
        return starting

    def test_only(self, query: ReplayQuery, now: float) -> float | None:
        """The start ``sbatch --test-only`` reports: after the slots of the pending jobs a pass plans,
        planned on limits; None when the request never fits the partition."""
        profile = self._plan_at(now).profile
        ask = (query.nodes, per_node_gpus(query.gpus, query.nodes))
        begin, _ = self._earliest(profile, ask, self.backfill.planned(query.time_limit_s), now)
        return None if begin == INF else begin

    def _plan_at(self, now: float, until_full: bool = False) -> _Plan:
        """The plan at ``now``: the kept one while it still holds, with the jobs not yet in it planned
        on top; else a new one. ``until_full``: a pass stops once no GPU is free now, since no later job
        can start now; the rest is planned when ``--test-only`` asks."""
        plan = self._plan
        if plan is None or not plan.holds_at(now, self.backfill.window_s):
            plan = self._plan = _Plan(self._profile(now), now)
            self._slots = []
        plan.as_of = now
        free = sum(self.pool.gpus_per_node - used for used in self._used)
        free -= sum(attempt.ask[1] * len(nodes) for attempt, nodes in plan.starting)
        for attempt in self.pending[plan.planned : self.backfill.max_jobs]:
            if until_full and free == 0:
                break
            begin, nodes = self._reserve(plan.profile, attempt.ask, attempt.limit_s, now)
            plan.add(attempt, begin, nodes, now, self.backfill.window_s)
            if now < begin <= now + self.backfill.window_s:
                self._slots.append((begin, begin + self.backfill.planned(attempt.limit_s), nodes))
            if begin == now:
                free -= attempt.ask[1] * len(nodes)
        return plan

    def _profile(self, now: float) -> Profile:
        """Free GPUs per node over time with running jobs held to their limits."""
        held: list[list[tuple[float, Amount]]] = [[] for _ in range(self.pool.nodes)]
        for attempt in self.running:
            assert attempt.start_s is not None
            for node in attempt.nodes:
                held[node].append(
                    (self.backfill.planned_end(attempt.start_s, attempt.limit_s), _held(attempt.ask))
                )
        return Profile([self._whole] * self.pool.nodes, now, held)

    def _reserve(
        self, profile: Profile, ask: tuple[int, int], limit_s: float, now: float
    ) -> tuple[float, list[int]]:
        """The earliest slot, held in the profile when it begins within the window."""
        planned = self.backfill.planned(limit_s)
        begin, nodes = self._earliest(profile, ask, planned, now)
        if begin <= now + self.backfill.window_s:
            # Slurm's backfill holds a later slot's nodes whole (its ``node_space`` is a node bitmap per
            # time); a job starting now holds its share of them, to its planned end as Slurm keeps it.
            amount = _held(ask) if begin == now else self._whole
            for node in nodes:
                profile.reserve(node, begin, self.backfill.planned_end(begin, limit_s), amount)
        return begin, nodes

    def _earliest(
        self, profile: Profile, ask: tuple[int, int], limit_s: float, now: float
    ) -> tuple[float, list[int]]:
        count, gpus = ask
        if count > self.pool.nodes or gpus > self.pool.gpus_per_node:
            return INF, []
        amount = _held(ask)
        begin, first = profile.earliest_on(
            range(self.pool.nodes), count, amount, limit_s, [now] * self.pool.nodes, INF
        )
        batched = self._batched(begin, now, limit_s)
        if batched > begin:
            floors = [batched] * self.pool.nodes
            begin, first = profile.earliest_on(range(self.pool.nodes), count, amount, limit_s, floors, INF)
        if begin == INF:
            return begin, first
        usable = [
            node
            for node in range(self.pool.nodes)
            if profile.earliest(node, amount, limit_s, begin, begin) == begin
        ]
        return begin, best_fit(usable, count)

    def _batched(self, begin: float, now: float, limit_s: float) -> float:
        """The start Slurm's will-run test plans for a slot the profile finds at ``begin`` (see
        ``Backfill.will_run_batch_s``): the last planned end of the batch of running jobs that reaches it.

        As in Slurm 22.05's ``_will_run_test``, the walk goes over every running job of the cluster by
        planned end and frees this partition's on nodes no earlier slot holds over ``limit_s`` from
        ``begin``; a batch ends where the job after the one just freed ends past the mark, so another job
        within the mark (a neighbour's with ``will_run_walk``, or one on a held node) carries the walk on
        to the next job it frees, wherever that one ends."""
        window = self.backfill.will_run_batch_s
        if window == 0 or begin <= now or begin == INF:
            return begin
        # Slurm frees only jobs on the nodes the job may use: not those earlier slots hold meanwhile.
        held = {
            node
            for start, end, nodes in self._slots
            if start < begin + limit_s and end > begin
            for node in nodes
        }
        ends = sorted(
            (
                self.backfill.planned_end(attempt.start_s, attempt.limit_s),
                attempt.order,
                partition is self and not held.issuperset(attempt.nodes),
            )
            for partition in [self, *self.neighbours]
            for attempt in partition.running
            if attempt.start_s is not None
        )
        origin, mark, last = self.backfill.will_run_origin_s, INF, -INF
        for index, (end, _, mine) in enumerate(ends):
            if not mine:
                continue
            if mark == INF:  # the first end, rounded up to the clock's next multiple of the window
                mark = origin + (math.floor((end - origin) / window) + 1) * window
            last = end
            following = ends[index + 1][0] if index + 1 < len(ends) else INF
            if following > mark + window:  # the batch ends here, and Slurm tests the slot
                if last >= begin:
                    return last
                window *= 2
                while following != INF and following > mark + window:
                    window *= 2
        return last if last >= begin else begin


@dataclass(slots=True)
class _Plan:
    """The slots of the queue's first ``planned`` attempts as of ``as_of``, on the profile they hold.

    Slots begin where resources free up: at a running job's planned end, or after another slot. Until an
    event touches the partition, each slot's search from a later time therefore finds the same slot, so
    the plan stays exact while no slot begins by then (``first_begin``) and no slot left out of the
    window enters it (``first_unreserved``).
    """

    profile: Profile
    as_of: float
    planned: int = 0
    starting: list[tuple[Attempt, list[int]]] = field(default_factory=list)
    """Attempts whose slot begins at ``as_of``, and its nodes: a pass starts them."""
    first_begin: float = INF
    first_unreserved: float = INF

    def holds_at(self, now: float, window_s: float) -> bool:
        if now == self.as_of:
            return True
        return not self.starting and now < self.first_begin and now + window_s < self.first_unreserved

    def add(self, attempt: Attempt, begin: float, nodes: list[int], now: float, window_s: float) -> None:
        self.planned += 1
        if begin == now:
            self.starting.append((attempt, nodes))
            return
        self.first_begin = min(self.first_begin, begin)
        if begin > now + window_s:
            self.first_unreserved = min(self.first_unreserved, begin)


def cluster_pass(partitions: list[SimPartition], now: float) -> list[Attempt]:
    """One backfill pass over the whole cluster, as Slurm's goes: every partition's queue in one priority
    order, each job planned (and started, where its slot begins now) on what the jobs before it left, so
    the will-run walk of a job sees the jobs started before it in this pass, in any partition, and not
    those after it. Returns the attempts started."""
    queue = sorted(
        ((attempt, partition) for partition in partitions for attempt in partition.open_pass(now)),
        key=lambda pair: pair[0].order,
    )
    started = [attempt for attempt, partition in queue if partition.plan_next(attempt, now)]
    for partition in partitions:
        partition.close_pass()
    return started


def _held(ask: tuple[int, int]) -> Amount:
    """What a replayed job holds on each of its nodes: its GPUs and one CPU (`live_queue.job_request`)."""
    return (ask[1], 1, 0)


def best_fit(usable: list[int], count: int) -> list[int]:
    """``count`` of the ``usable`` nodes (ascending), as Slurm 22.05's ``select/cons_tres`` picks them for a
    replayed job: runs of consecutive usable nodes, the shortest run with enough nodes, the first of equals,
    and its first nodes; with no run long enough, the longest (the first of equals) whole, then again.

    ``_eval_nodes`` takes the run with the fewest usable CPUs, and in it the node with the fewest, but a
    node's usable CPUs are capped at the job's tasks on it times its CPUs per task
    (``gres_select_filter_sock_core``): one for a replayed job (one task of one CPU per node), so every
    usable node counts one, and how full a node is does not matter."""
    runs: list[list[int]] = []
    for node in usable:
        if runs and runs[-1][-1] == node - 1:
            runs[-1].append(node)
        else:
            runs.append([node])
    chosen: list[int] = []
    while len(chosen) < count and runs:
        left = count - len(chosen)
        enough = [run for run in runs if len(run) >= left]
        run = min(enough, key=len) if enough else max(runs, key=len)
        runs.remove(run)
        chosen += run[:left]
    return sorted(chosen)
