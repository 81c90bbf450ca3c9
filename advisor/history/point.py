"""A job's point prediction: the rule over its kind's last completed runs that has fitted its user best.

Users differ in how their runs vary: one repeats the same length (the last run says most), another
alternates (a median says more), another has rare outliers (the run closest to most others). Each rule is
scored, user by user, on every completed job of theirs: what it would have said at that job's submission
against its run, by the accuracy ``min(p, run) / max(p, run)``; the best scorer so far predicts the next
job. A user with few scored jobs stays near `DEFAULT` (`PRIOR_JOBS`).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

Rule = Callable[[Sequence[float]], float]


def accuracy(prediction: float | None, run: float) -> float:
    """``min(p, run) / max(p, run)``: 1 for an exact prediction, 0 for none."""
    if not prediction or prediction <= 0 or run <= 0:
        return 0.0
    return min(prediction, run) / max(prediction, run)


def _closest_to_the_others(runs: Sequence[float]) -> float:
    """The run whose accuracy summed over all of ``runs`` is highest: the constant that fitted them best."""
    return max(runs, key=lambda candidate: sum(accuracy(candidate, run) for run in runs))


RULES: Mapping[str, Rule] = {
    "median of the last 5": lambda runs: statistics.median(runs[-5:]),
    "median of the last 3": lambda runs: statistics.median(runs[-3:]),
    "median of the last 20": lambda runs: statistics.median(runs[-20:]),
    "last run": lambda runs: runs[-1],
    "mean of the last 2": lambda runs: statistics.fmean(runs[-2:]),
    "run closest to the last 20": lambda runs: _closest_to_the_others(runs[-20:]),
}
"""Each over the completed runs (seconds, oldest first) of the job's most specific group that has any."""
DEFAULT = "median of the last 5"
"""The rule a user without scored jobs gets: the product's only rule before the choice."""
PRIOR_JOBS = 3.0
"""A user's scores start as if this many jobs had scored `DEFAULT` 0.6 and every other rule 0.55."""
_PRIOR = {name: 0.6 if name == DEFAULT else 0.55 for name in RULES}


SHARE_OF_LIMIT = "share of its limit the user's other jobs used"
"""For a kind the user never ran: the request times that share."""
USERS_MEDIAN = "median of the user's other jobs"


class ExpectedRun(NamedTuple):
    """A point prediction and how it was made: one of `RULES`, `SHARE_OF_LIMIT` or `USERS_MEDIAN`."""

    run_s: float
    rule: str


def explained(rule: str) -> str:
    """How the expected run was made, as its user reads it."""
    if rule in RULES:
        return f"the {rule}, the rule that fits your earlier jobs best"
    return (
        "the share of its limit your other jobs used"
        if rule == SHARE_OF_LIMIT
        else "the median of your last jobs"
    )


@dataclass
class RuleScores:
    """One user's summed accuracy per rule over their scored jobs."""

    jobs: int = 0
    sums: dict[str, float] = field(default_factory=lambda: dict.fromkeys(RULES, 0.0))

    def add(self, runs: Sequence[float], run: float) -> None:
        """Score every rule on ``runs`` (what history had at a job's submission) against its ``run``."""
        if not runs:
            return
        self.jobs += 1
        for name, rule in RULES.items():
            self.sums[name] += accuracy(rule(runs), run)

    def best(self) -> str:
        def mean(name: str) -> float:
            return (self.sums[name] + PRIOR_JOBS * _PRIOR[name]) / (self.jobs + PRIOR_JOBS)

        return max(RULES, key=mean)
