"""When would a candidate job start? A replay of Slurm's backfill scheduler over predicted run times.

At every moment a job ends (by prediction), a scheduling pass runs as Slurm's would: pending jobs in
priority order start now if they fit, otherwise reserve the earliest slot where they fit; a lower job
starts now only where it delays no reservation. Slurm plans with time limits, so the pass does too;
jobs still end at their predicted times, which is what makes the estimate better than Slurm's own.
The candidate is last in priority and changes nothing before it starts, so one replay serves every
candidate of a group of partitions that share nodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import islice

from advisor.wait.profile import INF, Amount, Profile
from advisor.wait.remaining import RuntimeEstimates
from advisor.wait.snapshot import QueueSnapshot, RunningJob, SlotRequest

#: Slurm's default ``bf_window``: a job that cannot start within it gets no reservation.
BACKFILL_WINDOW = timedelta(days=1)

#: node -> (begin, end, rank) of resources taken since the last pass, which count for jobs above ``rank``
_Taken = dict[int, list[tuple[float, float, float]]]
#: node -> the earliest time from which resources were freed there since the last pass
_Freed = dict[int, float]


@dataclass(slots=True)
class _Job:
    #: usable node indices of each partition the job may run in, in index order
    partitions: list[list[int]]
    count: int
    amount: Amount
    limit: float
    runtime: float
    #: position in priority order
    rank: int
    #: per node of the group, a time before which the job cannot start there (see ``Profile.earliest_on``)
    floors: list[float]
    #: every node the job may run on
    members: frozenset[int]
    #: the earliest slot found in the last pass (None: never planned; INF: blocked for good), which
    #: holds a reservation only when it begins within the window
    start: float | None = None
    nodes: list[int] = field(default_factory=list)
    reserved: bool = False


@dataclass(slots=True)
class _Running:
    end: float
    limit_end: float
    held: list[tuple[int, Amount]]
    rank: float = INF


def predict_starts(
    snapshot: QueueSnapshot,
    runtimes: RuntimeEstimates,
    candidates: Sequence[SlotRequest],
    now: datetime,
    window: timedelta = BACKFILL_WINDOW,
) -> list[datetime | None]:
    """Predicted start of each candidate; None when it could never start (too big, or blocked forever)."""
    results: list[datetime | None] = [None] * len(candidates)
    for names, members in _components(snapshot, candidates).items():
        replay = _Replay(snapshot, runtimes, names, now)
        last = len(snapshot.pending)
        starts = replay.run([replay.job(candidates[index], INF, last) for index in members], window)
        for index, start in zip(members, starts, strict=True):
            results[index] = None if start == INF else now + timedelta(seconds=start)
    return results


class _Replay:
    """One group of nodes: its running jobs, its pending jobs and the passes over them.

    Times are seconds after ``now``. Each pass replans every pending job, but reuses last pass's slot
    where nothing the job depends on changed: a slot stays valid while no resources were taken inside
    it, and only nodes where resources were freed can offer an earlier one.
    """

    def __init__(
        self, snapshot: QueueSnapshot, runtimes: RuntimeEstimates, names: frozenset[str], now: datetime
    ) -> None:
        nodes = [node for node in snapshot.nodes if node.name in names]
        self._index = {node.name: position for position, node in enumerate(nodes)}
        self._capacity: list[Amount] = [(node.gpus, node.cpus, node.memory_mb) for node in nodes]
        usable = {node.name for node in nodes if node.usable}
        self._usable = {
            partition: sorted(self._index[name] for name in members if name in usable)
            for partition, members in snapshot.partitions.items()
        }
        self._running = [
            self._running_job(job, runtimes, now)
            for job in snapshot.running
            if any(held.node in self._index for held in job.allocations)
        ]
        # Jobs of other groups never fit here: skip them before building them.
        waiting = (
            self.job(job.request, _seconds(runtimes.runtime_s.get(job.job_id, _limit(job.request))), rank)
            for rank, job in enumerate(snapshot.pending)
            if any(self._usable.get(partition) for partition in job.request.partitions)
        )
        self._waiting = [job for job in waiting if self._ever_fits(job)]

    def job(self, request: SlotRequest, runtime: float, rank: int) -> _Job:
        limit = _seconds(_limit(request))
        partitions = [self._usable.get(partition, []) for partition in request.partitions]
        amount = (request.gpus_per_node, request.cpus_per_node, request.memory_mb_per_node)
        return _Job(
            partitions=partitions,
            count=request.nodes,
            amount=amount,
            limit=limit,
            runtime=min(runtime, limit),
            rank=rank,
            floors=[0.0] * len(self._capacity),
            members=frozenset(node for nodes in partitions for node in nodes),
        )

    def run(self, candidates: list[_Job], window: timedelta) -> list[float]:
        """Pass after pass, each at the next predicted end, until every candidate has started."""
        starts = [INF] * len(candidates)
        unstarted = [index for index, job in enumerate(candidates) if self._ever_fits(job)]
        now, taken = 0.0, _Taken()
        while unstarted:
            # Jobs that ended free the rest of their slot for everyone.
            freed = {
                node: now for job in self._running if job.end <= now < job.limit_end for node, _ in job.held
            }
            self._running = [job for job in self._running if job.end > now]
            profile = self._base(now)
            started = self._pass(profile, now, now + window.total_seconds(), freed, taken)
            # A candidate only ever asks "now?", so its floors never pass the current time.
            for index in [index for index in unstarted if _fits_now(profile, candidates[index], now)]:
                starts[index] = now
                unstarted.remove(index)
            # The next pass comes with the next end, at once if a job started and ended right now.
            ends = [job.end for job in self._running if job.end < INF]
            if not ends:
                break
            now = min(ends)
            # Jobs started in this pass took their slot from the jobs above them, which did not see it.
            taken = _Taken()
            for job in started:
                for node, _ in job.held:
                    taken.setdefault(node, []).append((now, job.limit_end, job.rank))
        return starts

    def _running_job(self, job: RunningJob, runtimes: RuntimeEstimates, now: datetime) -> _Running:
        """Slurm plans with the limit; the job ends at its prediction, never after the limit."""
        limit_end = _seconds(None if job.limit_end is None else (job.limit_end - now).total_seconds())
        end = min(_seconds(runtimes.remaining_s.get(job.job_id, limit_end)), limit_end)
        held = [
            (self._index[held.node], (held.gpus, held.cpus, held.memory_mb))
            for held in job.allocations
            if held.node in self._index
        ]
        return _Running(end=max(end, 0.0), limit_end=max(limit_end, 0.0), held=held)

    def _base(self, now: float) -> Profile:
        """The reservation table at ``now`` holding only the running jobs, until their limits."""
        held: list[list[tuple[float, Amount]]] = [[] for _ in self._capacity]
        for job in self._running:
            for node, amount in job.held:
                held[node].append((job.limit_end, amount))
        return Profile(self._capacity, now, held)

    def _pass(
        self, profile: Profile, now: float, horizon: float, freed: _Freed, taken: _Taken
    ) -> list[_Running]:
        """Plan the pending jobs in priority order, reserving slots within the window; returns the jobs
        started now."""
        started: list[_Running] = []
        for job in self._waiting:
            for node, since in freed.items():
                # Only a slot reaching into the freed time can change; slots ending before it cannot.
                job.floors[node] = min(job.floors[node], max(now, since - job.limit))
            begin, nodes = self._slot(profile, job, now, freed, taken)
            reserved = begin <= horizon
            if (job.reserved, job.start, job.nodes) != (reserved, begin, nodes):
                if job.reserved and job.start is not None:
                    for node in job.nodes:
                        freed[node] = min(freed.get(node, INF), job.start)
                if reserved:
                    for node in nodes:
                        taken.setdefault(node, []).append((begin, begin + job.limit, INF))
            job.start, job.nodes, job.reserved = begin, nodes, reserved
            if reserved:
                for node in nodes:
                    profile.reserve(node, begin, begin + job.limit, job.amount)
            if begin == now:
                held = [(node, job.amount) for node in nodes]
                started.append(_Running(now + job.runtime, now + job.limit, held, job.rank))
        self._running.extend(started)
        self._waiting = [job for job in self._waiting if job.start != now]
        return started

    def _slot(
        self, profile: Profile, job: _Job, now: float, freed: _Freed, taken: _Taken
    ) -> tuple[float, list[int]]:
        """The job's earliest slot. While nothing was taken inside last pass's slot it stays possible,
        and only nodes where resources were freed can offer an earlier one (or a tie earlier in order)."""
        start = job.start
        if start is None or start < now or (taken and _overlaps(taken, job, start)):
            return _place(profile, job, now, INF)
        touched = sorted(
            node for node, since in freed.items() if since < start + job.limit and node in job.members
        )
        if not touched:
            return start, job.nodes
        if job.count > 1 or len(job.partitions) > 1:
            return _place(profile, job, now, start)
        best = (start, job.nodes)
        for node in touched:
            earlier = profile.earliest(node, job.amount, job.limit, job.floors[node], best[0])
            job.floors[node] = min(earlier, best[0])
            if earlier < best[0] or (earlier == best[0] < INF and node < best[1][0]):
                best = (earlier, [node])
        return best

    def _ever_fits(self, job: _Job) -> bool:
        """Whether the job fits the empty partition; Slurm never starts one that does not."""
        return any(
            len(list(islice((n for n in nodes if _covers(self._capacity[n], job.amount)), job.count)))
            == job.count
            for nodes in job.partitions
        )


def _overlaps(taken: _Taken, job: _Job, start: float) -> bool:
    """Whether resources were taken, on the job's planned nodes, inside its planned slot."""
    end = start + job.limit
    return any(
        begin < end and start < until and job.rank < rank
        for node in job.nodes
        for begin, until, rank in taken.get(node, ())
    )


