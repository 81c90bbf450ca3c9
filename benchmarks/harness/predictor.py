"""Step-time models learned from Sia's table for a replay: one XGBoost regressor per GPU type.

They stand in for the models the nightly benchmark trains (arm C's `StepPredictor` in
`benchmarks.harness.product` reads them). They learn from the step table with the replayed jobs' batch
sizes taken out, so arm C predicts the configurations it is asked about from other batch sizes, as it would
for a real user's unseen job; the held-out rows (ground truth is known there) measure how well. The p90 is
the p50 times the 90th percentile of the K-fold out-of-fold errors on the training rows. Only placements
(GPUs, nodes) the models saw are predicted: a step's all-reduce depends on them.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import xgboost as xgb
from pydantic import BaseModel, ConfigDict

from advisor.predict.leastsquares import relative_least_squares
from benchmarks.harness.model import Arrival
from benchmarks.harness.truth import StepRow, StepTable

_PARAMS = {
    "tree_method": "exact",
    "objective": "reg:squarederror",
    "max_depth": 4,
    "eta": 0.1,
    "min_child_weight": 1.0,
    "nthread": 1,
    "seed": 0,
}
_ROUNDS = 150
FOLDS = 5
P90 = 0.9
_TINY_S = 1e-9
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
class SeenCurve:
    """What the advisor knows of one (application, GPUs, nodes): its measured batch range, and the line
    ``fixed + per_sample x batch`` through those measurements that the booster corrects."""

    low: int
    high: int
    fixed_s: float
    per_sample_s: float

    def log_line_s(self, batch: int) -> float:
        return math.log(max(self.fixed_s + self.per_sample_s * batch, _TINY_S))


@dataclass(frozen=True)
class GpuTypeModel:
    """One GPU type: the lines through its curves, the regressor on top, and the p90 factor.

    Trees are piecewise constant, so the booster is not asked to interpolate in the batch: it starts from
    the line of the job's placement (XGBoost's base margin) and learns what the line misses.
    """

    applications: tuple[str, ...]
    curves: dict[tuple[str, int, int], SeenCurve]
    booster: xgb.Booster
    p90_factor: float = 1.0

    def log_predict(self, rows: Sequence[_Key]) -> np.ndarray:
        return np.asarray(self.booster.predict(self.matrix(rows)))

    def matrix(self, rows: Sequence[_Key], target: np.ndarray | None = None) -> xgb.DMatrix:
        """One-hot application, log local batch, GPUs, nodes; the placement's line as the base margin."""
        features = np.zeros((len(rows), len(self.applications) + 3))
        for index, (application, gpus, nodes, batch) in enumerate(rows):
            features[index, self.applications.index(application)] = 1.0
            features[index, -3:] = (math.log(batch), gpus, nodes)
        margin = [self.curves[(app, gpus, nodes)].log_line_s(batch) for app, gpus, nodes, batch in rows]
        return xgb.DMatrix(features, label=target, base_margin=np.asarray(margin))


@dataclass(frozen=True)
class StepModels:
    machines: dict[str, GpuTypeModel]
    _memo: dict[tuple[str, str, int, int, int], tuple[float, float]] = field(
        default_factory=dict, repr=False, compare=False
    )

    def predict(
        self, application: str, gpu_type: str, gpus: int, nodes: int, micro_batch: int
    ) -> tuple[float, float]:
        """(p50, p90) of one micro-step in seconds, for a placement the advisor has seen (see
        ``batch_range``); memoised, since a replay asks the same few often."""
        key = (application, gpu_type, gpus, nodes, micro_batch)
        if key not in self._memo:
            machine = self.machines[gpu_type]
            p50 = math.exp(float(machine.log_predict([(application, gpus, nodes, micro_batch)])[0]))
            self._memo[key] = (p50, p50 * machine.p90_factor)
        return self._memo[key]

    def predict_all(self, gpu_type: str, rows: Sequence[_Key]) -> None:
        """Predicts many (application, GPUs, nodes, micro-batch) of one GPU type in one booster call (a call
        per row costs a matrix each), for `predict` to answer from."""
        machine = self.machines[gpu_type]
        for (application, gpus, nodes, batch), log_p50 in zip(rows, machine.log_predict(rows), strict=True):
            p50 = math.exp(float(log_p50))
            self._memo[(application, gpu_type, gpus, nodes, batch)] = (p50, p50 * machine.p90_factor)

    def batch_range(self, application: str, gpu_type: str, gpus: int, nodes: int) -> tuple[int, int] | None:
        """The local batches the advisor trusts for a placement: nothing larger fits, as far as it knows,
        and nothing smaller was measured. None: it never saw this placement."""
        machine = self.machines.get(gpu_type)
        curve = None if machine is None else machine.curves.get((application, gpus, nodes))
        return None if curve is None else (curve.low, curve.high)


