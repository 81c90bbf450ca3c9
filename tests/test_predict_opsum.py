"""The op-sum step model (`advisor.predict.opsum`) and the roofline it prices untimed ops with
(`advisor.predict.roofline`), on the CPU zoo fixture's real measurements and on hand-counted cases."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from math import exp, log
from pathlib import Path

import pytest
import torch
import torchvision

from advisor.bench.sequence import family_table
from advisor.bench.tables import zoo_table
from advisor.cli import main as cli
from advisor.introspect import LayerKind
from advisor.introspect.run import introspect
from advisor.introspect.table import TrainingSettings
from advisor.introspect.training import trainable_parameters
from advisor.ops import Cost, layer_op, op_named, op_of
from advisor.ops.configs import kernels
from advisor.ops.known import RELEASE
from advisor.ops.rates import Curve, MachineRates, UpdateCurves
from advisor.predict.boosters import STEP_PARAMS, train_booster
from advisor.predict.evaluate import held_out
from advisor.predict.features import split_timed, timed_layers
from advisor.predict.heldout import without_models
from advisor.predict.leastsquares import relative_least_squares
from advisor.predict.machine import LayerSample, fit_layers
from advisor.predict.opsum import (
    OpSumModel,
    fit_opsum,
    module_calls,
    op_parts,
    op_terms,
    outside_seconds,
    parameter_tensors,
    untimed_seconds,
)
from advisor.predict.registry import layer_samples, machines, step_samples
from advisor.predict.roofline import Roofline, fit_roofline, release_seconds, update_seconds
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


def test_a_layers_roof_is_its_fixed_cost_plus_its_arithmetic_or_its_bytes() -> None:
    """A 1000 -> 1000 linear, one row a sample. At batch 1: 3 * 2 * 1000 * 1000 = 6e6 FLOPs (6 ms at
    1 GFLOP/s); bytes (4 each) input 1,000 + weights 1e6 + output 1,000 elements forward, output + 2x input
    + 2x weights backward: 12,020,000 bytes (12.02 ms at 1 GB/s), so it streams. At batch 1,000: 6e9 FLOPs
    (6 s) against 4 * (3e6 + 5e6) = 32e6 bytes (32 ms), so it computes. The fixed cost comes on top."""
    roof = Roofline({"matrix": 1e9}, bandwidth=1e9, launch_s=1e-5 / 3, update_s=0.0).layer_roof()
    linear = _config(op="linear", in_channels=1000, out_channels=1000, height=1)
    assert roof.fixed_s == pytest.approx(1e-5), "three launches"
    assert roof.seconds(linear) == pytest.approx(1e-5 + 12_020_000 / 1e9)
    assert roof.seconds(linear.model_copy(update={"batch": 1000})) == pytest.approx(1e-5 + 6.0)
    # A convolution on a machine that benchmarked only linears computes at the fastest rate known.
    conv = _config(in_channels=1000, out_channels=1000, height=1, batch=1000)
    assert roof.seconds(conv) == pytest.approx(1e-5 + 6.0)


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
    at_4, at_8 = (untimed_seconds(split_timed(table, b, False)[1], b, False, roofline) for b in (4, 8))
    assert at_4 == pytest.approx(moved / 1e9)
    assert at_8 > at_4


def test_a_fit_on_top_of_seconds_already_priced_scales_only_what_is_left() -> None:
    # 1 s of each step is priced already; the rest is exactly 2 per unit of the one term.
    assert relative_least_squares([[1], [2], [3]], [3, 5, 7], offset=[1, 1, 1]) == pytest.approx((2,))
    assert relative_least_squares([[1], [2], [3]], [3, 5, 7])[0] > 2.0


def test_the_update_is_priced_for_the_optimizer_the_table_trains_with(store: Store) -> None:
    """Unswept, AdamW moves 7 floats a parameter where SGD with momentum moves 5
    (`advisor.ops.costs`): 1,000 parameters at 2 ns each for SGD's are 2.8 us for AdamW's."""
    roofline = Roofline({"convolution": 1e12}, 1e9, 1e-6, update_s=2e-9)
    assert roofline.update_seconds(1000, 2) == pytest.approx(2e-6)
    assert roofline.update_seconds(1000, 2, "adamw") == pytest.approx(2.8e-6)
    (machine,) = machines(store)
    layers = fit_layers(machine, layer_samples(store.layer_rows(machine)))
    table = zoo_table("resnet18", 32)
    adamw = table.model_copy(update={"training": TrainingSettings(optimizer="adamw")})
    sgd_s = op_terms(layers, roofline, table, 4, False, False).optimizer_s
    assert op_terms(layers, roofline, adamw, 4, False, False).optimizer_s == pytest.approx(sgd_s * 7 / 5)


def _flat(seconds: float) -> tuple[tuple[float, float], ...]:
    """A swept curve: ``seconds`` at any size up to 1 MB."""
    return ((0.0, log(seconds)), (log(1e6), log(seconds)))


def _swept(launch_s: float) -> Roofline:
    """A roofline whose untimed ops are priced by one swept curve, 10 us at any size up to 1 MB; a softmax
    swept at its two launches says timing an op alone adds nothing (`MachineRates.alone_s`)."""
    rates = MachineRates(
        curves={"activation": _flat(1e-5), "softmax": _flat(2 * launch_s)}, launch_s=launch_s
    )
    return Roofline(compute={"convolution": 1e12}, bandwidth=1e9, launch_s=1e-6, update_s=0.0, swept=rates)


def test_swept_prices_hold_their_launches_and_the_profile_counts_them_as_dispatch(store: Store) -> None:
    """resnet18 at batch 4: each timed layer launches three kernels, each untimed op two, at the launch
    chain's 2 us; swept, no launch term is added on top of the prices that hold them."""
    (machine,) = machines(store)
    layers = fit_layers(machine, layer_samples(store.layer_rows(machine)))
    table = zoo_table("resnet18", 32)
    timed = len(timed_layers(table, 4, False))
    untimed = len(table.layers) - timed
    swept = op_terms(layers, _swept(2e-6), table, 4, False, False)
    assert swept.launch_s == 0.0 and swept.anchored == {1, 2}, "untimed ops and launches; no update swept"
    held = outside_seconds(table, 4, False, _swept(2e-6))
    assert held == pytest.approx((timed * 3 * 2e-6, untimed * 2 * 2e-6)), "no tiny layer swept: launches"
    unswept = Roofline({"convolution": 1e12}, 1e9, 1e-6, 0.0)
    plain = op_terms(layers, unswept, table, 4, False, False)
    assert (
        plain.launch_s == pytest.approx(untimed * 2 * 1e-6)
        and outside_seconds(table, 4, False, unswept)[1] == 0
    )
    # Each part at scale one and a booster that corrects nothing: the launches held move to dispatch.
    width = 11
    flat = train_booster(STEP_PARAMS, 1, [[0.0] * width, [1.0] * width], [0.0, 0.0])
    model = OpSumModel(layers, _swept(2e-6), (1.0, 1.0, 1.0, 1.0, 0.0, 0.0), {}, flat)
    parts = model.parts(table, 4, False, False)
    timed_s = sum(swept.layer_parts.values())
    assert parts[StepPart.LAYERS] == pytest.approx(timed_s - held[0])
    assert parts[StepPart.MEMORY_BOUND] == pytest.approx(swept.vector_s - held[1])
    assert parts[StepPart.DISPATCH] == pytest.approx(sum(held))
    assert parts[StepPart.OPTIMIZER] == pytest.approx(swept.optimizer_s)
    # A module call at the module chain's 1 us more: 76 of them a resnet18 step, per-op dispatch too.
    called = replace(_swept(2e-6), swept=replace(_swept(2e-6).swept, module_s=1e-6))
    assert op_terms(layers, called, table, 4, False, False).launch_s == pytest.approx(76 * 1e-6)
    more = OpSumModel(layers, called, (1.0, 1.0, 1.0, 1.0, 0.0, 0.0), {}, flat).parts(table, 4, False, False)
    assert more[StepPart.DISPATCH] == pytest.approx(parts[StepPart.DISPATCH] + 76e-6, rel=1e-3)


