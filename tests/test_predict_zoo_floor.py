"""The floor `benchmarks/predict_zoo.py` prints beside its figures: each interior step against the line
through its model's measured neighbours, one series per model and input size."""

from __future__ import annotations

import pytest

from advisor.bench.tables import zoo_table
from advisor.predict.machine import StepSample
from benchmarks.predict_zoo import neighbour_errors


def _step(size: int, batch: int, seconds: float) -> StepSample:
    table = zoo_table("squeezenet1_1", size)
    return StepSample(table, "squeezenet1_1", batch, False, False, seconds, None)


def test_each_input_size_is_its_own_series() -> None:
    # At 32 px the time grows as the square root of the batch: batch 2 lies on the line through 1 and 4.
    small = [_step(32, batch, batch**0.5) for batch in (1, 2, 4)]
    # At 224 px only batch 2, ten times slower: in the same series it would stand where 32 px's batch 2 is.
    large = [_step(224, 2, 10 * 2**0.5)]
    for steps in ([*small, *large], [*large, *small]):
        assert neighbour_errors(steps) == {2: [pytest.approx(0.0, abs=1e-12)]}
