"""Features of a model at a batch size, and of a single layer: pure, deterministic, no torch.

Following Bryzgalov et al., the strongest signal for a step's time on a machine is that machine's own
measured time of the model's convolution and linear layers; introspection adds what those layers miss
(normalisation, activations, element-wise ops, per-op overhead) as counts and bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import log

from pydantic import BaseModel, ConfigDict

from advisor.bench.zoo import layer_config
from advisor.introspect import Costs, Layer, LayerKind, LayerTable
from advisor.ops import KernelPath, group_alignment, layer_op, op_of, timed_groups, timed_kinds
from advisor.ops.configs import kernels
from advisor.ops.costs import math_attention
from advisor.predict.curves import Polyline, through_weights
from advisor.records import LayerConfig

_TINY = 1e-9


def layer_group(config: LayerConfig) -> str:
    """The step feature a timed layer's seconds add to: its op's group."""
    return op_of(config).group


def kernel_path(config: LayerConfig) -> KernelPath:
    return op_of(config).kernel_path(config)


_COUNTED_KINDS = frozenset({LayerKind.ATTENTION, LayerKind.ACTIVATION})
"""Untimed layers whose bytes are their op's hand count (`advisor.ops.costs`), not the introspection's."""
_PASSES = 2.0
"""An activation's bytes, at most, in hand counts: torch's single kernels (ReLU6, Hardswish, SiLU) are
introspected as two passes over their tensor, so a CNN's are as counted."""


def untimed_bytes(layer: Layer, costs: Costs, batch: int, amp: bool) -> float:
    """The bytes an untimed layer's forward moves. Attention: the math path's hand count
    (`costs.math_attention`), which grows with the scores (queries x keys per head) as either path's time
    does, where the introspection counts the fused kernel's inputs and output. An activation: the
    introspection's count, at most ``_PASSES`` hand counts of each of its kernels (`configs.kernels`:
    GPT-2's tanh GELU runs eight). Else the introspection's count."""
    counted = float(costs.bytes_read + costs.bytes_written)
    found = layer_op(layer, batch, amp) if layer.kind in _COUNTED_KINDS else None
    if found is None:
        return counted
    op, config = found
    if layer.kind == LayerKind.ATTENTION:
        return math_attention(config).forward_bytes
    return min(counted, _PASSES * op.cost(config).forward_bytes * kernels(layer))


Part = tuple[KernelPath, int]
"""Layer time by kernel path and by the benchmarked batch size it is interpolated from."""


def timed_layers(table: LayerTable, batch: int, amp: bool) -> list[LayerConfig]:
    """The micro-benchmark configuration of every executed layer of a timed op (convolutions and linears:
    `advisor.ops.known`), repeats included."""
    return split_timed(table, batch, amp)[0]


def split_timed(table: LayerTable, batch: int, amp: bool) -> tuple[list[LayerConfig], list[Layer]]:
    """``timed_layers`` and the layers no timed op covers, from one look at each layer: the registry's
    search is the costliest part of pricing a step."""
    timed, untimed = [], []
    for layer in table.layers:
        config = layer_config(layer, batch, amp)
        if config is None:
            untimed.append(layer)
        else:
            timed.append(config)
    return timed, untimed


def layer_flops(config: LayerConfig) -> float:
    """Forward plus backward FLOPs, by the op's hand count (`advisor.ops.costs`)."""
    return op_of(config).cost(config).train_flops


def layer_bytes(config: LayerConfig) -> float:
    """The bytes the forward reads and writes: input, weights and output."""
    return op_of(config).cost(config).forward_bytes


def layer_terms(config: LayerConfig) -> list[float]:
    """What a layer's time is close to linear in: a fixed cost, its arithmetic and the bytes it moves. A
    layer far larger than any benchmarked one (VGG's 100M-weight linear) is then priced by its bytes, where
    a tree alone would give it the efficiency of the largest layer it saw."""
    return [1.0, layer_flops(config), layer_bytes(config)]


LAYER_FEATURES = (
    "matrix",
    "log_in_channels",
    "log_out_channels",
    "kernel_area",
    "stride_area",
    "log_groups",
    "depthwise",
    "log_positions",
    "log_samples",
    "amp",
    "log_flops",
    "log_forward_bytes",
    "group_alignment",
    "channels_last",
)
"""``layer_features``' layout: what a layer booster is fitted on, and its model file records."""


