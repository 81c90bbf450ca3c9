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

from advisor.history.past import JobAsk, PastJob
from advisor.history.point import RULES, SHARE_OF_LIMIT, USERS_MEDIAN, ExpectedRun, RuleScores

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
    """Finished jobs by user, by user and script, by user and request (limit and size), by all three; and
    how well each point rule (`advisor.history.point`) has fitted each user."""

    def __init__(self) -> None:
        self._groups: dict[tuple[str, ...], _Group] = defaultdict(_Group)
        self._scores: dict[str, RuleScores] = defaultdict(RuleScores)

    def ended(self, job: PastJob) -> None:
        if job.completed and job.run_s > 0:
            self._scores[job.ask.user].add(self._kind_runs(job.ask, job.ask.submit_s), job.run_s)
        for key in (*_keys(job.ask), _script_request_key(job.ask)):
            if key:
                self._groups[key].add(job)

    def user_runs(self, user: str) -> Sequence[PastJob]:
        key = ("user", user)
        return tuple(self._groups[key].runs) if key in self._groups else ()

    def same_script(self, ask: JobAsk) -> Sequence[PastJob]:
        """The user's last runs of this script (of any script where the script is unknown)."""
        key = ("script", ask.user, ask.script)
        return tuple(self._groups[key].runs) if key in self._groups else ()

    def point(self, ask: JobAsk) -> ExpectedRun | None:
        """The run the user's best point rule makes of the completed runs of the job's kind (the same
        script at the same request, else the same request, else the same script); without any, the request
        times the share of their limits the user's last completed jobs used, else those jobs' median. Only
        completed runs count: a job that failed or was cancelled ran as long as it took to go wrong."""
        runs = self._kind_runs(ask, math.inf)
        if runs:
            rule = self.scores(ask.user).best()
            return ExpectedRun(RULES[rule](runs), rule)
        mine = [job for job in self.user_runs(ask.user) if job.completed][-5:]
        shares = [job.run_s / job.ask.limit_s for job in mine if job.ask.limit_s]
        if ask.limit_s and shares:
            return ExpectedRun(ask.limit_s * statistics.median(shares), SHARE_OF_LIMIT)
        if not mine:
            return None
        return ExpectedRun(statistics.median(job.run_s for job in mine), USERS_MEDIAN)

    def scores(self, user: str) -> RuleScores:
        """How each point rule has fitted ``user``'s completed jobs."""
        return self._scores.get(user, RuleScores())

    def _kind_runs(self, ask: JobAsk, until: float) -> list[float]:
        """The completed runs, ended by ``until``, of the job's most specific kind that has any: the same
        script at the same request, the same request, the same script."""
        _, script, request = _keys(ask)
        for key in (_script_request_key(ask), request, script if ask.script else None):
            group = self._groups.get(key) if key else None
            runs = [job.run_s for job in group.runs if job.completed and job.end_s <= until] if group else []
            if runs:
                return runs
        return []

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
    """The groups the model's features describe: the user, the user's script, the user's request."""
    script = ("script", ask.user, ask.script)
    return ("user", ask.user), script, ("request", ask.user, _limit(ask), str(ask.cpus), str(ask.gpus))


def _script_request_key(ask: JobAsk) -> tuple[str, ...] | None:
    """The same script at the same request: the most specific kind, where the script is known."""
    return ("script-request", ask.user, ask.script, _limit(ask), str(ask.cpus)) if ask.script else None


def _limit(ask: JobAsk) -> str:
    return str(round(ask.limit_s)) if ask.limit_s else "-"
