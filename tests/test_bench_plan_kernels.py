"""The nightly CPU grid's own layers, which no zoo model has: dense 5x5 and 7x7 convolutions, depthwise 7x7
and grouped 3x3 ones on the smallest maps, linears as wide as real transformers' and heads'."""

from __future__ import annotations

from dataclasses import replace
from itertools import product

import pytest
import torch

from advisor.bench.plan import DeviceProfile, Grid, Phase, Plan, build_plan, full_plan, nightly_grid
from advisor.bench.plan_rows import describe
from advisor.bench.tables import zoo_table
from advisor.bench.zoo import distinct_layers, zoo_model
from advisor.ops import op_of
from advisor.ops.configs import (
    dense_convolutions,
    depthwise_convolutions,
    grouped_convolutions,
    linears,
    vocabulary_heads,
)
from advisor.ops.costs import output_side
from advisor.records import LayerConfig, ResultLine, StepConfig
from tests.plan_support import fake_table


@pytest.fixture(scope="module")
def grid() -> Grid:
    return nightly_grid("cpu")


@pytest.fixture(scope="module")
def plan() -> Plan:
    """The real nightly CPU plan: a share is of the zoo's real layers and steps."""
    return full_plan(DeviceProfile.assumed("cpu"), zoo_table)


def test_dense_convolutions_span_a_diagonal_of_widths_and_maps_keeping_the_map() -> None:
    layers = dense_convolutions((5, 7), (16, 64), (32, 16), most=1024)
    assert [(c.kernel, c.in_channels, c.height) for c in layers] == [
        ((5, 5), 16, 32),
        ((5, 5), 16, 16),
        ((5, 5), 64, 16),  # 64 channels of 32 px is past the diagonal
        ((7, 7), 16, 32),
        ((7, 7), 16, 16),
        ((7, 7), 64, 16),
    ]
    for c in layers:
        assert op_of(c).name == "conv2d" and not (c.depthwise or c.grouped)
        assert c.out_channels == c.in_channels and c.stride == (1, 1) and c.width == c.height
        assert output_side(c.height, c.kernel[0], 1, c.padding[0], 1) == c.height, "padded to keep its map"


def test_grouped_convolutions_keep_channels_a_group_and_the_map() -> None:
    layers = grouped_convolutions((128, 512), 8, (1, 2))
    assert [(c.in_channels, c.groups, c.height) for c in layers] == [
        (128, 16, 1),
        (128, 16, 2),
        (512, 64, 1),
        (512, 64, 2),
    ]
    for c in layers:
        assert op_of(c).name == "grouped_conv2d" and c.grouped and not c.depthwise
        assert c.in_channels // c.groups == 8 and c.out_channels == c.in_channels and c.kernel == (3, 3)
        assert output_side(c.height, 3, 1, c.padding[0], 1) == c.height, "padded to keep its map"


def test_depthwise_convolutions_keep_a_channel_a_group_along_a_diagonal() -> None:
    layers = depthwise_convolutions((7,), (128, 1024), (1, 2, 4), most=2048)
    assert [(c.in_channels, c.height) for c in layers] == [(128, 1), (128, 2), (128, 4), (1024, 1), (1024, 2)]
    for c in layers:
        assert op_of(c).name == "depthwise_conv2d" and c.groups == c.in_channels == c.out_channels
        assert output_side(c.height, 7, 1, c.padding[0], 1) == c.height, "padded to keep its map"


def test_linears_span_widths_and_tokens_below_a_product() -> None:
    layers = linears((256, 1024), (1, 64), most=2**22)
    assert [(c.in_channels, c.out_channels, c.height) for c in layers] == [
        (256, 256, 1),
        (256, 1024, 1),
        (1024, 256, 1),
        (1024, 1024, 1),
        (256, 256, 64),  # 256 x 1024 x 64 = 2^24 is past 2^22
    ]
    assert all(op_of(c).name == "linear" and c.width == 1 for c in layers)
    (cost,) = {op_of(c).cost(c).forward_flops for c in layers if c.height == 64}
    assert cost == 2 * 64 * 256 * 256, "a hand count: one multiply-add per token, input and output"


def test_vocabulary_heads_cross_widths_with_vocabularies_over_a_few_tokens() -> None:
    layers = vocabulary_heads((512, 768), (32000, 50257), 4)
    assert [(c.in_channels, c.out_channels) for c in layers] == [
        (512, 32000), (512, 50257), (768, 32000), (768, 50257)
    ]  # fmt: skip
    assert all(op_of(c).name == "linear" and (c.height, c.width, c.batch) == (4, 1, 1) for c in layers)
    cost = op_of(layers[3]).cost(layers[3].model_copy(update={"batch": 2}))
    assert cost.forward_flops == 2 * (2 * 4) * 768 * 50257, "a multiply-add per row, input and output"
    assert cost.train_flops == 3 * cost.forward_flops, "and twice that back: input and weight gradients"


