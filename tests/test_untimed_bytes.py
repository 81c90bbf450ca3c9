"""What a step's untimed layers move (`advisor.predict.features.untimed_bytes`), on the zoo's real tables:
GPT-2's tanh GELU is capped at two of its hand-counted passes, attention grows with its scores, and a CNN's
single-kernel activations keep the introspection's count."""

from __future__ import annotations

from advisor.bench.tables import zoo_table
from advisor.introspect import Layer, LayerKind, LayerTable
from advisor.ops import layer_op
from advisor.ops.configs import kernels
from advisor.predict.features import untimed_bytes


def _first(table: LayerTable, kind: LayerKind, op: str) -> Layer:
    return next(layer for layer in table.layers if layer.kind == kind and layer.op == op)


def _both(layer: Layer, batch: int) -> tuple[float, float]:
    """(the introspection's bytes, ``untimed_bytes``) at ``batch``."""
    costs = layer.at_batch(batch)
    return float(costs.bytes_read + costs.bytes_written), untimed_bytes(layer, costs, batch, False)


def test_a_gelu_spelt_in_element_wise_ops_counts_each_of_its_kernels() -> None:
    """Eight kernels (tanh, pow, four multiplies, two adds), each a pass over the activations: their count,
    not one kernel's (capped at one kernel's two passes, today's model put GPT-2's steps 9-22% fast after its
    linears were priced right: benchmarks/README.md, language models at their published sizes)."""
    gelu = _first(zoo_table("tiny_gpt2", 32), LayerKind.ACTIVATION, "NewGELUActivation")
    found = layer_op(gelu, 4)
    assert found is not None and found[0].name == "activation" and kernels(gelu) == 8
    hand = found[0].cost(found[1]).forward_bytes
    counted, untimed = _both(gelu, 4)
    assert 4 * hand < counted < 2 * 8 * hand
    assert untimed == counted


def test_attentions_bytes_grow_with_its_scores_where_the_introspections_grow_with_the_tokens() -> None:
    short, long = (
        _first(zoo_table("tiny_gpt2", tokens), LayerKind.ATTENTION, "scaled_dot_product_attention")
        for tokens in (32, 128)
    )
    counted_short, untimed_short = _both(short, 2)
    counted_long, untimed_long = _both(long, 2)
    assert counted_long / counted_short == 4  # queries, keys, values and output: linear in the tokens
    assert untimed_long / untimed_short > 10  # queries x keys scores: four tokens' worth squared
    assert untimed_short > counted_short


def test_a_cnns_single_kernel_activations_keep_the_introspections_count() -> None:
    for model, op in (("mobilenet_v2", "ReLU6"), ("resnet18", "ReLU"), ("efficientnet_b0", "SiLU")):
        activation = _first(zoo_table(model, 32), LayerKind.ACTIVATION, op)
        counted, untimed = _both(activation, 8)
        assert untimed == counted, model