def test_what_a_layer_pays_outside_its_kernels_is_its_kinds_tiny_layer_less_its_module_call(
    store: Store,
) -> None:
    """resnet18 at batch 4 with tiny convolutions (20 us), batch norms (30 us) and ReLUs (3 us) measured and
    a module call at 1 us: each convolution moves 19 us of its price to per-op dispatch, each ReLU 2 us, each
    batch norm its whole price (under its 29 us); the fc (no tiny linear) and the rest their launches at the
    launch chain's 2 us. The whole prediction is not changed, only its split."""
    (machine,) = machines(store)
    layers = fit_layers(machine, layer_samples(store.layer_rows(machine)))
    table = zoo_table("resnet18", 32)
    called = replace(_swept(2e-6), swept=replace(_swept(2e-6).swept, module_s=1e-6))
    tiny_s = {"tiny_conv2d": 20e-6, "tiny_batch_norm": 30e-6, "tiny_activation": 3e-6}
    tiny = replace(called, swept=replace(called.swept, layer_s=tiny_s))
    timed = [layer_op(layer, 4, False, timed=True) for layer in table.layers]
    found = [layer_op(layer, 4, False) for layer, own in zip(table.layers, timed, strict=True) if own is None]
    convolutions = sum(own is not None and own[0].family == "convolution" for own in timed)
    norms = [f for f in found if f is not None and f[0].name == "batch_norm"]
    relus = sum(f is not None and f[0].name == "activation" for f in found)
    norm_prices = sum(tiny.layer_op_seconds(*f) for f in norms)
    assert convolutions == 20 and len(norms) == 20 and relus == 17 and norm_prices < 20 * 29e-6
    expected_timed = convolutions * 19e-6 + (len(table.layers) - len(found) - convolutions) * 3 * 2e-6
    rest = len(found) - len(norms) - relus
    expected_untimed = norm_prices + relus * 2e-6 + rest * 2 * 2e-6
    assert outside_seconds(table, 4, False, tiny) == pytest.approx((expected_timed, expected_untimed))
    width = 11
    flat = train_booster(STEP_PARAMS, 1, [[0.0] * width, [1.0] * width], [0.0, 0.0])
    scales = (1.0, 1.0, 1.0, 1.0, 0.0, 0.0)
    before = OpSumModel(layers, called, scales, {}, flat).parts(table, 4, False, False)
    after = OpSumModel(layers, tiny, scales, {}, flat).parts(table, 4, False, False)
    assert sum(after.values()) == pytest.approx(sum(before.values()))
    moved = sum(outside_seconds(table, 4, False, tiny)) - sum(outside_seconds(table, 4, False, called))
    assert moved > 0 and after[StepPart.DISPATCH] - before[StepPart.DISPATCH] == pytest.approx(moved)
    assert after[StepPart.OPTIMIZER] == pytest.approx(before[StepPart.OPTIMIZER])


