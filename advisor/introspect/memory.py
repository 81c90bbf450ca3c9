"""Peak training memory from a layer table, so candidates that cannot fit a GPU are dropped before prediction.

As the job trains (`LayerTable.training`, `advisor.introspect.training`): under LoRA only the adapters have
gradients and optimizer state; checkpointing keeps fewer activations; ZeRO divides optimizer state (stage
1), gradients (2) and weights (3) among ``devices``; the job's optimizer replaces the one asked about.
An estimate, not a measurement: the table's saved activations were measured in fp32 on the meta device;
under autocast most of them (convolution and matmul inputs and outputs) are half precision, which the
``_HALF_ACTIVATIONS`` factor approximates. The allocator's fragmentation and library workspaces are not
modelled beyond one layer's gradients at a time (`transient_bytes`).

The step's peak is the larger of two moments: in the backward (`transient_bytes`: activations kept for it are
freed and gradients made as it goes) and the optimizer's update, after the backward has freed them, where the
update's own temporaries sit on top of weights, gradients and state. Which temporaries, counted from torch's
optimizers (2.x, ``torch/optim/adam.py``, ``sgd.py``): Adam/AdamW one tensor at a time
(``_single_tensor_adam``, a CPU's only path) build ``exp_avg_sq.sqrt() / bias_correction2_sqrt``, two
temporaries the size of the tensor updated, so twice the largest; the multi-tensor update
(``_multi_tensor_adam``, a GPU's default) ``_foreach_sqrt`` of every second moment at once, one temporary the
size of all trainable parameters. SGD with momentum updates in place on either path (no temporaries; Nesterov
and coupled weight decay, not counted, would add one gradient's worth).
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
        """The backward's peak: the activations kept for it and the walk's excess (`transient_bytes`)."""
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
    """Bytes on one of ``devices`` GPUs at the peak of a training step, in the backward or the
    optimizer's ``update``, whichever holds more."""
    training = table.training
    parameters = table.totals.parameters + adapter_parameters(table)
    trainable = trainable_parameters(table)
    chosen = Optimizer(training.optimizer) if training is not None and training.optimizer else optimizer
    stage = 0 if training is None or training.zero_stage is None else training.zero_stage
    shards = [max(devices, 1) if stage >= level else 1 for level in (1, 2, 3)]
    half = precision is not Precision.FP32
    scale = _HALF_ACTIVATIONS if half else 1.0
    gradients = trainable * _FP32 // shards[1]
    activations = round(kept_activation_bytes(table, batch_size) * scale)
    return MemoryEstimate(
        weights=parameters * _FP32 // shards[2],
        gradients=gradients,
        optimizer_state=optimizer_state_bytes(trainable, chosen) // shards[0],
        autocast_weight_copies=parameters * _HALF // shards[2] if half else 0,
        activations=activations,
        transient=transient_bytes(table, batch_size, activations, gradients, scale),
        update_temporaries=update_temporary_bytes(table, chosen, update) // shards[0],
    )


def transient_bytes(table: LayerTable, batch_size: int, kept: int, gradients: int, scale: float = 1.0) -> int:
    """The backward's peak less the state's and the ``kept`` activations' (negative where it is lower).
    Walking the layers back, at each: the gradients of its inputs and outputs (their sizes times ``scale``;
    its weights are state already), less the activations the layers after it kept (freed by then; ``kept``
    shared out by bytes written), less the ``gradients`` of the layers before it (not made yet: the step
    began with none, ``zero_grad`` sets them to None; shared out by parameters). A language model's logits
    come last and count whole; a CNN's largest layers come first, when most activations are freed."""
    layers = table.layers
    written = [layer.bytes_written.per_sample * batch_size for layer in layers]
    total, later = max(sum(written), 1), sum(written)
    parameters, before = max(sum(layer.parameters for layer in layers), 1), 0
    most = float(-gradients)  # the end of the forward: every activation kept, no gradient yet
    for layer, own in zip(layers, written, strict=True):
        later -= own
        moved = (layer.bytes_read.per_sample + layer.bytes_written.per_sample) * batch_size * scale
        most = max(most, moved - kept * later / total - gradients * before / parameters)
        before += layer.parameters
    return round(most)


def update_temporary_bytes(table: LayerTable, optimizer: Optimizer, update: OptimizerUpdate) -> int:
    """fp32 temporaries the optimizer's update makes (module docstring): of the largest trainable tensor
    (a layer's parameters, at most all trainable ones: under LoRA an adapter) or of all of them."""
    trainable = trainable_parameters(table)
    per_tensor = min(max((layer.parameters for layer in table.layers), default=0), trainable)
    tensor = per_tensor if update is OptimizerUpdate.PER_TENSOR else trainable
    return _UPDATE_TEMPORARIES[optimizer, update] * tensor * _FP32
