"""A convolution's input layout as its network hands it on: seen by the introspection, carried by its
benchmark configuration, laid out so by the benchmark, kept by the store, and absent wherever it is unset,
so the tables, hashes and measurements from before it keep their identity."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
import torch
import torchvision

from advisor.bench.plan import Phase, PlanItem, nightly_grid
from advisor.bench.reporting import describe_item
from advisor.bench.results import read_jsonl
from advisor.introspect import LayerKind, LayerTable
from advisor.introspect.probe import _channels_last
from advisor.introspect.run import introspect
from advisor.ops import workloads
from advisor.ops.configs import convolution, depthwise_convolutions
from advisor.predict.features import LAYER_FEATURES, layer_features
from advisor.records import LayerConfig, LayerMeasurement, ResultLine
from advisor.store import Store

FINGERPRINT = read_jsonl(Path(__file__).parent / "data" / "predict" / "cpu-zoo.jsonl")[0].fingerprint


@pytest.fixture(scope="module")
def convnext() -> LayerTable:
    return introspect("convnext_tiny", (3, 32, 32), allow_factories=False)


def test_convnext_hands_its_depthwise_convolutions_on_channels_last(convnext: LayerTable) -> None:
    """Each block permutes its maps to run its LayerNorm and linears over channels and permutes them back:
    its depthwise 7x7 reads them channels last, on the last stage's 1x1 maps too (where both layouts are
    contiguous and only the strides tell them apart), and so does each stage's first block, after a
    downsampling convolution that ran channels last (as the CPU's kernels lay out its output: run here)."""
    convolutions = [layer for layer in convnext.layers if layer.kind is LayerKind.CONV and layer.window]
    depthwise = [layer for layer in convolutions if layer.depthwise]
    assert len(depthwise) == 18 and all(layer.window and layer.window.channels_last for layer in depthwise)
    last = depthwise[-1]
    assert (
        last.window is not None and last.window.channels == (768, 768) and last.inputs[0].dims[2:] == (1, 1)
    )
    stem = convolutions[0]
    assert stem.window is not None and stem.window.kernel == (4, 4) and not stem.window.channels_last
    assert [layer.window.channels_last for layer in convolutions if layer.window] == [False] + [True] * 21
    seen: list[bool] = []
    model = torchvision.models.convnext_tiny()
    for module in model.modules():
        if isinstance(module, torch.nn.Conv2d):
            module.register_forward_hook(lambda _m, given, _out: seen.append(_channels_last(given[0])))
    model(torch.randn(2, 3, 32, 32))
    assert seen == [False] + [True] * 21, "as a real step on this CPU hands them on"
    configs = [convolution("conv2d", layer, 2, False) for layer in depthwise]
    assert all(c is not None and c.channels_last and c.depthwise for c in configs)


def test_a_table_without_the_layout_is_written_as_before_the_field() -> None:
    """resnet18 feeds every convolution contiguous maps: its table's JSON, and so its architecture hash,
    hold no trace of the field."""
    table = introspect("resnet18", (3, 32, 32), allow_factories=False)
    assert all(layer.window is None or not layer.window.channels_last for layer in table.layers)
    assert "channels_last" not in table.model_dump_json()
    assert LayerTable.model_validate_json(table.model_dump_json()) == table


def test_the_benchmark_lays_out_its_input_as_the_network_handed_it_on(convnext: LayerTable) -> None:
    for layer in (layer for layer in convnext.layers if layer.depthwise):
        config = convolution("conv2d", layer, 2, False)
        assert config is not None
        maps = workloads._maps(config)
        assert _channels_last(maps), f"{config.in_channels} channels on {config.height}x{config.width}"
        c, h, w = config.in_channels, config.height, config.width
        assert maps.shape == (2, c, h, w) and maps.stride() == (h * w * c, 1, w * c, c)
    plain = depthwise_convolutions((7,), (768,), (1,), 768)[0]
    assert not plain.channels_last and not _channels_last(workloads._maps(plain))
    assert workloads._maps(plain).stride() == (768, 1, 1, 1)


def test_the_layout_is_a_layer_feature_and_the_grid_measures_it_where_the_zoo_cannot() -> None:
    (contiguous, last) = (
        depthwise_convolutions((7,), (768,), (1,), 768, channels_last=flag)[0] for flag in (False, True)
    )
    assert contiguous != last and contiguous.model_copy(update={"channels_last": True}) == last
    pairs = zip(LAYER_FEATURES, layer_features(contiguous), layer_features(last), strict=True)
    differ = [name for name, a, b in pairs if a != b]
    assert differ == ["channels_last"]
    own = nightly_grid("cpu").own_layers
    laid = [c for c in own if c.channels_last]
    assert laid and all(c.depthwise and c.kernel == (7, 7) for c in laid)
    assert {c.in_channels for c in laid} >= {512, 768}, "both sides of this CPU's 768-channel switch"
    item = PlanItem(phase=Phase.LAYER_GRID, config=last, estimate_s=0.02)
    assert describe_item(item) == "conv2d 768->768 k7x7 s1 g768 1x1 batch 1 cudnn_benchmark channels_last"


def test_a_contiguous_configuration_keeps_its_identity_and_an_old_line_reads_as_contiguous() -> None:
    config = depthwise_convolutions((7,), (256,), (2,), 512)[0]
    before = config.model_dump(mode="json")
    assert "channels_last" not in before
    text = json.dumps(before, sort_keys=True)
    assert config.key() == hashlib.sha256(text.encode()).hexdigest()[:32]
    assert LayerConfig.model_validate(before) == config
    laid = config.model_copy(update={"channels_last": True})
    assert laid.model_dump()["channels_last"] is True and laid.key() != config.key()
    assert LayerConfig.model_validate_json(laid.model_dump_json()) == laid


def _line(config: LayerConfig) -> ResultLine:
    measurement = LayerMeasurement(config=config, median_s=0.002, fits=True)
    return ResultLine(
        run_id="night",
        fingerprint=FINGERPRINT,
        measured_at=datetime(2026, 12, 7, tzinfo=UTC),
        measurement=measurement,
    )


def test_the_store_keeps_the_layout_and_reads_rows_from_before_it_as_contiguous(tmp_path: Path) -> None:
    path = tmp_path / "advisor.db"
    old = depthwise_convolutions((7,), (768,), (1,), 768)[0]
    store = Store.open(path)
    store.ingest([_line(old)])
    store.db.conn.close()
    with sqlite3.connect(path) as db:  # as an advisor from before the column left it
        db.execute("ALTER TABLE layer_measurements DROP COLUMN channels_last")
    store = Store.open(path)
    laid = old.model_copy(update={"channels_last": True})
    store.ingest([_line(laid)])
    assert sorted((row.config() for row in store.layer_rows()), key=lambda c: c.channels_last) == [old, laid]
    assert store.ingest([_line(old), _line(laid)]) == 0, "a line ingested again is kept once"