def test_a_fitted_op_sum_splits_its_prediction_into_the_profiles_parts(store: Store) -> None:
    (machine,) = machines(store)
    steps = step_samples(store.step_rows(machine), zoo_table)
    model = fit_opsum(machine, steps, layer_samples(store.layer_rows(machine)))
    assert all(c >= 0 for c in model.coefficients)
    assert not model.terms(zoo_table("resnet18", 32), 8, False, False).anchored, "no sweep: all fitted"
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


def test_the_share_check_counts_a_split_that_matches_the_profile_as_within(store: Store) -> None:
    """`benchmarks/profile_shares.py`: a profile equal to a model's own split is within 25% on every
    part; one where the model's smallest part took four times as long is off there."""
    from benchmarks.profile_shares import share_table, shares

    (machine,) = machines(store)
    steps = step_samples(store.step_rows(machine), zoo_table)
    model = fit_opsum(machine, steps, layer_samples(store.layer_rows(machine)))
    own = model.parts(zoo_table("resnet18", 32), 4, False, False)
    smallest = min((p for p in StepPart if own[p] > 0), key=lambda p: own[p])
    slower = {**own, smallest: 4 * own[smallest]}
    assert shares(slower)[smallest] > 1.25 * shares(own)[smallest]
    table = share_table([("resnet18", 4)], {("resnet18", 4): [own]}, [("op sum", model)])
    assert list(table.columns[-1].cells)[-1] == f"{len(StepPart)} of {len(StepPart)}"
    table = share_table([("resnet18", 4)], {("resnet18", 4): [slower, slower]}, [("op sum", model)])
    cells = list(table.columns[-1].cells)
    assert str(cells[list(StepPart).index(smallest)]).endswith("off")


