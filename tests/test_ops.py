"""The op registry: each op's FLOPs and bytes counted by hand on a small case, its place in a real layer
table, its torch workload, and a new op kind added by one entry."""

from __future__ import annotations

import pytest
import torch

from advisor.bench.sequence import family_table
from advisor.bench.tables import zoo_table
from advisor.bench.zoo import distinct_layers, layer_config
from advisor.introspect import LayerKind, LayerTable
from advisor.introspect.run import introspect
from advisor.ops import OPS, Cost, group_alignment, known, layer_op, op_named, op_of, profiled_op
from advisor.ops import costs as op_costs
from advisor.ops.configs import kernels
from advisor.ops.workloads import build
from advisor.predict.features import layer_features, step_feature_names, step_features, timed_layers
from advisor.records import LayerConfig

from .ops_support import TIMED_POOL

CPU = torch.device("cpu")


def _config(op: str, **fields: object) -> LayerConfig:
    unit = {"kernel": (1, 1), "stride": (1, 1), "padding": (0, 0), "dilation": (1, 1), "groups": 1}
    sizes = {"in_channels": 1, "out_channels": 1, "height": 1, "width": 1, "batch": 1}
    return LayerConfig.model_validate(
        {"op": op, **unit, **sizes, **fields, "amp": False, "cudnn_benchmark": True}
    )


