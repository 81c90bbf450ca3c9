"""EASY backfilling over a machine of interchangeable processors, for replaying a batch log (SWF).

The queue is first come, first served. When the head job does not fit, it gets a reservation at the
earliest time enough processors free up by the running jobs' planned ends (its shadow time); a later job
starts now only if it fits and ends by the shadow time by its own planned run, or uses processors the
head will not need. What plans a run is the arm's estimate (users' limits, Tsafrir's rule, the
advisor's); a job that outlives its estimate is planned to its user's limit from then on (Tsafrir,
Etsion, Feitelson 2007). A job runs its real time unless its limit is shorter: then it is killed there.
The harness's GPU scheduler (`scheduler.py`) plans on the limit that kills, so it cannot hold an estimate
apart from the limit; this one can.

One replay of a log can favour an arm by chance: a job arriving seconds earlier or later changes which
jobs backfill, and the difference spreads. `shaken` moves every submission a little (input shaking:
Tsafrir, Ouaknine, Feitelson 2007), so an arm is compared with another over many replays, not one.
"""

from __future__ import annotations

import heapq
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from advisor.frozen import Frozen

BOUND_S = 10.0
"""Bounded slowdown's floor on the run: a job of a second does not weigh as a thousand."""


@dataclass(frozen=True)
class Replayed:
    """One job as an arm submits it: when, how many processors, what it plans with, and when it ends."""

    submit_s: float
    procs: int
    run_s: float
    estimate_s: float
    limit_s: float
    """Where the job is killed (its user's limit, or the advised one)."""
    fallback_s: float
    """What it is planned to once it outlives its estimate."""


class Schedule(Frozen):
    mean_wait_s: float
    mean_bounded_slowdown: float
    killed: int


class Replays(Frozen):
    """One arm's jobs through EASY: the log as it is, then shaken (`shaken`, seeds 1, 2, ...)."""

    log: Schedule
    shaken: list[Schedule]


def replays(jobs: Sequence[Replayed], processors: int, shakes: int, shift_s: float) -> Replays:
    return Replays(
        log=easy(jobs, processors),
        shaken=[easy(shaken(jobs, shift_s, seed), processors) for seed in range(1, shakes + 1)],
    )


def shaken(jobs: Sequence[Replayed], shift_s: float, seed: int) -> list[Replayed]:
    """``jobs`` with each submission moved by a uniform random amount of at most ``shift_s`` either way;
    the same ``seed`` moves the same job the same way, so every arm is shaken alike."""
    shifts = np.random.default_rng(seed).uniform(-shift_s, shift_s, len(jobs))
    moved = zip(jobs, shifts, strict=True)
    return [replace(job, submit_s=job.submit_s + float(shift)) for job, shift in moved]


@dataclass
class _EasyRunning:
    start: float
    job: Replayed

    def planned_end(self, now: float) -> float:
        end = self.start + self.job.estimate_s
        return end if end > now else max(self.start + self.job.fallback_s, now)


def easy(jobs: Sequence[Replayed], processors: int) -> Schedule:
    """Every job of ``jobs`` (in submission order) through EASY on ``processors``."""
    order = sorted(range(len(jobs)), key=lambda index: jobs[index].submit_s)
    ends: list[tuple[float, int]] = []
    running: dict[int, _EasyRunning] = {}
    queue: list[int] = []
    waits = [0.0] * len(jobs)
    free, arrived, killed = processors, 0, 0

    def start(index: int, now: float) -> None:
        nonlocal free
        job = jobs[index]
        free -= job.procs
        running[index] = _EasyRunning(now, job)
        waits[index] = now - job.submit_s
        heapq.heappush(ends, (now + min(job.run_s, job.limit_s), index))

    while arrived < len(order) or ends:
        now = min(
            jobs[order[arrived]].submit_s if arrived < len(order) else float("inf"),
            ends[0][0] if ends else float("inf"),
        )
        while ends and ends[0][0] <= now:
            _, index = heapq.heappop(ends)
            free += jobs[index].procs
            killed += jobs[index].run_s > jobs[index].limit_s
            del running[index]
        while arrived < len(order) and jobs[order[arrived]].submit_s <= now:
            queue.append(order[arrived])
            arrived += 1
        while queue and jobs[queue[0]].procs <= free:
            start(queue.pop(0), now)
        if queue:
            queue = _backfill(queue, jobs, running, free, now, start)
    return Schedule(
        mean_wait_s=statistics.fmean(waits),
        mean_bounded_slowdown=statistics.fmean(
            max((wait + min(job.run_s, job.limit_s)) / max(min(job.run_s, job.limit_s), BOUND_S), 1.0)
            for wait, job in zip(waits, jobs, strict=True)
        ),
        killed=killed,
    )


def _backfill(
    queue: list[int],
    jobs: Sequence[Replayed],
    running: dict[int, _EasyRunning],
    free: int,
    now: float,
    start: Callable[[int, float], None],
) -> list[int]:
    """The queue after the jobs that may jump it have started."""
    head = jobs[queue[0]]
    shadow, extra, available = float("inf"), 0, free
    for end, procs in sorted((run.planned_end(now), run.job.procs) for run in running.values()):
        available += procs
        if available >= head.procs:
            shadow, extra = end, available - head.procs
            break
    kept = [queue[0]]
    for index in queue[1:]:
        job = jobs[index]
        if job.procs <= free and (now + job.estimate_s <= shadow or job.procs <= extra):
            if now + job.estimate_s > shadow:
                extra -= job.procs
            free -= job.procs
            start(index, now)
        else:
            kept.append(index)
    return kept
