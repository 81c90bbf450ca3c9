"""A machine's roofline, pure: how fast it computes by op family, how many bytes a second it moves, what one
op's launch costs and what the optimizer's update costs, read off its micro-benchmarks: the nightly grid's
sweeps of what is not compute where it has them (`advisor.ops.rates`), else its timed layers.

The roofline's two roofs: the compute rate of a family is what its fastest benchmarked layers reach (the
upper tenth of FLOP/s), the bandwidth what the most byte-heavy ones reach (the upper tenth of bytes/s; a
depthwise convolution is bound by it). A launch is the least any benchmarked layer ever took, over the
three kernels (forward, input and weight gradients) a layer with weights runs: what an op costs before its
arithmetic. The optimizer's update is its hand-counted bytes per parameter (`advisor.ops.costs`) over the
bandwidth. Where the sweeps measured them, an op's bytes cost what its own bandwidth curve says at its size,
a launch what the launch chain says and the update what the optimizer's curves say. Families no layer
benchmarks (vector ops) take the highest compute rate: they are bound by
their bytes, not their arithmetic, and the roofline's max picks the bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from math import exp, log

import numpy as np

from advisor.frozen import Frozen
from advisor.introspect import LayerTable
from advisor.introspect.training import trainable_parameters
from advisor.ops import Cost, Op, op_named, op_of
from advisor.ops.configs import LARGE_MAP, SMALL_MAP
from advisor.ops.costs import ELEMENT_BYTES
from advisor.ops.known import RELEASE, SMALL_MAPS
from advisor.ops.op import Family
from advisor.ops.rates import MachineRates, fit_rates
from advisor.records import LayerConfig

_UPPER = 90.0
LAUNCHES_PER_LAYER = 3
"""Forward, input gradient and weight gradient: what a layer with weights launches in a training step."""
_OPTIMIZER = "sgd_momentum"
"""The update the nightly grid's CNN steps run (`advisor.bench.training`), and a table's without one."""
UPDATES = {None: _OPTIMIZER, "sgd": _OPTIMIZER, "adam": "adam", "adamw": "adamw"}
"""The registry's update op of each optimizer a layer table's training settings name."""
_DEFAULT_FLOPS = 1e10
_DEFAULT_BANDWIDTH = 1e10
_DEFAULT_LAUNCH_S = 1e-5


@dataclass(frozen=True)
class Roofline:
    """What an op the nightly grid does not time costs on one machine: how the op-sum step model
    (`advisor.predict.opsum`) prices the memory-bound ops, the launches and the update."""

    compute: Mapping[Family, float]
    """FLOP/s by op family."""
    bandwidth: float
    """Bytes/s."""
    launch_s: float
    """Seconds one op's launch and dispatch cost."""
    update_s: float
    """Seconds the optimizer's update costs one parameter."""
    swept: MachineRates = field(default_factory=MachineRates)
    """What the sweeps measured (`advisor.ops.rates`); where they did, it prices in place of the above."""

    def op_seconds(self, family: Family, cost: Cost, op: str | None = None) -> float:
        """The roofline: forward and backward's arithmetic at the family's rate, or their bytes at the
        bandwidth (``op``'s swept curve at its size where measured, less what timing it alone added),
        whichever takes longer."""
        moved = cost.forward_bytes + cost.backward_bytes
        swept = self.swept.network_seconds(moved, op)
        return max(
            _compute_s(self.compute, family, cost), swept if swept is not None else moved / self.bandwidth
        )

    def layer_op_seconds(self, op: Op, config: LayerConfig) -> float:
        """An untimed layer's op at its configuration (`op_seconds`). A batch norm over maps of 2 to
        `LARGE_MAP` positions by its small-map sweep where the machine has one (`SMALL_MAPS`): at `SMALL_MAP`
        positions or fewer that curve, towards `LARGE_MAP` geometric in log positions to its own; a 1x1 map
        is channels-last as well and takes the vectorised kernel: its own curve."""
        cost = op.cost(config)
        own = self.op_seconds(op.family, cost, op.name)
        small = SMALL_MAPS.get(op.name)
        positions = config.height * config.width
        if small is None or small not in self.swept.curves or not 1 < positions < LARGE_MAP:
            return own
        share = max(0.0, log(positions / SMALL_MAP) / log(LARGE_MAP / SMALL_MAP))
        return exp((1 - share) * log(self.op_seconds(op.family, cost, small)) + share * log(own))

    def layer_roof(self) -> LayerRoof:
        """The timed layers' own roof, without the sweeps: what the layer booster corrects."""
        return LayerRoof(
            compute=dict(self.compute), bandwidth=self.bandwidth, fixed_s=LAUNCHES_PER_LAYER * self.launch_s
        )

    @property
    def prices_launches(self) -> bool:
        """Whether an untimed op's price holds its launches: a swept curve's small end is its launches."""
        return bool(self.swept.curves)

    def launch_seconds(self) -> float:
        return self.swept.launch_s if self.swept.launch_s is not None else self.launch_s

    def update_seconds(self, parameters: int, tensors: int, optimizer: str = _OPTIMIZER) -> float:
        """``optimizer``'s update of ``parameters`` in ``tensors``: its swept curves where it was swept, else
        its hand-counted bytes per parameter (`advisor.ops.costs`) at the cost per byte of SGD's."""
        swept = self.swept.update_s(optimizer, parameters, tensors)
        if swept is not None:
            return swept
        bytes_ratio = _update_bytes(optimizer) / _update_bytes(_OPTIMIZER)
        return parameters * self.update_s * bytes_ratio


