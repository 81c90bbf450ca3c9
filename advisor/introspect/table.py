"""The layer table: a model's executed layers, shapes and costs, as data that can cross a trust boundary.

A user's process sends this table to the daemon, so validation recomputes every total and the architecture
hash: a table that was edited by hand, or built by a buggy client, is refused rather than believed.
Costs are stored as ``per_sample * n + fixed`` so one table serves every batch size exactly.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Literal, Self

from pydantic import Field, JsonValue, model_validator

from advisor.frozen import Frozen, LaterFields

# Bounds far above any real network, low enough that arithmetic on a hostile table stays cheap and sane.
MAX_LAYERS = 200_000
_MAX_COUNT = 10**18
Count = Annotated[int, Field(ge=0, le=_MAX_COUNT)]
Dim = Annotated[int, Field(ge=1, le=2**31)]
Size = Annotated[int, Field(ge=0, le=2**31)]


class LayerKind(StrEnum):
    CONV = "conv"
    CONV_TRANSPOSE = "conv_transpose"
    LINEAR = "linear"
    MATMUL = "matmul"
    ATTENTION = "attention"
    BATCH_NORM = "batch_norm"
    LAYER_NORM = "layer_norm"
    GROUP_NORM = "group_norm"
    POOLING = "pooling"
    EMBEDDING = "embedding"
    DROPOUT = "dropout"
    ACTIVATION = "activation"
    ELEMENTWISE = "elementwise"


class Task(StrEnum):
    """What a training step computes its loss on: a token model's head and labels, or images' classes."""

    CAUSAL_LM = "causal-lm"
    """Next-token loss over the sequence."""
    MASKED_LM = "masked-lm"
    SEQUENCE_CLASSIFICATION = "sequence-classification"
    SEQ2SEQ = "seq2seq"
    """An encoder over the sequence, a decoder over the target."""
    IMAGE_CLASSIFICATION = "image-classification"


TOKEN_TASKS = frozenset({Task.CAUSAL_LM, Task.MASKED_LM, Task.SEQUENCE_CLASSIFICATION, Task.SEQ2SEQ})


class Scaling(Frozen):
    """A cost that grows linearly with the batch: ``per_sample * n + fixed`` (weights read once per step)."""

    per_sample: Count = 0
    fixed: Count = 0

    def at(self, batch_size: int) -> int:
        return self.per_sample * batch_size + self.fixed

    def __add__(self, other: Scaling) -> Scaling:
        return Scaling(per_sample=self.per_sample + other.per_sample, fixed=self.fixed + other.fixed)


class TensorShape(Frozen):
    """A shape at batch size 1; ``batch_dim`` is the dimension that grows with the batch, if any."""

    dims: tuple[Size, ...]
    batch_dim: int | None = None

    @model_validator(mode="after")
    def _batch_dim_in_range(self) -> Self:
        if self.batch_dim is not None and not 0 <= self.batch_dim < len(self.dims):
            raise ValueError(f"batch_dim {self.batch_dim} outside shape {self.dims}")
        return self

    def at_batch(self, batch_size: int) -> tuple[int, ...]:
        return tuple(d * batch_size if i == self.batch_dim else d for i, d in enumerate(self.dims))


class Window(Frozen, LaterFields):
    """Sliding-window geometry of a convolution or pooling; ``channels`` are (in, out) for convolutions."""

    kernel: tuple[Dim, ...]
    stride: tuple[Dim, ...]
    padding: tuple[Count, ...]
    dilation: tuple[Dim, ...]
    groups: Dim = 1
    channels: tuple[Dim, Dim] | None = None
    channels_last: bool = False
    """A convolution torch runs channels last, its input or its weight laid out so in memory
    (`advisor.records.LayerConfig.channels_last`); absent where unset, so tables and architecture hashes
    from before the field stay as they were."""
    later_fields = ("channels_last",)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        rank = len(self.kernel)
        if {len(self.stride), len(self.padding), len(self.dilation)} != {rank}:
            raise ValueError(f"window dimensions disagree: {self}")
        if self.channels is not None and any(c % self.groups for c in self.channels):
            raise ValueError(f"channels {self.channels} not divisible by groups {self.groups}")
        return self


class Layer(Frozen):
    """One executed leaf operation: a leaf module call, an attention call, or a bare tensor op."""

    index: Count
    name: str = Field(max_length=1000)
    op: str = Field(max_length=200)
    kind: LayerKind
    inputs: tuple[TensorShape, ...] = Field(max_length=64)
    outputs: tuple[TensorShape, ...] = Field(max_length=64)
    window: Window | None = None
    parameters: Count
    forward_flops: Scaling
    backward_flops: Scaling
    bytes_read: Scaling
    bytes_written: Scaling
    math_path: bool = False
    """An attention call a CPU runs on torch's math path, its scores and their softmax written out and kept
    for the backward: dropout on its weights, or a mask that takes a gradient (T5's learned position
    bias); else the fused kernel runs it (`advisor.introspect.attention`). Hashed only where set."""

    @property
    def depthwise(self) -> bool:
        w = self.window
        return w is not None and w.channels is not None and w.groups > 1 and w.groups == w.channels[0]

    @property
    def grouped(self) -> bool:
        return self.window is not None and self.window.groups > 1 and not self.depthwise

    def at_batch(self, batch_size: int) -> Costs:
        return _costs_at(self, batch_size)


@dataclass(frozen=True)
class Costs:
    forward_flops: int
    backward_flops: int
    bytes_read: int
    bytes_written: int

    @property
    def train_flops(self) -> int:
        return self.forward_flops + self.backward_flops


class Totals(Frozen):
    """Model-wide figures; ``unused_parameters`` are parameters no executed layer read."""

    parameters: Count
    unused_parameters: Count
    forward_flops: Scaling
    backward_flops: Scaling
    bytes_read: Scaling
    bytes_written: Scaling
    saved_activation_bytes: Scaling

    @classmethod
    def of(cls, layers: tuple[Layer, ...], parameters: int, saved_activation_bytes: Scaling) -> Totals:
        zero = Scaling()
        return cls(
            parameters=parameters,
            unused_parameters=parameters - sum(layer.parameters for layer in layers),
            forward_flops=sum((layer.forward_flops for layer in layers), zero),
            backward_flops=sum((layer.backward_flops for layer in layers), zero),
            bytes_read=sum((layer.bytes_read for layer in layers), zero),
            bytes_written=sum((layer.bytes_written for layer in layers), zero),
            saved_activation_bytes=saved_activation_bytes,
        )


class TrainingSettings(Frozen):
    """How a step trains beyond its model, where that changes its time and memory (read from the job's
    script; `advisor.introspect.training`). Absent: every parameter trains, nothing is recomputed."""

    lora_rank: Annotated[int, Field(ge=1, le=65536)] | None = None
    """LoRA: the base is frozen and low-rank adapters of this rank train."""
    lora_targets: tuple[Annotated[str, Field(max_length=200)], ...] = Field(default=(), max_length=64)
    """The linear layers (their last name: ``q_proj``) the adapters wrap, or ``all-linear``; none named:
    PEFT's defaults for the common architectures."""
    checkpointing: bool = False
    """Gradient checkpointing of each repeated block: its forward runs again in the backward."""
    zero_stage: Annotated[int, Field(ge=0, le=3)] | None = None
    """DeepSpeed ZeRO's stage (FSDP's full sharding is 3): optimizer state, gradients, weights sharded."""
    hybrid_shard: bool = False
    """FSDP's hybrid sharding: the stage's state sharded among one node's devices, replicated across nodes."""
    optimizer: Literal["sgd", "adam", "adamw"] | None = None
    """None: SGD with momentum, as the benchmarks train."""

    def shard_devices(self, gpus_per_node: int, nodes: int) -> int:
        """The devices one device's state is sharded among: all the job's under ZeRO/FSDP, one node's under
        hybrid sharding, none (1) without a stage."""
        if not self.zero_stage:
            return 1
        return max(gpus_per_node, 1) * (1 if self.hybrid_shard else max(nodes, 1))


