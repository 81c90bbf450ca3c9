"""`benchmarks/kept_back_pass.py`: the kept-back steps planned twice among the nightly grid's steps, and
the pass's results split into the zoo without them and one truth per architecture."""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

from advisor.bench.night import NightItem, Priority
from advisor.bench.plan import Phase, Plan, PlanItem
from advisor.bench.results import read_jsonl
from advisor.introspect.run import introspect
from advisor.records import ResultLine, StepConfig, StepMeasurement
from advisor.store import Store
from benchmarks.architecture_transfer import slug
from benchmarks.kept_back_pass import split, with_kept_back

FIXTURE = read_jsonl(Path(__file__).parent / "data" / "predict" / "cpu-zoo.jsonl")
KEPT = "benchmarks.harness.transfer_nets:vgg5x5"


def _item(phase: Phase, model: str, batch: int) -> PlanItem:
    config = StepConfig(
        model=model, input_size=32, batch=batch, amp=False, channels_last=False, pinned=False, workers=0
    )
    return PlanItem(phase=phase, config=config, estimate_s=1.0)


def test_each_kept_back_step_lands_once_among_the_batches_and_once_among_the_repeats() -> None:
    grid = [
        *(_item(Phase.COARSE, "resnet18", b) for b in (1, 4)),
        *(_item(Phase.BATCHES, "resnet18", b) for b in (2, 8, 16, 32)),
        *(_item(Phase.REPEATS, "resnet18", b) for b in (1, 2, 4, 8)),
    ]
    plan = Plan(items=tuple(grid), steps=3, warmup=1, repeats=3)
    extra = [
        NightItem(priority=Priority.SUBMITTED, subject=KEPT, item=_item(Phase.BATCHES, KEPT, b))
        for b in (2, 8)
    ]
    night = with_kept_back(plan, extra)
    items = [entry.item for entry in night.entries]
    assert [item for item in items if _model(item) == "resnet18"] == grid  # the grid's order kept
    assert Counter(item.config.batch for item in items if _model(item) == KEPT) == {2: 2, 8: 2}
    kept_at = [i for i, item in enumerate(items) if _model(item) == KEPT]
    first_repeat = next(i for i, item in enumerate(items) if item.phase is Phase.REPEATS)
    first_batches = next(i for i, item in enumerate(items) if item.phase is Phase.BATCHES)
    assert all(i > first_batches for i in kept_at)  # never among the coarse grid
    assert sum(i < first_repeat for i in kept_at) == 2  # one copy of each before the repeats
    assert night.grid_items == len(grid) and night.machine is None


def _model(item: PlanItem) -> str:
    assert isinstance(item.config, StepConfig), "a step"
    return item.config.model


def _as(line: ResultLine, model: str) -> ResultLine:
    measured = line.measurement
    assert isinstance(measured, StepMeasurement), "a step line"
    config = measured.config.model_copy(update={"model": model})
    return line.model_copy(update={"measurement": measured.model_copy(update={"config": config})})


def test_the_split_keeps_the_zoo_without_the_kept_back_and_each_truth_alone(tmp_path: Path) -> None:
    steps = [line for line in FIXTURE if isinstance(line.measurement, StepMeasurement)]
    zoo_rows = len(steps)
    results = tmp_path / "pass.jsonl"
    lines = [*steps, *(_as(line, KEPT) for line in steps[:3])]
    results.write_text("".join(line.model_dump_json() + "\n" for line in lines), encoding="utf-8")
    table = introspect(KEPT, (3, 32, 32), {}, allow_factories=True)
    held = split(results, tmp_path / "work", [table])
    assert held == {KEPT: 3}
    zoo = Store.existing(tmp_path / "work" / "zoo.db")
    assert len(zoo.step_rows()) == zoo_rows and all(row.model != KEPT for row in zoo.step_rows())
    truth = sqlite3.connect(tmp_path / "work" / "truth" / f"{slug(KEPT)}-truth.db")
    assert truth.execute("select distinct model from step_measurements").fetchall() == [(KEPT,)]
    full = Store.existing(tmp_path / "work" / "full.db")
    assert len(full.step_rows()) == zoo_rows + 3
    # the architecture's table is recorded, for training to find
    recorded = sqlite3.connect(tmp_path / "work" / "full.db").execute("select count(*) from architectures")
    assert recorded.fetchone() == (1,)