HAND_COUNTS = {
    # 3 -> 4 channels, 3x3, padding 1, on 5x5, 2 samples: 25 output positions, 3 x 9 MACs each.
    # Forward 2 x 2 x 4 x 25 x 27; backward the input and the weight gradient, each that again.
    # Bytes: input 2x3x25 = 150, weights 4x3x9 = 108, output 2x4x25 = 200; backward reads dy, x, w and
    # writes dx, dw: 200 + 150 + 108 + 150 + 108 = 716 elements.
    "conv2d": (
        _config("conv2d", in_channels=3, out_channels=4, kernel=(3, 3), padding=(1, 1), height=5, width=5,
                batch=2),
        Cost(10800, 21600, 4 * 458, 4 * 716),
    ),
    # 4 -> 6 channels in 2 groups, 3x3, stride 2, padding 1, on 6x6: a 3x3 output, 2 x 9 MACs per output.
    # Forward 2 x 6 x 9 x 18 = 1944; backward twice that, not 2 x 1944 x groups (torch 2.14's count).
    # Input 4x36 = 144, weights 6x2x9 = 108, output 6x9 = 54.
    "grouped_conv2d": (
        _config("conv2d", in_channels=4, out_channels=6, groups=2, kernel=(3, 3), stride=(2, 2),
                padding=(1, 1), height=6, width=6),
        Cost(1944, 3888, 4 * (144 + 108 + 54), 4 * (54 + 144 + 108 + 144 + 108)),
    ),
    # 4 channels each alone, 3x3, padding 1, on 4x4: 2 x 4 x 16 x 9; weights 4x9 = 36, maps 64 each way.
    "depthwise_conv2d": (
        _config("conv2d", in_channels=4, out_channels=4, groups=4, kernel=(3, 3), padding=(1, 1), height=4,
                width=4),
        Cost(1152, 2304, 4 * (64 + 36 + 64), 4 * (64 + 64 + 36 + 64 + 36)),
    ),
    # 4 -> 2 channels, 2x2, stride 2, on 3x3: a 6x6 output whose every position takes one tap of 4 input
    # channels: 2 x 2 x 36 x 4 = 576 (the weight 4x2x4 = 32 met at each of 9 input positions, x2).
    "conv_transpose2d": (
        _config("conv_transpose2d", in_channels=4, out_channels=2, kernel=(2, 2), stride=(2, 2), height=3,
                width=3),
        Cost(576, 1152, 4 * (36 + 32 + 72), 4 * (72 + 36 + 32 + 36 + 32)),
    ),
    # 7 rows of 3 -> 5 features, 2 samples: 2 x 14 x 3 x 5; x 42, w 15, y 70.
    "linear": (
        _config("linear", in_channels=3, out_channels=5, height=7, batch=2),
        Cost(420, 840, 4 * (42 + 15 + 70), 4 * (70 + 42 + 15 + 42 + 15)),
    ),
    # Two (3x4) @ (4x5) products: 2 x 2 x 60 MACs; operands 2 x (12 + 20), results 2 x 15; backward reads
    # dC, A, B and writes dA, dB.
    "matmul": (
        _config("matmul", in_channels=4, out_channels=5, height=3, width=2),
        Cost(240, 480, 4 * (64 + 30), 4 * (30 + 128)),
    ),
    # 2 heads, 3 queries, 5 keys, key dimension 4, value dimension 6: per head QK^T 2x3x5x4 = 120, softmax
    # 5 x 15 = 75, PV 2x3x5x6 = 180. The fused kernel's backward per head: QK^T again 120, dV 180, dP 180,
    # dQ 120, dK 120, two pointwise passes 2 x 2 x 15 = 60 and D = rowsum(dO * O) 2 x 3 x 6 = 36. Moves per
    # head: forward Q 12, K 20, V 30 read, O 18 and a log-sum-exp a query (3) written = 83; backward Q, K,
    # V, O, dO and the log-sum-exp read (12 + 20 + 30 + 18 + 18 + 3), dQ, dK, dV written (62) = 163.
    "attention": (
        _config("attention", groups=2, height=3, width=5, in_channels=4, out_channels=6),
        Cost(750, 1632, 4 * 2 * 83, 4 * 2 * 163),
    ),
    # The math path's: forward as the fused one's; backward per head dV 180, dP 180, softmax 4 x 15, dQ
    # 120, dK 120. Moves per head: forward (Q 12 + K 20 + S 15) + 3 x 15 + (P 15 + V 30 + O 18) = 155;
    # backward (dV, dP: 2 x 15 + 2 x 18 + 2 x 30 = 126) + 5 x 15 + (dQ, dK: 2 x 15 + 2 x 20 + 2 x 12 = 94)
    # = 295.
    "math_attention": (
        _config("math_attention", groups=2, height=3, width=5, in_channels=4, out_channels=6),
        Cost(750, 1320, 4 * 2 * 155, 4 * 2 * 295),
    ),
    # 2 channels at 3 positions, 2 samples: 12 elements; 7 and 13 FLOPs, 3 and 5 moves each; scale and
    # shift (2 per channel) read forward, read and their gradients written backward.
    "batch_norm": (
        _config("batch_norm", in_channels=2, out_channels=2, height=3, batch=2),
        Cost(84, 156, 4 * (36 + 4), 4 * (60 + 12)),
    ),
    # batch_norm's, over 2 samples (its width) of 2 channels of 4 positions: 16 elements, 7 FLOPs and 3
    # moves forward, 13 and 5 backward; 2 weights a channel read forward, read and their gradients written.
    "batch_norm_small_maps": (
        _config("batch_norm_small_maps", in_channels=2, out_channels=2, height=4, width=2),
        Cost(112, 208, 4 * (48 + 4), 4 * (80 + 12)),
    ),
    "layer_norm": (
        _config("layer_norm", in_channels=2, out_channels=2, height=3, batch=2),
        Cost(84, 156, 4 * (36 + 4), 4 * (60 + 12)),
    ),
    "group_norm": (
        _config("group_norm", in_channels=2, out_channels=2, height=3, batch=2, groups=2),
        Cost(84, 156, 4 * (36 + 4), 4 * (60 + 12)),
    ),
    # 2 rows of 4: 8 elements, 4 and 9 FLOPs each, one scale per feature.
    "rms_norm": (_config("rms_norm", in_channels=4, out_channels=4, height=2), Cost(32, 72, 4 * 28, 4 * 52)),
    # 2 rows of 16: 32 elements; forward 5 FLOPs and 3 moves each, backward 4 and 5.
    "softmax": (_config("softmax", in_channels=16, height=2), Cost(160, 128, 4 * 96, 4 * 160)),
    "activation": (_config("activation", height=10, batch=3), Cost(30, 30, 4 * 60, 4 * 90)),
    "dropout": (_config("dropout", height=10), Cost(30, 20, 4 * 30, 4 * 30)),
    "elementwise": (_config("elementwise", height=10), Cost(10, 10, 4 * 30, 4 * 30)),
    # Max over 2x2 windows, stride 2, of 3 maps of 4x4: 12 outputs of 4 compares; 48 read, 12 written.
    "pooling": (
        _config("pooling", in_channels=3, out_channels=3, kernel=(2, 2), stride=(2, 2), height=4, width=4),
        Cost(48, 48, 4 * 60, 4 * 60),
    ),
    # 3 tokens of 2 samples in a 10 x 4 table: 6 indices (8 bytes each), 24 values read and written;
    # backward zeroes the 40-value gradient and adds 24 values into it (dy read, gradient read and written).
    "embedding": (
        _config("embedding", in_channels=10, out_channels=4, height=3, batch=2),
        Cost(0, 24, 8 * 6 + 4 * 48, 8 * 6 + 4 * (40 + 72)),
    ),
    # 4 samples of 10 classes: 40 logits, 5 FLOPs and 3 moves forward, 2 and 2 backward.
    "cross_entropy": (_config("cross_entropy", in_channels=10, batch=4), Cost(200, 80, 4 * 120, 4 * 80)),
    # 1000 parameters: 4, 14 and 15 FLOPs each; 5, 7 and 7 elements moved.
    "sgd_momentum": (_config("sgd_momentum", height=1000), Cost(4000, 0, 4 * 5000, 0)),
    "adam": (_config("adam", height=1000), Cost(14000, 0, 4 * 7000, 0)),
    "adamw": (_config("adamw", height=1000), Cost(15000, 0, 4 * 7000, 0)),
    # 1,000 gradients set to None: no arithmetic, each element's memory handed back once.
    "grad_release": (_config("grad_release", height=1000), Cost(0, 0, 4 * 1000, 0)),
    # 50 multiplies of 2 samples x 4 elements: 400 FLOPs each way, each op reading and writing its 8.
    "launch_chain": (_config("launch_chain", height=50, width=4, batch=2), Cost(400, 400, 4 * 800, 4 * 800)),
    # The same 50 multiplies, each in a module of its own: the same arithmetic and bytes.
    "module_chain": (_config("module_chain", height=50, width=4, batch=2), Cost(400, 400, 4 * 800, 4 * 800)),
    # 16 tiny layers of 8 maps of 2x2: 512 elements, each read and written once each way.
    **{
        name: (_config(name, in_channels=8, out_channels=8, height=16, width=2), Cost(512, 512, 4096, 4096))
        for name in ("tiny_conv2d", "tiny_linear", "tiny_batch_norm", "tiny_activation", "tiny_elementwise",
                     "tiny_pooling")
    },
}  # fmt: skip


