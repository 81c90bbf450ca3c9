"""Features of a model at a batch size, and of a single layer: pure, deterministic, no torch.

Following Bryzgalov et al., the strongest signal for a step's time on a machine is that machine's own
measured time of the model's convolution and linear layers; introspection adds what those layers miss
(normalisation, activations, element-wise ops, per-op overhead) as counts and bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from math import log

from pydantic import BaseModel, ConfigDict

from advisor.bench.zoo import layer_config
from advisor.introspect import LayerKind, LayerTable
from advisor.predict.curves import Polyline, through_weights
from advisor.records import LayerConfig

_FLOAT_BYTES = 4
_TINY = 1e-9


class LayerGroup(StrEnum):
    DENSE = "dense"
    DEPTHWISE = "depthwise"
    GROUPED = "grouped"
    LINEAR = "linear"


def layer_group(config: LayerConfig) -> LayerGroup:
    if config.op == "linear":
        return LayerGroup.LINEAR
    if config.depthwise:
        return LayerGroup.DEPTHWISE
    return LayerGroup.GROUPED if config.grouped else LayerGroup.DENSE


class KernelPath(StrEnum):
    """Stride-1 1x1 convolutions take kernels of their own on a CPU (PyTorch runs them without oneDNN below
    batch 16), and their micro-benchmarks stray from their time inside a network otherwise than the rest's."""

    POINTWISE = "pointwise"
    OTHER = "other"


def kernel_path(config: LayerConfig) -> KernelPath:
    pointwise = config.kernel == (1, 1) and config.stride == (1, 1) and not config.grouped
    return KernelPath.POINTWISE if config.op == "conv2d" and pointwise else KernelPath.OTHER


Part = tuple[KernelPath, int]
"""Layer time by kernel path and by the benchmarked batch size it is interpolated from."""


def timed_layers(table: LayerTable, batch: int, amp: bool) -> list[LayerConfig]:
    """The micro-benchmark configuration of every executed convolution and linear, repeats included."""
    configs = (layer_config(layer, batch, amp) for layer in table.layers)
    return [config for config in configs if config is not None]


def _output_side(size: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    return max(1, (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1)


def layer_flops(config: LayerConfig) -> float:
    """Forward plus backward FLOPs (backward is twice the forward: input and weight gradients)."""
    c = config
    if c.op == "linear":
        forward = 2.0 * c.batch * c.height * c.width * c.in_channels * c.out_channels
    else:
        sides = (c.height, c.width) if c.op == "conv2d" else (c.height * c.stride[0], c.width * c.stride[1])
        out_h = _output_side(sides[0], c.kernel[0], c.stride[0], c.padding[0], c.dilation[0])
        out_w = _output_side(sides[1], c.kernel[1], c.stride[1], c.padding[1], c.dilation[1])
        macs = c.out_channels * out_h * out_w * (c.in_channels // c.groups) * c.kernel[0] * c.kernel[1]
        forward = 2.0 * c.batch * macs
    return 3.0 * forward


def layer_bytes(config: LayerConfig) -> float:
    c = config
    weights = c.in_channels * c.out_channels // c.groups * c.kernel[0] * c.kernel[1]
    activations = c.batch * c.height * c.width * (c.in_channels + c.out_channels)
    return float(_FLOAT_BYTES * (weights + activations))


def layer_terms(config: LayerConfig) -> list[float]:
    """What a layer's time is close to linear in: a fixed cost, its arithmetic and the bytes it moves. A
    layer far larger than any benchmarked one (VGG's 100M-weight linear) is then priced by its bytes, where
    a tree alone would give it the efficiency of the largest layer it saw."""
    return [1.0, layer_flops(config), layer_bytes(config)]


def layer_features(config: LayerConfig) -> list[float]:
    c = config
    return [
        float(c.op == "linear"),
        log(c.in_channels),
        log(c.out_channels),
        float(c.kernel[0] * c.kernel[1]),
        float(c.stride[0] * c.stride[1]),
        log(c.groups),
        float(c.depthwise),
        log(c.height * c.width),
        log(c.batch),
        float(c.amp),
        log(layer_flops(c) + 1.0),
        log(layer_bytes(c)),
    ]


class StepFeatures(BaseModel):
    """One model at one batch size and settings on one machine."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    batch: int
    amp: bool
    channels_last: bool
    group_s: dict[LayerGroup, float]
    layer_parts: dict[Part, float]
    """The same layer time by ``Part``: what the step base calibrates."""
    flops: float
    bytes_moved: float
    other_bytes: float
    """Bytes moved by layers that are not convolutions or linears: norms, activations, element-wise ops."""
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
        return [
            log(self.batch),
            float(self.amp),
            float(self.channels_last),
            *(log(self.group_s[group] + _TINY) for group in LayerGroup),
            log(self.layers_s + _TINY),
            log(self.flops + 1.0),
            log(self.bytes_moved + 1.0),
            log(self.other_bytes + 1.0),
            log(self.parameters + 1.0),
            log(self.activation_bytes + 1.0),
            *(float(self.counts[kind]) for kind in LayerKind),
            float(sum(self.counts.values())),
        ]


STEP_FEATURES = (
    "log_batch",
    "amp",
    "channels_last",
    *(f"log_{group}_s" for group in LayerGroup),
    "log_layers_s",
    "log_flops",
    "log_bytes",
    "log_other_bytes",
    "log_parameters",
    "log_activation_bytes",
    *(f"count_{kind}" for kind in LayerKind),
    "count_layers",
)


def step_features(
    table: LayerTable,
    batch: int,
    amp: bool,
    channels_last: bool,
    layer_points: Mapping[LayerConfig, Polyline],
) -> StepFeatures:
    """``layer_points`` must give every configuration ``timed_layers`` names its (batch, seconds) polyline,
    measured or predicted."""
    group_s = dict.fromkeys(LayerGroup, 0.0)
    layer_parts: dict[Part, float] = {}
    for config in timed_layers(table, batch, amp):
        seconds = dict(layer_points[config])
        shares = [(b, weight * seconds[b]) for b, weight in through_weights(layer_points[config], batch)]
        group_s[layer_group(config)] += max(sum(share for _b, share in shares), _TINY)
        for benchmarked, share in shares:
            part = (kernel_path(config), benchmarked)
            layer_parts[part] = layer_parts.get(part, 0.0) + share
    costs = table.at_batch(batch)
    timed = {LayerKind.CONV, LayerKind.CONV_TRANSPOSE, LayerKind.LINEAR}
    other = sum(
        c.bytes_read + c.bytes_written
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
