"""A first sight spans the micro-batches a job's candidates use and plans past its budget, which the run cuts,
in three processes whose runs training takes apart (the plans pure, on fake tables; training on a real
store)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from advisor.bench.plan import DeviceProfile, nightly_grid
from advisor.bench.run import process_plans
from advisor.bench.sight_plan import (
    DEFAULT_RANGE,
    LEAST_SHARE_S,
    OVERPLAN,
    PROCESSES,
    SightPart,
    candidate_range,
    range_batches,
    sight_plan,
    spread,
)
from advisor.predict.registry import layer_samples
from advisor.records import LayerConfig, LayerMeasurement, ResultLine, StepConfig
from advisor.store import Store
from tests.plan_support import fake_table

from .test_bench_neighbours import FINGERPRINT, linear

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


def test_a_first_sight_runs_in_three_fresh_processes_the_first_pass_and_the_layers_in_the_first() -> None:
    """Instances built in one process share its offset: each process is a run of its own, and each
    measures every batch again, so that training sees three runs of every step."""
    table = fake_table("resnet18", 32)
    batches = range_batches(CPU, 2, 32)
    plan = sight_plan(CPU, DEVICE, table, 180.0, batches)
    assert PROCESSES == 3 and [row.process for row in plan.rows()] == [1, 1, 1, 2, 3]
    parts = process_plans(plan.night().plan())
    assert len(parts) == 3 and sum(len(part.items) for part in parts) == len(plan.items)
    first = {type(item.config) for item in parts[0].items[: len(batches) + 1]}
    assert first == {StepConfig, LayerConfig}, "the first process: the steps' first pass, then the layers"
    for part in parts[1:]:
        assert all(isinstance(item.config, StepConfig) for item in part.items)
        assert len(part.items) % len(batches) == 0, "whole passes: every batch in each process"
        assert {item.config.batch for item in part.items} == set(batches)
        assert part.learn_estimates and not part.processes
        assert len(part.items) >= 3 * len(batches), "passes past its share: the run cuts them"
    short = sight_plan(CPU, DEVICE, table, PROCESSES * LEAST_SHARE_S - 1, batches)
    assert not short.night().processes, "too short a budget to start three: one process"
    assert not sight_plan(CPU, DEVICE, table, 600.0, batches, steps=False).night().processes


def test_training_takes_a_process_level_out_of_the_three_runs_of_a_first_sight() -> None:
    """The same first sight's rows with one process 40% slow throughout: in three runs, training takes
    that process's level out and keeps the other two's; had the slow process been the only one, every
    prediction would be 40% high."""

    def run(run_id: str, slow: float) -> list[ResultLine]:
        return [
            ResultLine(
                run_id=run_id,
                fingerprint=FINGERPRINT,
                measured_at=datetime(2026, 12, 5, 11, minute, tzinfo=UTC),
                measurement=LayerMeasurement(
                    config=linear(width), median_s=0.0, fits=True, pace_ratio=slow * width / 100, pace_s=0.03
                ),
            )
            for minute, width in enumerate((10, 20, 40, 80))
        ]

    def seconds(lines: list[ResultLine]) -> dict[int, float]:
        store = Store.memory()
        store.ingest(lines)
        return {s.config.in_channels: s.seconds for s in layer_samples(store.layer_rows())}

    three = seconds([*run("process-1", 1.0), *run("process-2", 1.4), *run("process-3", 0.97)])
    alone = seconds(run("process-2", 1.4))
    for width, value in three.items():
        assert value == pytest.approx(0.03 * width / 100, rel=1e-9)
        assert alone[width] == pytest.approx(1.4 * value, rel=1e-9)
