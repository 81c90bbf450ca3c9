"""What a job's training settings change in one step, counted from its layer table.

The predictors were fitted on steps that train every parameter and recompute nothing, so a setting's effect
on time is the ratio of the step's counted work with it to the work without (`training_time_factor`), and on
memory the parameters that train and the activations kept (`advisor.introspect.memory`):
- LoRA: a frozen linear or convolution computes its input's gradient only (about its forward), a frozen
  embedding nothing, and a frozen linear keeps no input for a weight gradient; each adapted linear adds its
  two rank-r products forward and twice that backward, and only the adapters have gradients and optimizer
  state.
- Gradient checkpointing: each repeated block (``layers.3``, ``h.3``) runs its forward again in the
  backward; of its activations only its input is kept, and one block's while it is recomputed. A block's
  share of the saved bytes is its share of the bytes the layers write.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from advisor.introspect.table import Layer, LayerKind, LayerTable, TensorShape

DEFAULT_TARGETS = frozenset(
    {"q_proj", "v_proj", "c_attn", "query", "value", "q", "v", "qkv", "query_key_value", "Wqkv", "q_lin"}
    | {"v_lin"}
)
"""PEFT's default LoRA targets of the common architectures (Llama/Mistral/Qwen, GPT-2, BERT, T5, ViT...)."""
ALL_LINEAR = "all-linear"
_HEADS = frozenset({"lm_head", "classifier", "score", "head", "fc", "cls"})
"""Output layers ``all-linear`` leaves alone, as PEFT does."""
_WEIGHTED = frozenset({LayerKind.LINEAR, LayerKind.CONV, LayerKind.CONV_TRANSPOSE})
_BLOCK = re.compile(r"^(.*?\.\d+)\.")
_FP32 = 4


def adapted(table: LayerTable) -> list[Layer]:
    """The linear layers LoRA wraps: those named in its targets (their last name), else PEFT's defaults."""
    training = table.training
    if training is None or training.lora_rank is None:
        return []
    targets = set(training.lora_targets) or DEFAULT_TARGETS
    every = ALL_LINEAR in targets
    chosen = []
    for layer in table.layers:
        last = layer.name.rsplit(".", 1)[-1]
        named = last in targets or (every and last not in _HEADS)
        if layer.kind is LayerKind.LINEAR and layer.parameters and named:
            chosen.append(layer)
    return chosen


def _widths(layer: Layer) -> tuple[int, int, int]:
    """Rows per sample, input and output features of a linear layer."""
    dims = layer.inputs[0].dims
    return math.prod(dims[:-1]), dims[-1], layer.outputs[0].dims[-1]


def adapter_parameters(table: LayerTable) -> int:
    rank = _rank(table)
    return sum(rank * (d_in + d_out) for _, d_in, d_out in map(_widths, adapted(table)))


def trainable_parameters(table: LayerTable) -> int:
    """Parameters with gradients and optimizer state: the adapters under LoRA, else all."""
    return adapter_parameters(table) if _rank(table) else table.totals.parameters


def _rank(table: LayerTable) -> int:
    return 0 if table.training is None or table.training.lora_rank is None else table.training.lora_rank


def _adapter_forward(layers: Iterable[Layer], rank: int, batch: int) -> int:
    """FLOPs of the adapters' forward on ``layers``: x A then (x A) B, rank ``rank``."""
    return sum(2 * rows * batch * rank * (d_in + d_out) for rows, d_in, d_out in map(_widths, layers))


def _blocks(table: LayerTable) -> dict[str, list[Layer]]:
    """The layers of each repeated block (a numbered module: ``model.layers.3``), in order."""
    blocks: dict[str, list[Layer]] = {}
    for layer in table.layers:
        found = _BLOCK.match(layer.name)
        if found:
            blocks.setdefault(found.group(1), []).append(layer)
    return blocks


def training_time_factor(table: LayerTable, batch: int) -> float:
    """The step's counted work as the job trains over the work of a full step (1 without settings)."""
    training, totals = table.training, table.totals
    full = totals.forward_flops.at(batch) + totals.backward_flops.at(batch)
    if training is None or full == 0:
        return 1.0
    work = full
    rank, wrapped = _rank(table), adapted(table)
    if rank:
        work -= sum(_weight_gradient(layer, batch) for layer in table.layers if layer.parameters)
        work += 3 * _adapter_forward(wrapped, rank, batch)
    if training.checkpointing:
        inside = [layer for layers in _blocks(table).values() for layer in layers]
        work += sum(layer.forward_flops.at(batch) for layer in inside)
        work += _adapter_forward((layer for layer in wrapped if layer in inside), rank, batch)
    return work / full


def _weight_gradient(layer: Layer, batch: int) -> int:
    """The share of a frozen layer's backward that is its weight's gradient."""
    backward = layer.backward_flops.at(batch)
    if layer.kind is LayerKind.EMBEDDING:
        return backward
    return min(backward, layer.forward_flops.at(batch)) if layer.kind in _WEIGHTED else 0


def kept_activation_bytes(table: LayerTable, batch: int) -> int:
    """Bytes kept for the backward at the end of the forward (fp32), as the job trains."""
    saved = table.totals.saved_activation_bytes.at(batch)
    training = table.training
    if training is None:
        return saved
    if _rank(table):
        wrapped = {layer.index for layer in adapted(table)}
        frozen = [
            layer
            for layer in table.layers
            if layer.kind is LayerKind.LINEAR and layer.parameters and layer.index not in wrapped
        ]
        saved -= sum(_bytes(layer.inputs[0], batch) for layer in frozen)
    blocks = _blocks(table)
    if training.checkpointing and blocks:
        written = _written(table.layers, batch)
        inside = sum(_written(layers, batch) for layers in blocks.values())
        in_blocks = saved * inside / max(written, 1)
        inputs = sum(_bytes(layers[0].inputs[0], batch) for layers in blocks.values() if layers[0].inputs)
        # Outside the blocks (the head, the loss) at the end of the forward; one block recomputed later,
        # once the backward has freed the head's.
        saved = round(inputs + max(saved - in_blocks, in_blocks / len(blocks)))
    return max(saved, 0)


def _written(layers: Iterable[Layer], batch: int) -> int:
    return sum(_bytes(shape, batch) for layer in layers for shape in layer.outputs)


def _bytes(shape: TensorShape, batch: int) -> int:
    return math.prod(shape.at_batch(batch)) * _FP32