def layer_features(config: LayerConfig) -> list[float]:
    """Its op's family (`advisor.ops`), geometry and hand-counted costs, as ``LAYER_FEATURES`` names them.
    A linear's samples are its rows, positions times batch, at one position: one product of rows x in x out
    whichever way its rows come, and a booster that kept them apart priced GPT-2's head over 128 tokens at
    2.1 times its roof where the same head over 4 tokens, at the same rows, was measured at 1.1."""
    c = config
    positions, samples = c.height * c.width, c.batch
    if op_of(c).name == "linear":
        positions, samples = 1, positions * samples
    return [
        float(op_of(c).family == "matrix"),
        log(c.in_channels),
        log(c.out_channels),
        float(c.kernel[0] * c.kernel[1]),
        float(c.stride[0] * c.stride[1]),
        log(c.groups),
        float(c.depthwise),
        log(positions),
        log(samples),
        float(c.amp),
        log(layer_flops(c) + 1.0),
        log(layer_bytes(c)),
        float(group_alignment(c)),
        float(c.channels_last),
    ]


class StepFeatures(BaseModel):
    """One model at one batch size and settings on one machine."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    batch: int
    amp: bool
    channels_last: bool
    group_s: dict[str, float]
    """Seconds of the timed layers by their op's group (`timed_groups`)."""
    layer_parts: dict[Part, float]
    """The same layer time by ``Part``: what the step base calibrates."""
    flops: float
    bytes_moved: float
    other_bytes: float
    """Bytes moved by layers that are not convolutions or linears: norms, activations, element-wise ops,
    attention (``untimed_bytes``)."""
    parameters: int
    activation_bytes: int
    counts: dict[LayerKind, int]

    @property
    def layers_s(self) -> float:
        return sum(self.group_s.values())

    def base_terms(self, calibration: Mapping[Part, float]) -> list[float]:
        """What a step's time is close to linear in: the timed layers (each part weighed by its
        ``calibration``, 1 where it has none), per-op dispatch overhead, the optimizer's sweep over the
        parameters and the bytes the untimed layers move. Few terms on purpose: a coefficient per layer
        group overfits a zoo of twenty models."""
        layers = sum(calibration.get(part, 1.0) * s for part, s in self.layer_parts.items())
        return [layers, float(sum(self.counts.values())), float(self.parameters), self.other_bytes]

    def vector(self) -> list[float]:
        """The step booster's columns: the step's timed seconds, sizes and settings, no count of each layer
        kind. Twenty-five zoo models' counts name each model, and the booster learned them as such: with
        them, each model held out whole erred 0.1-0.5 points more on three CPU passes (benchmarks/README.md,
        issue 51)."""
        return [
            log(self.batch),
            float(self.amp),
            float(self.channels_last),
            *(log(self.group_s[group] + _TINY) for group in timed_groups()),
            log(self.layers_s + _TINY),
            log(self.flops + 1.0),
            log(self.bytes_moved + 1.0),
            log(self.other_bytes + 1.0),
            log(self.parameters + 1.0),
            log(self.activation_bytes + 1.0),
        ]


def step_feature_names() -> tuple[str, ...]:
    """``StepFeatures.vector``'s layout: what a step booster is fitted on, and its model file records."""
    return (
        "log_batch",
        "amp",
        "channels_last",
        *(f"log_{group}_s" for group in timed_groups()),
        "log_layers_s",
        "log_flops",
        "log_bytes",
        "log_untimed_bytes",
        "log_parameters",
        "log_activation_bytes",
    )


def step_features(
    table: LayerTable,
    batch: int,
    amp: bool,
    channels_last: bool,
    configs: Sequence[LayerConfig],
    layer_points: Mapping[LayerConfig, Polyline],
) -> StepFeatures:
    """``configs``: ``timed_layers`` of the table at ``batch``; ``layer_points`` must give each its (batch,
    seconds) polyline, measured or predicted."""
    group_s = dict.fromkeys(timed_groups(), 0.0)
    layer_parts: dict[Part, float] = {}
    for config in configs:
        seconds = dict(layer_points[config])
        shares = [(b, weight * seconds[b]) for b, weight in through_weights(layer_points[config], batch)]
        group_s[layer_group(config)] += max(sum(share for _b, share in shares), _TINY)
        for benchmarked, share in shares:
            part = (kernel_path(config), benchmarked)
            layer_parts[part] = layer_parts.get(part, 0.0) + share
    costs = table.at_batch(batch)
    timed = timed_kinds()
    other = sum(
        untimed_bytes(layer, c, batch, amp)
        for layer, c in zip(table.layers, costs.layers, strict=True)
        if layer.kind not in timed
    )
    counts = dict.fromkeys(LayerKind, 0)
    for layer in table.layers:
        counts[layer.kind] += 1
    return StepFeatures(
        batch=batch,
        amp=amp,
        channels_last=channels_last,
        group_s=group_s,
        layer_parts=layer_parts,
        flops=float(costs.total.train_flops),
        bytes_moved=float(costs.total.bytes_read + costs.total.bytes_written),
        other_bytes=float(other),
        parameters=table.totals.parameters,
        activation_bytes=costs.saved_activation_bytes,
        counts=counts,
    )
