"""Calibration from reality: finished advised jobs' actual times against their predictions.

A machine whose jobs keep running longer than predicted (slower data loading, a shared file system,
checkpoint costs nobody declared) gets a multiplicative correction: the median log-ratio of actual to
predicted, shrunk toward no correction while there are few jobs, so one odd job cannot swing it.

A job killed at its time limit (TIMEOUT) ran at least that long: its ratio is a lower bound (right-censored),
and the median is Kaplan-Meier's, which counts it as "at least". Left out, the jobs a too-short prediction
(and the limit set from it) killed would never correct the prediction that killed them.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from fractions import Fraction

from pydantic import BaseModel, ConfigDict, Field

PRIOR_JOBS = 5
"""Jobs' worth of belief in the benchmarks: with n finished jobs the correction carries n / (n + 5)."""

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
    predicted_p90_s: float = Field(gt=0)
    actual_s: float = Field(ge=0)


class Correction(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    machine: str
    factor: float
    jobs: int


class PartitionReport(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    partition: str
    jobs: int
    """Finished advised jobs; only completed ones count in the error figures."""
    completed: int
    timed_out: int
    """Killed at their limit: in the median ratio and the corrections as lower bounds."""
    mape: float | None
    """Mean absolute percentage error of the predictions as made."""
    calibrated_mape: float | None
    """The same with each job's machine correction fitted on the other jobs only (an honest figure)."""
    median_ratio: float | None
    """Actual over predicted (Kaplan-Meier's, timeouts as lower bounds): above 1, predictions run short."""
    within_p90: float | None
    """Share of the jobs whose p90 can be judged (completed, or timed out past it) that ended within it."""


def fit_corrections(outcomes: Sequence[Outcome]) -> dict[str, Correction]:
    by_machine: dict[str, list[Outcome]] = defaultdict(list)
    for outcome in _calibrating(outcomes):
        by_machine[outcome.machine].append(outcome)
    return {machine: _correction(machine, rows) for machine, rows in by_machine.items()}


def _correction(machine: str, rows: Sequence[Outcome]) -> Correction:
    n = len(rows)
    return Correction(
        machine=machine, factor=math.exp(_median_log_ratio(rows) * n / (n + PRIOR_JOBS)), jobs=n
    )


def _median_log_ratio(rows: Sequence[Outcome]) -> float:
    """Kaplan-Meier's median of log(actual / predicted), a timeout's ratio being a lower bound. Where the
    lower bounds keep the survival above one half to the end, the median is at least the largest value."""
    points = sorted(
        (math.log(row.actual_s / row.predicted_s), row.state in CENSORED_STATES) for row in rows
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
    calibrating = _calibrating(outcomes)
    return [_partition_report(name, rows, calibrating) for name, rows in sorted(by_partition.items())]


def _partition_report(name: str, rows: list[Outcome], calibrating: Sequence[Outcome]) -> PartitionReport:
    """``calibrating``: every partition's outcomes that calibrate, which each job's correction learns from."""
    usable = _calibrating(rows)
    done = [row for row in usable if row.state == COMPLETED]
    calibrated = []
    for outcome in done:
        others = [o for o in calibrating if o.machine == outcome.machine and o.job_id != outcome.job_id]
        factor = _correction(outcome.machine, others).factor if others else 1.0
        calibrated.append(_ape(outcome.predicted_s * factor, outcome.actual_s))
    judged = [o for o in usable if o.state == COMPLETED or o.actual_s > o.predicted_p90_s]
    return PartitionReport(
        partition=name,
        jobs=len(rows),
        completed=len(done),
        timed_out=len(usable) - len(done),
        mape=_mean([_ape(o.predicted_s, o.actual_s) for o in done]),
        calibrated_mape=_mean(calibrated),
        median_ratio=math.exp(_median_log_ratio(usable)) if usable else None,
        within_p90=_mean([float(o.actual_s <= o.predicted_p90_s) for o in judged]),
    )


def _calibrating(outcomes: Sequence[Outcome]) -> list[Outcome]:
    return [o for o in outcomes if (o.state == COMPLETED or o.state in CENSORED_STATES) and o.actual_s > 0]


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _ape(predicted: float, actual: float) -> float:
    return abs(predicted - actual) / actual