def test_every_op_has_a_hand_count_and_unique_name_and_covers_only_known_kinds() -> None:
    names = [op.name for op in OPS]
    assert sorted(names) == sorted(set(names)) == sorted(HAND_COUNTS)
    assert {kind for op in OPS for kind in op.kinds} <= set(LayerKind)


@pytest.mark.parametrize("name", sorted(HAND_COUNTS))
def test_an_ops_costs_are_its_hand_count(name: str) -> None:
    config, expected = HAND_COUNTS[name]
    op = op_of(config)
    assert op.name == name
    assert op.cost(config) == expected


@pytest.mark.parametrize(
    ("in_channels", "out_channels", "groups", "aligned"),
    [
        (400, 400, 25, 4),  # regnet_x_400mf: 16 a group, 16 = 2**4
        (1024, 1024, 32, 5),  # resnext50_32x4d's last: 32 = 2**5
        (912, 912, 38, 3),  # regnet_x_1_6gf: 24 = 8 x 3
        (440, 440, 55, 3),  # regnet_y_400mf: 8
        (32, 32, 32, 0),  # depthwise: 1 a group
        (3, 64, 1, 0),  # a first layer: 3 input channels, odd
        (64, 24, 1, 3),  # dense, the smaller side: 24 = 8 x 3
        (256, 512, 1, 6),  # past 64 counted as 64
    ],
)
def test_a_groups_channel_alignment_is_its_hand_count(
    in_channels: int, out_channels: int, groups: int, aligned: int
) -> None:
    config = _config("conv2d", in_channels=in_channels, out_channels=out_channels, groups=groups)
    assert group_alignment(config) == aligned


