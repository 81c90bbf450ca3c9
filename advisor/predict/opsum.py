"""The step as a sum of what its ops cost, then a booster on what that sum leaves (issue 51).

Each timed op (convolutions, linears) costs its own measured curve where it was micro-benchmarked, else the
layer booster's (`MachineModel.layer_seconds`), never less than its bytes at the bandwidth roof (the booster
prices a huge linear's weights as cheap as a small one's); every other op costs the machine's roofline
(`advisor.predict.roofline`): its hand-counted FLOPs at its family's rate or its bytes at the bandwidth,
whichever is longer (its swept bandwidth curve where the nightly grid measured it, which holds its
launches, less what timing an op alone adds: `MachineRates.network_seconds`). To those: the launches no
price holds, the update of the trainable parameters by the table's optimizer and their gradients' release
after it, and the time off the device (a fixed host cost per step and a per-sample one: the loader's, what
makes small batches CPU-bound, as the CNN-prediction research's non-GPU term). Each term is in seconds,
so a model the zoo lacks is priced by what it does, not by what correlates in the zoo.

What measures a term alone sets its price: the untimed ops, the launches and the update keep the sweeps'
prices in proportion to each other, as whole steps cannot tell them apart (they grow with the same models;
fitted freely, the untimed ops got scale 0 and the launches 14.5, benchmarks/README.md). The steps fit
only what an op timed alone costs inside a network: one scale for those anchored terms together and the
timed layers' (by kernel path and benchmarked batch), all shrunk toward one shared scale; the host's two
terms; and the scales of measurable terms no sweep priced (their prices then are the timed layers'
roofline's guesses). The step booster corrects what is left from batch-free features (each term's share),
so it cannot learn a batch size it never saw. A model measured whole keeps its own two scales, of its fixed
and of its per-sample seconds, fitted to its measured steps: one noisy step bends a two-parameter curve
less than it bends an interpolation through it. Split for `advisor profile`, what each layer pays outside
its kernels (its kind's tiny layer's cost, else its launches) is per-op dispatch, as a profile counts it.

Half of the product's step model: the served prediction is its blend with today's
(`advisor.predict.machine`), weighted as fits held-out steps best (`advisor.predict.blend`), as each errs
where the other does not; ``benchmarks/predict_zoo.py --compare`` sets each alone beside the blend.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from math import exp, log

from advisor.introspect import Layer, LayerTable
from advisor.ops import Cost, KernelPath, layer_op, op_of
from advisor.ops.configs import kernels
from advisor.ops.rates import OP_LAUNCHES
from advisor.predict.boosters import STEP_PARAMS, STEP_ROUNDS, apply_booster, train_booster
from advisor.predict.curves import segment, through_weights
from advisor.predict.features import kernel_path, split_timed
from advisor.predict.leastsquares import relative_least_squares
from advisor.predict.machine import (
    LayerSample,
    MachineModel,
    NotEnoughDataError,
    StepSample,
    fit_layers,
    series,
)
from advisor.predict.roofline import LAUNCHES_PER_LAYER, UPDATES, Roofline, release_seconds, update_seconds
from advisor.records import LayerConfig, StepPart

_TINY = 1e-9
_TENSORS_PER_LAYER = 2
"""A weight and a bias (or a norm's scale and shift): a layer's tensors where no op's configuration says."""
TERM_PARTS = (
    StepPart.LAYERS,
    StepPart.MEMORY_BOUND,
    StepPart.DISPATCH,
    StepPart.OPTIMIZER,
    StepPart.DISPATCH,
    StepPart.DISPATCH,
)
"""What `advisor profile` names each of ``OpTerms.columns`` (timed layers, untimed ops, launches, the
optimizer, the host per step and per sample): the time off the device is profiled outside every kernel."""
_MEASURABLE = (1, 2, 3)
"""The columns a sweep measures alone (untimed ops, launches, the update): where it did, they are anchored,
one scale for them all, as whole steps cannot tell them apart (they grow with the same models); where it
did not, their prices are the timed layers' roofline's guesses, and the steps fit their scales."""


@dataclass(frozen=True)
class OpTerms:
    """One model at one batch size and settings, priced op by op on one machine."""

    batch: int
    amp: bool
    channels_last: bool
    layer_parts: Mapping[OpPart, float]
    """The timed layers' seconds by ``OpPart``."""
    vector_s: float
    launch_s: float
    """Launches no op's price holds (every untimed op's where no sweep priced it), and the module calls
    (`module_calls`, each at the module chain's cost beyond the launch chain's)."""
    optimizer_s: float
    """The update and the gradients' release after it (``release_s``)."""
    parameters: int
    layers: int
    anchored: frozenset[int] = frozenset()
    """The columns priced by a sweep's measurements, under one scale (``_MEASURABLE``)."""
    release_s: float = 0.0

    def columns(self, calibration: Mapping[OpPart, float]) -> list[float]:
        timed = sum(calibration.get(part, 1.0) * s for part, s in self.layer_parts.items())
        return [timed, self.vector_s, self.launch_s, self.optimizer_s, 1.0, float(self.batch)]


def module_calls(table: LayerTable) -> int:
    """The ``nn.Module`` calls of one forward, counted from the layers' names (module paths): each leaf's
    call (a leaf called twice, as resnet18 calls a block's ReLU, is two layers) and every container above a
    layer once, the model's own included; a bare op is named by the container it runs in. A swept or timed
    op's price has its one call taken out (`MachineRates.alone_s`), so a network pays them here."""
    names = [layer.name for layer in table.layers]
    containers = {""} | {
        ".".join(name.split(".")[:i]) for name in names for i in range(1, name.count(".") + 1)
    }
    return len(containers) + sum(name not in containers for name in names)


def parameter_tensors(table: LayerTable) -> int:
    """The tensors the optimizer updates, counted by hand from each layer's op: a weight, and a bias where
    the layer's parameters are more than its weight; a norm's one or two a channel (RMS norm: its scale;
    the others: scale and shift); an embedding's table. An SGD step loops over tensors on a CPU, so a
    tensor costs as much as tens of thousands of parameters (mobilenet_v2: 158, not 210)."""
    return sum(_tensors(layer) for layer in table.layers if layer.parameters > 0)


def _tensors(layer: Layer) -> int:
    found = layer_op(layer)
    if found is None:
        return _TENSORS_PER_LAYER
    op, c = found
    if op.family != "vector":
        weight = c.in_channels * c.out_channels * c.kernel[0] * c.kernel[1] // c.groups
        return 1 if layer.parameters <= weight else 2
    if op.name.endswith("norm"):
        return min(max(layer.parameters // c.in_channels, 1), _TENSORS_PER_LAYER)
    return 1


def untimed_seconds(untimed: Sequence[Layer], batch: int, amp: bool, rates: Roofline) -> float:
    """The roofline of every layer no timed op covers (``split_timed``): its op's hand count where the
    registry has one, each of its kernels (a composite module's several: `configs.kernels`), else the
    introspection's costs for it, as a vector op's."""
    total = 0.0
    for layer in untimed:
        found = layer_op(layer, batch, amp)
        if found is not None:
            op, config = found
            total += rates.layer_op_seconds(op, config) * kernels(layer)
        else:
            c = layer.at_batch(batch)
            moved = float(c.bytes_read + c.bytes_written)
            total += rates.op_seconds("vector", Cost(c.forward_flops, c.backward_flops, moved, 0.0))
    return total


OpPart = tuple[str, KernelPath, int]
"""Timed layers' seconds by op (dense, depthwise, grouped convolution, linear), kernel path and the
benchmarked batch they are interpolated from: a depthwise convolution timed alone strays from its time
inside a network otherwise than a dense one."""


def op_parts(
    layers: MachineModel, rates: Roofline, configs: Sequence[LayerConfig], batch: int
) -> dict[OpPart, float]:
    """Each benchmarked batch's time less what timing the layer alone added (`MachineRates.alone_s`, as
    for a swept op: the same harness times both), no shorter than its launches nor than the layer's bytes
    take at the bandwidth roof (`bytes_floor`): the layer booster, fitted on small layers, does not know a
    huge one's weights are memory-bound at small batches. Only the benchmarked batches ``batch`` is read
    from are floored: a floor is the price's costliest part (a served prediction prices every layer).
    ``configs``: the step's ``timed_layers``."""
    points = layers.layer_points(configs)
    alone, launches = rates.swept.alone_s, LAUNCHES_PER_LAYER * rates.launch_seconds()
    parts: dict[OpPart, float] = {}
    for config in configs:
        floored = tuple(
            (b, max(s - alone, launches, bytes_floor(rates, config, b)))
            for b, s in segment(points[config], batch)
        )
        for benchmarked, weight in through_weights(floored, batch):
            part = (op_of(config).name, kernel_path(config), benchmarked)
            parts[part] = parts.get(part, 0.0) + weight * dict(floored)[benchmarked]
    return parts


def bytes_floor(rates: Roofline, config: LayerConfig, batch: int) -> float:
    """The seconds a timed layer's forward and backward bytes (its weights read twice, their gradient
    written) take at ``batch`` at the fastest swept op's bandwidth at that size; none unswept."""
    cost = op_of(config).cost(config.model_copy(update={"batch": batch}))
    return rates.swept.least_bytes_seconds(cost.forward_bytes + cost.backward_bytes) or 0.0


def op_terms(
    layers: MachineModel, rates: Roofline, table: LayerTable, batch: int, amp: bool, channels_last: bool
) -> OpTerms:
    """The step's terms. A launch costs what the launch chain says; the timed layers' curves hold their
    launches, and so do the untimed ops' prices where the sweeps measured them (their curves' small end is
    the launches), else the launches are a term of their own; so are the module calls."""
    configs, untimed = split_timed(table, batch, amp)
    untimed_launches = len(untimed) * OP_LAUNCHES * rates.launch_seconds()
    calls_s = module_calls(table) * (rates.swept.module_s or 0.0)
    held = rates.prices_launches
    update = UPDATES[table.training.optimizer if table.training else None]
    swept = (held, held or rates.swept.launch_s is not None, rates.swept.update_s(update, 1) is not None)
    update_s = update_seconds(table, rates, update, parameter_tensors(table))
    release = release_seconds(table, rates)
    return OpTerms(
        batch=batch,
        amp=amp,
        channels_last=channels_last,
        layer_parts=op_parts(layers, rates, configs, batch),
        vector_s=untimed_seconds(untimed, batch, amp, rates),
        launch_s=(0.0 if held else untimed_launches) + calls_s,
        optimizer_s=update_s + release,
        release_s=release,
        parameters=table.totals.parameters,
        layers=len(table.layers),
        anchored=frozenset(i for i, measured in zip(_MEASURABLE, swept, strict=True) if measured),
    )


@dataclass(frozen=True)
class OpSumModel:
    """One machine's op-sum step model."""

    layers: MachineModel
    """The layer part: measured curves and the layer booster (``fit_layers``)."""
    rates: Roofline
    coefficients: tuple[float, ...]
    calibration: Mapping[OpPart, float]
    booster: str
    own_scales: Mapping[tuple[str, bool, bool], tuple[float, float]] = field(default_factory=dict)
    """Each model measured whole: its scales of the sum's fixed and per-sample seconds."""
    anchored_scale: float = 1.0
    """The anchored terms' one scale: the sweeps' prices inside a network (``OpTerms.anchored``)."""

    def terms(self, table: LayerTable, batch: int, amp: bool, channels_last: bool) -> OpTerms:
        return op_terms(self.layers, self.rates, table, batch, amp, channels_last)

    def shares(self, terms: OpTerms) -> list[float]:
        """Each term's seconds after the machine's scales."""
        columns = terms.columns(self.calibration)
        scales = zip(self.coefficients, columns, strict=True)
        return [(self.anchored_scale if i in terms.anchored else c) * t for i, (c, t) in enumerate(scales)]

    def base(self, terms: OpTerms) -> float:
        return max(sum(self.shares(terms)), _TINY)

    def step_seconds(self, table: LayerTable, batch: int, amp: bool, channels_last: bool) -> float:
        return self.priced(self.terms(table, batch, amp, channels_last), table.architecture_hash)

    def priced(self, terms: OpTerms, architecture: str) -> float:
        """The step's seconds from its terms: its architecture's own scales where it was measured whole."""
        own = self.own_scales.get((architecture, terms.amp, terms.channels_last))
        if own is not None:
            fixed, sampled = fixed_and_sampled(self.shares(terms))
            return max(own[0] * fixed + own[1] * sampled, _TINY)
        (ratio,) = apply_booster(self.booster, [booster_row(self, terms)])
        return self.base(terms) * exp(ratio)

    def parts(self, table: LayerTable, batch: int, amp: bool, channels_last: bool) -> dict[StepPart, float]:
        """The predicted step split by term, each term's share of the sum times the whole prediction; of
        the timed layers' and untimed ops' shares, what their layers pay outside their kernels
        (`outside_seconds`) is per-op dispatch, as a profile counts it. The whole is not changed."""
        terms = self.terms(table, batch, amp, channels_last)
        scale = self.priced(terms, table.architecture_hash) / self.base(terms)
        shares = self.shares(terms)
        split = dict.fromkeys(StepPart, 0.0)
        for part, seconds in zip(TERM_PARTS, shares, strict=True):
            split[part] += seconds * scale
        priced = (sum(terms.layer_parts.values()), terms.vector_s, terms.optimizer_s)
        outside = (*outside_seconds(table, batch, amp, self.rates), terms.release_s)
        for part, held, whole in zip(_HOLD_OUTSIDE, outside, priced, strict=True):
            moved = split[part] * min(held / max(whole, _TINY), 1.0)
            split[part] -= moved
            split[StepPart.DISPATCH] += moved
        return split


_HOLD_OUTSIDE = (StepPart.LAYERS, StepPart.MEMORY_BOUND, StepPart.OPTIMIZER)
"""The parts whose prices hold what a profile counts as dispatch: what their layers pay outside their
kernels (`outside_seconds`), and the gradients' release in the optimizer's (``zero_grad``, outside
``Optimizer.step``)."""


def outside_seconds(table: LayerTable, batch: int, amp: bool, rates: Roofline) -> tuple[float, float]:
    """Of the timed layers' and the untimed ops' prices, what their layers pay outside their kernels: each
    one its kind's tiny layer's cost (`MachineRates.outside_s`: Python, argument checks, autograd's nodes),
    else its launches at the launch chain's cost; an untimed op's never over its own price, and none where
    the untimed ops' prices do not hold their launches (``Roofline.prices_launches``)."""
    launch = rates.launch_seconds()
    configs, layers = split_timed(table, batch, amp)
    timed = 0.0
    for config in configs:
        outside = rates.swept.outside_s(op_of(config).name)
        timed += LAUNCHES_PER_LAYER * launch if outside is None else outside
    if not rates.prices_launches:
        return timed, 0.0
    return timed, sum(_untimed_outside(layer, batch, amp, rates, launch) for layer in layers)


def _untimed_outside(layer: Layer, batch: int, amp: bool, rates: Roofline, launch: float) -> float:
    found = layer_op(layer, batch, amp)
    if found is None:
        return OP_LAUNCHES * launch
    op, config = found
    outside = rates.swept.outside_s(op.name)
    each = OP_LAUNCHES * launch if outside is None else min(outside, rates.layer_op_seconds(op, config))
    return each * kernels(layer)


_FIXED = (2, 3, 4)
"""The sum's terms that do not grow with the batch: launches, the optimizer, the host's per-step cost."""


def fixed_and_sampled(shares: Sequence[float]) -> tuple[float, float]:
    """A step's seconds that stay with the batch and those that grow with it."""
    fixed = sum(shares[i] for i in _FIXED)
    return fixed, sum(shares) - fixed


def fit_own_scales(pairs: Sequence[tuple[tuple[float, float], float]]) -> tuple[float, float]:
    """Scales of a model's fixed and per-sample seconds that fit its measured steps (relative least
    squares, non-negative); one step measured scales both alike."""
    if len(pairs) < 2:
        ((fixed, sampled), seconds) = pairs[0]
        ratio = seconds / max(fixed + sampled, _TINY)
        return ratio, ratio
    a, b = relative_least_squares([list(terms) for terms, _ in pairs], [s for _, s in pairs])
    return a, b


def booster_row(model: OpSumModel, terms: OpTerms) -> list[float]:
    """Batch-free: each term's share of the sum, the sum, the settings and the model's size."""
    shares = model.shares(terms)
    base = max(sum(shares), _TINY)
    return [
        *(log(max(s / base, _TINY)) for s in shares),
        log(base),
        float(terms.amp),
        float(terms.channels_last),
        log(terms.parameters + 1.0),
        log(terms.layers + 1.0),
    ]


def fit_opsum(machine: str, steps: Sequence[StepSample], layers: Sequence[LayerSample]) -> OpSumModel:
    """The layer part and the rates from the micro-benchmarks, the term scales from the steps, then the
    step booster on what the sum leaves."""
    layer_model = fit_layers(machine, layers)
    return opsum_on(layer_model, steps, step_terms(layer_model, steps))


def step_terms(layer_model: MachineModel, steps: Sequence[StepSample]) -> list[OpTerms]:
    """Each step's terms on a fitted layer part (``fit_layers``: its roofline is the rates): the costly
    part of a fit, which held-out folds on the same layer part share."""
    rates = _rates(layer_model, steps)
    return [op_terms(layer_model, rates, s.table, s.batch, s.amp, s.channels_last) for s in steps]


def opsum_on(layer_model: MachineModel, steps: Sequence[StepSample], terms: Sequence[OpTerms]) -> OpSumModel:
    """``fit_opsum`` on a layer part already fitted and ``steps``' terms on it (``step_terms``)."""
    rates = _rates(layer_model, steps)
    coefficients, calibration, anchored = _scales(terms, [s.seconds for s in steps])
    model = OpSumModel(layer_model, rates, coefficients, calibration, "", anchored_scale=anchored)
    logs = [log(s.seconds) - log(model.base(t)) for s, t in zip(steps, terms, strict=True)]
    booster = train_booster(STEP_PARAMS, STEP_ROUNDS, [booster_row(model, t) for t in terms], logs)
    own: dict[tuple[str, bool, bool], list[tuple[tuple[float, float], float]]] = {}
    for sample, t in zip(steps, terms, strict=True):
        own.setdefault(series(sample), []).append((fixed_and_sampled(model.shares(t)), sample.seconds))
    scales = {key: fit_own_scales(pairs) for key, pairs in own.items()}
    return OpSumModel(layer_model, rates, coefficients, calibration, booster, scales, anchored)


def _rates(layer_model: MachineModel, steps: Sequence[StepSample]) -> Roofline:
    if not steps or layer_model.roofline is None:
        raise NotEnoughDataError(f"machine {layer_model.machine}: no step or no roofline to train on")
    return layer_model.roofline


def _scales(
    terms: Sequence[OpTerms], seconds: Sequence[float]
) -> tuple[tuple[float, ...], dict[OpPart, float], float]:
    """The scales fitted on whole steps: the timed layers' with a multiplier for each ``Part``, and one
    for the anchored terms together, all shrunk toward one shared scale (what an op timed alone costs
    inside a network: a layer strays by kernel path and batch, and the sweeps keep the anchored terms'
    prices in proportion); the measurable terms no sweep priced, each its own; the host's per step and per
    sample."""
    parts = sorted({part for t in terms for part in t.layer_parts})
    rows = []
    for t in terms:
        columns = t.columns({})
        free = [0.0 if i in t.anchored else columns[i] for i in _MEASURABLE]
        anchored = sum(columns[i] for i in t.anchored)
        rows.append([t.layer_parts.get(part, 0.0) for part in parts] + [anchored] + free + columns[4:])
    *coefficients, shared = relative_least_squares(rows, seconds, shrunk=len(parts) + 1)
    calibration = (
        {p: c / shared for p, c in zip(parts, coefficients[: len(parts)], strict=True)} if shared else {}
    )
    together, *rest = coefficients[len(parts) :]
    return (shared, *rest), calibration, together