_HASHED = {"op", "kind", "inputs", "outputs", "window", "parameters"}


def _set_later(layer: Layer) -> set[str]:
    """A layer's fields added later join the hash only where set, so the hashes stored before them stay."""
    return {"math_path"} if layer.math_path else set()


def architecture_hash(
    input_shape: tuple[int, int, int],
    layers: tuple[Layer, ...],
    tokens: tuple[int, str] | None = None,
    training: TrainingSettings | None = None,
) -> str:
    """Hash of what determines the computation (ops, shapes, geometry), not of names, weights or costs;
    ``tokens`` (sequence length, task) only for a token model and ``training`` only where given, so an
    image model's hash stays as it was."""
    architecture: list[object] = [
        list(input_shape),
        [layer.model_dump(mode="json", include=_HASHED | _set_later(layer)) for layer in layers],
    ]
    if tokens is not None:
        architecture.append(list(tokens))
    if training is not None:
        # A field added later joins the hash only where set, so the hashes stored before it stay.
        later = set() if training.hybrid_shard else {"hybrid_shard"}
        architecture.append(training.model_dump(mode="json", exclude=later))
    canonical = json.dumps(architecture, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class Probe:
    """What one recorded training step found: its layers, the model's parameters and saved activations."""

    layers: tuple[Layer, ...]
    parameters: int
    saved_activation_bytes: Scaling


class LayerTable(Frozen):
    """Every executed leaf operation of one model at one input shape, with totals and a hash to check them."""

    reference: str = Field(max_length=1000)
    model_kwargs: dict[str, JsonValue]
    input_shape: tuple[Dim, Dim, Dim]
    """One image sample (C, H, W); not read for a token model."""
    sequence_length: Dim | None = None
    """A token model's input: token ids ``[batch, sequence_length]`` (None: an image of ``input_shape``)."""
    task: Task | None = None
    layers: tuple[Layer, ...] = Field(max_length=MAX_LAYERS)
    totals: Totals
    architecture_hash: str = Field(pattern=r"^[0-9a-f]{64}$")
    training: TrainingSettings | None = None
    """How the job trains it, where that is not every parameter with nothing recomputed (hashed then)."""

    @classmethod
    def build(
        cls,
        reference: str,
        model_kwargs: dict[str, JsonValue],
        input_shape: tuple[int, int, int],
        probe: Probe,
        sequence_length: int | None = None,
        task: Task | None = None,
    ) -> LayerTable:
        layers = probe.layers
        return cls(
            reference=reference,
            model_kwargs=model_kwargs,
            input_shape=input_shape,
            sequence_length=sequence_length,
            task=task,
            layers=layers,
            totals=Totals.of(layers, probe.parameters, probe.saved_activation_bytes),
            architecture_hash=architecture_hash(input_shape, layers, _tokens(sequence_length, task)),
        )

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if [layer.index for layer in self.layers] != list(range(len(self.layers))):
            raise ValueError("layer indices are not 0, 1, 2, ... in order")
        if sum(layer.parameters for layer in self.layers) > self.totals.parameters:
            raise ValueError("layers hold more parameters than the model")
        if self.totals != Totals.of(self.layers, self.totals.parameters, self.totals.saved_activation_bytes):
            raise ValueError("totals do not match the layers")
        tokens = _tokens(self.sequence_length, self.task)
        if self.architecture_hash != architecture_hash(self.input_shape, self.layers, tokens, self.training):
            raise ValueError("architecture hash does not match the layers")
        return self

    def trained(self, training: TrainingSettings | None) -> LayerTable:
        """This table as a job trains it (its hash with ``training``; None or the default: as benchmarked)."""
        kept = None if training is None or training == TrainingSettings() else training
        tokens = _tokens(self.sequence_length, self.task)
        digest = architecture_hash(self.input_shape, self.layers, tokens, kept)
        return self.model_copy(update={"training": kept, "architecture_hash": digest})

    def at_batch(self, batch_size: int) -> BatchCosts:
        return BatchCosts(
            batch_size=batch_size,
            layers=tuple(layer.at_batch(batch_size) for layer in self.layers),
            total=self.total_at(batch_size),
            saved_activation_bytes=self.totals.saved_activation_bytes.at(batch_size),
        )

    def total_at(self, batch_size: int) -> Costs:
        """The whole model's costs at one batch size, without each layer's (a plan asks tens of thousands)."""
        return _costs_at(self.totals, _positive(batch_size))


@dataclass(frozen=True)
class BatchCosts:
    """A table's costs at one batch size; ``layers`` follow the table's rows."""

    batch_size: int
    layers: tuple[Costs, ...]
    total: Costs
    saved_activation_bytes: int


def _tokens(sequence_length: int | None, task: Task | None) -> tuple[int, str] | None:
    return None if sequence_length is None else (sequence_length, str(task))


def _positive(batch_size: int) -> int:
    if batch_size < 1:
        raise ValueError(f"batch size must be positive, not {batch_size}")
    return batch_size


def _costs_at(source: Layer | Totals, batch_size: int) -> Costs:
    """A layer's or the whole table's costs at one batch size: the same four scalings either way."""
    return Costs(
        forward_flops=source.forward_flops.at(batch_size),
        backward_flops=source.backward_flops.at(batch_size),
        bytes_read=source.bytes_read.at(batch_size),
        bytes_written=source.bytes_written.at(batch_size),
    )
