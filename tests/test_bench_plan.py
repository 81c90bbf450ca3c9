"""The plan is pure: a fake layer table stands in for introspection, but where the real quick plan counts."""

from __future__ import annotations

import pytest

from advisor.bench.plan import (
    DeviceProfile,
    Phase,
    Plan,
    PlanItem,
    full_plan,
    geometric,
)
from advisor.bench.plan_rows import describe
from advisor.bench.short_plans import quick_plan
from advisor.bench.zoo import (
    CPU_MODELS,
    CPU_SEQUENCE_MODELS,
    CPU_SIZES,
    GPU_SEQUENCE_MODELS,
    SMALL,
    ZOO,
    zoo_model,
)
from advisor.records import LayerConfig, StepConfig
from tests.plan_support import fake_table

PHASE_ORDER = list(Phase)


def test_the_zoo_spans_at_least_25_cnns_and_vision_transformers() -> None:
    names = [model.name for model in ZOO]
    assert len(set(names)) == len(names)
    assert sum(model.family == "cnn" for model in ZOO) >= 25
    assert {"vit_b_16", "swin_t"} <= set(names)
    assert zoo_model("vit_b_16").kwargs(32) == {"num_classes": 10, "image_size": 32}
    assert zoo_model("resnet50").kwargs(224) == {"num_classes": 1000}
    with pytest.raises(ValueError, match="not benchmarked"):
        zoo_model("alexnet").kwargs(32)


def test_batch_grids_are_geometric_from_one() -> None:
    assert geometric(64) == (1, 2, 4, 8, 16, 32, 64)
    assert geometric(100, 4) == (1, 4, 16, 64)
    assert geometric(1) == (1,)
    with pytest.raises(ValueError):
        geometric(0)


@pytest.fixture(scope="module")
def plan() -> Plan:
    return full_plan(DeviceProfile.assumed("cuda", memory_bytes=80 * 2**30), fake_table)


def _once(plan: Plan) -> list[PlanItem]:
    """The plan without the updates' later places (`Sweeps.update_places`)."""
    return list(dict.fromkeys(plan.items))


def test_phases_come_in_order_with_the_coarse_grid_first(plan: Plan) -> None:
    phases = [item.phase for item in _once(plan)]
    assert phases[0] is Phase.COARSE
    assert [PHASE_ORDER.index(phase) for phase in phases] == sorted(PHASE_ORDER.index(p) for p in phases)
    # A GPU's grid outlasts any night: its steps are measured once.
    assert set(phases) == set(Phase) - {Phase.REPEATS}
    coarse = {item.config.batch for item in plan.items if item.phase is Phase.COARSE}
    assert coarse == {1, 4, 16, 64, 256, 1024, 4096}
    defaults = [item for item in plan.items if item.phase is Phase.COARSE]
    assert all(isinstance(i.config, StepConfig) and not i.config.amp for i in defaults)
    models = {i.config.model for i in defaults if isinstance(i.config, StepConfig)}
    assert models == {m.name for m in ZOO} | set(GPU_SEQUENCE_MODELS)


def test_every_series_grows_its_batch_from_one(plan: Plan) -> None:
    series: dict[tuple[Phase, StepConfig | LayerConfig], list[int]] = {}
    for item in plan.items:
        series.setdefault((item.phase, item.config.model_copy(update={"batch": 1})), []).append(
            item.config.batch
        )
    for (phase, _), batches in series.items():
        assert batches == sorted(batches)
        if phase in (Phase.COARSE, Phase.AMP):
            assert batches[0] == 1


def test_each_setting_is_crossed_with_those_before_it(plan: Plan) -> None:
    pinned = {
        (item.config.amp, item.config.channels_last)
        for item in plan.items
        if item.phase is Phase.PINNED and isinstance(item.config, StepConfig)
    }
    assert pinned == {(False, False), (False, True), (True, False), (True, True)}
    cudnn = {i.config.cudnn_benchmark for i in plan.items if isinstance(i.config, LayerConfig)}
    assert cudnn == {True, False}


def test_no_configuration_is_planned_twice_but_the_updates_at_their_places(plan: Plan) -> None:
    configs = [item.config for item in plan.items if item.phase is not Phase.UPDATES]
    updates = [item.config for item in plan.items if item.phase is Phase.UPDATES]
    assert len(set(configs)) == len(configs) and len(updates) == 4 * len(set(updates)) > 0