def test_the_profiles_against_themselves_count_by_hand() -> None:
    """`benchmarks/profile_shares.py`'s floor: identical profiles agree in every cell of every draw. Two
    profiles whose dispatch share is about 0 and 1/3: a resampled pair's median is either one or their
    mean, each pair of sets agrees only when both drew alike: 1/16 + 1/4 + 1/16 = 3/8 of draws."""
    from benchmarks.profile_shares import self_agreement

    one = {
        StepPart.LAYERS: 1.0,
        StepPart.DISPATCH: 0.001,
        StepPart.OPTIMIZER: 0.5,
        StepPart.MEMORY_BOUND: 0.5,
    }
    alike = self_agreement([("resnet18", 2)], {("resnet18", 2): [one, one, one]})
    assert alike.counts == [len(StepPart)] * len(alike.counts)
    other = {**one, StepPart.DISPATCH: 1.0}
    apart = self_agreement([("resnet18", 2)], {("resnet18", 2): [one, other]})
    assert abs(apart.by_cell[("resnet18", 2, StepPart.DISPATCH)] - 3 / 8) < 0.05
    assert min(apart.counts) < len(StepPart)


def test_the_anchored_terms_take_one_scale_with_the_timed_layers_when_the_steps_say_so() -> None:
    """Steps that take exactly half of every priced term (timed layers and swept untimed ops alike) fit
    one shared scale of 0.5, the anchored terms' 0.5 with it, and no host time."""
    from advisor.ops import KernelPath
    from advisor.predict.opsum import OpTerms, _scales

    def terms(batch: int, timed: float, vector: float) -> OpTerms:
        return OpTerms(
            batch, False, False, {("conv2d", KernelPath.OTHER, 1): timed}, vector, 0.0, 0.0, 1, 1,
            anchored=frozenset({1, 2, 3}),
        )  # fmt: skip

    priced = [terms(1, 0.010, 0.004), terms(2, 0.030, 0.002), terms(4, 0.020, 0.010), terms(8, 0.050, 0.020)]
    seconds = [0.5 * (t.layer_parts[("conv2d", KernelPath.OTHER, 1)] + t.vector_s) for t in priced]
    coefficients, calibration, anchored = _scales(priced, seconds)
    assert coefficients[0] == pytest.approx(0.5, rel=1e-3) and anchored == pytest.approx(0.5, rel=1e-3)
    assert calibration[("conv2d", KernelPath.OTHER, 1)] == pytest.approx(1.0, rel=1e-3)
    assert coefficients[-2:] == pytest.approx((0.0, 0.0), abs=1e-6), "no host time per step or sample"


def test_the_bandwidth_roof_is_the_fastest_swept_op_at_that_size() -> None:
    one_gb_s = ((0.0, log(1e-9)), (log(1e9), 0.0))
    two_gb_s = ((0.0, log(5e-10)), (log(1e9), log(0.5)))
    rates = MachineRates(curves={"activation": one_gb_s, "softmax": two_gb_s})
    assert rates.least_bytes_seconds(1e6) == pytest.approx(5e-4)
    assert MachineRates().least_bytes_seconds(1e6) is None


def test_a_timed_layer_takes_no_less_than_its_bytes_at_the_bandwidth_roof(store: Store) -> None:
    """At one byte a second every layer is bound by its bytes, which grow linearly with the batch: the
    timed layers' seconds are their bytes at any batch; without sweeps, their curves alone."""
    (machine,) = machines(store)
    layers = fit_layers(machine, layer_samples(store.layer_rows(machine)))
    table = zoo_table("resnet18", 32)
    one_byte_s = ((0.0, 0.0), (log(1e12), log(1e12)))
    slow = Roofline({"convolution": 1e12}, 1e9, 1e-6, 0.0, MachineRates(curves={"activation": one_byte_s}))
    moved = 0.0
    for config in timed_layers(table, 4, False):
        cost = op_of(config).cost(config)
        moved += cost.forward_bytes + cost.backward_bytes
    assert sum(op_parts(layers, slow, timed_layers(table, 4, False), 4).values()) == pytest.approx(moved)
    plain = Roofline({"convolution": 1e12}, 1e9, 1e-6, 0.0)
    assert sum(op_parts(layers, plain, timed_layers(table, 4, False), 4).values()) < 1.0


