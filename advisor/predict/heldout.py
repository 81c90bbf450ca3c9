"""Held-out residuals of one machine's step predictions by evidence class, and the version trained with
the bands they make (`advisor.predict.bands`). Every residual is log(measured / predicted) by a predictor
that did not see the measurement, held out the way a query of that class is unseen:

- measured: one run of a configuration that ran more than once, against the median of its other runs;
- interpolated: one batch size of a model measured whole, from that model's other batch sizes (the shared
  step base keeps the measurement: one sample of dozens, it moves it little);
- layers: models held out in folds, their layers still measured;
- zoo: the same folds, less the layer geometries only the held-out models have, as for a model new to the
  zoo (a held-out model whose layers all remain measured would be a `layers` query and is not counted).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import exp, log
from statistics import median

from pydantic import BaseModel, ConfigDict

from advisor.predict.bands import TRAINED_CLASSES, ClassBand, class_bands, conformal_quantile
from advisor.predict.curves import interpolate
from advisor.predict.features import StepFeatures, timed_layers
from advisor.predict.machine import (
    LayerSample,
    MachineModel,
    StepSample,
    fit_layers,
    fit_machine,
    fit_steps,
    predict_steps,
    series,
)
from advisor.predict.types import Evidence
from advisor.records import LayerConfig

P90 = 0.9


@dataclass(frozen=True)
class Residual:
    model: str
    evidence: Evidence
    value: float
    """log(measured / predicted)."""


def fit_with_bands(
    machine: str, steps: Sequence[StepSample], layers: Sequence[LayerSample], *, folds: int
) -> MachineModel:
    """The machine's predictors with each evidence class's band and the held-out MAPE of models whose
    layers were measured (the figure the quality gate has always compared)."""
    model = fit_machine(machine, steps, layers)
    residuals = heldout_residuals(model, steps, layers, folds)
    unseen = [r.value for r in residuals if r.evidence == "layers"] or [0.0]
    return model.model_copy(
        update={
            "bands": class_bands(by_class(residuals)),
            "p90_log_ratio": conformal_quantile(unseen, P90),
            "heldout_mape": sum(abs(exp(-r) - 1.0) for r in unseen) / len(unseen),
        }
    )


def by_class(residuals: Sequence[Residual]) -> dict[Evidence, list[float]]:
    grouped: dict[Evidence, list[float]] = {}
    for residual in residuals:
        grouped.setdefault(residual.evidence, []).append(residual.value)
    return grouped


def heldout_residuals(
    model: MachineModel, steps: Sequence[StepSample], layers: Sequence[LayerSample], folds: int
) -> list[Residual]:
    return [*_repeats(steps), *_other_batches(model, steps), *_unseen_models(model, steps, layers, folds)]


def _repeats(steps: Sequence[StepSample]) -> list[Residual]:
    return [
        Residual(s.model, "measured", log(run) - log(median([*s.runs[:i], *s.runs[i + 1 :]])))
        for s in steps
        if len(s.runs) > 1
        for i, run in enumerate(s.runs)
    ]


def _other_batches(model: MachineModel, steps: Sequence[StepSample]) -> list[Residual]:
    fit = model.step_fit()
    curves = {(c.architecture, c.amp, c.channels_last): c.points for c in model.measured_curves}
    residuals = []
    for sample in steps:
        x = log(sample.batch)
        others = [p for p in curves.get(series(sample), ()) if abs(p[0] - x) > 1e-9]
        if not others:
            continue
        features = model.features(sample.table, sample.batch, sample.amp, sample.channels_last)
        predicted = log(fit.linear(features)) + interpolate(others, x)
        residuals.append(Residual(sample.model, "interpolated", log(sample.seconds) - predicted))
    return residuals


def _unseen_models(
    model: MachineModel, steps: Sequence[StepSample], layers: Sequence[LayerSample], folds: int
) -> list[Residual]:
    names = sorted({s.model for s in steps})
    count = min(folds, len(names))
    measured = [model.features(s.table, s.batch, s.amp, s.channels_last) for s in steps]
    residuals: list[Residual] = []
    for fold in range(count):
        held = set(names[fold::count])
        train = [i for i, s in enumerate(steps) if s.model not in held]
        test = [i for i, s in enumerate(steps) if s.model in held]
        if not train or not test:
            continue
        residuals += _fold(steps, measured, train, test, "layers")
        remaining = without_models(steps, layers, held)
        if not remaining:  # the held-out models owned every layer measured: no zoo to price them from
            continue
        fewer = fit_layers(model.machine, remaining)
        unseen = [i for i in test if not fewer.knows_layers(steps[i].table)]
        if unseen:
            features = [fewer.features(s.table, s.batch, s.amp, s.channels_last) for s in steps]
            residuals += _fold(steps, features, train, unseen, "zoo")
    return residuals


def _fold(
    steps: Sequence[StepSample],
    features: Sequence[StepFeatures],
    train: Sequence[int],
    test: Sequence[int],
    evidence: Evidence,
) -> list[Residual]:
    fit = fit_steps([steps[i] for i in train], [features[i] for i in train])
    predicted = predict_steps(fit, [features[i] for i in test])
    return [
        Residual(steps[i].model, evidence, log(steps[i].seconds) - p)
        for i, p in zip(test, predicted, strict=True)
    ]


def _geometry(config: LayerConfig) -> LayerConfig:
    return config.model_copy(update={"batch": 1, "amp": False, "cudnn_benchmark": True})


def without_models(
    steps: Sequence[StepSample], layers: Sequence[LayerSample], models: set[str]
) -> list[LayerSample]:
    """The layer measurements less geometries only ``models`` have: an unseen model's layers are
    unmeasured."""
    mine = {_geometry(c) for s in steps if s.model in models for c in timed_layers(s.table, 1, False)}
    others = {_geometry(c) for s in steps if s.model not in models for c in timed_layers(s.table, 1, False)}
    only_mine = mine - others
    return [s for s in layers if _geometry(s.config) not in only_mine]


class ClassCoverage(BaseModel):
    """How one evidence class's band held on residuals it was not made from: each held-out model's
    residuals against the band the machine's other models' residuals make."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    evidence: Evidence
    samples: int
    band_source: str
    """The class whose residuals made the band (another where this one had too few), or "none"."""
    p10_ratio: float | None
    p50_ratio: float | None
    p90_ratio: float | None
    """The band from every residual, as ratios to the prediction's point, as the model file holds it."""
    under_p10: int
    under_p50: int
    under_p90: int
    """Held-out samples at or under each quantile; their shares are these over ``samples``."""
    share_under_p10: float | None
    share_under_p50: float | None
    share_under_p90: float | None


