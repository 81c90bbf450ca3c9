"""Held-out residuals of one machine's step predictions by evidence class, and the version trained with
the bands they make (`advisor.predict.bands`). Every residual is log(measured / predicted) by a predictor
that did not see the measurement, held out the way a query of that class is unseen, and the predictor is
the served one: today's step model and the op sum, each held out so, blended at the served weight
(`advisor.predict.blend`), which the zoo class's folds fit (``fit_served``):

- measured: one run of a configuration that ran more than once, against the median of its other runs;
- interpolated: one batch size of a model measured whole, from that model's other batch sizes (the shared
  step base keeps the measurement: one sample of dozens, it moves it little);
- layers: models held out in folds, their layers still measured;
- zoo: the same folds, less the layer geometries only the held-out models have, as for a model new to the
  zoo (a held-out model whose layers all remain measured would be a `layers` query and is not counted).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from math import exp, log
from statistics import median

from pydantic import BaseModel, ConfigDict

from advisor.predict.bands import TRAINED_CLASSES, ClassBand, class_bands, conformal_quantile
from advisor.predict.blend import PairedStep, best_weight, served_opsum, stored, weighted
from advisor.predict.curves import interpolate
from advisor.predict.features import StepFeatures, timed_layers
from advisor.predict.machine import (
    LayerSample,
    MachineModel,
    NotEnoughDataError,
    StepSample,
    fit_layers,
    fit_machine,
    fit_steps,
    predict_steps,
    series,
)
from advisor.predict.opsum import OpSumModel, OpTerms, fit_own_scales, fixed_and_sampled, opsum_on, step_terms
from advisor.predict.types import Evidence
from advisor.records import LayerConfig

P90 = 0.9
_TINY_S = 1e-9
PricedPart = tuple[MachineModel, Sequence[OpTerms]]
"""A layer part and every step's terms on it (`advisor.predict.opsum.step_terms`): what a fold's op sum
is fitted on and predicts from."""
Terms = Sequence[OpTerms] | None
"""The steps' terms on the served model's layer part; None where it holds no op sum."""


@dataclass(frozen=True)
class Residual:
    model: str
    evidence: Evidence
    value: float
    """log(measured / predicted)."""


@dataclass(frozen=True)
class FoldStep:
    """A step of a model held out in a fold, as each step model fitted without it predicts it."""

    index: int
    """Of the step in the machine's steps."""
    evidence: Evidence
    """``layers`` (its layers still measured) or ``zoo`` (its own layer geometries dropped)."""
    counted: bool
    """Whether it makes a residual of its class: a zoo step whose layers all remain measured would be a
    ``layers`` query; the blend's weight is fitted on every zoo step regardless."""
    today_s: float
    op_sum_s: float | None
    """None where no op sum was fitted."""


def fit_served(
    machine: str, steps: Sequence[StepSample], layers: Sequence[LayerSample], *, folds: int
) -> MachineModel:
    """The served step model, without bands: today's and the op sum fitted on every step, blended with the
    weight that fits best the steps of the models held out in ``folds`` folds, their own layer geometries
    dropped as for a model new to the zoo (``zoo`` `FoldStep`s); today's alone (weight 1) where the op sum
    cannot be fitted or no fold could."""
    return _served(machine, steps, layers, folds, bands=False)[0]


def fit_with_bands(
    machine: str, steps: Sequence[StepSample], layers: Sequence[LayerSample], *, folds: int
) -> MachineModel:
    """The served model (``fit_served``) with each evidence class's band and the held-out MAPE of models
    whose layers were measured (the figure the quality gate has always compared), all of the blend's
    predictions, which are the served ones."""
    model, held, terms = _served(machine, steps, layers, folds, bands=True)
    residuals = _residuals(model, steps, held, terms)
    unseen = [r.value for r in residuals if r.evidence == "layers"] or [0.0]
    return model.model_copy(
        update={
            "bands": class_bands(by_class(residuals)),
            "p90_log_ratio": conformal_quantile(unseen, P90),
            "heldout_mape": sum(abs(exp(-r) - 1.0) for r in unseen) / len(unseen),
        }
    )


