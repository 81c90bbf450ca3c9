"""Peak training memory from a layer table, so candidates that cannot fit a GPU are dropped before prediction.

As the job trains (`LayerTable.training`, `advisor.introspect.training`): under LoRA only the adapters have
gradients and optimizer state; checkpointing keeps fewer activations; ZeRO divides optimizer state (stage
1), gradients (2) and weights (3) among ``devices``; the job's optimizer replaces the one asked about.
An estimate, not a measurement: the table's saved activations were measured in fp32 on the meta device;
under autocast most of them (convolution and matmul inputs and outputs) are half precision, which the
``_HALF_ACTIVATIONS`` factor approximates. The allocator's fragmentation and library workspaces are not
modelled beyond one transient layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from advisor.introspect.table import LayerTable
from advisor.introspect.training import adapter_parameters, kept_activation_bytes, trainable_parameters
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
    table: LayerTable, batch_size: int, precision: Precision, optimizer: Optimizer, devices: int = 1
) -> MemoryEstimate:
    """Bytes on one of ``devices`` GPUs at the peak of a training step (end of forward, start of backward)."""
    training = table.training
    parameters = table.totals.parameters + adapter_parameters(table)
    trainable = trainable_parameters(table)
    chosen = Optimizer(training.optimizer) if training is not None and training.optimizer else optimizer
    stage = 0 if training is None or training.zero_stage is None else training.zero_stage
    shards = [max(devices, 1) if stage >= level else 1 for level in (1, 2, 3)]
    half = precision is not Precision.FP32
    scale = _HALF_ACTIVATIONS if half else 1.0
    # The largest single layer's inputs and outputs exist at once on top of what is saved for backward.
    transient = table.largest_layer_bytes(batch_size)
    return MemoryEstimate(
        weights=parameters * _FP32 // shards[2],
        gradients=trainable * _FP32 // shards[1],
        optimizer_state=optimizer_state_bytes(trainable, chosen) // shards[0],
        autocast_weight_copies=parameters * _HALF // shards[2] if half else 0,
        activations=round(kept_activation_bytes(table, batch_size) * scale),
        transient=round(transient * scale),
    )
