"""Steps on a CPU measured each in a process of its own (`advisor.bench.apart`); real measurements, tiny."""

from __future__ import annotations

import pytest

from advisor.bench import apart, measure
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


def test_a_step_apart_is_paced_by_its_own_process_not_the_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The job's pace step, timed in a process an hour of items has shaped, strayed from the children's
    (benchmarks/README.md): each child times its own, in the state its step runs in."""
    monkeypatch.setattr(measure, "pace_step", lambda: lambda: 1000.0)
    with apart.steps_apart() as steps:
        measured = steps.measure(TINY, CPU, 2, 0, None, allow_factories=False)
    assert measured.fits and measured.pace_s is not None and 0 < measured.pace_s < 10
    assert measured.median_s is not None
    # The median of each group's ratio to the pace steps around it, not the ratio of the medians: on a busy
    # CI node the two have differed twofold; by the job's 1,000 s pace step it would be 10,000 times smaller.
    assert measured.pace_ratio is not None
    assert 0.1 < measured.pace_ratio / (measured.median_s / measured.pace_s) < 10