def _served(
    machine: str, steps: Sequence[StepSample], layers: Sequence[LayerSample], folds: int, *, bands: bool
) -> tuple[MachineModel, list[FoldStep], Terms]:
    """The served model, its held-out fold steps (the ``layers`` class's only with ``bands``) and the
    steps' terms on its layer part (None without an op sum)."""
    model = fit_machine(machine, steps, layers)
    terms = None
    with suppress(NotEnoughDataError):  # too few measurements for the op sum: today's alone
        found = step_terms(model, steps)
        model = model.model_copy(update={"op_sum": stored(opsum_on(model, steps, found))})
        terms = found
    held = fold_steps(model, steps, layers, folds, bands=bands, terms=terms)
    paired = [
        PairedStep(steps[h.index].seconds, h.today_s, h.op_sum_s)
        for h in held
        if h.evidence == "zoo" and h.op_sum_s is not None
    ]
    weight = best_weight(paired) if paired else 1.0
    return model.model_copy(update={"blend_weight": weight}), held, terms


def by_class(residuals: Sequence[Residual]) -> dict[Evidence, list[float]]:
    grouped: dict[Evidence, list[float]] = {}
    for residual in residuals:
        grouped.setdefault(residual.evidence, []).append(residual.value)
    return grouped


def heldout_residuals(
    model: MachineModel, steps: Sequence[StepSample], layers: Sequence[LayerSample], folds: int
) -> list[Residual]:
    """The served predictor's (``model``'s blend, at its weight) held-out residuals of every class."""
    terms = None if model.op_sum is None else step_terms(model, steps)
    return _residuals(model, steps, fold_steps(model, steps, layers, folds, bands=True, terms=terms), terms)


def _residuals(
    model: MachineModel, steps: Sequence[StepSample], held: Sequence[FoldStep], terms: Terms
) -> list[Residual]:
    op_sum = served_opsum(model)
    priced = None if op_sum is None or terms is None else (op_sum, terms)
    weight = model.blend_weight if priced is not None else 1.0
    others = {} if priced is None else _op_sum_interpolated(*priced, steps)
    found = [*_repeats(priced, weight, steps), *_other_batches(model, steps, others)]
    for h in (h for h in held if h.counted):
        predicted = h.today_s if h.op_sum_s is None else weighted(h.today_s, h.op_sum_s, weight)
        step = steps[h.index]
        found.append(Residual(step.model, h.evidence, log(step.seconds) - log(predicted)))
    return found


def _repeats(
    priced: tuple[OpSumModel, Sequence[OpTerms]] | None, weight: float, steps: Sequence[StepSample]
) -> list[Residual]:
    """Today's prediction of a measured configuration is its measurement: one run held out, the median of
    the others; the op sum's, its own scales' (one run of several moves them little)."""
    found = []
    for i, s in enumerate(steps):
        if len(s.runs) < 2:
            continue
        op_s = None if priced is None else priced[0].priced(priced[1][i], s.table.architecture_hash)
        for j, run in enumerate(s.runs):
            today_s = median([*s.runs[:j], *s.runs[j + 1 :]])
            predicted = today_s if op_s is None else weighted(today_s, op_s, weight)
            found.append(Residual(s.model, "measured", log(run) - log(predicted)))
    return found


def _other_batches(
    model: MachineModel, steps: Sequence[StepSample], op_sum_s: Mapping[int, float]
) -> list[Residual]:
    """Each step of a model measured whole at other batch sizes, from those alone: today's from its own
    curve's other points, the op sum's from its own scales refitted on them (``op_sum_s``, by step)."""
    fit = model.step_fit()
    curves = {(c.architecture, c.amp, c.channels_last): c.points for c in model.measured_curves}
    residuals = []
    for i, sample in enumerate(steps):
        x = log(sample.batch)
        others = [p for p in curves.get(series(sample), ()) if abs(p[0] - x) > 1e-9]
        if not others:
            continue
        features = model.features(sample.table, sample.batch, sample.amp, sample.channels_last)
        predicted = exp(log(fit.linear(features)) + interpolate(others, x))
        if i in op_sum_s:
            predicted = weighted(predicted, op_sum_s[i], model.blend_weight)
        residuals.append(Residual(sample.model, "interpolated", log(sample.seconds) - log(predicted)))
    return residuals