def train_predictors(table: StepTable, held_out: Collection[tuple[str, int]]) -> StepModels:
    """One model per GPU type of the table, trained on every row not held out."""
    training = [row for row in table.rows if not is_held_out(row, held_out)]
    types = sorted({row.gpu_type for row in training})
    return StepModels({t: _train_machine([r for r in training if r.gpu_type == t]) for t in types})


def _train_machine(rows: Sequence[StepRow]) -> GpuTypeModel:
    """The model on every row; its p90 factor from K folds, each fitted (lines too) without its rows."""
    folds = np.random.default_rng(0).permutation(len(rows)) % FOLDS
    residuals: list[float] = []
    for fold in range(FOLDS):
        fitted = _fit([row for row, f in zip(rows, folds, strict=True) if f != fold])
        unseen = [
            row
            for row, f in zip(rows, folds, strict=True)
            if f == fold and (row.application, row.gpus, row.nodes) in fitted.curves
        ]
        predicted = fitted.log_predict([_key(row) for row in unseen])
        residuals.extend(np.log([row.step_s for row in unseen]) - predicted)
    return replace(_fit(rows), p90_factor=max(1.0, math.exp(float(np.quantile(residuals, P90)))))


def _key(row: StepRow) -> _Key:
    return row.application, row.gpus, row.nodes, row.local_batch


def fit_line(points: Sequence[tuple[int, float]]) -> tuple[float, float]:
    """``(a, c)`` of ``seconds = a + c * batch`` through (batch, seconds), both non-negative, by least
    squares on relative error; one point or one batch size gives a line through the origin."""
    if len({b for b, _ in points}) < 2:
        return 0.0, float(np.mean([t / b for b, t in points]))
    a, c = relative_least_squares([[1.0, float(b)] for b, _ in points], [t for _, t in points])
    return a, c


def _fit(rows: Sequence[StepRow]) -> GpuTypeModel:
    points: dict[tuple[str, int, int], list[tuple[int, float]]] = defaultdict(list)
    for row in rows:
        points[(row.application, row.gpus, row.nodes)].append((row.local_batch, row.step_s))
    curves = {}
    for placement, pairs in points.items():
        fixed_s, per_sample_s = fit_line(pairs)
        batches = [batch for batch, _ in pairs]
        curves[placement] = SeenCurve(min(batches), max(batches), fixed_s, per_sample_s)
    lines_only = GpuTypeModel(tuple(sorted({row.application for row in rows})), curves, xgb.Booster())
    target = np.log([row.step_s for row in rows])
    booster = xgb.train(_PARAMS, lines_only.matrix([_key(row) for row in rows], target), _ROUNDS)
    return replace(lines_only, booster=booster)


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
    predictors: StepModels, table: StepTable, held_out: Collection[tuple[str, int]]
) -> HeldOutError:
    """Scores the rows ``train_predictors`` left out, on the placements it learned."""
    errors: dict[str, list[float]] = {}
    covered = 0
    for row in table.rows:
        seen = predictors.batch_range(row.application, row.gpu_type, row.gpus, row.nodes)
        if not is_held_out(row, held_out) or seen is None:
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
