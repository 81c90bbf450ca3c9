"""A first sight spans the micro-batches a job's candidates use and plans past its budget, which the run cuts
(pure; fake tables)."""

from __future__ import annotations

import pytest

from advisor.bench.plan import DeviceProfile, nightly_grid
from advisor.bench.sight_plan import (
    DEFAULT_RANGE,
    OVERPLAN,
    SightPart,
    candidate_range,
    range_batches,
    sight_plan,
    spread,
)
from advisor.records import LayerConfig, StepConfig
from tests.plan_support import fake_table

CPU = nightly_grid("cpu")
DEVICE = DeviceProfile.assumed("cpu")


def test_a_range_is_taken_ends_first_then_each_gap_halved() -> None:
    assert range_batches(CPU, 2, 32) == (2, 32, 8, 4, 16)
    assert range_batches(CPU, 3, 40) == (3, 40, 8, 4, 16, 32)
    assert range_batches(CPU, 8, 8) == (8,)
    assert spread([1, 2]) == (1, 2)
    with pytest.raises(ValueError, match="1 <= low <= high"):
        range_batches(CPU, 16, 4)


def test_a_submitted_global_batch_gives_the_micro_batches_its_candidates_split_it_into() -> None:
    assert candidate_range((64,), CPU) == (8, 64)
    assert candidate_range((16, 256), CPU) == (2, 128), "within the grid"
    assert candidate_range((4,), CPU) == (1, 4)
    assert candidate_range((), CPU) == DEFAULT_RANGE


def test_steps_span_the_range_first_then_layers_at_its_batches_then_steps_again_past_the_budget() -> None:
    table = fake_table("resnet18", 32)
    budget_s = 10.0
    plan = sight_plan(CPU, DEVICE, table, budget_s, range_batches(CPU, 2, 32))
    parts = [entry.part for entry in plan.items]
    assert parts == sorted(parts, key=list(SightPart).index), "steps, then layers, then steps again"
    rows = {row.part: row for row in plan.rows()}
    assert rows[SightPart.STEPS].batches == (2, 32, 8, 4, 16)
    assert sorted(rows[SightPart.AGAIN].batches) == [2, 4, 8, 16, 32]
    # The grid's layer batch 15 lies in the range: a 1x1 convolution's kernel switches at 16 on a CPU.
    assert rows[SightPart.LAYERS].batches == (2, 32, 8, 4, 16, 15)
    assert all(isinstance(e.item.config, LayerConfig) == (e.part is SightPart.LAYERS) for e in plan.items)
    assert plan.estimate_s >= OVERPLAN * budget_s, "the run, not the rough estimate, stops it"
    night = plan.night()
    assert [entry.item for entry in night.entries] == [entry.item for entry in plan.items]
    assert night.budget_s == budget_s
    assert night.plan().learn_estimates, "minutes of budget: the run learns how long its items take"


def test_without_whole_steps_only_the_layers_are_planned_once() -> None:
    table = fake_table("lab.nets:build", 32)
    plan = sight_plan(CPU, DEVICE, table, 600.0, (4, 16), steps=False)
    assert {entry.part for entry in plan.items} == {SightPart.LAYERS}
    assert not any(isinstance(entry.item.config, StepConfig) for entry in plan.items)
    assert plan.rows()[0].batches == (4, 16, 8, 15), "the grid's layer batches between them after"


def test_each_pass_again_builds_every_step_afresh_in_an_order_of_its_own() -> None:
    """As the nightly grid's second step pass: a batch's instance follows other steps in each pass."""
    table = fake_table("resnet18", 32)
    batches = range_batches(CPU, 2, 32)
    plan = sight_plan(CPU, DEVICE, table, 30.0, batches)
    again = [e.item.config.batch for e in plan.items if e.part is SightPart.AGAIN]
    passes = [tuple(again[i : i + len(batches)]) for i in range(0, len(again), len(batches))]
    assert len(passes) >= 3 and all(sorted(p) == sorted(batches) for p in passes), "every batch each pass"
    assert len(set(passes)) > 1, "not one order repeated"
    assert sight_plan(CPU, DEVICE, table, 30.0, batches) == plan, "seeded: the same plan every time"
