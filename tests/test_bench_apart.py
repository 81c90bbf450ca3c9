"""Steps on a CPU measured each in a process of its own (`advisor.bench.apart`); real measurements, tiny."""

from __future__ import annotations

import pytest

from advisor.bench import apart
from advisor.bench.plan import Phase, Plan, PlanItem
from advisor.bench.reporting import Event
from advisor.bench.run import RunOn, run_plan
from advisor.records import LayerConfig, ResultLine, StepConfig

from .bench_support import CPU, TINY, one_thread  # noqa: F401 (an autouse fixture)
from .test_bench_neighbours import linear

KILLED = TINY.model_copy(update={"model": "tests.factories.cnn:killed_in_training", "input_size": 16})


def _item(config: StepConfig | LayerConfig) -> PlanItem:
    return PlanItem(phase=Phase.COARSE, config=config, estimate_s=1.0)


def test_a_step_killed_by_the_kernel_costs_that_step_and_the_run_goes_on() -> None:
    """Were the step measured in the job's process, the kill would end this test's process too."""
    layer = linear(16)
    plan = Plan(items=(_item(KILLED), _item(TINY), _item(layer)), steps=2, warmup=0, repeats=2)
    lines: list[ResultLine] = []
    events: list[Event] = []
    on = RunOn(CPU, None, allow_factories=True)
    summary = run_plan(plan, on, budget_s=600, sink=lines.append, progress=events.append)
    assert [event.status for event in events] == ["does not fit", "measured", "measured"]
    assert "died" in (events[0].error or "")
    assert (summary.measured, summary.did_not_fit) == (2, 1)
    assert [line.measurement.fits for line in lines] == [False, True, True]


def test_a_step_apart_is_paced_by_the_job_process_as_its_layer_items_are(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One yardstick, in the process that paces the layer items: the pace step allocates too."""
    monkeypatch.setattr(apart, "pace_step", lambda: lambda: 0.04)
    with apart.steps_apart() as steps:
        measured = steps.measure(TINY, CPU, 2, 0, None, allow_factories=False)
    assert measured.fits and measured.pace_s == pytest.approx(0.04)
    assert measured.median_s is not None and measured.pace_ratio == pytest.approx(measured.median_s / 0.04)