def test_a_swept_op_inside_a_network_costs_its_time_alone_less_what_timing_it_alone_adds() -> None:
    """Hand count at 1 us a launch: the cheapest swept op, an activation, took 10 us alone, two launches of
    it, so timing an op alone adds 8 us (a module call, a backward's start), which a network pays once a
    step. Inside one, an activation costs its two launches (2 us), a softmax swept at 25 us (its first
    byte) 17 us, and at 1 MB, where it took 1 ms alone, 992 us; 1 us forward and 1 backward at the least."""
    softmax = ((0.0, log(2.5e-5)), (log(1e6), log(1e-3)))
    rates = MachineRates(curves={"activation": _flat(1e-5), "softmax": softmax}, launch_s=1e-6)
    assert rates.alone_s == pytest.approx(8e-6)
    assert rates.network_seconds(1.0, "activation") == pytest.approx(2e-6)
    assert rates.network_seconds(1.0, "softmax") == pytest.approx(17e-6)
    assert rates.network_seconds(1e6, "softmax") == pytest.approx(992e-6)
    assert rates.bytes_seconds(1e6, "softmax") == pytest.approx(1e-3), "the curve itself is as measured"
    roofline = Roofline({"convolution": 1e12}, 1e9, 1e-6, 0.0, rates)
    assert roofline.op_seconds("vector", Cost(0.0, 0.0, 5e5, 5e5), "softmax") == pytest.approx(992e-6)
    assert MachineRates().alone_s == 0.0 and MachineRates().network_seconds(1e6) is None


def test_a_timed_layer_inside_a_network_costs_its_time_alone_less_what_timing_it_alone_adds(
    store: Store,
) -> None:
    """The harness that times a swept op times a layer too: with an activation swept at 10 us flat and 1 us
    a launch, each of resnet18's timed layers at batch 4 costs 8 us less than its curve says (its points
    are each well over the 10 us the curve also floors them at)."""
    (machine,) = machines(store)
    layers = fit_layers(machine, layer_samples(store.layer_rows(machine)))
    table = zoo_table("resnet18", 32)
    swept = MachineRates(curves={"activation": _flat(1e-5)}, launch_s=1e-6)
    alone = Roofline({"convolution": 1e12}, 1e9, 1e-6, 0.0, swept)
    plain = Roofline({"convolution": 1e12}, 1e9, 1e-6, 0.0)
    timed = len(timed_layers(table, 4, False))
    points = layers.layer_points(timed_layers(table, 4, False))
    assert min(s for curve in points.values() for _b, s in curve) > 1.8e-5
    assert sum(op_parts(layers, alone, timed_layers(table, 4, False), 4).values()) == pytest.approx(
        sum(op_parts(layers, plain, timed_layers(table, 4, False), 4).values()) - timed * 8e-6
    )


def _grouped(channels: int, groups: int, side: int, batch: int) -> LayerConfig:
    return _config(
        in_channels=channels, out_channels=channels, groups=groups, kernel=(3, 3), padding=(1, 1),
        height=side, width=side, batch=batch,
    )  # fmt: skip


