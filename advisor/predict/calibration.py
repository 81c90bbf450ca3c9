"""Calibration from reality: finished advised jobs' actual times against their predictions.

A machine whose jobs keep running longer than predicted (slower data loading, a shared file system,
checkpoint costs nobody declared) gets a multiplicative correction: the median log-ratio of actual to
predicted, shrunk toward no correction while there are few jobs, so one odd job cannot swing it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from statistics import median

from pydantic import BaseModel, ConfigDict, Field

PRIOR_JOBS = 5
"""Jobs' worth of belief in the benchmarks: with n finished jobs the correction carries n / (n + 5)."""

CALIBRATING_STATES = frozenset({"COMPLETED"})
"""A job that failed, was cancelled or hit its limit did not run its predicted course."""


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
    mape: float | None
    """Mean absolute percentage error of the predictions as made."""
    calibrated_mape: float | None
    """The same with each job's machine correction fitted on the other jobs only (an honest figure)."""
    median_ratio: float | None
    """Actual over predicted: above 1 means the predictions run short."""
    within_p90: float | None
    """Share of completed jobs that finished within their p90."""


def fit_corrections(outcomes: Sequence[Outcome]) -> dict[str, Correction]:
    by_machine: dict[str, list[float]] = defaultdict(list)
    for outcome in _calibrating(outcomes):
        by_machine[outcome.machine].append(math.log(outcome.actual_s / outcome.predicted_s))
    return {machine: _correction(machine, ratios) for machine, ratios in by_machine.items()}


def _correction(machine: str, log_ratios: Sequence[float]) -> Correction:
    n = len(log_ratios)
    return Correction(machine=machine, factor=math.exp(median(log_ratios) * n / (n + PRIOR_JOBS)), jobs=n)


def report(outcomes: Sequence[Outcome]) -> list[PartitionReport]:
    by_partition: dict[str, list[Outcome]] = defaultdict(list)
    for outcome in outcomes:
        by_partition[outcome.partition].append(outcome)
    return [_partition_report(name, rows, outcomes) for name, rows in sorted(by_partition.items())]


def _partition_report(name: str, rows: list[Outcome], everything: Sequence[Outcome]) -> PartitionReport:
    done = _calibrating(rows)
    if not done:
        return PartitionReport(
            partition=name,
            jobs=len(rows),
            completed=0,
            mape=None,
            calibrated_mape=None,
            median_ratio=None,
            within_p90=None,
        )
    calibrating = _calibrating(everything)
    calibrated = []
    for outcome in done:
        others = [
            math.log(o.actual_s / o.predicted_s)
            for o in calibrating
            if o.machine == outcome.machine and o.job_id != outcome.job_id
        ]
        factor = _correction(outcome.machine, others).factor if others else 1.0
        calibrated.append(_ape(outcome.predicted_s * factor, outcome.actual_s))
    return PartitionReport(
        partition=name,
        jobs=len(rows),
        completed=len(done),
        mape=sum(_ape(o.predicted_s, o.actual_s) for o in done) / len(done),
        calibrated_mape=sum(calibrated) / len(calibrated),
        median_ratio=median(o.actual_s / o.predicted_s for o in done),
        within_p90=sum(o.actual_s <= o.predicted_p90_s for o in done) / len(done),
    )


def _calibrating(outcomes: Sequence[Outcome]) -> list[Outcome]:
    return [o for o in outcomes if o.state in CALIBRATING_STATES and o.actual_s > 0]


def _ape(predicted: float, actual: float) -> float:
    return abs(predicted - actual) / actual
