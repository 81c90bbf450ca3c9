"""One machine's rates for what is not compute, fitted from the nightly grid's sweeps
(`advisor.bench.sweeps`): the bandwidth a memory-bound op reaches at each size, the seconds each launched
op costs and each module call, and the optimizer's update per parameter and per tensor.

Pure: handed each swept configuration with its seconds (a machine's layer samples), it reads the ops it
knows and leaves the rest. A step model prices an op it never timed from these: its bytes at the bandwidth
of its size, its launches, the update of the model's parameters.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from math import exp, log
from statistics import fmean

from advisor.ops.known import TINY_LAYERS, op_of
from advisor.records import LayerConfig

OP_LAUNCHES = 2
"""A forward and a backward kernel: what a memory-bound op launches in a training step."""
Curve = tuple[tuple[float, float], ...]
"""(log bytes moved, log seconds) points, ascending in bytes."""


@dataclass(frozen=True)
class UpdateCurves:
    """An optimizer's step by parameters, one curve per split into tensors measured. Not a line: a small
    update stays in cache and a large one does not, and one huge tensor's temporaries cost more than many
    small ones' (an Adam step of 16 Mi parameters is slower in one tensor than in 64 on a CPU)."""

    splits: tuple[tuple[int, Curve], ...]
    """(tensors, (log parameters, log seconds) points), ascending in tensors."""

    def seconds(self, parameters: int, tensors: int) -> float:
        """Between two splits measured, linear in tensors (a tensor's own cost: its kernels' launches and
        Python), as past the largest: each further tensor at what the last two splits' difference costs a
        tensor (none where more tensors were faster)."""
        x = log(max(parameters, 1))
        times = [(split, exp(_at(curve, x))) for split, curve in self.splits]
        below = [(split, t) for split, t in times if split <= tensors]
        above = [(split, t) for split, t in times if split > tensors]
        if not below:
            return above[0][1]
        low, low_s = below[-1]
        if above:
            high, high_s = above[0]
            return low_s + (tensors - low) * (high_s - low_s) / (high - low)
        if len(times) < 2:
            return low_s
        previous, previous_s = times[-2]
        return low_s + (tensors - low) * max((low_s - previous_s) / (low - previous), 0.0)

    @property
    def per_parameter_s(self) -> float:
        """Seconds per parameter of the largest update measured in the most tensors: out of cache, split as
        a network's parameters are."""
        _tensors, curve = self.splits[-1]
        x, y = curve[-1]
        return exp(y - x)


@dataclass(frozen=True)
class MachineRates:
    """What one machine's sweeps measured; None where a kind was not swept on it."""

    curves: Mapping[str, Curve] = field(default_factory=dict)
    """Each swept memory-bound op's seconds by the bytes its forward and backward move."""
    launch_s: float | None = None
    """One launched op's cost (a forward or a backward kernel and its dispatch)."""
    module_s: float | None = None
    """One module call's cost beyond its ops' launches (``nn.Module.__call__``: its hooks' checks, Python);
    a swept op's price has its one call taken out with the measurement's own cost (`alone_s`)."""
    updates: Mapping[str, UpdateCurves] = field(default_factory=dict)
    """By optimizer: ``sgd_momentum``, ``adam``, ``adamw``."""
    layer_s: Mapping[str, float] = field(default_factory=dict)
    """Each tiny-layer chain's seconds a layer (``tiny_conv2d``, ...): a layer of its kind when its kernels
    do almost nothing, its module call included."""

    def outside_s(self, op: str) -> float | None:
        """What a layer of ``op`` pays outside its kernels inside a network: its tiny chain's seconds a layer
        (`known.TINY_LAYERS`) less the module call, which a network's calls price apart (`module_s`); None
        where no tiny chain of its kind was measured."""
        tiny = self.layer_s.get(TINY_LAYERS.get(op, ""))
        return None if tiny is None else max(tiny - (self.module_s or 0.0), 0.0)

    def bytes_seconds(self, moved: float, op: str | None = None) -> float | None:
        """Seconds of an op whose forward and backward move ``moved`` bytes: ``op``'s own curve where it
        was swept, else the geometric mean of every swept op's. Below the smallest size swept, the
        smallest's time (a tiny op costs its launches); above the largest, the largest's bandwidth. The
        curve holds each op's launches, so an op priced here needs no `launch_s` on top."""
        curves = [self.curves[op]] if op is not None and op in self.curves else list(self.curves.values())
        if not curves or moved <= 0:
            return None
        return exp(fmean(_at(curve, log(moved)) for curve in curves))

    @property
    def alone_s(self) -> float:
        """What an op timed alone costs beyond its forward's and backward's launches, at the least: the
        measurement's own fixed cost (a module call and the start of a backward), which a network pays once
        a step, not once an op. The cheapest swept op's least time less its two launches; 0 unswept."""
        if not self.curves:
            return 0.0
        least = min(exp(min(y for _x, y in curve)) for curve in self.curves.values())
        return max(least - OP_LAUNCHES * (self.launch_s or 0.0), 0.0)

    def network_seconds(self, moved: float, op: str | None = None) -> float | None:
        """Seconds of a memory-bound op inside a network: its time alone (`bytes_seconds`) less the
        measurement's own cost (`alone_s`), never under its forward's and backward's launches. A 1 Ki-element
        op timed alone took 40-60 us on the CPU passes, a tenth of it launches (benchmarks/README.md)."""
        alone = self.bytes_seconds(moved, op)
        if alone is None:
            return None
        return max(alone - self.alone_s, OP_LAUNCHES * (self.launch_s or 0.0))

    def least_bytes_seconds(self, moved: float) -> float | None:
        """The least seconds any swept op takes to move ``moved`` bytes: the bandwidth roof at that size,
        under which no op moving them can run."""
        if not self.curves or moved <= 0:
            return None
        return min(exp(_at(curve, log(moved))) for curve in self.curves.values())

    def bytes_per_s(self, moved: float, op: str | None = None) -> float | None:
        """The bandwidth an op moving ``moved`` bytes reaches (`bytes_seconds`)."""
        seconds = self.bytes_seconds(moved, op)
        return moved / seconds if seconds else None

    def update_s(self, optimizer: str, parameters: int, tensors: int = 1) -> float | None:
        fit = self.updates.get(optimizer)
        return fit.seconds(parameters, tensors) if fit else None

    def per_parameter_s(self, optimizer: str) -> float | None:
        fit = self.updates.get(optimizer)
        return fit.per_parameter_s if fit else None