ALONE_BYTES = 32 * 2**20
"""A tensor this large is updated at its own size, the sweep's one-tensor curve: glibc hands a block of
32 MiB or more back to the kernel (its largest dynamic mmap threshold), so the temporaries of Adam's update
fault their pages in at every step (16 Mi parameters in one tensor: 6.4 ns each, in 64 tensors 1.9; SGD's
update, in place, 0.8 and 0.7). GPT-2's 50,257 x 768 embedding is one: 0.25 s of its update."""


def update_seconds(table: LayerTable, rates: Roofline, optimizer: str, tensors: int) -> float:
    """The optimizer's update of the table's trainable parameters in ``tensors``: each weight of
    `ALONE_BYTES` or more at its own size where the sweep measured one tensor, the rest together."""
    parameters = trainable_parameters(table)
    alone = [layer.parameters for layer in table.layers if layer.parameters * ELEMENT_BYTES >= ALONE_BYTES]
    single = rates.swept.update_s(optimizer, 1, 1) is not None
    if not alone or not single or parameters < table.totals.parameters:  # under LoRA the adapters alone
        return rates.update_seconds(parameters, tensors, optimizer)
    rest = parameters - sum(alone)
    together = rates.update_seconds(rest, max(tensors - len(alone), 1), optimizer) if rest > 0 else 0.0
    return together + sum(rates.update_seconds(count, 1, optimizer) for count in alone)


def release_seconds(table: LayerTable, rates: Roofline) -> float:
    """Setting the gradients to None after the step (`known.RELEASE`, swept in one tensor): the call once
    (the smallest swept), and each layer's weights as one tensor at what its size costs beyond that
    (nothing until a block is large enough to go back to the kernel: vgg11_bn's 25088 x 4096 linear);
    under LoRA, the adapters' alone, the call. Nothing where it was not swept (a GPU's allocator keeps freed
    blocks: its sweep reads it so)."""
    released = rates.swept.updates.get(RELEASE)
    if released is None:
        return 0.0
    call = released.seconds(1, 1)
    if trainable_parameters(table) < table.totals.parameters:
        return call
    weights = (layer.parameters for layer in table.layers if layer.parameters > 0)
    return call + sum(max(released.seconds(count, 1) - call, 0.0) for count in weights)


class LayerRoof(Frozen):
    """A timed layer's training step at its machine's roofs: its fixed cost, plus its arithmetic at its
    family's rate or its bytes at the bandwidth, whichever takes longer (the rates of `fit_roofline`: what
    the machine's fastest benchmarked layers reach). The layer booster learns each layer's time relative to
    this, not to a line fitted through every layer: a tree is flat outside its data, so a layer far larger
    than any benchmarked keeps the largest ones' ratio to their roof, which is near one wherever they
    compute or stream (vgg11_bn's 25088 x 4096 linear: benchmarks/README.md, issue 51)."""

    compute: dict[Family, float]
    """FLOP/s by op family."""
    bandwidth: float
    """Bytes/s."""
    fixed_s: float
    """Seconds before any arithmetic: the fastest layer's, its three launches."""

    def seconds(self, config: LayerConfig) -> float:
        op = op_of(config)
        cost = op.cost(config)
        moved = cost.forward_bytes + cost.backward_bytes
        return self.fixed_s + max(_compute_s(self.compute, op.family, cost), moved / self.bandwidth)


def _compute_s(compute: Mapping[Family, float], family: Family, cost: Cost) -> float:
    """Forward and backward's arithmetic at the family's rate; a family never benchmarked at the fastest."""
    return cost.train_flops / compute.get(family, max(compute.values()))


def _upper(values: Iterable[float], default: float) -> float:
    found = [v for v in values if v > 0]
    return float(np.percentile(found, _UPPER)) if found else default


def fit_roofline(layers: Sequence[tuple[LayerConfig, float]]) -> Roofline:
    """The rates from (configuration, seconds) micro-benchmarks: the timed layers' roofline, and the
    sweeps' rates beside it."""
    families: dict[Family, list[float]] = {}
    moved: list[float] = []
    timed = [(config, seconds) for config, seconds in layers if op_of(config).timed]
    for config, seconds in timed:
        op = op_of(config)
        cost = op.cost(config)
        families.setdefault(op.family, []).append(cost.train_flops / seconds)
        moved.append((cost.forward_bytes + cost.backward_bytes) / seconds)
    compute = {family: _upper(rates, _DEFAULT_FLOPS) for family, rates in families.items()}
    bandwidth = _upper(moved, _DEFAULT_BANDWIDTH)
    launch_s = min((s for _c, s in timed), default=_DEFAULT_LAUNCH_S * LAUNCHES_PER_LAYER)
    return Roofline(
        compute=compute or {"convolution": _DEFAULT_FLOPS},
        bandwidth=bandwidth,
        launch_s=launch_s / LAUNCHES_PER_LAYER,
        update_s=_update_bytes(_OPTIMIZER) / bandwidth,
        swept=fit_rates(layers),
    )


def _update_bytes(optimizer: str) -> float:
    """The bytes ``optimizer``'s update moves a parameter, by its hand count."""
    return op_named(optimizer).cost(_one_parameter(optimizer)).forward_bytes


def _one_parameter(optimizer: str) -> LayerConfig:
    return LayerConfig.model_validate(
        {
            "op": optimizer,
            "in_channels": 1,
            "out_channels": 1,
            "kernel": (1, 1),
            "stride": (1, 1),
            "padding": (0, 0),
            "dilation": (1, 1),
            "groups": 1,
            "height": 1,
            "width": 1,
            "batch": 1,
            "amp": False,
            "cudnn_benchmark": True,
        }
    )