def _op_sum_interpolated(
    op_sum: OpSumModel, terms: Sequence[OpTerms], steps: Sequence[StepSample]
) -> dict[int, float]:
    """Each step of a model measured at other batch sizes, as the op sum predicts it from those alone."""
    split = [fixed_and_sampled(op_sum.shares(t)) for t in terms]
    found = {}
    for i, sample in enumerate(steps):
        others = [
            (split[j], other.seconds)
            for j, other in enumerate(steps)
            if series(other) == series(sample) and other.batch != sample.batch
        ]
        if others:
            fixed, sampled = fit_own_scales(others)
            found[i] = max(fixed * split[i][0] + sampled * split[i][1], _TINY_S)
    return found


def fold_steps(
    model: MachineModel,
    steps: Sequence[StepSample],
    layers: Sequence[LayerSample],
    folds: int,
    *,
    bands: bool,
    terms: Terms,
) -> list[FoldStep]:
    """Each model held out in one of ``folds`` folds, as both step models fitted without it predict its
    steps: its layers dropped where only it has them (``zoo``), and with ``bands`` still measured too
    (``layers``). The op sum is fitted on the same layer part as today's where ``terms`` (the steps' on
    ``model``'s layer part) are given."""
    names = sorted({s.model for s in steps})
    count = min(folds, len(names))
    measured = [model.features(s.table, s.batch, s.amp, s.channels_last) for s in steps] if bands else []
    whole = None if terms is None else (model, terms)
    found: list[FoldStep] = []
    for fold in range(count):
        held = set(names[fold::count])
        train = [i for i, s in enumerate(steps) if s.model not in held]
        test = [i for i, s in enumerate(steps) if s.model in held]
        if not train or not test:
            continue
        if bands:
            found += _fold(steps, measured, (train, test), "layers", whole)
        remaining = without_models(steps, layers, held)
        if not remaining:  # the held-out models owned every layer measured: no zoo to price them from
            continue
        fewer = fit_layers(model.machine, remaining)
        counted = {i for i in test if not fewer.knows_layers(steps[i].table)}
        if whole is not None or counted:
            features = [fewer.features(s.table, s.batch, s.amp, s.channels_last) for s in steps]
            priced = None if whole is None else _priced(fewer, steps)
            zoo = _fold(steps, features, (train, test), "zoo", priced, counted)
            found += zoo if whole is not None else [h for h in zoo if h.counted]
    return found


def _priced(layer_part: MachineModel, steps: Sequence[StepSample]) -> PricedPart | None:
    with suppress(NotEnoughDataError):
        return layer_part, step_terms(layer_part, steps)
    return None


def _fold(
    steps: Sequence[StepSample],
    features: Sequence[StepFeatures],
    split: tuple[Sequence[int], Sequence[int]],
    evidence: Evidence,
    priced: PricedPart | None,
    counted: set[int] | None = None,
) -> list[FoldStep]:
    """One fold's predictions: today's step fit on ``features`` of the training steps, and the op sum on
    ``priced``'s layer part (none without it, or where the fold's steps are too few for it)."""
    train, test = split
    fit = fit_steps([steps[i] for i in train], [features[i] for i in train])
    today = predict_steps(fit, [features[i] for i in test])
    op_sum_s = {} if priced is None else _op_sum_held_out(priced, steps, split)
    return [
        FoldStep(
            index=i,
            evidence=evidence,
            counted=counted is None or i in counted,
            today_s=exp(p),
            op_sum_s=op_sum_s.get(i),
        )
        for i, p in zip(test, today, strict=True)
    ]


def _op_sum_held_out(
    priced: PricedPart, steps: Sequence[StepSample], split: tuple[Sequence[int], Sequence[int]]
) -> dict[int, float]:
    """The test steps as the op sum fitted on the training steps predicts them; none where they are too
    few for it."""
    (layer_part, terms), (train, test) = priced, split
    try:
        op_sum = opsum_on(layer_part, [steps[i] for i in train], [terms[i] for i in train])
    except NotEnoughDataError:
        return {}
    return {i: op_sum.priced(terms[i], steps[i].table.architecture_hash) for i in test}


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
