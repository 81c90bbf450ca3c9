"""A machine's pace is its runs' over the time they measured: a short first sight in a slow spell of a shared
CPU, however many rows it writes, does not move every prediction of the machine."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from advisor.bench.results import read_jsonl
from advisor.ops import configs as op_configs
from advisor.predict.registry import PACE_BAND, layer_samples, machine_pace
from advisor.records import LayerConfig, LayerMeasurement, ResultLine
from advisor.store import LayerMeasurementRow, Store

FINGERPRINT = read_jsonl(Path(__file__).parent / "data" / "predict" / "cpu-zoo.jsonl")[0].fingerprint
T0 = datetime(2026, 12, 5, 2, 9, tzinfo=UTC)


def _linear(width: int) -> LayerConfig:
    return LayerConfig(
        op="linear", in_channels=width, out_channels=width, kernel=(1, 1), stride=(1, 1), padding=(0, 0),
        dilation=(1, 1), groups=1, height=1, width=1, batch=8, amp=False, cudnn_benchmark=True,
    )  # fmt: skip


def _run(run_id: str, widths: range, pace_s: float, span: timedelta) -> list[ResultLine]:
    """One run's layers, each at ratio width / 100 to a pace step of ``pace_s``, spread over ``span``."""
    step = span / len(widths)
    return [
        ResultLine(
            run_id=run_id,
            fingerprint=FINGERPRINT,
            measured_at=T0 + index * step,
            measurement=LayerMeasurement(
                config=_linear(width),
                median_s=pace_s * width / 100,
                fits=True,
                pace_ratio=width / 100,
                pace_s=pace_s,
            ),
        )
        for index, width in enumerate(widths)
    ]


def test_a_short_first_sight_in_a_slow_spell_leaves_the_machines_pace(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "advisor.db")
    grid = _run("night", range(10, 50), 0.030, timedelta(minutes=20))
    store.ingest(grid)
    machine = FINGERPRINT.machine()
    alone = {sample.config: sample.seconds for sample in layer_samples(store.layer_rows(machine))}
    # Forty rows in three minutes while the pace step took four times as long.
    store.ingest(_run("first-sight", range(60, 100), 0.120, timedelta(minutes=3)))
    rows = store.layer_rows(machine)
    assert machine_pace(rows) == 0.030
    after = {sample.config: sample.seconds for sample in layer_samples(rows)}
    for config, seconds in alone.items():
        assert abs(after[config] / seconds - 1) < 1e-9, config
    assert abs(after[_linear(60)] - 0.030 * 0.60) < 1e-9, "its own rows at the machine's pace"


def test_runs_of_equal_length_share_the_pace_by_their_time() -> None:
    rows = [
        *(_row("a", 0.03, minute) for minute in range(10)),
        *(_row("b", 0.05, minute) for minute in range(0, 30, 3)),
    ]
    assert machine_pace(rows) == 0.05, "b measured 27 minutes, a 9"
    assert machine_pace([]) == 0.0


def _row(run_id: str, pace_s: float, minute: int) -> LayerMeasurementRow:
    line = _run(run_id, range(10, 11), pace_s, timedelta(minutes=1))[0]
    line = line.model_copy(update={"measured_at": T0 + timedelta(minutes=minute)})
    assert isinstance(line.measurement, LayerMeasurement)
    return LayerMeasurementRow.of(line, line.measurement)


def test_a_pace_step_that_strays_from_its_runs_is_held_within_the_band(tmp_path: Path) -> None:
    """Width 60's pace steps took four times the run's (its step ran at its usual 18 ms): its ratio is read
    at the band's edge, not at a quarter of its time; width 70's, 5% slow, is within the band and kept."""
    lines = _run("night", range(10, 50), 0.030, timedelta(minutes=20))
    lines += [_line("night", 60, 0.018, 0.120), _line("night", 70, 0.021, 0.0315)]
    store = Store.open(tmp_path / "advisor.db")
    store.ingest(lines)
    seconds = {s.config: s.seconds for s in layer_samples(store.layer_rows(FINGERPRINT.machine()))}
    assert seconds[_linear(60)] == pytest.approx(0.018 / PACE_BAND)
    assert seconds[_linear(70)] == pytest.approx(0.021 / 1.05)
    assert seconds[_linear(30)] == pytest.approx(0.030 * 0.30)


def _line(
    run_id: str, width: int, step_s: float, pace_s: float, config: LayerConfig | None = None
) -> ResultLine:
    measurement = LayerMeasurement(
        config=config or _linear(width), median_s=step_s, fits=True, pace_ratio=step_s / pace_s, pace_s=pace_s
    )
    return ResultLine(run_id=run_id, fingerprint=FINGERPRINT, measured_at=T0, measurement=measurement)


def test_an_update_measured_at_four_places_is_not_priced_by_the_one_in_a_slow_spell(tmp_path: Path) -> None:
    """A night measures each update configuration at four places (`Sweeps.update_places`): one of them in a
    slow spell, 1.4 times as long at a pace step held within the band, is left out by the interquartile
    mean; measured only there, it would price every optimizer step 1.4 times too slow."""
    update = op_configs.update("sgd_momentum", 4**10, 64)
    grid = _run("night", range(10, 50), 0.030, timedelta(minutes=20))
    places = [(0.0040, 0.030), (0.0041, 0.030), (0.0057, 0.033), (0.0039, 0.030)]
    for name, rows in (("four", places), ("slow", places[2:3])):
        lines = grid + [_line("night", 0, step_s, pace_s, update) for step_s, pace_s in rows]
        store = Store.open(tmp_path / f"{name}.db")
        store.ingest(lines)
        seconds = {s.config: s.seconds for s in layer_samples(store.layer_rows(FINGERPRINT.machine()))}
        expected = {"four": (0.0040 + 0.0041) / 2, "slow": 0.0057 / 1.1}[name]
        assert seconds[update] == pytest.approx(expected, rel=0.01), name


def test_a_pass_cut_to_one_place_keeps_the_first_or_the_slowest_and_every_other_row() -> None:
    """`benchmarks.update_places`: how the places' worth is judged on a pass (benchmarks/README.md)."""
    from benchmarks.update_places import one_place

    update = op_configs.update("adam", 4**10, 64)
    grid = _run("night", range(10, 13), 0.030, timedelta(minutes=3))
    places = [_line("night", 0, step_s, 0.030, update) for step_s in (0.0040, 0.0057, 0.0041)]
    lines = [grid[0], places[0], grid[1], places[1], grid[2], places[2]]
    assert one_place(lines, "first") == [grid[0], places[0], grid[1], grid[2]]
    assert one_place(lines, "slowest") == [grid[0], grid[1], places[1], grid[2]]
