"""Calibration from reality: finished advised jobs' actual times against their predictions.

A machine whose jobs keep running longer than predicted (slower data loading, a shared file system,
checkpoint costs nobody declared) gets a multiplicative correction: the median log-ratio of actual to
predicted, shrunk toward no correction by a prior worth `PRIOR_JOBS` jobs, so one odd job cannot swing it,
and held within `BOUND` unless many jobs agree (`BEYOND_BOUND_JOBS`, `AGREEING_SHARE`).

Only comparable jobs calibrate: COMPLETED, and not shorter than their predicted start-up plus one epoch
(`Outcome.comparable_from_s`; `COMPARABLE_SHARE` of the predicted run where the description gave no epochs).
A shorter one did not train as described (a stub that exits at once, a smoke test, a job that ran fewer
steps than its description says): it is counted and shown, never used; four 20-second stubs once scaled a
machine's predictions by x0.003.

A correction is fitted per machine (its calibration key) and, where `ARCHITECTURE_JOBS` comparable jobs
trained one architecture there, per machine and architecture: that one serves the architecture's
predictions, the machine's serves the rest.

A job killed at its time limit (TIMEOUT) ran at least that long: its ratio is a lower bound (right-censored),
and the median is Kaplan-Meier's, which counts it as "at least". Left out, the jobs a too-short prediction
(and the limit set from it) killed would never correct the prediction that killed them.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from fractions import Fraction

from pydantic import BaseModel, ConfigDict, Field

PRIOR_JOBS = 10
"""Jobs' worth of belief in the benchmarks: with n comparable jobs the correction carries n / (n + 10) of
their median log-ratio."""
BOUND = (0.5, 2.0)
"""A correction stays within this unless `BEYOND_BOUND_JOBS` jobs, `AGREEING_SHARE` of them on its side,
say otherwise; one beyond it is flagged in `advisor report`."""
BEYOND_BOUND_JOBS = 20
AGREEING_SHARE = 0.8
"""Of the jobs, the share whose own ratio lies on the correction's side of 1 for it to pass `BOUND`."""
COMPARABLE_SHARE = 0.25
"""Where a job's record has no start-up plus one epoch (its description gave steps and no dataset size, or
it was recorded before they were kept), ending in less than this share of its predicted run is what did not
train as described."""
ARCHITECTURE_JOBS = 10
"""Comparable jobs of one architecture on one machine before they get a correction of their own: fewer
would let a handful of one model's jobs speak for it, which the machine's correction does better."""

COMPLETED = "COMPLETED"
CENSORED_STATES = frozenset({"TIMEOUT"})
"""Killed at the limit: ran at least its elapsed time. Failed or cancelled jobs tell nothing."""


