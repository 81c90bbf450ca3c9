"""A measurement's pace step judged by its neighbours in the run (pure; hand-made sequences)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from advisor.bench.neighbours import NEIGHBOURS, STRAY, Neighbours, held_pace, neighbours_pace
from advisor.bench.results import read_jsonl
from advisor.records import LayerConfig, LayerMeasurement, ResultLine

FINGERPRINT = read_jsonl(Path(__file__).parent / "data" / "predict" / "cpu-zoo.jsonl")[0].fingerprint


def linear(width: int) -> LayerConfig:
    return LayerConfig(
        op="linear", in_channels=width, out_channels=width, kernel=(1, 1), stride=(1, 1), padding=(0, 0),
        dilation=(1, 1), groups=1, height=1, width=1, batch=8, amp=False, cudnn_benchmark=True,
    )  # fmt: skip


def test_a_pace_step_that_strays_alone_is_replaced_by_its_neighbours_and_a_drift_is_kept() -> None:
    """Run 6's batch-8 steps: 45 ms pace steps among 30 ms ones; a CPU slowing down moves them all."""
    strays = [0.030, 0.031, 0.045, 0.029, 0.030]
    assert NEIGHBOURS == 2 and neighbours_pace(strays, 2) == pytest.approx(0.0300, abs=1e-4)
    assert held_pace(strays[2], neighbours_pace(strays, 2)) == pytest.approx(0.0300, abs=1e-4)
    assert held_pace(0.020, 0.030) == 0.030, "too fast alone is replaced too"
    assert held_pace(0.030 * STRAY, 0.030) == 0.030 * STRAY and held_pace(0.0275, 0.030) == 0.0275, "its own"
    drift = [0.030 * 1.025**i for i in range(8)]  # 19% slower from first to last
    assert all(held_pace(pace, neighbours_pace(drift, i)) == pace for i, pace in enumerate(drift))
    assert neighbours_pace([0.030], 0) is None and held_pace(0.030, None) == 0.030, "alone in its run"
    assert neighbours_pace(strays, 0) == pytest.approx(0.0305), "the first: the four after it"
    assert neighbours_pace(strays, 4) == pytest.approx(0.0305), "the last: the four before it"


def _line(width: int, pace_s: float | None, ratio: float = 2.0) -> ResultLine:
    return ResultLine(
        run_id="run",
        fingerprint=FINGERPRINT,
        measured_at=datetime(2026, 12, 5, 11, tzinfo=UTC) + timedelta(seconds=width),
        measurement=LayerMeasurement(
            config=linear(width),
            median_s=ratio * (pace_s or 0.03),
            fits=pace_s is not None,
            pace_ratio=ratio if pace_s else None,
            pace_s=pace_s,
        ),
    )


def test_each_result_waits_for_the_measurements_after_it_and_a_stray_leaves_with_its_ratio_scaled() -> None:
    written: list[ResultLine] = []
    held = Neighbours(written.append)
    sequence = [(1, 0.030), (2, 0.031), (3, 0.045), (4, None), (5, 0.029), (6, 0.030)]
    seen = []
    for width, pace in sequence:
        held.add(_line(width, pace))
        seen.append([line.measurement.config.in_channels for line in written])
    # A paced line leaves once its four neighbours are in; one that did not fit, in its place in the order.
    assert seen == [[], [], [], [], [], [1, 2, 3, 4]]
    held.write(ended=True)
    assert [line.measurement.config.in_channels for line in written] == [1, 2, 3, 4, 5, 6]
    stray = written[2].measurement
    assert stray.pace_s == pytest.approx(0.030), "the median of its neighbours, 30, 31, 29, 30 ms"
    assert stray.pace_ratio == pytest.approx(2.0 * 0.045 / 0.030)
    assert stray.median_s == pytest.approx(2.0 * 0.045), "what was measured stays as it was"
    assert [line for i, line in enumerate(written) if i != 2] == [
        _line(w, p) for w, p in sequence if w != 3
    ], "the others as measured"