def test_the_memory_estimate_caps_the_batch_grid() -> None:
    small = full_plan(DeviceProfile.assumed("cuda", memory_bytes=2**24), fake_table)
    big = full_plan(DeviceProfile.assumed("cuda", memory_bytes=2**40), fake_table)
    assert max(i.config.batch for i in small.items) < max(i.config.batch for i in big.items) == 4096


def test_the_first_items_of_a_plan_keep_its_order() -> None:
    step = StepConfig(
        model="resnet18", input_size=32, batch=1, amp=False, channels_last=False, pinned=False, workers=0
    )
    items = tuple(
        PlanItem(phase=Phase.COARSE, config=step.model_copy(update={"batch": b}), estimate_s=s)
        for b, s in ((1, 5), (2, 100), (4, 5))
    )
    small = Plan(items=items, steps=1, warmup=0, repeats=1)
    assert small.first(2).items == items[:2]


def test_description_rows_cover_the_plan(plan: Plan) -> None:
    rows = describe(plan)
    assert [row.phase for row in rows] == [phase for phase in Phase if phase is not Phase.REPEATS]
    assert sum(row.items for row in rows) == len(plan.items)
    assert sum(row.estimate_s for row in rows) == pytest.approx(plan.estimate_s)
    layers = next(row for row in rows if row.phase is Phase.LAYERS)
    assert "conv2d" in layers.subjects and layers.kind == "layer"


def test_the_quick_plan_is_small_and_estimated_under_three_minutes() -> None:
    from advisor.bench.tables import zoo_table  # the real tables: introspection of four small models

    plan = quick_plan(zoo_table)
    assert plan.estimate_s < 180
    steps = [i.config for i in plan.items if isinstance(i.config, StepConfig)]
    assert {c.input_size for c in steps} == {32}
    assert {c.amp for c in steps} == {False, True}
    assert max(c.batch for c in steps) == 64
    assert 0 < sum(isinstance(i.config, LayerConfig) for i in plan.items) <= 30


def test_a_cpu_night_measures_the_cpu_zoo_at_32px_with_layers_either_side_of_the_kernel_switches() -> None:
    plan = full_plan(DeviceProfile.assumed("cpu"), fake_table)
    steps = [item.config for item in plan.items if isinstance(item.config, StepConfig)]
    layers = [item.config for item in plan.items if isinstance(item.config, LayerConfig)]
    assert {config.model for config in steps} == set(CPU_MODELS + CPU_SEQUENCE_MODELS)
    assert {config.input_size for config in steps if config.model in CPU_MODELS} == {SMALL}
    assert {config.input_size for config in steps} == set(CPU_SIZES)
    assert max(config.batch for config in steps) == 128
    assert not any(config.amp or config.channels_last for config in steps), "bf16 is emulated on a CPU"
    # _slow_conv2d at batch 1 and oneDNN from 2; a stride-1 1x1 switches between 15 and 16.
    assert {config.batch for config in layers} == {1, 2, 8, 15, 16, 128}
    first_layers = next(i for i, item in enumerate(plan.items) if item.phase is Phase.LAYERS)
    assert plan.items[first_layers].config.batch == 16, "the layers phase measures the switch's far side"
    assert plan.estimate_s < 8 * 3600, "a night"


def test_a_cpu_plan_measures_its_steps_again_after_everything_else_in_another_order() -> None:
    """The CPU grid ends within a night; what is left of the budget measures each step a second time, minutes
    after the first, in an order of its own, so that a slow minute does not shift a whole batch size."""
    plan = full_plan(DeviceProfile.assumed("cpu"), fake_table)
    phases = [item.phase for item in plan.items]
    again = phases.index(Phase.REPEATS)
    assert set(phases[again:]) <= {Phase.REPEATS, Phase.UPDATES}, "and the updates' later places"
    first = [item.config for item in plan.items[:again] if isinstance(item.config, StepConfig)]
    second = [item.config for item in plan.items[again:] if isinstance(item.config, StepConfig)]
    assert sorted(map(str, second)) == sorted(map(str, first)) and len(set(first)) == len(first)
    assert second != first
    batches = [config.batch for config in second[:20]]
    assert len(set(batches)) > 3, "not one batch size after another"
