"""The advisor's own step-time models for a replay: one XGBoost regressor per GPU type.

They learn from the step table with the replayed jobs' batch sizes taken out, so arm C predicts the
configurations it is asked about from other batch sizes, as it would for a real user's unseen job; the
held-out rows (ground truth is known there) measure how well. The p90 is the p50 times the 90th percentile
of the K-fold out-of-fold errors on the training rows.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import xgboost as xgb
from pydantic import BaseModel, ConfigDict

from advisor.replay.model import Arrival
from advisor.replay.truth import StepRow, StepTable

_PARAMS = {
    "tree_method": "exact",
    "objective": "reg:squarederror",
    "max_depth": 6,
    "eta": 0.15,
    "min_child_weight": 1.0,
    "nthread": 1,
    "seed": 0,
}
_ROUNDS = 150
FOLDS = 5
P90 = 0.9
_Key = tuple[str, int, int, int]
"""(application, GPUs, nodes, local batch): what a prediction depends on for one GPU type."""
SAME_BATCH = 0.01
"""Sia measured a geometric grid (257, 513, 1025): a row within 1% of a replayed batch is that batch."""


def held_out_batches(arrivals: Iterable[Arrival]) -> set[tuple[str, int]]:
    """(application, local batch) of every replayed job's own configuration: round(global / GPUs)."""
    return {(a.application, round(a.global_batch / a.gpus)) for a in arrivals}


def is_held_out(row: StepRow, held_out: Collection[tuple[str, int]]) -> bool:
    return any(
        app == row.application and abs(row.local_batch - batch) <= SAME_BATCH * batch
        for app, batch in held_out
    )


@dataclass(frozen=True)
class MachineModel:
    """One GPU type's regressor, its applications (one-hot order), p90 factor and what it has seen."""

    gpu_type: str
    applications: tuple[str, ...]
    booster: xgb.Booster
    p90_factor: float
    ranges: dict[tuple[str, int, int], tuple[int, int]]
    """(application, GPUs, nodes) -> the smallest and largest local batch in the training rows."""

    def log_predict(self, rows: Sequence[_Key]) -> np.ndarray:
        return np.asarray(self.booster.predict(xgb.DMatrix(_features(self.applications, rows))))


def _features(applications: Sequence[str], rows: Sequence[_Key]) -> np.ndarray:
    """One-hot application, log local batch, GPUs, nodes."""
    matrix = np.zeros((len(rows), len(applications) + 3))
    for index, (application, gpus, nodes, batch) in enumerate(rows):
        matrix[index, applications.index(application)] = 1.0
        matrix[index, -3:] = (math.log(batch), gpus, nodes)
    return matrix


@dataclass(frozen=True)
class Predictors:
    machines: dict[str, MachineModel]
    _memo: dict[tuple[str, str, int, int, int], tuple[float, float]] = field(
        default_factory=dict, repr=False, compare=False
    )

    def predict(
        self, application: str, gpu_type: str, gpus: int, nodes: int, micro_batch: int
    ) -> tuple[float, float]:
        """(p50, p90) of one micro-step in seconds; memoised, since a replay asks the same few often."""
        key = (application, gpu_type, gpus, nodes, micro_batch)
        if key not in self._memo:
            machine = self.machines[gpu_type]
            if application not in machine.applications:
                raise KeyError(f"no {gpu_type} training rows for {application}")
            p50 = math.exp(float(machine.log_predict([(application, gpus, nodes, micro_batch)])[0]))
            self._memo[key] = (p50, p50 * machine.p90_factor)
        return self._memo[key]

    def batch_range(self, application: str, gpu_type: str, gpus: int, nodes: int) -> tuple[int, int] | None:
        """The local batches the advisor trusts for a placement: nothing larger fits, as far as it knows,
        and nothing smaller was measured. None: it never saw this placement."""
        machine = self.machines.get(gpu_type)
        return None if machine is None else machine.ranges.get((application, gpus, nodes))


def train_predictors(table: StepTable, held_out: Collection[tuple[str, int]]) -> Predictors:
    """One model per GPU type of the table, trained on every row not held out."""
    training = [row for row in table.rows if not is_held_out(row, held_out)]
    types = sorted({row.gpu_type for row in training})
    return Predictors({t: _train_machine(t, [r for r in training if r.gpu_type == t]) for t in types})


def _train_machine(gpu_type: str, rows: Sequence[StepRow]) -> MachineModel:
    applications = tuple(sorted({row.application for row in rows}))
    ranges: dict[tuple[str, int, int], tuple[int, int]] = {}
    for row in rows:
        placement = (row.application, row.gpus, row.nodes)
        low, high = ranges.get(placement, (row.local_batch, row.local_batch))
        ranges[placement] = (min(low, row.local_batch), max(high, row.local_batch))
    keys = [(row.application, row.gpus, row.nodes, row.local_batch) for row in rows]
    target = np.log([row.step_s for row in rows])
    features = _features(applications, keys)
    folds = np.random.default_rng(0).permutation(len(rows)) % FOLDS
    residuals = np.empty(len(rows))
    for fold in range(FOLDS):
        test = folds == fold
        booster = _fit(features[~test], target[~test])
        residuals[test] = target[test] - booster.predict(xgb.DMatrix(features[test]))
    p90_factor = max(1.0, math.exp(float(np.quantile(residuals, P90))))
    return MachineModel(gpu_type, applications, _fit(features, target), p90_factor, ranges)


def _fit(features: np.ndarray, target: np.ndarray) -> xgb.Booster:
    return xgb.train(_PARAMS, xgb.DMatrix(features, label=target), _ROUNDS)


class HeldOutError(BaseModel):
    """The advisor's step-time error where it was not trained: the replayed batch sizes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rows: int
    mape: float
    """Mean absolute percentage error of the p50 against the measured step time (0.1 = 10%)."""
    within_p90: float
    """Share of held-out rows whose measured step time is at most the predicted p90."""
    mape_by_type: dict[str, float]


def held_out_error(
    predictors: Predictors, table: StepTable, held_out: Collection[tuple[str, int]]
) -> HeldOutError:
    """Scores the rows ``train_predictors`` left out, for the GPU types and applications it learned."""
    errors: dict[str, list[float]] = {}
    covered = 0
    for row in table.rows:
        machine = predictors.machines.get(row.gpu_type)
        if not is_held_out(row, held_out) or machine is None or row.application not in machine.applications:
            continue
        p50, p90 = predictors.predict(row.application, row.gpu_type, row.gpus, row.nodes, row.local_batch)
        errors.setdefault(row.gpu_type, []).append(abs(p50 - row.step_s) / row.step_s)
        covered += row.step_s <= p90
    every = [error for per_type in errors.values() for error in per_type]
    if not every:
        raise ValueError("no held-out rows to score")
    return HeldOutError(
        rows=len(every),
        mape=float(np.mean(every)),
        within_p90=covered / len(every),
        mape_by_type={t: float(np.mean(e)) for t, e in sorted(errors.items())},
    )