def test_an_optimizers_update_costs_the_same_at_every_batch() -> None:
    config, expected = HAND_COUNTS["adamw"]
    assert op_of(config).cost(config.model_copy(update={"batch": 64})) == expected


@pytest.fixture(scope="module")
def every_op() -> LayerTable:
    return introspect("tests.factories.every_op:EveryOp", (3, 8, 8), {}, allow_factories=True)


EXPECTED_OPS = [
    "conv2d", "batch_norm", "activation", "grouped_conv2d", "depthwise_conv2d", "elementwise", "group_norm",
    "conv_transpose2d", "pooling", "dropout", "layer_norm", "rms_norm", "linear", "attention", "elementwise",
    "matmul", "softmax", "matmul", None, "linear",
]  # fmt: skip


def test_each_layer_of_a_table_finds_its_op_and_the_matrix_ops_count_as_the_introspection(
    every_op: LayerTable,
) -> None:
    batch = 3
    found = [layer_op(layer, batch) for layer in every_op.layers]
    assert [f[0].name if f else None for f in found] == EXPECTED_OPS
    for layer, f in zip(every_op.layers, found, strict=True):
        if f is None or f[0].family not in ("convolution", "matrix"):
            continue
        op, config = f
        cost, counted = op.cost(config), layer.at_batch(batch)
        if op.family == "matrix" and "attention" in op.name:
            # The introspection counts the two products; the registry adds the softmax between them.
            softmax = batch * config.groups * config.height * config.width * op_costs.SOFTMAX.forward_flops
            assert cost.forward_flops == counted.forward_flops + softmax
            continue
        assert cost.forward_flops == counted.forward_flops, layer.name
        if layer.index > 0:  # the first convolution's input needs no gradient
            assert cost.backward_flops == counted.backward_flops, layer.name


def test_only_the_timed_ops_are_the_nightly_grids_layers(every_op: LayerTable) -> None:
    timed = {op.name for op in OPS if op.timed}
    assert timed == {"conv2d", "grouped_conv2d", "depthwise_conv2d", "conv_transpose2d", "linear"}
    configs = timed_layers(every_op, 2, False)
    assert [op_of(c).name for c in configs] == [n for n in EXPECTED_OPS if n in timed]
    assert {c for c, _ in distinct_layers(every_op)} == {c.model_copy(update={"batch": 1}) for c in configs}


@pytest.mark.parametrize("name", sorted(HAND_COUNTS))
def test_each_ops_workload_runs_its_configuration_in_torch(name: str) -> None:
    config, _ = HAND_COUNTS[name]
    workload = build(config, CPU)
    for _ in range(2):
        workload.reset()
        workload.run()


def test_an_unknown_op_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="'pool3d'"):
        op_of(_config("pool3d"))
    with pytest.raises(ValueError, match="'pool3d'"):
        op_named("pool3d")
    with pytest.raises(ValueError):
        _config("Conv2D")


