"""The nightly CPU grid's wide kernels: dense 5x5 and 7x7 convolutions no zoo model has at 32 px."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from advisor.bench.plan import DeviceProfile, Grid, Phase, Plan, build_plan, full_plan, nightly_grid
from advisor.bench.plan_rows import describe
from advisor.bench.tables import zoo_table
from advisor.bench.zoo import CPU_MODELS, distinct_layers
from advisor.ops import op_of
from advisor.ops.configs import dense_convolutions
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


def test_the_cpu_grid_declares_kernels_the_zoo_lacks_and_the_gpu_grid_none(grid: Grid) -> None:
    zoo = {config for name in CPU_MODELS for config, _ in distinct_layers(zoo_table(name, 32))}
    kernels = set(grid.wide_kernels)
    assert {c.kernel for c in kernels} == {(5, 5), (7, 7)} and len(kernels) == 16
    assert kernels.isdisjoint(zoo), "a zoo layer is measured as the zoo's"
    assert not any(c.kernel[0] > 3 and c.groups == 1 and c.in_channels > 3 for c in zoo), "the zoo has none"
    assert nightly_grid("cuda").wide_kernels == ()


def test_each_kernel_is_measured_at_every_layer_batch_within_a_small_share_of_the_night(
    grid: Grid, plan: Plan
) -> None:
    kernels = set(grid.wide_kernels)
    measured = [item for item in plan.items if _geometry(item.config) in kernels]
    assert {item.phase for item in measured} == {Phase.LAYERS, Phase.LAYER_GRID}
    pairs = {(_geometry(item.config), item.config.batch) for item in measured}
    assert pairs == {(kernel, batch) for kernel in kernels for batch in grid.layer_batches}
    assert len(measured) == len(pairs), "each once"
    share = sum(item.estimate_s for item in measured) / plan.estimate_s
    assert 0 < share < 0.05


def _geometry(config: StepConfig | LayerConfig) -> StepConfig | LayerConfig:
    return config.model_copy(update={"batch": 1})


def test_the_plan_shows_kernels_in_rows_of_their_own_with_their_share(grid: Grid, plan: Plan) -> None:
    rows = [row for row in describe(plan) if row.kind == "wide kernel"]
    assert [row.phase for row in rows] == [Phase.LAYERS, Phase.LAYER_GRID]
    assert rows[0].subjects == ("conv2d 5x5", "conv2d 7x7") and rows[0].sizes == (4, 8, 16, 32)
    assert sum(row.items for row in rows) == len(grid.wide_kernels) * len(grid.layer_batches)
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
    grid = replace(
        nightly_grid("cpu"), models=("resnet18",), layer_models=("resnet18",), wide_kernels=kernels
    )
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
