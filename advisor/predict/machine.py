"""Fitting and applying one machine's predictors: layer times, step time (p10, p50, p90) and peak memory.

Trees are piecewise constant, so none is asked to interpolate in the batch size. A layer's time is linear
in the batch between its micro-benchmarks (a fixed and a per-sample cost, which change where a kernel
switches algorithm); a geometry never benchmarked gets the layer booster's times at the benchmarked batch
sizes and the polyline through those. A step's time is a non-negative linear base (layer times, op
count, parameters, untimed bytes; the layer time weighed by kernel path and by the benchmarked batch size
it comes from, as layers timed alone stray from their time inside a network), times a correction that
depends on the batch size alone and is shared by all models (kernels switch algorithms with the batch; the
curve is interpolated in log batch, so an unmeasured batch lies between its neighbours), times the step
booster's correction from the model's features. A model measured whole on the machine is the linear base
times its own measured ratio to it, interpolated the same way: its neighbours know it better than the zoo
does, and below its smallest measured batch the zoo's curve would carry in the few models that ran there.
The point served is this blended with the op sum's (`advisor.predict.blend`), its band its evidence
class's (`advisor.predict.bands`), measured on the blend by `advisor.predict.heldout`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import exp, log

import numpy as np
from pydantic import BaseModel, ConfigDict, PrivateAttr

from advisor.introspect import LayerTable
from advisor.introspect.training import training_time_factor
from advisor.ops import KernelPath, op_of
from advisor.predict.bands import ClassBand, machine_band
from advisor.predict.boosters import STEP_PARAMS, STEP_ROUNDS, apply_booster, exercise_booster, train_booster
from advisor.predict.curves import (
    MeasuredCurve,
    Polyline,
    batch_effects,
    interpolate,
    measured_curves,
    through,
)
from advisor.predict.features import (
    Part,
    StepFeatures,
    layer_terms,
    step_features,
    timed_layers,
)
from advisor.predict.layer_boosters import family_ratios, trained_boosters
from advisor.predict.layout import FeatureLayout, current_layout
from advisor.predict.leastsquares import relative_least_squares
from advisor.predict.outsized import Largest, largest_layers, outsized_seconds
from advisor.predict.peak_memory import MemoryFit, fit_peak_memory
from advisor.predict.roofline import LayerRoof, Roofline, fit_roofline
from advisor.predict.stored_opsum import StoredOpSum
from advisor.predict.types import Evidence
from advisor.records import LayerConfig, StepPart

_Curve = tuple[tuple[float, float], ...]
_TINY_S, _PREDICTED_MOST = 1e-9, 5_000


class NotEnoughDataError(ValueError):
    """A machine whose benchmarks cannot train a model yet; the others are trained regardless."""


@dataclass(frozen=True)
class LayerSample:
    config: LayerConfig
    seconds: float


@dataclass(frozen=True)
class StepSample:
    table: LayerTable
    model: str
    batch: int
    amp: bool
    channels_last: bool
    seconds: float
    peak_memory_bytes: int | None
    runs: tuple[float, ...] = ()
    """Each run's own seconds where the configuration ran more than once: how far a repeat strays."""


