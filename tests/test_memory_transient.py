"""The transient layer of a step's peak, counted by hand: a layer's backward holds its activations'
gradients on top of what the layers before it kept, never its weights (state already)."""

from __future__ import annotations

from advisor.introspect import Layer, LayerKind, LayerTable, Optimizer, Scaling, TensorShape
from advisor.introspect.memory import estimate_peak_memory, transient_bytes
from advisor.introspect.table import Probe
from advisor.precision import Precision

WEIGHTS = 4 * 1_000_000
"""Bytes of a weight-heavy layer's weights, read once a step (``Scaling.fixed``): VGG's first classifier."""


def _linear(index: int, d_in: int, d_out: int) -> Layer:
    return Layer(
        index=index, name=f"{index}", op="Linear", kind=LayerKind.LINEAR,
        inputs=(TensorShape(dims=(1, d_in), batch_dim=0),),
        outputs=(TensorShape(dims=(1, d_out), batch_dim=0),),
        parameters=WEIGHTS // 4, forward_flops=Scaling(per_sample=2 * d_in * d_out),
        backward_flops=Scaling(per_sample=4 * d_in * d_out),
        bytes_read=Scaling(per_sample=4 * d_in, fixed=WEIGHTS), bytes_written=Scaling(per_sample=4 * d_out),
    )  # fmt: skip


def _table(head: int) -> LayerTable:
    """100 -> 1000 -> 1000 -> ``head`` linears that keep, in all, what they write."""
    layers = (_linear(0, 100, 1000), _linear(1, 1000, 1000), _linear(2, 1000, head))
    kept = 4 * (1000 + 1000 + head)
    return LayerTable.build(
        "lab.nets:stack", {}, (1, 1, 100), Probe(layers, 3 * WEIGHTS // 4, Scaling(per_sample=kept))
    )


def test_a_middle_layer_less_what_the_layers_after_it_kept() -> None:
    table = _table(head=50)
    # Batch 2, kept = written: 16,400 bytes. Each layer's in + out less what the layers after it wrote:
    # first (400 + 4,000) * 2 - (4,000 + 200) * 2 = 400; second 16,000 - 400 = 15,600; head 8,400 - 0.
    assert transient_bytes(table, 2, 16_400, 0) == 15_600
    # Kept nothing (checkpointed away): each layer's in + out counts whole; the second's is the most.
    assert transient_bytes(table, 2, 0, 0) == 16_000
    # Under autocast (scale 0.5, kept 8,200) both halve: second 8,000 - 200 = 7,800.
    assert transient_bytes(table, 2, 8_200, 0, 0.5) == 7_800


def test_a_language_model_s_logits_count_whole() -> None:
    table = _table(head=5000)
    # The head writes 20,000 bytes a sample: at batch 2 (4,000 + 20,000) * 2 = 48,000, nothing kept after it.
    assert transient_bytes(table, 2, 4 * 7000 * 2, 0) == 48_000


def test_the_gradients_of_the_layers_before_are_not_made_yet() -> None:
    table = _table(head=50)
    # 3,000 bytes of gradients, a third a layer: first 400 - 0; second 15,600 - 1,000; head 8,400 - 2,000;
    # the end of the forward -3,000 (every activation, no gradient).
    assert transient_bytes(table, 2, 16_400, 3_000) == 14_600
    # Gradients far larger than activations: the first layer's backward, every gradient made, is the peak.
    assert transient_bytes(table, 2, 16_400, 300_000) == 400
    # The estimate's gradients are its weights' 12 MB: the first layer's 400 bytes on top of the state, not
    # a layer's 4 MB of weights counted twice.
    estimate = estimate_peak_memory(table, 2, Precision.FP32, Optimizer.SGD)
    assert estimate.transient == 400
    assert estimate.forward_peak == 3 * 4 * 3_000_000 + 16_400 + 400
