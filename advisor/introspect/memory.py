"""Peak training memory from a layer table, so candidates that cannot fit a GPU are dropped before prediction.

As the job trains (`LayerTable.training`, `advisor.introspect.training`): under LoRA only the adapters have
gradients and optimizer state; checkpointing keeps fewer activations; ZeRO divides optimizer state (stage
1), gradients (2) and weights (3) among ``devices``; the job's optimizer replaces the one asked about.
An estimate, not a measurement: the table's saved activations were measured in fp32 on the meta device;
under autocast most of them (convolution and matmul inputs and outputs) are half precision, which the
``_HALF_ACTIVATIONS`` factor approximates. The allocator's fragmentation and library workspaces are not
modelled beyond one transient layer.

The step's peak is the larger of two moments: the end of the forward (activations kept for the backward)
and the optimizer's update, after the backward has freed them, where the update's own temporaries sit on
top of weights, gradients and state. Which temporaries, counted from torch's optimizers (2.x,
``torch/optim/adam.py``, ``sgd.py``): Adam/AdamW one tensor at a time (``_single_tensor_adam``, a CPU's
only path) build ``exp_avg_sq.sqrt() / bias_correction2_sqrt``, two temporaries the size of the tensor
updated, so twice the largest; the multi-tensor update (``_multi_tensor_adam``, a GPU's default)
``_foreach_sqrt`` of every second moment at once, one temporary the size of all trainable parameters.
SGD with momentum updates in place on either path (no temporaries; Nesterov and coupled weight decay,
not counted, would add one gradient's worth).
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


class OptimizerUpdate(StrEnum):
    """How torch applies an optimizer's update: which temporaries it makes."""

    PER_TENSOR = "per_tensor"
    """One parameter tensor at a time: a CPU's only path (no foreach kernels there)."""
    FOREACH = "foreach"
    """Every tensor of a device at once: the default on a GPU."""


_UPDATE_TEMPORARIES = {
    (Optimizer.SGD, OptimizerUpdate.PER_TENSOR): 0,
    (Optimizer.SGD, OptimizerUpdate.FOREACH): 0,
    (Optimizer.ADAM, OptimizerUpdate.PER_TENSOR): 2,
    (Optimizer.ADAM, OptimizerUpdate.FOREACH): 1,
    (Optimizer.ADAMW, OptimizerUpdate.PER_TENSOR): 2,
    (Optimizer.ADAMW, OptimizerUpdate.FOREACH): 1,
}
"""fp32 temporaries of an update: of the largest tensor (per tensor), of all trainable ones (foreach)."""


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
    update_temporaries: int = 0

    @property
    def state(self) -> int:
        """What lives through the whole step: weights, gradients, optimizer state."""
        return self.weights + self.gradients + self.optimizer_state

    @property
    def forward_peak(self) -> int:
        """End of the forward, start of the backward: the activations kept for it and one layer's."""
        return self.state + self.autocast_weight_copies + self.activations + self.transient

    @property
    def update_peak(self) -> int:
        """The optimizer's update: the activations are freed, its temporaries are not yet."""
        return self.state + self.update_temporaries

    @property
    def total(self) -> int:
        return max(self.forward_peak, self.update_peak)


def estimate_peak_memory(
    table: LayerTable,
    batch_size: int,
    precision: Precision,
    optimizer: Optimizer,
    devices: int = 1,
    update: OptimizerUpdate = OptimizerUpdate.FOREACH,
) -> MemoryEstimate:
    """Bytes on one of ``devices`` GPUs at the peak of a training step, the end of the forward or the
    optimizer's ``update``, whichever holds more."""
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
        update_temporaries=update_temporary_bytes(table, chosen, update) // shards[0],
    )


def update_temporary_bytes(table: LayerTable, optimizer: Optimizer, update: OptimizerUpdate) -> int:
    """fp32 temporaries the optimizer's update makes (module docstring): of the largest trainable tensor
    (a layer's parameters, at most all trainable ones: under LoRA an adapter) or of all of them."""
    trainable = trainable_parameters(table)
    per_tensor = min(max((layer.parameters for layer in table.layers), default=0), trainable)
    tensor = per_tensor if update is OptimizerUpdate.PER_TENSOR else trainable
    return _UPDATE_TEMPORARIES[optimizer, update] * tensor * _FP32
