"""How well one machine's predictors generalise: to a model never measured (leave one model out), to a batch
size never measured, and in peak memory. Every figure is a held-out prediction, never a training fit.

Leave one model out also drops the layer geometries only that model has, as for a model new to the zoo.
An unseen batch size is each interior step batch held out for every model at once, as for a query at a
batch size the nightly grid never ran (say 48): each model keeps its other batch sizes, as a zoo model
queried at 48 would. The layer micro-benchmarks stay: they run at their own fixed batch sizes (the zoo's:
1, 2, 8, 15, 16, 128, on each side of PyTorch's CPU kernel switches), which such a query has too, and are
never the held-out step measurement; held-out steps at 4, 32 and 64 lie between them.

Each evidence class's band is judged on samples it was not made from (`advisor.predict.heldout.coverage`):
the share at or under its p10, p50 and p90 should be near 10%, 50% and 90%.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from math import log, pi, sqrt
from statistics import mean, variance
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from advisor.introspect import LayerTable
from advisor.predict.heldout import ClassCoverage, coverage, fit_served, heldout_residuals, without_models
from advisor.predict.machine import LayerSample, NotEnoughDataError, StepSample, fit_machine, fit_memory
from advisor.predict.registry import HELDOUT_FOLDS


class StepTimer(Protocol):
    """A fitted step model, as the held-out figures ask it."""

    def step_seconds(self, table: LayerTable, batch: int, amp: bool, channels_last: bool) -> float: ...


Fit = Callable[[str, Sequence[StepSample], Sequence[LayerSample]], StepTimer]
"""Fits one machine's step model: the product's (``fit_machine``) or a candidate beside it."""


class Point(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    batch: int
    measured_s: float
    predicted_s: float

    @property
    def error(self) -> float:
        return abs(self.predicted_s - self.measured_s) / self.measured_s


class MachineEvaluation(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    machine: str
    lomo_mape: float | None
    lomo_mape_by_model: dict[str, float | None]
    lomo_skipped: tuple[str, ...] = ()
    """Models left out of leave one model out: holding them out left no step or layer to train on."""
    unseen_batch_mape: float | None
    """None when fewer than three batch sizes were measured: nothing lies between them."""
    unseen_batch_mape_by_batch: dict[int, float | None]
    """Off the layer grid or on it, a held-out batch size tells a different story."""
    memory_mape: float | None
    """Leave one model out, like the time; None when no step recorded its peak."""
    measurement_error: float | None = None
    """How far the measured steps the held-out figures are scored against err by their own noise
    (`measurement_error`)."""
    lomo_points: tuple[Point, ...]
    bands: tuple[ClassCoverage, ...] = ()
    """Each evidence class's band and how it held out."""
    blend_weight: float | None = None
    """The served model's weight on today's step model, fitted on every step (`advisor.predict.blend`);
    None for another step model's figures."""


def _mape(points: Sequence[Point]) -> float | None:
    return sum(p.error for p in points) / len(points) if points else None


def leave_one_model_out(
    machine: str, steps: Sequence[StepSample], layers: Sequence[LayerSample], fit: Fit | None = None
) -> list[Point]:
    """``fit``: the step model held out; today's (``fit_machine``) by default."""
    fit = fit or fit_machine
    points = []
    for model in sorted({s.model for s in steps}):
        train = [s for s in steps if s.model != model]
        try:
            fitted = fit(machine, train, without_models(steps, layers, {model}))
        except NotEnoughDataError:  # it owned every layer measured: nothing is left to price it from
            continue
        for sample in (s for s in steps if s.model == model):
            predicted = fitted.step_seconds(sample.table, sample.batch, sample.amp, sample.channels_last)
            points.append(
                Point(model=model, batch=sample.batch, measured_s=sample.seconds, predicted_s=predicted)
            )
    return points


def unseen_batches(
    machine: str, steps: Sequence[StepSample], layers: Sequence[LayerSample], fit: Fit | None = None
) -> tuple[list[Point], tuple[int, ...]]:
    """Each interior step batch size held out in turn for every model (interpolation)."""
    fit = fit or fit_machine
    sizes = sorted({s.batch for s in steps})
    interior = tuple(sizes[1:-1])
    points = []
    for batch in interior:
        fitted = fit(machine, [s for s in steps if s.batch != batch], layers)
        for sample in (s for s in steps if s.batch == batch):
            predicted = fitted.step_seconds(sample.table, sample.batch, sample.amp, sample.channels_last)
            points.append(
                Point(model=sample.model, batch=batch, measured_s=sample.seconds, predicted_s=predicted)
            )
    return points, interior


def measurement_error(steps: Sequence[StepSample]) -> float | None:
    """How far a measured step, as training reads it, lies from its true time by its measurements' own
    noise: their log sd about each step's mean, pooled over the steps measured more than once, over the
    square root of each step's count, as a mean absolute error (a normal's: sqrt(2/pi) sd). No model
    scores a held-out MAPE far under it: one CPU night's 5.6% put its steps 6.0% from three other nights'
    (6.2% expected; benchmarks/README.md). None where no step was measured twice."""
    repeated = [s.runs for s in steps if len(s.runs) > 1]
    if not repeated:
        return None
    spread = sqrt(mean(variance([log(run) for run in runs]) for runs in repeated))
    return mean(sqrt(2 / pi) * spread / sqrt(max(len(s.runs), 1)) for s in steps)


def memory_error(steps: Sequence[StepSample]) -> float | None:
    errors = []
    for model in sorted({s.model for s in steps}):
        fitted = fit_memory([s for s in steps if s.model != model])
        for sample in (s for s in steps if s.model == model and s.peak_memory_bytes):
            measured = float(sample.peak_memory_bytes or 0)
            errors.append(abs(fitted.predict(sample.table, sample.batch, sample.amp) - measured) / measured)
    return sum(errors) / len(errors) if errors else None


def evaluate_machine(
    machine: str, steps: Sequence[StepSample], layers: Sequence[LayerSample]
) -> MachineEvaluation:
    """The served predictor's figures: the blend of today's step model and the op sum, as `advisor models
    train` fits it (``fit_served``), and its bands' coverage."""
    served = partial(fit_served, folds=HELDOUT_FOLDS)
    model = served(machine, steps, layers)
    residuals = heldout_residuals(model, steps, layers, HELDOUT_FOLDS)
    return held_out(machine, steps, layers, served).model_copy(
        update={"bands": tuple(coverage(residuals)), "blend_weight": model.blend_weight}
    )


def held_out(
    machine: str, steps: Sequence[StepSample], layers: Sequence[LayerSample], fit: Fit
) -> MachineEvaluation:
    """The held-out figures of one step model, without bands: what a side-by-side run compares."""
    lomo = leave_one_model_out(machine, steps, layers, fit)
    batches, interior = unseen_batches(machine, steps, layers, fit)
    return MachineEvaluation(
        machine=machine,
        lomo_mape=_mape(lomo),
        lomo_mape_by_model={
            m: _mape([p for p in lomo if p.model == m]) for m in sorted({p.model for p in lomo})
        },
        unseen_batch_mape=_mape(batches),
        unseen_batch_mape_by_batch={b: _mape([p for p in batches if p.batch == b]) for b in interior},
        memory_mape=memory_error(steps),
        measurement_error=measurement_error(steps),
        lomo_points=tuple(lomo),
        lomo_skipped=tuple(sorted({s.model for s in steps} - {p.model for p in lomo})),
    )