def test_the_cpu_grid_declares_layers_the_zoo_lacks_and_the_gpu_grid_none(grid: Grid) -> None:
    zoo = {
        config
        for name, size in product(grid.layer_models, grid.sizes)
        if size in zoo_model(name).sizes
        for config, _ in distinct_layers(zoo_table(name, size))
    }
    own = set(grid.own_layers)
    assert len(own) == len(grid.own_layers) == 16 + 13 + 10 + 9 + 18 + 6
    assert not any(c.channels_last for c in zoo), "the zoo's CNNs hand every convolution contiguous maps"
    assert own.isdisjoint(zoo), "a zoo layer is measured as the zoo's"
    wide = {c for c in own if c.kernel[0] > 3 and not c.depthwise}
    assert {c.kernel for c in wide} == {(5, 5), (7, 7)} and len(wide) == 16
    assert not any(c.kernel[0] > 5 and c.depthwise for c in zoo), "its depthwise layers are 3x3 and 5x5"
    assert not any(c.kernel[0] > 3 and c.groups == 1 and c.in_channels > 3 for c in zoo), "the zoo has none"
    zoo_linears = [c for c in zoo if c.op == "linear"]
    assert not any(c.in_channels >= 1024 and c.height > 1 for c in zoo_linears), "its wide linears are heads"
    assert any(c.in_channels >= 1024 and c.height > 1 for c in own)
    heads = {(c.in_channels, c.out_channels) for c in own if c.out_channels > 4096}
    assert heads == set(product((512, 768, 1024), (32000, 50257))), "GPT-2's, BERT's, T5's, Llama's widths"
    assert max(c.out_channels for c in zoo_linears) <= 4096, "the zoo's widest linear: vgg11_bn's 4,096"
    assert nightly_grid("cuda").own_layers == ()


def test_each_kernel_is_measured_at_every_layer_batch_within_a_small_share_of_the_night(
    grid: Grid, plan: Plan
) -> None:
    kernels = set(grid.own_layers)
    measured = [item for item in plan.items if _geometry(item.config) in kernels]
    assert {item.phase for item in measured} == {Phase.LAYERS, Phase.LAYER_GRID}
    pairs = {(_geometry(item.config), item.config.batch) for item in measured}
    assert pairs == {(kernel, batch) for kernel in kernels for batch in grid.layer_batches}
    assert len(measured) == len(pairs), "each once"
    share = sum(item.estimate_s for item in measured) / plan.estimate_s
    # Estimated at the assumed CPU's 5 GFLOP/s: the heads' products at 637 s, where they took 72 s at 80.
    assert 0 < share < 0.12, "pass H measured them in 123 s of its 2,967 (4.2%), the heads 72 s more"


def _geometry(config: StepConfig | LayerConfig) -> StepConfig | LayerConfig:
    return config.model_copy(update={"batch": 1})


def test_the_plan_shows_its_own_layers_in_rows_of_their_own_with_their_share(grid: Grid, plan: Plan) -> None:
    rows = [row for row in describe(plan) if row.kind == "grid layer"]
    assert [row.phase for row in rows] == [Phase.LAYERS, Phase.LAYER_GRID]
    subjects = {"conv2d 5x5", "conv2d 7x7", "depthwise conv2d 7x7", "grouped conv2d 3x3", "linear"}
    subjects.add("depthwise conv2d 7x7 channels-last")
    assert set(rows[0].subjects) == subjects
    assert rows[0].sizes == (1, 2, 4, 8, 16, 32), "map sides of the convolutions, none of the linears"
    assert sum(row.items for row in rows) == len(grid.own_layers) * len(grid.layer_batches)
    layers = [row for row in describe(plan) if row.kind == "layer"]
    assert all("conv2d 5x5" not in row.subjects for row in layers)


def test_a_grid_measuring_no_layers_measures_no_kernels(grid: Grid) -> None:
    bare = build_plan(replace(grid, models=(), layer_models=()), DeviceProfile.assumed("cpu"), fake_table)
    assert not any(item.phase in (Phase.LAYERS, Phase.LAYER_GRID) for item in bare.items)


def test_kernel_rows_are_measured_ingested_and_trained_on() -> None:
    """The product's path: the plan's kernel items run by `run_plan`, stored, read back as training reads
    layers, and the layer predictor fitted on them predicts a kernel it never measured."""
    from advisor.bench.run import RunOn, run_plan
    from advisor.predict.machine import fit_layers
    from advisor.predict.registry import layer_samples
    from advisor.store import Store

    kernels = dense_convolutions((5, 7), (16,), (8, 4), most=1024)
    grid = replace(nightly_grid("cpu"), models=("resnet18",), layer_models=("resnet18",), own_layers=kernels)
    plan = build_plan(
        replace(grid, layer_batches=(2, 1), repeats=2), DeviceProfile.assumed("cpu"), fake_table
    )
    items = tuple(item for item in plan.items if _geometry(item.config) in set(kernels))
    lines: list[ResultLine] = []
    summary = run_plan(
        plan.model_copy(update={"items": items}),
        RunOn(torch.device("cpu"), "cpu"),
        budget_s=120,
        sink=lines.append,
    )
    assert summary.measured == len(items) == 8
    store = Store.memory()
    store.ingest(lines)
    samples = layer_samples(store.layer_rows())
    assert {s.config.model_copy(update={"batch": 1}) for s in samples} == set(kernels)
    model = fit_layers("cpu", samples)
    unseen = LayerConfig.model_validate(
        {**kernels[0].model_dump(), "in_channels": 24, "out_channels": 24, "batch": 2}
    )
    (seconds,) = model.layer_seconds([unseen]).values()
    assert 0 < seconds < 1
