"""The blends `benchmarks/predict_zoo.py --compare` sets beside the step models: each held-out step's
weighted geometric mean of two models' predictions (the product's, `advisor.predict.blend`), the weight
fitted without the group held out."""

from __future__ import annotations

import pytest

from advisor.predict.evaluate import Point
from benchmarks.predict_zoo import fitted_blend, mix


def _point(model: str, predicted_s: float, measured_s: float = 2.0) -> Point:
    return Point(model=model, batch=8, measured_s=measured_s, predicted_s=predicted_s)


def test_half_and_half_is_the_geometric_mean_and_a_weight_of_one_is_the_first() -> None:
    assert mix(_point("a", 1.0), _point("a", 4.0), 0.5).predicted_s == pytest.approx(2.0)
    assert mix(_point("a", 1.0), _point("a", 4.0), 1.0).predicted_s == pytest.approx(1.0)


def test_two_different_steps_are_not_mixed() -> None:
    with pytest.raises(ValueError, match="mix pairs a at batch 8 with b at batch 8"):
        mix(_point("a", 1.0), _point("b", 1.0), 0.5)


def test_a_group_s_weight_is_fitted_on_the_other_groups_alone() -> None:
    # The first model is exact on a and c, the second on b: held out, b gets the others' weight (all first).
    first = [_point("a", 2.0), _point("b", 8.0), _point("c", 2.0)]
    second = [_point("a", 8.0), _point("b", 2.0), _point("c", 8.0)]
    mixed = {p.model: p.predicted_s for p in fitted_blend(first, second, lambda p: p.model)}
    assert mixed == {"a": pytest.approx(4.0), "b": pytest.approx(8.0), "c": pytest.approx(4.0)}
