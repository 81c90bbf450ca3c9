"""The zoo's transformer family: built by transformers as introspection counts it, trained with AdamW by the
benchmark, and torchvision ViT's ``nn.MultiheadAttention`` counted as its projections and a fused attention
with its heads."""

from __future__ import annotations

import pytest
import torch

from advisor.bench.measure import measure_step
from advisor.bench.sequence import family_table, is_sequence_model, start_sequence_training
from advisor.bench.tables import zoo_table
from advisor.bench.zoo import CPU_SEQUENCE_MODELS, REAL_SEQUENCE_ZOO, SEQUENCE_LENGTHS, ZOO, zoo_model
from advisor.introspect import LayerKind
from advisor.ops import layer_op
from advisor.records import StepConfig

pytest.importorskip("transformers")


def test_the_family_is_in_the_zoo_with_its_sequence_lengths() -> None:
    assert set(CPU_SEQUENCE_MODELS) <= {model.name for model in ZOO}
    assert all(is_sequence_model(name) for name in CPU_SEQUENCE_MODELS)
    assert not is_sequence_model("resnet18") and not is_sequence_model("no_such_model")
    assert zoo_model("tiny_gpt2").sizes == SEQUENCE_LENGTHS
    assert zoo_model("tiny_vit").kwargs(32)["image_size"] == 32
    with pytest.raises(ValueError, match="not benchmarked at 48tokens"):
        zoo_model("tiny_gpt2").kwargs(48)


def test_each_member_is_a_token_model_trained_with_adamw_at_its_length() -> None:
    for name in CPU_SEQUENCE_MODELS:
        table = zoo_table(name, 64 if zoo_model(name).tokens else 32)
        assert table.training is not None and table.training.optimizer == "adamw", name
        assert table.sequence_length == (64 if zoo_model(name).tokens else None), name
        assert any(layer.kind is LayerKind.ATTENTION for layer in table.layers), name


def test_the_llama_block_has_rms_norm_swiglu_and_grouped_query_attention() -> None:
    table = family_table("tiny_llama", 32)
    norms = [layer for layer in table.layers if layer.op == "LlamaRMSNorm"]
    assert len(norms) == 2 * 2 + 1  # two per block, one at the end
    attention = [layer for layer in table.layers if layer.kind is LayerKind.ATTENTION]
    query, key, _value = (shape.dims for shape in attention[0].inputs[:3])
    assert query[1] == 4 and key[1] == 2  # 4 query heads share 2 key/value heads
    gated = [
        layer.name for layer in table.layers if layer.name.endswith(("gate_proj", "up_proj", "down_proj"))
    ]
    assert len(gated) == 2 * 3


def test_a_family_step_trains_with_adamw_on_the_cpu() -> None:
    """The peak holds weights, gradients and AdamW's two moments: four copies of the parameters at least
    (SGD with momentum would keep three)."""
    config = StepConfig(
        model="tiny_llama", input_size=32, batch=2, amp=False, channels_last=False, pinned=False, workers=0
    )
    measured = measure_step(config, torch.device("cpu"), steps=1, warmup=1)
    assert measured.fits and measured.median_s is not None and measured.median_s > 0
    parameters = zoo_table("tiny_llama", 32).totals.parameters
    assert measured.peak_memory_bytes is not None and measured.peak_memory_bytes > 4 * 4 * parameters


def test_vit_multi_head_attention_is_its_projections_and_a_fused_attention_with_heads() -> None:
    """torchvision's ViT-B/16 on 32x32: 4 patches and the class token, 768 wide, 12 heads of 64. Counted
    by hand per block: the in-projection 2 x 5 x 768 x 2304, the attention 2 x 2 x 12 x 5 x 5 x 64 (scores
    and their product with the values), the out-projection 2 x 5 x 768 x 768."""
    table = zoo_table("vit_b_16", 32)
    block = [layer for layer in table.layers if layer.name == "encoder.layers.encoder_layer_0.self_attention"]
    flops = {layer.kind: layer.forward_flops.per_sample for layer in block if layer.forward_flops.per_sample}
    attention = next(layer for layer in block if layer.kind is LayerKind.ATTENTION)
    assert attention.op == "scaled_dot_product_attention"
    assert flops[LayerKind.ATTENTION] == 2 * 2 * 12 * 5 * 5 * 64
    projections = sorted(layer.forward_flops.per_sample for layer in block if layer.kind is LayerKind.LINEAR)
    assert projections == [2 * 5 * 768 * 768, 2 * 5 * 768 * 2304]
    found = layer_op(attention, 8)
    assert found is not None and found[1].op == "attention" and found[1].groups == 12


def test_the_real_sizes_build_at_every_length_the_gpu_grid_measures() -> None:
    """BERT has 512 positions: the GPU grid must not ask it for 1024 tokens."""
    for model in REAL_SEQUENCE_ZOO:
        table = zoo_table(model.name, max(model.sizes))
        assert table.training is not None and table.training.optimizer == "adamw"
    assert max(zoo_model("bert-base-uncased").sizes) == 512


def test_a_member_is_fed_token_ids_from_its_whole_vocabulary() -> None:
    """The published sizes' zoo entries override no field, so the vocabulary comes from the built
    configuration: t5-small's 32,128 ids, not two (whose embedding backward would write two rows)."""
    for model, vocabulary in (("tiny_gpt2", 4096), ("t5-small", 32128)):
        config = StepConfig(
            model=model, input_size=128, batch=8, amp=False, channels_last=False, pinned=False, workers=0
        )
        tokens, _labels = start_sequence_training(config, torch.device("cpu")).fetch()
        assert tokens.shape == (8, 128) and int(tokens.min()) >= 0, model
        assert vocabulary // 2 < int(tokens.max()) < vocabulary, model
