"""The benchmark zoo and the layer geometries it contains, as pure data.

A model is named by its zoo name alone in every record (a torchvision name, or a transformer of the family
below); the keyword arguments it is built with follow from the name and the input size here, so the
planner, the measurement and the predictors that introspect the same model later all build the same
network. A transformer reading token ids is benchmarked at sequence lengths: its record's ``input_size``
is the sequence length.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from math import prod
from typing import Literal

from pydantic import JsonValue

from advisor.introspect import Layer, LayerKind, LayerTable
from advisor.ops import layer_op, op_of
from advisor.records import LayerConfig

SMALL, LARGE = 32, 224
"""CIFAR-like and ImageNet-like input sides."""
_SMALL_CLASSES, _LARGE_CLASSES = 10, 1000
_NO_AUX: dict[str, JsonValue] = {"aux_logits": False, "init_weights": False}


@dataclass(frozen=True)
class ZooModel:
    name: str
    family: Literal["cnn", "transformer"]
    sizes: tuple[int, ...] = (SMALL, LARGE)
    extra: Mapping[str, JsonValue] = field(default_factory=dict)
    sized: bool = False
    """ViT fixes its position embeddings at construction, so it is told the input size."""
    reference: str | None = None
    """A Hugging Face model (``hf:NAME``) built from its configuration with ``extra`` over its fields, and
    trained with AdamW as such jobs are; None: the torchvision model ``name``."""
    tokens: bool = False
    """It reads token ids: its sizes are sequence lengths, not image sides."""

    def kwargs(self, input_size: int) -> dict[str, JsonValue]:
        if input_size not in self.sizes:
            unit = "tokens" if self.tokens else f"x{input_size}"
            raise ValueError(f"{self.name} is not benchmarked at {input_size}{unit}")
        sized: dict[str, JsonValue] = {"image_size": input_size} if self.sized else {}
        if self.reference is not None:
            return {**self.extra, **sized}
        return {"num_classes": self.classes(input_size), **self.extra, **sized}

    def classes(self, input_size: int) -> int:
        return _SMALL_CLASSES if input_size <= SMALL else _LARGE_CLASSES


def _cnn(
    name: str, sizes: tuple[int, ...] = (SMALL, LARGE), extra: Mapping[str, JsonValue] | None = None
) -> ZooModel:
    return ZooModel(name, "cnn", sizes, extra or {})


SEQUENCE_LENGTHS = (32, 64, 128)
"""The CPU family's sequence lengths: attention's share of a step grows with them."""
_TINY_VOCABULARY: dict[str, JsonValue] = {"vocab_size": 4096, "max_position_embeddings": 256}


def _hf(name: str, reference: str, config: Mapping[str, JsonValue], tokens: bool = True) -> ZooModel:
    sizes = SEQUENCE_LENGTHS if tokens else (SMALL,)
    return ZooModel(name, "transformer", sizes, config, sized=not tokens, reference=reference, tokens=tokens)


SEQUENCE_ZOO = (
    _hf(
        "tiny_gpt2",
        "hf:gpt2",
        {"n_layer": 2, "n_embd": 128, "n_head": 4, "vocab_size": 4096, "n_positions": 256}
        | {"bos_token_id": 0, "eos_token_id": 0, "attn_pdrop": 0.0},
    ),
    _hf(
        "tiny_bert",
        "hf:bert-base-uncased",
        {"num_hidden_layers": 2, "hidden_size": 128, "num_attention_heads": 2, "intermediate_size": 512}
        | {"attention_probs_dropout_prob": 0.0}
        | _TINY_VOCABULARY,
    ),
    _hf(
        "tiny_t5",
        "hf:t5-small",
        {"num_layers": 2, "num_decoder_layers": 2, "d_model": 128, "d_ff": 512, "num_heads": 4, "d_kv": 32}
        | {"vocab_size": 4096, "dropout_rate": 0.0},
    ),
    _hf(
        "tiny_llama",
        "hf:llama-3.2-1b",
        {"num_hidden_layers": 2, "hidden_size": 128, "intermediate_size": 352, "num_attention_heads": 4}
        | {"num_key_value_heads": 2, "head_dim": 32, "tie_word_embeddings": False}
        | _TINY_VOCABULARY,
    ),
    _hf(
        "tiny_vit",
        "hf:vit-base-patch16-224",
        {"num_hidden_layers": 2, "hidden_size": 128, "num_attention_heads": 4, "intermediate_size": 512}
        | {"patch_size": 4, "num_labels": _SMALL_CLASSES},
        tokens=False,
    ),
)
"""The transformer family at sizes two CPU cores train in seconds: GPT-2 (causal LM, learned positions,
GELU MLP), BERT (masked LM, post-norm), T5 (seq2seq: encoder, decoder, cross-attention, relative
positions), a Llama block (RMSNorm, rotary positions, SwiGLU, grouped-query attention: 4 query heads on 2
key/value heads) and ViT (patches, image classification), each two blocks 128 wide, as their
``transformers`` configuration classes build them. Without dropout on the attention weights, as Llama-
family models train: with it, a CPU's ``scaled_dot_product_attention`` falls back to its math path (the
scores kept for the backward) where a GPU's fused kernels apply dropout inside, and a table counts the
fused kernel (`advisor.introspect.attention`). T5's dropout is one rate for the whole model."""
GPU_SEQUENCE_LENGTHS = (128, 512, 1024)
"""Fine-tuning and pre-training lengths of the real sizes, on a GPU."""
REAL_SEQUENCE_ZOO = (
    *(
        ZooModel(name, "transformer", lengths, reference=f"hf:{name}", tokens=True)
        for name, lengths in (
            ("gpt2", GPU_SEQUENCE_LENGTHS),
            ("bert-base-uncased", GPU_SEQUENCE_LENGTHS[:2]),  # 512 positions
            ("t5-small", GPU_SEQUENCE_LENGTHS),
            ("llama-3.2-1b", GPU_SEQUENCE_LENGTHS),
        )
    ),
    ZooModel(
        "vit-base-patch16-224", "transformer", (LARGE,), sized=True, reference="hf:vit-base-patch16-224"
    ),
)
"""The same architectures at their published sizes (`advisor/data/architectures.toml`), for a GPU's
nightly grid (`GPU_SEQUENCE_MODELS` at `GPU_SIZES`; not in `ZOO`, which every grid spans): a job naming
``hf:gpt2`` is the zoo's ``gpt2``."""
CPU_SEQUENCE_MODELS = tuple(model.name for model in SEQUENCE_ZOO)
GPU_SEQUENCE_MODELS = tuple(model.name for model in REAL_SEQUENCE_ZOO)
CPU_SIZES = (SMALL, *SEQUENCE_LENGTHS[1:])
"""The CPU grid's input sizes: CNNs and ViT at 32x32, the token models at every sequence length."""
GPU_SIZES = (SMALL, LARGE, *GPU_SEQUENCE_LENGTHS)
"""The GPU grid's: the zoo at 32x32 and 224x224, the real-size transformers at their lengths."""