def coverage(residuals: Sequence[Residual]) -> list[ClassCoverage]:
    """Per evidence class: each model's residuals against the bands of the others' (split by model)."""
    under: dict[Evidence, list[int]] = {e: [0, 0, 0] for e in TRAINED_CLASSES}
    for name in sorted({r.model for r in residuals}):
        bands = {b.evidence: b for b in class_bands(by_class([r for r in residuals if r.model != name]))}
        for residual in (r for r in residuals if r.model == name and r.evidence in bands):
            band = bands[residual.evidence]
            for i, edge in enumerate((band.p10, band.p50, band.p90)):
                under[residual.evidence][i] += residual.value <= edge
    whole = {b.evidence: b for b in class_bands(by_class(residuals))}
    counts = {e: sum(r.evidence == e for r in residuals) for e in TRAINED_CLASSES}
    return [_coverage(e, counts[e], under[e], whole.get(e)) for e in TRAINED_CLASSES]


def _coverage(evidence: Evidence, samples: int, under: list[int], band: ClassBand | None) -> ClassCoverage:
    edges = (None, None, None) if band is None else (band.p10, band.p50, band.p90)
    p10, p50, p90 = (None if e is None else exp(e) for e in edges)
    s10, s50, s90 = (u / samples if samples else None for u in under)
    return ClassCoverage(
        evidence=evidence,
        samples=samples,
        band_source="none" if band is None else band.source,
        p10_ratio=p10,
        p50_ratio=p50,
        p90_ratio=p90,
        under_p10=under[0],
        under_p50=under[1],
        under_p90=under[2],
        share_under_p10=s10,
        share_under_p50=s50,
        share_under_p90=s90,
    )