class Outcome(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    job_id: int
    partition: str
    machine: str
    """The prediction's calibration key: its machine, or ``scaled:PARTITION`` for a scaled one."""
    state: str
    predicted_s: float = Field(gt=0)
    """The p50 run."""
    predicted_p90_s: float = Field(gt=0)
    predicted_p10_s: float | None = Field(default=None, gt=0)
    """None where the job's record has no p10 (recorded before predictions had one)."""
    actual_s: float = Field(ge=0)
    comparable_from_s: float | None = Field(default=None, gt=0)
    """The predicted start-up plus one epoch; None where the record has none (`COMPARABLE_SHARE` then)."""
    architecture: str | None = None
    """The layer table's hash the prediction was made for; None where none was kept."""
    applied_correction: float = Field(default=1.0, gt=0)
    """The correction already in ``predicted_s`` when the job was advised."""

    @property
    def uncorrected_s(self) -> float:
        """The predictor's own p50, before any correction: what a correction is fitted against. Fitted
        against ``predicted_s``, a serving correction would pull itself back toward 1 as jobs it corrected
        finish (their ratios near 1), then swing out again once it had."""
        return self.predicted_s / self.applied_correction

    @property
    def trained_from_s(self) -> float:
        """The least run that trained as described."""
        return comparable_from(self.predicted_s, self.comparable_from_s)

    @property
    def comparable(self) -> bool:
        """Ended as described (completed, or killed at its limit) and ran long enough to have trained."""
        ended = self.state == COMPLETED or self.state in CENSORED_STATES
        return ended and self.actual_s > 0 and self.actual_s >= self.trained_from_s

    @property
    def did_not_train(self) -> bool:
        """Completed before its start-up and one epoch were over: counted, never used."""
        return self.state == COMPLETED and self.actual_s < self.trained_from_s


def comparable_from(predicted_s: float, start_up_and_epoch_s: float | None) -> float:
    """The least run of a job that trained as described: its predicted start-up plus one epoch where
    known, else `COMPARABLE_SHARE` of its predicted run."""
    return COMPARABLE_SHARE * predicted_s if start_up_and_epoch_s is None else start_up_and_epoch_s


def start_up_and_epoch(run_s: float, start_up_s: float, epochs: float) -> float | None:
    """A predicted run's start-up and first epoch, the rest being ``epochs`` alike; None without epochs
    (steps with no dataset size). Under one epoch: the whole run."""
    if epochs <= 0:
        return None
    start_up_s = min(start_up_s, run_s)
    return start_up_s + (run_s - start_up_s) / max(epochs, 1.0)


class Correction(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    machine: str
    """The calibration key it corrects (`Outcome.machine`)."""
    architecture: str | None = None
    """Fitted on this architecture's jobs alone, and serving only its predictions; None: the machine's."""
    factor: float
    """What the machine's predicted times are multiplied by."""
    jobs: int
    """Comparable jobs it was fitted on."""
    agreeing: int
    """Of them, the jobs whose own ratio lies on the factor's side of 1."""
    shrunk: float
    """The median ratio shrunk toward 1 by the prior, before the bound."""
    held: bool = False
    """The shrunk factor lay beyond `BOUND` and too few jobs agreed: held at the bound."""
    beyond_bound: bool = False
    """Beyond `BOUND`, with enough agreeing jobs: flagged for an admin to look at."""


class QuantileCoverage(BaseModel):
    """How many comparable jobs ended under a predicted quantile, of those that can be judged against it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    quantile: str
    under: int
    judged: int
    """Completed jobs with the quantile recorded, and jobs killed at their limit past it."""
    expected: float
    """The share a well-calibrated quantile has under it."""

    @property
    def share(self) -> float | None:
        return self.under / self.judged if self.judged else None


class PartitionReport(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    partition: str
    jobs: int
    """Finished advised jobs; only comparable ones count in the figures below."""
    completed: int
    """Comparable and completed."""
    timed_out: int
    """Killed at their limit: in the median ratio and the corrections as lower bounds."""
    not_comparable: int
    """Completed before its predicted start-up and one epoch were over: did not train as described."""
    mape: float | None
    """Mean absolute percentage error of the predictions as made."""
    calibrated_mape: float | None
    """The same with each job's machine correction fitted on the other jobs only (an honest figure)."""
    median_ratio: float | None
    """Actual over predicted (Kaplan-Meier's, timeouts as lower bounds): above 1, predictions run short."""
    coverage: list[QuantileCoverage]
    """Under p10, p50 and p90: two-sided, so a band too wide shows as well as one too narrow."""

    @property
    def within_p90(self) -> float | None:
        return self.coverage[-1].share


def fit_corrections(outcomes: Sequence[Outcome]) -> dict[str, Correction]:
    """By `correction_key`: each machine's, and each architecture's with `ARCHITECTURE_JOBS` jobs there."""
    by_machine: dict[str, list[Outcome]] = defaultdict(list)
    by_architecture: dict[tuple[str, str], list[Outcome]] = defaultdict(list)
    for outcome in outcomes:
        if outcome.comparable:
            by_machine[outcome.machine].append(outcome)
            if outcome.architecture is not None:
                by_architecture[(outcome.machine, outcome.architecture)].append(outcome)
    fitted = {machine: _correction(machine, rows) for machine, rows in by_machine.items()}
    for (machine, architecture), rows in by_architecture.items():
        if len(rows) >= ARCHITECTURE_JOBS:
            fitted[correction_key(machine, architecture)] = _correction(machine, rows, architecture)
    return fitted


def correction_key(machine: str, architecture: str | None) -> str:
    """Where `fit_corrections` keeps a correction: the machine's key, or it and the architecture's hash."""
    return machine if architecture is None else f"{machine}@{architecture}"


def correction_for(
    corrections: Mapping[str, Correction], machine: str, architecture: str | None
) -> Correction | None:
    """The architecture's own correction on the machine where it has one, else the machine's."""
    own = corrections.get(correction_key(machine, architecture))
    return own if own is not None else corrections.get(machine)


def _correction(machine: str, rows: Sequence[Outcome], architecture: str | None = None) -> Correction:
    """The median log-ratio times n / (n + `PRIOR_JOBS`), within `BOUND` unless the jobs agree."""
    n = len(rows)
    shrunk = _median_log_ratio(rows) * n / (n + PRIOR_JOBS)
    agreeing = sum(_agrees(row, slower=shrunk > 0) for row in rows) if shrunk else 0
    low, high = (math.log(bound) for bound in BOUND)
    bounded = min(max(shrunk, low), high)
    beyond = bounded != shrunk
    trusted = n >= BEYOND_BOUND_JOBS and agreeing >= AGREEING_SHARE * n
    return Correction(
        machine=machine,
        architecture=architecture,
        factor=math.exp(shrunk if trusted or not beyond else bounded),
        jobs=n,
        agreeing=agreeing,
        shrunk=math.exp(shrunk),
        held=beyond and not trusted,
        beyond_bound=beyond and trusted,
    )


def _agrees(row: Outcome, slower: bool) -> bool:
    """A job killed at its limit below its prediction ran at least that: it may be on either side."""
    ratio = row.actual_s / row.uncorrected_s
    return ratio > 1 if slower else ratio < 1 and row.state not in CENSORED_STATES


def _median_log_ratio(rows: Sequence[Outcome], corrected: bool = False) -> float:
    """Kaplan-Meier's median of log(actual / predicted), a timeout's ratio being a lower bound: the
    predictor's own prediction, or with ``corrected`` the one the job was advised with. Where the lower
    bounds keep the survival above one half to the end, the median is at least the largest value."""
    points = sorted(
        (
            math.log(row.actual_s / (row.predicted_s if corrected else row.uncorrected_s)),
            row.state in CENSORED_STATES,
        )
        for row in rows
    )  # at one value, observed (False) before censored: the usual convention
    at_risk, survival = len(points), Fraction(1)
    for index, (value, censored) in enumerate(points):
        if not censored:
            survival *= 1 - Fraction(1, at_risk)  # exact: a median between two values is one
            if survival < 0.5:
                return value
            if survival == 0.5:  # the median lies between this value and the next observed one
                later = [v for v, c in points[index + 1 :] if not c]
                return (value + later[0]) / 2 if later else value
        at_risk -= 1
    return points[-1][0]


def report(outcomes: Sequence[Outcome]) -> list[PartitionReport]:
    by_partition: dict[str, list[Outcome]] = defaultdict(list)
    for outcome in outcomes:
        by_partition[outcome.partition].append(outcome)
    calibrating = [o for o in outcomes if o.comparable]
    return [_partition_report(name, rows, calibrating) for name, rows in sorted(by_partition.items())]


def _partition_report(name: str, rows: list[Outcome], calibrating: Sequence[Outcome]) -> PartitionReport:
    """``calibrating``: every partition's comparable outcomes, which each job's correction learns from."""
    usable = [o for o in rows if o.comparable]
    done = [row for row in usable if row.state == COMPLETED]
    calibrated = []
    for outcome in done:
        others = [o for o in calibrating if o.machine == outcome.machine and o.job_id != outcome.job_id]
        correction = correction_for(fit_corrections(others), outcome.machine, outcome.architecture)
        factor = 1.0 if correction is None else correction.factor
        calibrated.append(_ape(outcome.uncorrected_s * factor, outcome.actual_s))
    return PartitionReport(
        partition=name,
        jobs=len(rows),
        completed=len(done),
        timed_out=len(usable) - len(done),
        not_comparable=sum(o.did_not_train for o in rows),
        mape=_mean([_ape(o.predicted_s, o.actual_s) for o in done]),
        calibrated_mape=_mean(calibrated),
        median_ratio=math.exp(_median_log_ratio(usable, corrected=True)) if usable else None,
        coverage=[
            _coverage("p10", 0.1, [(o, o.predicted_p10_s) for o in usable]),
            _coverage("p50", 0.5, [(o, o.predicted_s) for o in usable]),
            _coverage("p90", 0.9, [(o, o.predicted_p90_s) for o in usable]),
        ],
    )


def _coverage(name: str, expected: float, rows: Sequence[tuple[Outcome, float | None]]) -> QuantileCoverage:
    """A job killed at its limit is judged only once past the quantile: it ran longer, whatever it needed."""
    judged = [(o, q) for o, q in rows if q is not None and (o.state == COMPLETED or o.actual_s > q)]
    under = sum(o.actual_s <= q for o, q in judged)
    return QuantileCoverage(quantile=name, under=under, judged=len(judged), expected=expected)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _ape(predicted: float, actual: float) -> float:
    return abs(predicted - actual) / actual
