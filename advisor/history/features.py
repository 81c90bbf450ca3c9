"""What a job's past says at its submission: its user's finished jobs, the same script's, the same request's.

`History` is fed jobs as they end and asked about a job as it is submitted, so a feature never includes a
job that had not ended by then. Times are log seconds; a group without jobs gives NaN (the model's
"unknown").
"""

from __future__ import annotations

import heapq
import math
import statistics
from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from advisor.history.jobs import JobAsk, PastJob

KEPT = 20
"""Runs kept per group: the most recent, the only ones a feature looks at."""
_NAN = math.nan
_GROUP_FEATURES = ("count", "last", "mean2", "median5", "max5", "max20", "min5", "censored", "used")
GROUPS = ("user", "script", "request")
FEATURES = (
    *(f"{group}_{name}" for group in GROUPS for name in _GROUP_FEATURES),
    "limit",
    "cpus",
    "gpus",
    "nodes",
    "hour",
)
"""Only what accounting has of every past job too: a feature the daemon could not compute at a submission
the way the nightly training computed it would mislead the model."""


def _log(seconds: float) -> float:
    return math.log(max(seconds, 1.0))


@dataclass
class _Group:
    runs: deque[PastJob] = field(default_factory=lambda: deque(maxlen=KEPT))
    count: int = 0

    def add(self, job: PastJob) -> None:
        self.runs.append(job)
        self.count += 1

    def features(self) -> list[float]:
        if not self.runs:
            return [0.0, *([_NAN] * (len(_GROUP_FEATURES) - 1))]
        runs = [_log(job.run_s) for job in self.runs]
        last = self.runs[-1]
        used = last.run_s / last.ask.limit_s if last.ask.limit_s else _NAN
        return [
            math.log1p(self.count),
            runs[-1],
            _log(statistics.fmean(job.run_s for job in list(self.runs)[-2:])),
            statistics.median(runs[-5:]),
            max(runs[-5:]),
            max(runs),
            min(runs[-5:]),
            float(last.censored),
            used,
        ]


class History:
    """Finished jobs by user, by user and script, by user and request (limit and size)."""

    def __init__(self) -> None:
        self._groups: dict[tuple[str, ...], _Group] = defaultdict(_Group)

    def ended(self, job: PastJob) -> None:
        for key in _keys(job.ask):
            self._groups[key].add(job)

    def user_runs(self, user: str) -> Sequence[PastJob]:
        key = ("user", user)
        return tuple(self._groups[key].runs) if key in self._groups else ()

    def same_script(self, ask: JobAsk) -> Sequence[PastJob]:
        """The user's last runs of this script (of any script where the script is unknown)."""
        key = ("script", ask.user, ask.script)
        return tuple(self._groups[key].runs) if key in self._groups else ()

    def completed_median(self, ask: JobAsk, last: int = 5) -> float | None:
        """The median of the same request's ``last`` completed runs, else of the user's: a job that failed
        or was cancelled ran as long as it took to go wrong, which says little of what the next one needs."""
        for key in (_keys(ask)[2], _keys(ask)[0]):
            group = self._groups.get(key)
            runs = [job.run_s for job in group.runs if job.completed] if group else []
            if runs:
                return statistics.median(runs[-last:])
        return None

    def seen(self, ask: JobAsk) -> bool:
        """Whether the user ran this script, or asked for exactly this, before."""
        script, request = _keys(ask)[1:]
        return (bool(ask.script) and script in self._groups) or request in self._groups

    def features(self, ask: JobAsk) -> list[float]:
        row: list[float] = []
        for key in _keys(ask):
            row += self._groups[key].features() if key in self._groups else _Group().features()
        limit = _log(ask.limit_s) if ask.limit_s else _NAN
        hour = (ask.submit_s % 86400) / 3600
        return [*row, limit, math.log(max(ask.cpus, 1)), float(ask.gpus), float(ask.nodes), hour]


def past_rows(jobs: Sequence[PastJob], until: float) -> tuple[list[list[float]], list[PastJob]]:
    """What each job (in submission order) that ended by ``until`` had as its past at its submission:
    the nightly training's rows."""
    history, ends = History(), list[tuple[float, int]]()
    rows: dict[int, list[float]] = {}
    for index, job in enumerate(jobs):
        while ends and ends[0][0] <= job.ask.submit_s:
            history.ended(jobs[heapq.heappop(ends)[1]])
        rows[index] = history.features(job.ask)
        heapq.heappush(ends, (job.end_s, index))
    ended = sorted(
        (index for index, job in enumerate(jobs) if job.end_s <= until), key=lambda i: jobs[i].end_s
    )
    return [rows[index] for index in ended], [jobs[index] for index in ended]


def _keys(ask: JobAsk) -> tuple[tuple[str, ...], ...]:
    limit = str(round(ask.limit_s)) if ask.limit_s else "-"
    script = ("script", ask.user, ask.script)
    return ("user", ask.user), script, ("request", ask.user, limit, str(ask.cpus), str(ask.gpus))
