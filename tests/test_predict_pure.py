"""The pure parts of the predictors: features, curves in the batch size, job time and device scaling."""

from __future__ import annotations

import subprocess
import sys
from math import ceil, log

import pytest

from advisor.bench.tables import zoo_table
from advisor.introspect import Optimizer, estimate_peak_memory
from advisor.introspect.table import TrainingSettings
from advisor.ops import KernelPath
from advisor.precision import Precision
from advisor.predict.curves import batch_effects, through, through_weights
from advisor.predict.features import step_feature_names, step_features, timed_layers
from advisor.predict.jobtime import JobShape, job_time
from advisor.predict.layout import FeatureLayout, current_layout, layout_problem, width_problem
from advisor.predict.leastsquares import relative_least_squares
from advisor.predict.machine import MachineModel
from advisor.predict.peak_memory import MEMORY_MARGIN, MemoryFit
from advisor.predict.scaling import DeviceSpec, match_spec, roofline_ratio


def test_the_pure_modules_import_neither_torch_nor_xgboost() -> None:
    code = (
        "import sys, advisor.predict.curves, advisor.predict.features, advisor.predict.jobtime\n"
        "import advisor.predict.leastsquares, advisor.predict.scaling\n"
        "assert not {'torch', 'xgboost'} & set(sys.modules), sorted({'torch', 'xgboost'} & set(sys.modules))"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_features_are_deterministic_and_sum_the_layer_times_by_group() -> None:
    table = zoo_table("mobilenet_v3_small", 32)
    configs = timed_layers(table, 8, False)
    seconds = {config: 1e-3 * (i % 7 + 1) for i, config in enumerate(dict.fromkeys(configs))}
    points = {config: ((1, s / 8), (16, s * 2)) for config, s in seconds.items()}
    first = step_features(table, 8, False, False, configs, points)
    again = step_features(table, 8, False, False, configs, dict(reversed(points.items())))
    assert first == again
    assert first.vector() == again.vector()
    assert len(first.vector()) == len(step_feature_names())
    assert first.layers_s == pytest.approx(sum(seconds[c] for c in configs))
    # Batch 8 lies 7/15 of the way from the batch-1 to the batch-16 benchmark of every layer.
    assert {batch for _path, batch in first.layer_parts} == {1, 16}
    assert {path for path, _batch in first.layer_parts} == set(KernelPath)
    assert sum(first.layer_parts.values()) == pytest.approx(first.layers_s)
    assert first.base_terms({})[0] == pytest.approx(first.layers_s)
    assert first.group_s["depthwise"] > 0 and first.group_s["linear"] > 0
    assert first.flops == table.at_batch(8).total.train_flops


def test_a_layer_keeps_each_algorithms_times_between_its_benchmarks() -> None:
    # Batch 8 on a slower kernel than batch 16, as PyTorch's unblocked 1x1 convolutions on one CPU thread.
    points = ((1, 1.0), (8, 8.0), (16, 4.0), (128, 32.0))
    assert [through(points, b) for b in (1, 8, 16, 128)] == [1.0, 8.0, 4.0, 32.0]
    assert through(points, 4) == pytest.approx(4.0)
    assert through(points, 12) == pytest.approx(6.0)
    assert through(points, 256) == pytest.approx(32.0 + 128 * 28 / 112)
    # Past a falling end segment, in proportion: never a time that shrinks as the batch grows.
    assert through(((1, 2.0), (16, 1.0)), 32) == pytest.approx(2.0)
    assert through(((16, 4.0),), 4) == pytest.approx(1.0)
    # Which measurements each time comes from, for the step base to weigh.
    assert through_weights(points, 12) == ((8, 0.5), (16, 0.5))
    assert through_weights(((1, 2.0), (16, 1.0)), 32) == ((16, 2.0),)


def test_a_batch_size_few_models_ran_is_judged_against_their_own_level() -> None:
    effect = {1: 0.1, 2: 0.2, 4: 0.3}
    level = {"slow": 1.0, "a": 0.0, "b": 0.0, "c": -0.1}
    batches = {"slow": (1, 2, 4), "a": (2, 4), "b": (2, 4), "c": (2, 4)}
    residuals = [(k, b, level[k] + effect[b]) for k, sizes in batches.items() for b in sizes]
    # The median at batch 1 alone would be the slow model's 1.1.
    assert dict(batch_effects(residuals)) == pytest.approx({log(b): e for b, e in effect.items()})


def test_accumulation_pays_the_optimizer_once_per_step() -> None:
    shape = JobShape(steps=100, accumulation=4, optimizer_s=0.1, epochs=2, epoch_overhead_s=5, startup_s=30)
    whole = job_time(1.0, 1.5, shape)
    assert whole.p50_s == pytest.approx(30 + 2 * 5 + 100 * (4 * 1.0 - 3 * 0.1))
    assert whole.p90_s == pytest.approx(30 + 2 * 5 + 100 * (4 * 1.5 - 3 * 0.1))


def test_roofline_scaling_uses_the_bound_each_device_hits() -> None:
    slow = DeviceSpec(name="Tesla T4", flops=8e12, bandwidth=320e9)
    fast = DeviceSpec(name="NVIDIA A100-SXM4-40GB", flops=19.5e12, bandwidth=1555e9)
    assert roofline_ratio(1e12, 1e6, slow, fast) == pytest.approx(8 / 19.5)
    assert roofline_ratio(1e6, 1e12, slow, fast) == pytest.approx(320 / 1555)
    assert match_spec("t4", [fast, slow]) == slow
    assert match_spec("h100", [fast, slow]) is None


def test_shrunk_coefficients_lean_toward_a_shared_one_that_unreached_columns_keep() -> None:
    # Exactly 2 per unit of the first column and 1 of the second: shrunk, they lean toward each other.
    first, second, shared = relative_least_squares([[1, 0], [0, 1], [1, 1]], [2, 1, 3], shrunk=2)
    assert relative_least_squares([[1, 0], [0, 1], [1, 1]], [2, 1, 3]) == pytest.approx((2, 1))
    assert 2 > first > shared > second > 1
    # A column no sample reaches (a benchmarked batch no step lies beside) keeps the shared coefficient.
    _first, unreached, _third, shared = relative_least_squares(
        [[1, 0, 1], [2, 0, 1], [3, 0, 2]], [2, 3, 5], shrunk=2
    )
    assert unreached == pytest.approx(shared)


def test_a_feature_layout_difference_is_said_column_by_column() -> None:
    current = current_layout()
    older = FeatureLayout(
        layer=current.layer, step=(*(n for n in current.step if n != "log_activation_bytes"), "log_pruned_s")
    )
    assert layout_problem(current, current) is None
    assert layout_problem(older, current) == (
        f"its step booster was fitted with another feature layout ({len(current.step)} columns, this "
        f"advisor's {len(current.step)}; new here: log_activation_bytes; gone from here: log_pruned_s)"
    )
    assert width_problem((len(current.layer), len(current.step)), current) is None
    assert width_problem((len(current.layer), 3), current) == (
        f"its boosters read {len(current.layer)} and 3 features, this advisor's layout has "
        f"{len(current.layer)} and {len(current.step)} (fitted before model files kept their feature layout)"
    )


def test_zero_stage_3_keeps_a_share_of_a_jobs_state_on_each_gpu() -> None:
    """Weights, gradients and SGD's momentum are 12 bytes a parameter on one GPU; ZeRO-3 over 4 GPUs keeps
    a quarter of each on every one, so the state per GPU is 9 bytes a parameter lower. The backward's peak
    gives a little of it back: fewer of the gradients it has not made yet are subtracted there."""
    table = zoo_table("resnet18", 32).trained(TrainingSettings(zero_stage=3))
    parameters = table.totals.parameters
    one, four = (estimate_peak_memory(table, 8, Precision.FP32, Optimizer.SGD, devices) for devices in (1, 4))
    assert one.state - four.state == 9 * parameters
    fit = MemoryFit()
    whole, shard = (fit.predict(table, 8, False, devices) for devices in (1, 4))
    assert whole - shard == 9 * parameters - (four.transient - one.transient)
    assert 8 * parameters < whole - shard <= 9 * parameters
    model = MachineModel(
        machine="m", layer_booster="", measured_layers=(), step_base=(), step_booster="", p90_log_ratio=0.0,
        heldout_mape=None, memory=fit, architectures=(),
    )  # fmt: skip
    capacity = ceil(fit.predict(table, 64, False, 4) * (1 + MEMORY_MARGIN))
    assert model.memory.largest_batch(table, False, capacity, devices=4) == 64
    assert model.memory.largest_batch(table, False, capacity) < 64