ZOO: tuple[ZooModel, ...] = (
    _cnn("resnet18"),
    _cnn("resnet34"),
    _cnn("resnet50"),
    _cnn("resnet101"),
    _cnn("resnext50_32x4d"),
    _cnn("wide_resnet50_2"),
    _cnn("vgg11_bn"),
    _cnn("vgg16"),
    _cnn("densenet121"),
    _cnn("densenet169"),
    _cnn("mobilenet_v2"),
    _cnn("mobilenet_v3_small"),
    _cnn("mobilenet_v3_large"),
    _cnn("efficientnet_b0"),
    _cnn("efficientnet_b3"),
    _cnn("efficientnet_v2_s"),
    _cnn("shufflenet_v2_x0_5"),
    _cnn("shufflenet_v2_x1_0"),
    _cnn("mnasnet0_5"),
    _cnn("mnasnet1_0"),
    _cnn("regnet_y_400mf"),
    _cnn("regnet_x_1_6gf"),
    _cnn("regnet_y_1_6gf"),
    _cnn("squeezenet1_0"),
    _cnn("squeezenet1_1"),
    _cnn("googlenet", extra=_NO_AUX),
    _cnn("convnext_tiny"),
    # Their pooling shrinks a 32x32 input to nothing.
    _cnn("alexnet", (LARGE,)),
    _cnn("inception_v3", (LARGE,), _NO_AUX),
    ZooModel("vit_b_16", "transformer", sized=True),
    ZooModel("vit_b_32", "transformer", sized=True),
    ZooModel("swin_t", "transformer"),
    ZooModel("swin_v2_t", "transformer"),
    ZooModel("maxvit_t", "transformer", sizes=(LARGE,)),
    *SEQUENCE_ZOO,
)

