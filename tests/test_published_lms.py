"""`benchmarks/published_lms.py`: the published language models' steps planned among reference steps of the
CPU grid, and their truth put in a database's unit by those references."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from advisor.bench.architectures import measured_tables
from advisor.bench.results import read_jsonl
from advisor.bench.zoo import zoo_model
from advisor.predict.registry import step_samples
from advisor.records import ResultLine, StepConfig, StepMeasurement
from advisor.store import Store
from benchmarks.published_lms import PUBLISHED, REFERENCES, TOKENS, judge, night

FIXTURE = read_jsonl(Path(__file__).parent / "data" / "predict" / "cpu-zoo.jsonl")


def test_each_published_step_and_each_reference_is_planned_twice_at_a_size_its_model_is_built_at() -> None:
    steps = [entry.item.config for entry in night().entries]
    assert all(isinstance(config, StepConfig) for config in steps)
    keys = Counter((c.model, c.input_size, c.batch) for c in steps if isinstance(c, StepConfig))
    published = {(name, TOKENS, batch) for name, batches in PUBLISHED.items() for batch in batches}
    assert set(keys) == published | set(REFERENCES) and set(keys.values()) == {2}
    assert all(size in zoo_model(model).sizes for model, size, _ in keys)
    other = [entry.item.config for entry in night(seed=12).entries]
    assert steps != other and Counter(map(str, steps)) == Counter(map(str, other)), "seeded orders differ"


def _step(line: ResultLine, model: str, size: int, batch: int, seconds: float) -> ResultLine:
    measured = line.measurement
    assert isinstance(measured, StepMeasurement)
    config = measured.config.model_copy(update={"model": model, "input_size": size, "batch": batch})
    step = measured.model_copy(update={"config": config, "median_s": seconds, "pace_ratio": None})
    return line.model_copy(update={"measurement": step})


def test_a_published_step_is_read_in_the_databases_unit_through_the_reference_steps(tmp_path: Path) -> None:
    """The run's resnet18 at 8 and 32 took half the database's seconds: its t5-small step of 1 s is 2 s
    of the database's (the median of the references' ratios), whatever a pace step would say."""
    zoo = tmp_path / "zoo.db"
    Store.open(zoo).ingest(FIXTURE)
    store = Store.existing(zoo)
    samples = step_samples(store.step_rows(), measured_tables(store))
    seconds = {s.batch: s.seconds for s in samples if s.model == "resnet18"}
    line = FIXTURE[0]
    run = [
        *(_step(line, "resnet18", 32, batch, seconds[batch] / 2) for batch in (8, 32)),
        _step(line, "tiny_gpt2", TOKENS, 8, 5.0),  # a reference the database never measured: no unit
        _step(line, "t5-small", TOKENS, 1, 1.0),
    ]
    table, bands = judge(zoo, [_write(tmp_path / "run.jsonl", run)], [])
    assert "2 reference steps: x2.000" in str(table.title)
    model, batch, truth, by_pace = (next(iter(column.cells)) for column in table.columns[:4])
    assert (model, batch, truth, by_pace) == ("t5-small", "1", "2000", "-")
    # The served band beside the same truth: whether it holds it, read off its own cells.
    cells = {column.header: list(column.cells) for column in bands.columns}
    p10, p50, p90 = (float(cells[name][0]) for name in ("p10 ms", "p50 ms", "p90 ms"))
    held = "yes" if p10 <= 2000 <= p90 else ("under p10" if p10 > 2000 else "over p90")
    assert cells["measured ms"][0] == "2000" and p10 <= p50 <= p90 and cells["held"][0] == held
    assert cells["evidence"][0] == "zoo" and cells["confidence"][0] in ("high", "medium", "low")
    assert bands.caption == f"{int(held == 'yes')} of 1 inside p10-p90, {int(p90 >= 2000)} at or under p90"
    with pytest.raises(SystemExit, match="no reference step measured in both"):
        judge(zoo, [_write(tmp_path / "other.jsonl", run[2:])], [])


def _write(path: Path, lines: list[ResultLine]) -> Path:
    path.write_text("".join(line.model_dump_json() + "\n" for line in lines), encoding="utf-8")
    return path