def _place(profile: Profile, job: _Job, now: float, latest: float) -> tuple[float, list[int]]:
    """The earliest slot over the job's partitions (the first partition wins a tie)."""
    best: tuple[float, list[int]] = (INF, [])
    for nodes in job.partitions:
        found = profile.earliest_on(nodes, job.count, job.amount, job.limit, job.floors, min(latest, best[0]))
        if found[0] < best[0]:
            best = found
    return best


def _covers(have: Amount, need: Amount) -> bool:
    return all(free >= wanted for free, wanted in zip(have, need, strict=True))


def _fits_now(profile: Profile, job: _Job, now: float) -> bool:
    return _place(profile, job, now, now)[0] == now


def _components(
    snapshot: QueueSnapshot, candidates: Sequence[SlotRequest]
) -> dict[frozenset[str], list[int]]:
    """Candidates grouped by the nodes whose jobs can delay them: partitions that share a node, or that
    one job names together, belong to one group."""
    parent = {node.name: node.name for node in snapshot.nodes}

    def root(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    # A partition's nodes form one group; a job that names several partitions joins their groups.
    anchors: dict[str, str] = {}
    for partition, names in snapshot.partitions.items():
        present = [name for name in names if name in parent]
        for name in present[1:]:
            parent[root(name)] = root(present[0])
        if present:
            anchors[partition] = present[0]
    requests = [job.request.partitions for job in snapshot.pending]
    requests += [candidate.partitions for candidate in candidates]
    for partitions in requests:
        named = [anchors[partition] for partition in partitions if partition in anchors]
        for name in named[1:]:
            parent[root(name)] = root(named[0])
    nodes_of: dict[str, list[str]] = {}
    for name in parent:
        nodes_of.setdefault(root(name), []).append(name)
    groups: dict[str, list[int]] = {}
    for index, candidate in enumerate(candidates):
        named = [anchors[partition] for partition in candidate.partitions if partition in anchors]
        if named:
            groups.setdefault(root(named[0]), []).append(index)
    return {frozenset(nodes_of[key]): group for key, group in groups.items()}


def _limit(request: SlotRequest) -> float | None:
    return None if request.time_limit is None else request.time_limit.total_seconds()


def _seconds(value: float | None) -> float:
    return INF if value is None else value