CPU_MODELS = (
    "squeezenet1_1",
    "shufflenet_v2_x0_5",
    "mobilenet_v3_small",
    "mnasnet0_5",
    "resnet18",
    "squeezenet1_0",
    "shufflenet_v2_x1_0",
    "mobilenet_v2",
    "mobilenet_v3_large",
    "mnasnet1_0",
    "regnet_y_400mf",
    "efficientnet_b0",
    "resnet34",
    "googlenet",
    "regnet_x_1_6gf",
    "regnet_y_1_6gf",
    "resnet50",
    "densenet121",
    "resnext50_32x4d",
    "vgg11_bn",
)
"""The twenty zoo CNNs that train at 32x32 on two CPU cores in minutes, cheapest first."""

CHECK_MODELS = (
    "resnet18",
    "resnet50",
    "resnext50_32x4d",
    "vgg11_bn",
    "densenet121",
    "mobilenet_v2",
    "mobilenet_v3_large",
    "efficientnet_b0",
    "shufflenet_v2_x1_0",
    "regnet_y_400mf",
    "convnext_tiny",
    "vit_b_16",
)
"""A first look at a machine: every family of the zoo (dense, grouped, depthwise, dense blocks, a
transformer) in twelve models."""
_BY_NAME = {model.name: model for model in (*ZOO, *REAL_SEQUENCE_ZOO)}


def zoo_model(name: str) -> ZooModel:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ValueError(f"{name!r} is not in the benchmark zoo") from None


def zoo_sized(model: str, input_size: int) -> ZooModel | None:
    """The zoo model ``model`` where the zoo benchmarks it at this input side, else None: any other model,
    or a zoo model at another side, is built with its defaults."""
    zoo = _BY_NAME.get(model)
    return zoo if zoo is not None and input_size in zoo.sizes else None


def layer_config(layer: Layer, batch: int = 1, amp: bool = False) -> LayerConfig | None:
    """The micro-benchmark of ``layer`` at ``batch``, or None for a layer no timed op covers (the nightly
    grid times the registry's timed ops: convolutions and linears)."""
    found = layer_op(layer, batch, amp, timed=True)
    return found[1] if found is not None else None


def smallest_batch(table: LayerTable) -> int:
    """Batch norm in training needs more than one value per channel: a 1x1 map needs two samples."""
    for layer in table.layers:
        if layer.kind is LayerKind.BATCH_NORM and layer.inputs:
            dims = layer.inputs[0].dims
            if len(dims) >= 2 and prod(dims) == dims[1]:
                return 2
    return 1


def distinct_layers(table: LayerTable) -> list[tuple[LayerConfig, Layer]]:
    """Each distinct layer geometry of a model once, with a layer that has it (for its costs)."""
    seen: dict[LayerConfig, Layer] = {}
    for layer in table.layers:
        config = layer_config(layer)
        if config is not None:
            seen.setdefault(config, layer)
    return list(seen.items())


def layer_costs(config: LayerConfig, layer: Layer | None) -> tuple[float, float]:
    """Training FLOPs and the bytes its inputs, outputs and their gradients hold at once: the introspection's
    of a zoo layer, its op's hand count (`advisor.ops.costs`) for one no model has (`Grid.own_layers`)."""
    if layer is None:
        cost = op_of(config).cost(config)
        return cost.train_flops, cost.forward_bytes + cost.backward_bytes
    costs = layer.at_batch(config.batch)
    return costs.train_flops, 2 * (costs.bytes_read + costs.bytes_written)