def _at(curve: Curve, x: float) -> float:
    """Log seconds at log bytes ``x``: linear between points; the first's seconds below, the last's
    bandwidth (slope one) above."""
    xs = [point[0] for point in curve]
    if x <= xs[0]:
        return curve[0][1]
    if x >= xs[-1]:
        return curve[-1][1] + x - xs[-1]
    i = bisect_left(xs, x)
    (x0, y0), (x1, y1) = curve[i - 1], curve[i]
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


def fit_rates(measured: Iterable[tuple[LayerConfig, float]]) -> MachineRates:
    """A machine's rates from its swept configurations and their seconds: the memory-bound ops at batch
    one (the bandwidth sweep's), the chains (launches, modules, tiny layers), the optimizers' updates;
    anything else is left out."""
    curves: dict[str, dict[float, list[float]]] = {}
    chains: dict[str, list[tuple[float, float]]] = {}
    updates: dict[str, dict[int, dict[float, list[float]]]] = {}
    for config, seconds in measured:
        if seconds <= 0:
            continue
        op = op_of(config)
        if op.family == "launch":
            chains.setdefault(op.name, []).append((float(config.height), seconds))
        elif op.family == "update":
            split = updates.setdefault(op.name, {}).setdefault(config.width, {})
            split.setdefault(log(config.height * config.width), []).append(log(seconds))
        elif op.sweep is not None and config == op.sweep(_elements(config)):
            cost = op.cost(config)
            moved = log(cost.forward_bytes + cost.backward_bytes)
            curves.setdefault(op.name, {}).setdefault(moved, []).append(log(seconds))
    per_layer = {name: slope for name, points in chains.items() if (slope := _slope(points)) is not None}
    chained, linked = per_layer.pop("launch_chain", None), per_layer.pop("module_chain", None)
    return MachineRates(
        curves={name: _curve(points) for name, points in curves.items()},
        launch_s=None if chained is None else chained / 2.0,
        module_s=None if chained is None or linked is None else max(linked - chained, 0.0),
        layer_s=per_layer,
        updates={
            name: UpdateCurves(tuple((tensors, _curve(points)) for tensors, points in sorted(splits.items())))
            for name, splits in updates.items()
        },
    )


def _curve(points: Mapping[float, list[float]]) -> Curve:
    """Each x once, at the mean of its log seconds."""
    return tuple((x, fmean(ys)) for x, ys in sorted(points.items()))


def _elements(config: LayerConfig) -> int:
    return config.in_channels * config.height * config.width


def _slope(points: list[tuple[float, float]]) -> float | None:
    """Seconds a link: a chain's time's least-squares slope in its length (its fixed cost apart); with one
    length measured, its time over its length."""
    if not points:
        return None
    xs = {x for x, _ in points}
    if len(xs) == 1:
        return fmean(y / x for x, y in points)
    mx, my = fmean(x for x, _ in points), fmean(y for _, y in points)
    slope = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)
    return max(slope, 0.0)
