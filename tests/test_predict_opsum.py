"""The op-sum step model (`advisor.predict.opsum`) and the roofline it prices untimed ops with
(`advisor.predict.roofline`), on the CPU zoo fixture's real measurements and on hand-counted cases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.bench.tables import zoo_table
from advisor.cli import main as cli
from advisor.ops import Cost, layer_op
from advisor.predict.evaluate import held_out
from advisor.predict.heldout import without_models
from advisor.predict.opsum import fit_opsum, untimed_seconds
from advisor.predict.registry import layer_samples, machines, step_samples
from advisor.predict.roofline import Roofline, fit_roofline
from advisor.records import LayerConfig, StepPart
from advisor.store import Store

from . import predict_support

ingested, store, store_file = predict_support.ingested, predict_support.store, predict_support.store_file


def _config(**fields: object) -> LayerConfig:
    unit = {"kernel": (1, 1), "stride": (1, 1), "padding": (0, 0), "dilation": (1, 1), "groups": 1}
    return LayerConfig.model_validate(
        {"op": "conv2d", **unit, "width": 1, "batch": 1, "amp": False, "cudnn_benchmark": True, **fields}
    )


def test_an_op_costs_its_arithmetic_or_its_bytes_whichever_takes_longer() -> None:
    roofline = Roofline(compute={"convolution": 1e9}, bandwidth=1e8, launch_s=0.0, update_s=0.0)
    # 2e9 FLOPs at 1e9/s is 2 s; 1e6 bytes at 1e8/s is 0.01 s.
    assert roofline.op_seconds("convolution", Cost(1e9, 1e9, 5e5, 5e5)) == pytest.approx(2.0)
    assert roofline.op_seconds("convolution", Cost(1.0, 1.0, 1e8, 1e8)) == pytest.approx(2.0)
    # A family nothing measured computes at the highest rate known: bound by its bytes, not arithmetic.
    assert roofline.op_seconds("vector", Cost(1e9, 0.0, 0.0, 0.0)) == pytest.approx(1.0)


def test_the_roofline_is_read_off_the_micro_benchmarks() -> None:
    """A 1x1 convolution of 64 -> 64 channels on 16x16 at batch 1: 2 * 64 * 64 * 256 = 2,097,152 forward
    FLOPs, 3x that for a training pass; bytes (4 each): input 16,384 + weights 4,096 + output 16,384
    elements forward, 2x inputs + 2x weights + outputs backward."""
    config = _config(in_channels=64, out_channels=64, height=16, width=16)
    flops = 3 * 2 * 64 * 64 * 256
    moved = 4 * (16_384 + 4_096 + 16_384) + 4 * (16_384 + 2 * 16_384 + 2 * 4_096)
    roofline = fit_roofline([(config, 0.001)])
    assert roofline.compute["convolution"] == pytest.approx(flops / 0.001)
    assert roofline.bandwidth == pytest.approx(moved / 0.001)
    assert roofline.launch_s == pytest.approx(0.001 / 3), "a layer with weights launches three kernels"
    # SGD with momentum moves 5 floats a parameter (`advisor.ops.costs.SGD_MOMENTUM`).
    assert roofline.update_s == pytest.approx(20 / roofline.bandwidth)


def test_untimed_ops_are_priced_by_their_bytes_and_timed_ones_left_to_their_curves() -> None:
    table = zoo_table("resnet18", 32)
    roofline = Roofline(compute={"convolution": 1e30}, bandwidth=1e9, launch_s=0.0, update_s=0.0)
    untimed = [found for layer in table.layers if (found := layer_op(layer, 4)) and not found[0].timed]
    assert untimed, "batch norms, activations, additions and pooling"
    moved = 0.0
    for layer in table.layers:
        if layer_op(layer, 4, timed=True) is not None:
            continue
        found = layer_op(layer, 4)
        if found is not None:
            cost = found[0].cost(found[1])
            moved += cost.forward_bytes + cost.backward_bytes
        else:
            costs = layer.at_batch(4)
            moved += costs.bytes_read + costs.bytes_written
    assert untimed_seconds(table, 4, False, roofline) == pytest.approx(moved / 1e9)
    assert untimed_seconds(table, 8, False, roofline) > untimed_seconds(table, 4, False, roofline)


def test_a_fitted_op_sum_splits_its_prediction_into_the_profiles_parts(store: Store) -> None:
    (machine,) = machines(store)
    steps = step_samples(store.step_rows(machine), zoo_table)
    model = fit_opsum(machine, steps, layer_samples(store.layer_rows(machine)))
    assert all(c >= 0 for c in model.coefficients)
    table = zoo_table("resnet18", 32)
    parts = model.parts(table, 8, False, False)
    assert set(parts) == set(StepPart) and all(s >= 0 for s in parts.values())
    assert sum(parts.values()) == pytest.approx(model.step_seconds(table, 8, False, False))
    measured = next(s for s in steps if s.model == "resnet18" and s.batch == 8)
    assert 0.5 < model.step_seconds(table, 8, False, False) / measured.seconds < 2.0


def test_both_step_models_are_held_out_the_same_way(store: Store) -> None:
    """The side-by-side figures: each model held out on the same samples."""
    (machine,) = machines(store)
    steps = step_samples(store.step_rows(machine), zoo_table)
    result = held_out(machine, steps, layer_samples(store.layer_rows(machine)), fit_opsum)
    assert set(result.lomo_mape_by_model) == {s.model for s in steps}
    assert list(result.unseen_batch_mape_by_batch) == [2, 4, 8, 16, 32, 64]
    assert result.lomo_mape is not None and result.lomo_mape < 0.5
    assert result.unseen_batch_mape is not None and result.unseen_batch_mape < 0.5


def test_a_model_that_owns_every_measured_layer_is_left_out_of_leave_one_model_out_and_named(
    store: Store,
) -> None:
    (machine,) = machines(store)
    steps = step_samples(store.step_rows(machine), zoo_table)
    layers = layer_samples(store.layer_rows(machine))
    others = without_models(steps, layers, {"resnet18"})
    only_resnet = [s for s in layers if s not in others]
    assert only_resnet, "resnet18 has geometries no other model of the fixture has"
    result = held_out(machine, steps, only_resnet, fit_opsum)
    assert result.lomo_skipped == ("resnet18",)
    assert "resnet18" not in result.lomo_mape_by_model and len(result.lomo_mape_by_model) == 4


def test_profile_sets_the_op_sums_parts_beside_the_profiled_ones(
    store_file: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from advisor.predict.registry import train_machine

    (machine,) = machines(store_file)
    train_machine(store_file, machine, tmp_path / "models", zoo_table)
    monkeypatch.setenv("COLUMNS", "160")
    words = ["profile", "resnet18", "--batch-size", "4", "--partition", "cpu", "--steps", "1", "--json"]
    assert cli([*words, "--db", str(tmp_path / "advisor.db")]) == 0
    answer = json.loads(capsys.readouterr().out)
    by_part = {p["part"]: p for p in answer["parts"]}
    assert all(by_part[str(part)]["op_sum_s"] >= 0 for part in StepPart)
    parts_s = sum(by_part[str(part)]["op_sum_s"] for part in StepPart)
    assert by_part["step"]["op_sum_s"] == pytest.approx(parts_s)
