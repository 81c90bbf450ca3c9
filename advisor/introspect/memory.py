"""Peak training memory from a layer table, so candidates that cannot fit a GPU are dropped before prediction.

An estimate, not a measurement: the table's saved activations were measured in fp32 on the meta device;
under autocast most of them (convolution and matmul inputs and outputs) are half precision, which the
``_HALF_ACTIVATIONS`` factor approximates. The allocator's fragmentation and library workspaces are not
modelled beyond one transient layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from advisor.introspect.table import LayerTable
from advisor.precision import Precision

_FP32 = 4
_HALF = 2
_HALF_ACTIVATIONS = 0.5


class Optimizer(StrEnum):
    SGD = "sgd"
    """With momentum: one fp32 buffer per parameter."""
    ADAM = "adam"
    ADAMW = "adamw"


_STATE_BUFFERS = {Optimizer.SGD: 1, Optimizer.ADAM: 2, Optimizer.ADAMW: 2}


def optimizer_state_bytes(parameters: int, optimizer: Optimizer) -> int:
    """fp32 state kept by the optimizer: momentum for SGD, first and second moments for Adam/AdamW."""
    return parameters * _FP32 * _STATE_BUFFERS[optimizer]


@dataclass(frozen=True)
class MemoryEstimate:
    weights: int
    gradients: int
    optimizer_state: int
    autocast_weight_copies: int
    activations: int
    transient: int

    @property
    def total(self) -> int:
        return (
            self.weights
            + self.gradients
            + self.optimizer_state
            + self.autocast_weight_copies
            + self.activations
            + self.transient
        )


def estimate_peak_memory(
    table: LayerTable, batch_size: int, precision: Precision, optimizer: Optimizer
) -> MemoryEstimate:
    """Bytes on one GPU at the peak of a training step (end of forward, start of backward)."""
    parameters = table.totals.parameters
    half = precision is not Precision.FP32
    scale = _HALF_ACTIVATIONS if half else 1.0
    # The largest single layer's inputs and outputs exist at once on top of what is saved for backward.
    transient = table.largest_layer_bytes(batch_size)
    return MemoryEstimate(
        weights=parameters * _FP32,
        gradients=parameters * _FP32,
        optimizer_state=optimizer_state_bytes(parameters, optimizer),
        autocast_weight_copies=parameters * _HALF if half else 0,
        activations=round(table.totals.saved_activation_bytes.at(batch_size) * scale),
        transient=round(transient * scale),
    )