def _blocked_law(config: LayerConfig) -> float:
    """200 us, and the arithmetic at 100 GFLOP/s where a group's channels are a multiple of 16 (oneDNN's
    16-blocked kernels on AVX-512), at 20 GFLOP/s otherwise (8-blocked, the weight gradient by GEMM)."""
    rate = 1e11 if (config.in_channels // config.groups) % 16 == 0 else 2e10
    return 2e-4 + op_of(config).cost(config).train_flops / rate


def test_a_grouped_convolution_no_benchmark_has_is_priced_by_its_groups_alignment() -> None:
    """Grouped 3x3s of 96-1536 channels, 8, 16, 24, 32 and 48 channels a group, on 2-8 px maps, timed by
    `_blocked_law` at batches 1, 16 and 128; regnet_x_400mf's geometries (16 a group: 160 in 10 groups on
    2 px, 400 in 25 on 1 px) and two more no benchmark has are priced at batch 32 within 10% of the law.
    Seen only by channels and groups, the layer booster priced the aligned ones 1.1-5.2 times over."""
    measured = [
        _grouped(channels, channels // width, side, batch)
        for channels in (96, 192, 384, 768, 1536)
        for width in (8, 16, 24, 32, 48)
        for side in (2, 4, 8)
        for batch in (1, 16, 128)
        if channels % width == 0 and channels > width
    ]
    model = fit_layers("m", [LayerSample(config, _blocked_law(config)) for config in measured])
    unseen = [_grouped(160, 10, 2, 32), _grouped(400, 25, 1, 32), _grouped(640, 40, 4, 32)]
    unseen.append(_grouped(240, 10, 2, 32))  # 24 a group: the slow kernels
    geometries = {(c.in_channels, c.groups, c.height) for c in measured}
    assert not geometries & {(c.in_channels, c.groups, c.height) for c in unseen}
    for config in unseen:
        (seconds,) = model.layer_seconds([config]).values()
        assert seconds == pytest.approx(_blocked_law(config), rel=0.1), config


def test_a_batch_norm_over_small_maps_is_priced_by_its_small_map_sweep() -> None:
    """Hand count at 1 us a launch: batch norm swept at 10 us on large maps and 40 us on 2x2 maps (flat),
    the cheapest swept op 10 us alone: an op inside a network costs 8 us less. A batch norm over 2x2 maps
    costs the small-map curve's 32 us, over 1x1 (channels-last too) and 4x4 maps its own 2 us, over 3x3 maps
    between the two, geometric in log positions (log 9/4 of log 16/4); unswept on small maps, its own."""
    curves = {"batch_norm": _flat(1e-5), "batch_norm_small_maps": _flat(4e-5)}
    swept = Roofline({"convolution": 1e12}, 1e9, 1e-6, 0.0, MachineRates(curves=curves, launch_s=1e-6))
    large = MachineRates(curves={"batch_norm": _flat(1e-5)}, launch_s=1e-6)
    plain = Roofline({"convolution": 1e12}, 1e9, 1e-6, 0.0, large)
    norm = op_named("batch_norm")

    def maps(positions: int) -> LayerConfig:
        return _config(op="batch_norm", in_channels=64, out_channels=64, height=positions, batch=4)

    share = log(9 / 4) / log(16 / 4)
    expected = {1: 2e-6, 4: 32e-6, 9: exp((1 - share) * log(32e-6) + share * log(2e-6)), 16: 2e-6}
    assert {p: swept.layer_op_seconds(norm, maps(p)) for p in expected} == pytest.approx(expected)
    assert {p: plain.layer_op_seconds(norm, maps(p)) for p in expected} == pytest.approx(
        dict.fromkeys(expected, 2e-6)
    )


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2", "densenet121"])
def test_the_updates_tensors_are_counted_as_torch_holds_them(name: str) -> None:
    """Convolutions without bias (one tensor), batch norms (two), the classifier (two): resnet18's 62,
    mobilenet_v2's 158, densenet121's 364, as torchvision's models hold them."""
    model = getattr(torchvision.models, name)(num_classes=10)
    assert parameter_tensors(zoo_table(name, 32)) == len(list(model.parameters()))


@pytest.mark.parametrize(
    ("name", "calls"), [("resnet18", 76), ("mobilenet_v2", 213), ("shufflenet_v2_x0_5", 192)]
)
def test_the_module_calls_are_counted_as_torch_makes_them(name: str, calls: int) -> None:
    """Every module's forward pre-hook, counted over one forward of torchvision's model: resnet18's 68
    modules with each block's ReLU called twice (76), mobilenet_v2's 213, shufflenet_v2_x0_5's 192 of its
    205 modules (its unused ones not called)."""
    model = getattr(torchvision.models, name)(num_classes=10)
    counted = [0]
    for module in model.modules():
        module.register_forward_pre_hook(lambda *_: counted.__setitem__(0, counted[0] + 1))
    model(torch.randn(2, 3, 32, 32))
    assert counted[0] == calls
    assert module_calls(zoo_table(name, 32)) == calls


def _released(rates: Roofline) -> Roofline:
    """``rates`` with the gradients' release swept in one tensor: 20 us up to 4 Mi parameters (16 MiB, the
    call), 3.7 ms at 16 Mi (64 MiB: a block glibc hands back to the kernel), as this CPU read them."""
    curve = ((log(4 * 2**20), log(20e-6)), (log(16 * 2**20), log(3.7e-3)))
    released = UpdateCurves(((1, curve),))
    return replace(rates, swept=replace(rates.swept, updates={**rates.swept.updates, RELEASE: released}))


def test_the_gradients_release_is_the_call_once_and_each_weight_past_it() -> None:
    """Hand count, vgg11_bn: every layer's weights but its two large linears' are under 4 Mi parameters and
    cost nothing beyond the call; the 25088 x 4096 linear's (and bias) past the sweep's largest cost its
    seconds per parameter, the 4096 x 4096's about that of 16 Mi. Under LoRA only the call; where nothing
    swept it (a GPU's allocator keeps freed blocks), nothing."""
    table = zoo_table("vgg11_bn", 32)
    rates = _released(_swept(2e-6))
    large = (25088 * 4096 + 4096, 4096 * 4096 + 4096)
    past = sum(3.7e-3 * n / (16 * 2**20) - 20e-6 for n in large)
    assert sorted(layer.parameters for layer in table.layers)[-2:] == sorted(large)
    assert release_seconds(table, rates) == pytest.approx(20e-6 + past, rel=1e-9)
    adapted = table.model_copy(update={"training": TrainingSettings(lora_rank=8)})
    assert release_seconds(adapted, rates) == pytest.approx(20e-6)
    assert release_seconds(table, _swept(2e-6)) == 0.0


def test_the_release_is_the_optimizers_price_and_a_profiles_dispatch(store: Store) -> None:
    """The release is in the optimizer's term, which the steps fit with the update; split for `advisor
    profile`, it is per-op dispatch (``zero_grad`` runs outside ``Optimizer.step``). The whole is the sum."""
    (machine,) = machines(store)
    layers = fit_layers(machine, layer_samples(store.layer_rows(machine)))
    table = zoo_table("vgg11_bn", 32)
    plain, released = _swept(2e-6), _released(_swept(2e-6))
    terms = op_terms(layers, released, table, 4, False, False)
    assert terms.release_s == pytest.approx(release_seconds(table, released)) and terms.release_s > 0.02
    unreleased = op_terms(layers, plain, table, 4, False, False).optimizer_s
    assert terms.optimizer_s == pytest.approx(unreleased + terms.release_s)
    flat = train_booster(STEP_PARAMS, 1, [[0.0] * 11, [1.0] * 11], [0.0, 0.0])
    scales = (1.0, 1.0, 1.0, 1.0, 0.0, 0.0)
    before = OpSumModel(layers, plain, scales, {}, flat).parts(table, 4, False, False)
    after = OpSumModel(layers, released, scales, {}, flat).parts(table, 4, False, False)
    assert sum(after.values()) - sum(before.values()) == pytest.approx(terms.release_s)
    assert after[StepPart.DISPATCH] - before[StepPart.DISPATCH] == pytest.approx(terms.release_s)
    assert after[StepPart.OPTIMIZER] == pytest.approx(before[StepPart.OPTIMIZER])


def _updated(rates: Roofline, alone_s: float, split_s: float) -> Roofline:
    """``rates`` with SGD's update swept: ``alone_s`` a parameter in one tensor, ``split_s`` in 64 or 256."""

    def line(per_parameter: float) -> Curve:
        return tuple((log(n), log(per_parameter * n)) for n in (2**14, 2**24))

    curves = UpdateCurves(((1, line(alone_s)), (64, line(split_s)), (256, line(split_s))))
    return replace(rates, swept=replace(rates.swept, updates={"sgd_momentum": curves}))


def test_a_weight_of_32_mib_or_more_is_updated_at_its_own_size() -> None:
    """Hand count, vgg11_bn under SGD: its 25088 x 4096 and 4096 x 4096 linears (411 and 67 MB) at the
    one-tensor curve's 4 ns a parameter; the rest of its 38 tensors as before, together. A model without such
    a weight (resnet18's largest is 9 MB), or one under LoRA, is priced as before."""
    rates = _updated(_swept(2e-6), 4e-9, 1e-9)
    table = zoo_table("vgg11_bn", 32)
    tensors = parameter_tensors(table)
    large = (25088 * 4096 + 4096, 4096 * 4096 + 4096)
    rest = table.totals.parameters - sum(large)
    together = rates.update_seconds(rest, tensors - 2, "sgd_momentum")
    expected = together + 4e-9 * sum(large)
    assert update_seconds(table, rates, "sgd_momentum", tensors) == pytest.approx(expected, rel=1e-9)
    assert expected > rates.update_seconds(table.totals.parameters, tensors, "sgd_momentum") * 1.5
    small = zoo_table("resnet18", 32)
    plain = rates.update_seconds(small.totals.parameters, 62, "sgd_momentum")
    assert update_seconds(small, rates, "sgd_momentum", 62) == pytest.approx(plain, rel=1e-9)
    adapted = table.model_copy(update={"training": TrainingSettings(lora_rank=8)})
    lora = rates.update_seconds(trainable_parameters(adapted), tensors, "sgd_momentum")
    assert update_seconds(adapted, rates, "sgd_momentum", tensors) == pytest.approx(lora, rel=1e-9)


def test_a_composite_module_is_priced_a_kernel_at_a_time() -> None:
    """Hand count: every activation at 10 us a kernel on the swept curve (`_swept`); GPT-2's tanh GELU runs
    eight, 80 us; BERT's exact GELU one, 10 us."""
    rates = _swept(2e-6)
    gpt2 = next(layer for layer in family_table("tiny_gpt2", 32).layers if layer.op == "NewGELUActivation")
    bert = next(layer for layer in family_table("tiny_bert", 32).layers if layer.op == "GELUActivation")
    assert untimed_seconds([gpt2], 2, False, rates) == pytest.approx(8e-5)
    assert untimed_seconds([bert], 2, False, rates) == pytest.approx(1e-5)
    # Attention, whose math path the introspection counts (five outputs' worth), is one fused kernel.
    encoder = introspect("benchmarks.harness.transfer_nets:encoder", (3, 32, 32), {}, allow_factories=True)
    attention = next(layer for layer in encoder.layers if layer.kind is LayerKind.ATTENTION)
    found = layer_op(attention, 2, False)
    written = attention.at_batch(1).bytes_written / (4 * math.prod(attention.outputs[0].dims))
    assert written == 5 and kernels(attention) == 1 and found is not None
    assert untimed_seconds([attention], 2, False, rates) == pytest.approx(rates.layer_op_seconds(*found))


def test_attention_is_priced_on_the_path_a_cpu_runs_it() -> None:
    """tiny_t5's self-attention adds its learned position bias (the math path: scores and their softmax
    written out and read back); its cross-attention, at the same shapes, adds none (the fused kernel). At
    1 GB/s and an unbounded matrix rate each is its hand-counted bytes' time."""
    rates = Roofline(compute={"matrix": 1e15}, bandwidth=1e9, launch_s=0.0, update_s=0.0)
    table = family_table("tiny_t5", 32)
    attention = {layer.math_path: layer for layer in table.layers if layer.kind is LayerKind.ATTENTION}
    priced = {}
    for math_path, layer in attention.items():
        found = layer_op(layer, 2, False)
        assert found is not None and found[0].name == ("math_attention" if math_path else "attention")
        cost = found[0].cost(found[1])
        priced[math_path] = untimed_seconds([layer], 2, False, rates)
        assert priced[math_path] == pytest.approx((cost.forward_bytes + cost.backward_bytes) / 1e9)
    # 2 samples x 4 heads; per head 32 queries and keys of 32 (1,024 values a tensor): the fused kernel
    # reads Q, K, V and writes O, then reads those and dO and writes dQ, dK, dV (12 tensors), and writes and
    # reads a log-sum-exp a query. The math path moves Q, K, V, O and the scores (as large at 32 tokens)
    # 9 times forward (Q, K, S; the softmax's three passes; P, V, O), 17 backward (`math_attention`).
    assert priced[False] == pytest.approx(4 * 2 * 4 * (12 * 1024 + 2 * 32) / 1e9)
    assert priced[True] == pytest.approx(4 * 2 * 4 * (9 + 17) * 1024 / 1e9)