class StepPrediction(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    step_p10_s: float
    step_s: float
    step_p90_s: float
    peak_memory_bytes: int
    band: ClassBand
    """The evidence behind the prediction and the band it earns."""


def fit_memory(samples: Sequence[StepSample]) -> MemoryFit:
    """The peak model of the measured steps (`advisor.predict.peak_memory.fit_peak_memory`)."""
    measured = [s for s in samples if s.peak_memory_bytes]
    steps = [(s.table, s.batch, s.amp) for s in measured]
    peaks = [float(s.peak_memory_bytes or 0) for s in measured]
    return fit_peak_memory(steps, peaks) if len(measured) >= 4 else MemoryFit()


def _key(config: LayerConfig) -> LayerConfig:
    """A layer's geometry and precision: CPUs have no cuDNN, so the benchmark flag does not matter."""
    return config.model_copy(update={"batch": 1, "cudnn_benchmark": True})


@dataclass(frozen=True)
class StepFit:
    coefficients: tuple[float, ...]
    calibration: Mapping[Part, float]
    curve: _Curve
    booster: str

    def base(self, features: StepFeatures) -> float:
        """Seconds: the linear base times the shared correction at this batch size."""
        return self.linear(features) * exp(interpolate(self.curve, log(features.batch)))

    def linear(self, features: StepFeatures) -> float:
        terms = features.base_terms(self.calibration)
        return max(float(np.dot(self.coefficients, terms)), _TINY_S)


class MachineModel(BaseModel):
    """Everything one machine's predictions need, serialisable as one JSON file."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    machine: str
    layer_base: tuple[float, float, float] = (1.0, 1.0, 0.0)
    """Coefficients of ``layer_terms``, which the layer booster corrects; the default (a second per flop, plus
    one) reads versions stored before the field."""
    layer_roof: LayerRoof | None = None
    """Where set, what the layer booster corrects in place of ``layer_base``: a candidate that
    `benchmarks/predict_zoo.py --compare` holds out beside the product (issue 51); never in a model file."""
    layer_booster: str
    matrix_booster: str = ""
    """Where set, the matrix products' own layer booster, and ``layer_booster`` the convolutions'
    (`advisor.predict.layer_boosters`); empty in older versions and where one family was not measured."""
    measured_layers: tuple[tuple[LayerConfig, float], ...]
    step_base: tuple[float, ...]
    """Coefficients of ``StepFeatures.base_terms``."""
    batch_curve: _Curve = ()
    """(log batch, log ratio of measured to base) shared by all models; empty in older versions."""
    step_booster: str
    p90_log_ratio: float
    """The 90th percentile of log(measured / predicted) over held-out models, every evidence class alike:
    the band of versions trained before ``bands``."""
    heldout_mape: float | None
    memory: MemoryFit
    architectures: tuple[str, ...]
    """Hashes of the architectures measured whole on this machine: their predictions deserve more trust."""
    measured_curves: tuple[MeasuredCurve, ...] = ()
    """Each model measured whole: its ratios to the base with the shared curve; empty in older versions."""
    layer_calibration: tuple[tuple[KernelPath, int, float], ...] = ()
    """(kernel path, benchmarked batch, multiplier of ``step_base``'s layer coefficient); empty (every part at
    1) in older versions."""
    bands: tuple[ClassBand, ...] = ()
    """Each evidence class's band from held-out residuals; empty in older versions (``band``)."""
    layout: FeatureLayout | None = None
    """The boosters' columns as fitted (`advisor.predict.layout`); None in versions from before it."""
    roofline: Roofline | None = None
    """The machine's rates from its micro-benchmarks and sweeps (`advisor.predict.roofline`): what prices a
    layer far larger than any benchmarked (`advisor.predict.outsized`); None in versions from before it."""
    op_sum: StoredOpSum | None = None
    """The op sum's fit on this model's layer part (`advisor.predict.blend`); None if unfitted or older."""
    blend_weight: float = 1.0
    """The served blend's weight on today's step model, the rest on ``op_sum``'s: 1 without one."""

    _polylines: dict[LayerConfig, Polyline] = PrivateAttr(default_factory=dict)
    _grid: tuple[int, ...] = PrivateAttr(default=())
    _largest: Largest = PrivateAttr(default_factory=dict)
    _predicted: dict[LayerConfig, Polyline] = PrivateAttr(default_factory=dict)
    """The booster's polylines, once for the blend's two models; bounded, as a daemon's users ask for any."""

    def model_post_init(self, context: object, /) -> None:
        points: dict[LayerConfig, list[tuple[int, float]]] = {}
        for config, seconds in self.measured_layers:
            points.setdefault(_key(config), []).append((config.batch, seconds))
        self._polylines = {key: tuple(sorted(pairs)) for key, pairs in points.items() if len(pairs) >= 2}
        self._grid = tuple(sorted({config.batch for config, _ in self.measured_layers}))
        self._largest = largest_layers(config for config, _ in self.measured_layers)

    def exercise(self) -> None:
        """Parses and runs each booster once: all xgboost's native code does with a file (`model_check`)."""
        boosters = (self.layer_booster, self.matrix_booster, self.step_booster)
        for encoded in (*boosters, self.op_sum.booster if self.op_sum else ""):
            if encoded:
                exercise_booster(encoded)

    def knows_layers(self, table: LayerTable) -> bool:
        """Whether every layer of a timed op in ``table`` was micro-benchmarked on this machine: its
        prediction then rests on its own parts, not on the layer booster's guesses."""
        configs = timed_layers(table, 1, False)
        return bool(configs) and all(_key(config) in self._polylines for config in configs)

    def layer_seconds(self, configs: Sequence[LayerConfig]) -> dict[LayerConfig, float]:
        return {c: through(points, c.batch) for c, points in self.layer_points(configs).items()}

    def layer_points(self, configs: Sequence[LayerConfig]) -> dict[LayerConfig, Polyline]:
        """Each layer's polyline through its micro-benchmarks where it has two or more, else through the
        layer booster's times at the benchmarked batch sizes."""
        if len(self._predicted) > _PREDICTED_MOST:
            self._predicted.clear()
        wanted = {_key(c) for c in configs} - self._polylines.keys() - self._predicted.keys()
        self._predicted.update(self._predicted_polylines(sorted(wanted, key=lambda c: c.key())))
        return {c: self._polylines.get(_key(c)) or self._predicted[_key(c)] for c in configs}

    def _predicted_polylines(self, keys: Sequence[LayerConfig]) -> dict[LayerConfig, Polyline]:
        if not keys:
            return {}
        grid = [[key.model_copy(update={"batch": batch}) for batch in self._grid or (1,)] for key in keys]
        flat = [config for row in grid for config in row]
        ratios = family_ratios(self.layer_booster, self.matrix_booster, flat)
        seconds = iter(
            outsized_seconds(c, self._largest, self.roofline) or exp(r) * self.layer_base_s(c)
            for c, r in zip(flat, ratios, strict=True)
        )
        return dict(zip(keys, [tuple((c.batch, next(seconds)) for c in row) for row in grid], strict=True))

    def layer_base_s(self, config: LayerConfig) -> float:
        """What the layer booster's ratio multiplies: the layer's roof where it has one, else the line."""
        if self.layer_roof is not None:
            return self.layer_roof.seconds(config)
        return max(float(np.dot(self.layer_base, layer_terms(config))), _TINY_S)

    def features(self, table: LayerTable, batch: int, amp: bool, channels_last: bool) -> StepFeatures:
        timed = timed_layers(table, batch, amp)
        return step_features(table, batch, amp, channels_last, timed, self.layer_points(timed))

    def predict(
        self, table: LayerTable, batch: int, amp: bool, channels_last: bool, devices: int = 1
    ) -> StepPrediction:
        """The step's time, and its peak memory on one of ``devices`` GPUs (`MemoryFit.predict`)."""
        features = self.features(table, batch, amp, channels_last)
        fit = self.step_fit()
        own = self._measured_curve(table.architecture_hash, amp, channels_last)
        if own:
            point_s = fit.linear(features) * exp(interpolate(own, log(batch)))
            measured = any(abs(x - log(batch)) < _TINY_S for x, _ in own)
            evidence: Evidence = "measured" if measured else "interpolated"
        else:
            (log_s,) = predict_steps(fit, [features])
            point_s = exp(log_s)
            evidence = "layers" if self.knows_layers(table) else "zoo"
        from advisor.predict.blend import blended_seconds  # the blend builds on this module

        point_s = blended_seconds(self, point_s, table, batch, amp, channels_last)
        point_s *= training_time_factor(table, batch)  # LoRA, checkpointing: 1 for a plain step
        band = self.band(evidence)
        return StepPrediction(
            step_p10_s=point_s * exp(band.p10),
            step_s=point_s * exp(band.p50),
            step_p90_s=point_s * exp(band.p90),
            peak_memory_bytes=round(self.memory.predict(table, batch, amp, devices)),
            band=band,
        )

    def step_seconds(self, table: LayerTable, batch: int, amp: bool, channels_last: bool) -> float:
        """The point prediction alone: what a side-by-side evaluation compares."""
        return self.predict(table, batch, amp, channels_last).step_s

    def band(self, evidence: Evidence) -> ClassBand:
        """The class's band; a version trained before bands by evidence has its machine-wide one."""
        found = next((b for b in self.bands if b.evidence == evidence), None)
        return found or machine_band(evidence, self.p90_log_ratio)

    def parts(self, table: LayerTable, batch: int, amp: bool, channels_last: bool) -> dict[StepPart, float]:
        """The served step split by part for `advisor profile`: the op sum's split where the blend weighs it
        (`blend.blended_split`), else the linear base's terms, scaled to the served prediction."""
        from advisor.predict.blend import blended_split  # the blend builds on this module

        split = blended_split(self, table, batch, amp, channels_last)
        if split is None:
            features, fit = self.features(table, batch, amp, channels_last), self.step_fit()
            terms = features.base_terms(fit.calibration)
            split = {p: c * t for p, c, t in zip(StepPart, fit.coefficients, terms, strict=True)}
        scale = self.predict(table, batch, amp, channels_last).step_s / max(sum(split.values()), _TINY_S)
        return {part: seconds * scale for part, seconds in split.items()}

    def _measured_curve(self, architecture: str, amp: bool, channels_last: bool) -> _Curve:
        key = (architecture, amp, channels_last)
        return next(
            (c.points for c in self.measured_curves if (c.architecture, c.amp, c.channels_last) == key), ()
        )

    def step_fit(self) -> StepFit:
        return StepFit(
            coefficients=self.step_base,
            calibration={(path, batch): m for path, batch, m in self.layer_calibration},
            curve=self.batch_curve,
            booster=self.step_booster,
        )


def fit_machine(
    machine: str, steps: Sequence[StepSample], layers: Sequence[LayerSample], *, layer_roof: bool = False
) -> MachineModel:
    """Fits every predictor of one machine, without bands (`advisor.predict.heldout.fit_with_bands`);
    ``layer_roof``: the layer booster corrects the layers' roof (``fit_layers``)."""
    if not steps or not layers:
        raise NotEnoughDataError(f"machine {machine}: no step or no layer measurements to train on")
    base = fit_layers(machine, layers, roof=layer_roof).model_copy(
        update={
            "memory": fit_memory(steps),
            "architectures": tuple(sorted({s.table.architecture_hash for s in steps})),
        }
    )
    features = [base.features(s.table, s.batch, s.amp, s.channels_last) for s in steps]
    fit = fit_steps(steps, features)
    return base.model_copy(
        update={
            "step_base": fit.coefficients,
            "batch_curve": fit.curve,
            "step_booster": fit.booster,
            "measured_curves": measured_curves(
                (series(s), s.batch, log(s.seconds) - log(fit.linear(f)))
                for s, f in zip(steps, features, strict=True)
            ),
            "layer_calibration": tuple((path, b, m) for (path, b), m in sorted(fit.calibration.items())),
        }
    )


def fit_layers(machine: str, layers: Sequence[LayerSample], *, roof: bool = False) -> MachineModel:
    """The machine's layer times alone (``layer_seconds``), before any step is fitted on top of them: the
    timed ops' (the sweeps of what is not compute are the roofline's, `advisor.predict.roofline`). The
    booster corrects a line in FLOPs and bytes fitted to the layers, or with ``roof`` the layers' roof
    (`advisor.predict.roofline.LayerRoof`), to which a layer larger than any benchmarked keeps its ratio."""
    swept, layers = layers, [s for s in layers if op_of(s.config).timed]
    if not layers:
        raise NotEnoughDataError(f"machine {machine}: no convolution or linear measured to train on")
    line = relative_least_squares([layer_terms(s.config) for s in layers], [s.seconds for s in layers])
    rates = fit_roofline([(s.config, s.seconds) for s in swept])
    model = MachineModel(
        machine=machine,
        layer_base=(line[0], line[1], line[2]),
        layer_roof=rates.layer_roof() if roof else None,
        layer_booster="",
        measured_layers=tuple((s.config, s.seconds) for s in layers),
        step_base=(),
        step_booster="",
        p90_log_ratio=0.0,
        heldout_mape=None,
        memory=MemoryFit(),
        architectures=(),
        layout=current_layout(),
        roofline=rates,
    )
    layer, matrix = trained_boosters(model.layer_base_s, [(s.config, s.seconds) for s in layers])
    return model.model_copy(update={"layer_booster": layer, "matrix_booster": matrix})


def _rows(fit: StepFit, features: Sequence[StepFeatures]) -> list[list[float]]:
    return [[*f.vector(), log(fit.base(f))] for f in features]


def fit_steps(steps: Sequence[StepSample], features: Sequence[StepFeatures]) -> StepFit:
    """The linear base (``_calibrated_base``), the batch curve (``batch_effects`` of the log ratios to it),
    then the booster on what both leave."""
    coefficients, calibration = _calibrated_base(features, [s.seconds for s in steps])
    linear = StepFit(coefficients, calibration, curve=(), booster="")
    residuals = [
        (series(sample), f.batch, log(sample.seconds) - log(linear.linear(f)))
        for sample, f in zip(steps, features, strict=True)
    ]
    fit = StepFit(coefficients, calibration, curve=batch_effects(residuals), booster="")
    targets = [log(s.seconds) - log(fit.base(f)) for s, f in zip(steps, features, strict=True)]
    booster = train_booster(STEP_PARAMS, STEP_ROUNDS, _rows(fit, features), targets)
    return StepFit(coefficients, calibration, fit.curve, booster)


def _calibrated_base(
    features: Sequence[StepFeatures], seconds: Sequence[float]
) -> tuple[tuple[float, ...], dict[Part, float]]:
    """The base's coefficients, and a multiplier of its layer coefficient for each ``Part``: a layer timed
    alone strays from its time inside a network by kernel path and batch size, which bends a model's ratio
    to the base between batch sizes, where its kernel switches (figures: benchmarks/README.md). Shrunk toward
    the shared coefficient, so a part the steps rarely reach keeps it."""
    parts = sorted({part for f in features for part in f.layer_parts})
    rows = [[f.layer_parts.get(part, 0.0) for part in parts] + f.base_terms({})[1:] for f in features]
    *coefficients, shared = relative_least_squares(rows, seconds, shrunk=len(parts))
    own = coefficients[: len(parts)]
    calibration = {part: c / shared for part, c in zip(parts, own, strict=True)} if shared else {}
    return (shared, *coefficients[len(parts) :]), calibration


def series(sample: StepSample) -> tuple[str, bool, bool]:
    return sample.table.architecture_hash, sample.amp, sample.channels_last


def predict_steps(fit: StepFit, features: Sequence[StepFeatures]) -> list[float]:
    """Log seconds."""
    ratios = apply_booster(fit.booster, _rows(fit, features))
    return [r + log(fit.base(f)) for r, f in zip(ratios, features, strict=True)]