def test_a_new_op_kind_is_one_registry_entry(every_op: LayerTable, monkeypatch: pytest.MonkeyPatch) -> None:
    """A max pool timed on the nightly grid (`TIMED_POOL`): the entry alone makes it a benchmark
    configuration, a measured workload, a layer booster row and a step feature of its own."""
    from advisor.bench.measure import measure_layer

    assert "log_pooling_s" not in step_feature_names()
    monkeypatch.setattr(known, "OPS", (*known.OPS, TIMED_POOL))
    pool = next(layer for layer in every_op.layers if layer.name == "pool")
    config = layer_config(pool, 2)
    assert config is not None and op_of(config) is TIMED_POOL
    assert (config.op, config.in_channels, config.kernel, config.height) == ("max_pool2d", 8, (2, 2), 8)
    measured = measure_layer(config, CPU, repeats=2, warmup=1)
    assert measured.fits and measured.median_s is not None and measured.median_s > 0
    assert len(layer_features(config)) == len(layer_features(HAND_COUNTS["conv2d"][0]))
    names = step_feature_names()
    assert names.index("log_pooling_s") == names.index("log_linear_s") + 1
    timed = timed_layers(every_op, 2, False)
    features = step_features(every_op, 2, False, False, timed, {c: ((1, 1e-4), (8, 8e-4)) for c in timed})
    assert features.group_s["pooling"] == pytest.approx(2e-4)
    assert len(features.vector()) == len(names)


def test_a_profilers_kernel_names_find_their_ops() -> None:
    """What `advisor profile` splits a profiled step by: the registry's own kernel names."""
    found = {
        name: op.name if (op := profiled_op(name)) else None
        for name in (
            "aten::mkldnn_convolution",
            "aten::convolution_backward",
            "aten::_conv_depthwise2d",
            "aten::addmm",
            "aten::bmm",
            "aten::_foreach_add_",
            "aten::_fused_adamw_",
            "aten::native_batch_norm",
            "aten::_convert_indices_from_coo_to_csr",
        )
    }
    assert found == {
        "aten::mkldnn_convolution": "conv2d",
        "aten::convolution_backward": "conv2d",
        "aten::_conv_depthwise2d": "conv2d",
        "aten::addmm": "linear",
        "aten::bmm": "matmul",
        "aten::_foreach_add_": "sgd_momentum",
        "aten::_fused_adamw_": "adam",
        "aten::native_batch_norm": None,
        "aten::_convert_indices_from_coo_to_csr": None,
    }


def test_a_linear_is_featured_by_its_rows_wherever_they_come_from() -> None:
    """A linear over 128 tokens at batch 2 is the product a linear over 4 tokens at batch 64 is: the booster
    sees the same row (GPT-2's head, the grid's head); a convolution's positions and batch stay apart."""
    head = {"in_channels": 768, "out_channels": 50257}
    long = _config("linear", **head, height=128, batch=2)
    short = _config("linear", **head, height=4, batch=64)
    assert layer_features(long) == layer_features(short)
    assert layer_features(long) != layer_features(_config("linear", **head, height=128, batch=4))
    maps = {"in_channels": 64, "out_channels": 64, "kernel": (3, 3), "padding": (1, 1)}
    wide = _config("conv2d", **maps, height=16, width=16, batch=2)
    deep = _config("conv2d", **maps, height=2, width=2, batch=128)
    assert layer_features(wide) != layer_features(deep)


def test_a_composite_module_counts_its_kernels_and_a_plain_one_one() -> None:
    """GPT-2's tanh GELU writes eight outputs' worth (pow, mul, add, mul, tanh, add, mul, mul); mobilenet_v2's
    in-place ReLU6, counted as written twice, and a batch norm are one kernel each."""
    gelu = next(layer for layer in family_table("tiny_gpt2", 32).layers if layer.op == "NewGELUActivation")
    assert kernels(gelu) == 8
    mobilenet = zoo_table("mobilenet_v2", 32).layers
    assert {kernels(layer) for layer in mobilenet if layer.op in ("ReLU6", "BatchNorm2d")} == {1}
