"""The served step time: today's step model and the op sum blended (`advisor.predict.blend`), fitted by
`advisor models train`, kept in the model file, loaded and banded as served; hand-checked cases and the CPU
zoo fixture (`tests/data/predict/cpu-zoo.jsonl`), whose own fits weigh today's alone (weight 1): where a
test needs a blend, it sets the weight's choice to one half."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from math import exp, log, sqrt
from pathlib import Path
from statistics import mean

import pytest

from advisor.bench.tables import zoo_table
from advisor.predict import heldout
from advisor.predict.bands import class_bands
from advisor.predict.blend import PairedStep, best_weight, opsum_of, weighted
from advisor.predict.boosters import booster_width
from advisor.predict.heldout import by_class, fit_with_bands, heldout_residuals
from advisor.predict.layout import current_layout
from advisor.predict.machine import LayerSample, MachineModel, NotEnoughDataError, StepSample, fit_machine
from advisor.predict.opsum import fit_opsum, step_terms
from advisor.predict.registry import active_models, layer_samples, machines, step_samples, train_machine
from advisor.store import Store

from . import predict_support

ingested, store = predict_support.ingested, predict_support.store
"""The CPU zoo fixture, a store per test."""
QUESTIONS = (("resnet18", 8), ("resnet18", 48), ("resnet50", 16), ("vgg11_bn", 4))
"""Measured at that batch, measured at others (interpolated), never measured whole (zoo), and one more."""


def _half(_steps: Sequence[PairedStep]) -> float:
    return 0.5


def _samples(store: Store) -> tuple[str, list[StepSample], list[LayerSample]]:
    (machine,) = machines(store)
    return (
        machine,
        step_samples(store.step_rows(machine), zoo_table),
        layer_samples(store.layer_rows(machine)),
    )


@pytest.fixture(scope="module")
def blended(ingested: Path) -> Iterator[tuple[MachineModel, list[StepSample], list[LayerSample]]]:
    """The fixture's served model, its weight set to one half, fitted once for the module."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(heldout, "best_weight", _half)
        machine, steps, layers = _samples(Store.existing(ingested))
        yield fit_with_bands(machine, steps, layers, folds=5), steps, layers


def test_the_blend_is_the_weighted_geometric_mean_and_weight_one_is_todays_exactly() -> None:
    assert weighted(1.0, 4.0, 0.5) == pytest.approx(2.0)
    assert weighted(8.0, 1.0, 2 / 3) == pytest.approx(4.0)  # 8 ** (2/3) * 1 ** (1/3)
    assert weighted(0.3, 7.0, 0.0) == pytest.approx(7.0)
    assert weighted(0.3, 7.0, 1.0) == 0.3


def test_the_weight_is_the_twentieth_whose_blend_fits_the_held_out_steps_best() -> None:
    assert best_weight([PairedStep(2.0, 2.0, 8.0), PairedStep(1.0, 1.0, 0.5)]) == 1.0, "today's exact"
    assert best_weight([PairedStep(2.0, 8.0, 2.0), PairedStep(1.0, 0.5, 1.0)]) == 0.0, "the op sum exact"
    # Twice too slow and half too fast: their geometric mean is exact.
    assert best_weight([PairedStep(2.0, 4.0, 1.0)]) == 0.5
    # 8x too slow and 2x too fast: w * log 8 = (1 - w) * log 2 at w = 1/4, five twentieths.
    assert best_weight([PairedStep(1.0, 8.0, 0.5)]) == 0.25
    # Halfway wrong both ways on two steps, one each: half and half errs least.
    assert best_weight([PairedStep(2.0, 4.0, 2.0), PairedStep(2.0, 2.0, 4.0)]) == 0.5


def test_the_fixtures_own_fit_keeps_an_op_sum_whose_booster_reads_the_layouts_columns(
    store: Store,
) -> None:
    machine, steps, layers = _samples(store)
    model = heldout.fit_served(machine, steps, layers, folds=5)
    assert model.op_sum is not None and model.blend_weight == 1.0, "the op sum errs more on these 5 models"
    assert model.layout == current_layout()
    assert booster_width(model.op_sum.booster) == len(current_layout().op_sum)


def test_a_trained_file_round_trips_and_predicts_the_blend_of_todays_and_the_op_sums_fit(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loaded from its file, the model predicts each step as the geometric mean of today's point and the
    op sum fitted apart on the same samples (its layer part is today's, so it is not stored twice)."""
    monkeypatch.setattr(heldout, "best_weight", _half)
    machine, steps, layers = _samples(store)
    trained = train_machine(store, machine, tmp_path / "models", zoo_table)
    loaded, _version = active_models(store)[machine]
    assert loaded.blend_weight == 0.5 and loaded.op_sum is not None
    assert MachineModel.model_validate_json(trained.path.read_text()) == loaded
    assert "layers" not in json.loads(trained.path.read_text())["op_sum"]
    apart = fit_opsum(machine, steps, layers)
    today = loaded.model_copy(update={"blend_weight": 1.0})
    for name, batch in QUESTIONS:
        table = zoo_table(name, 32)
        found, alone = loaded.predict(table, batch, False, False), today.predict(table, batch, False, False)
        assert found.band == alone.band
        point = sqrt(alone.step_s / exp(alone.band.p50) * apart.step_seconds(table, batch, False, False))
        assert found.step_s == pytest.approx(point * exp(found.band.p50), rel=1e-9), (name, batch)
        assert found.step_p90_s / found.step_s == pytest.approx(exp(found.band.p90 - found.band.p50))
        assert abs(found.step_s / alone.step_s - 1) > 1e-3, "the op sum moves it"


def test_a_model_without_an_op_sum_predicts_exactly_todays(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    def too_few(*_args: object) -> object:
        raise NotEnoughDataError("too few")

    monkeypatch.setattr(heldout, "opsum_on", too_few)
    machine, steps, layers = _samples(store)
    model = fit_with_bands(machine, steps, layers, folds=5)
    assert model.op_sum is None and model.blend_weight == 1.0
    today = fit_machine(machine, steps, layers).model_copy(update={"bands": model.bands})
    before = model.model_dump(mode="json")
    del before["op_sum"], before["blend_weight"]  # a file written before the blend
    older = MachineModel.model_validate(before)
    for name, batch in QUESTIONS:
        table = zoo_table(name, 32)
        expected = today.predict(table, batch, False, False)
        assert model.predict(table, batch, False, False) == expected
        assert older.predict(table, batch, False, False) == expected
        assert model.parts(table, batch, False, False) == today.parts(table, batch, False, False)


def test_the_bands_and_the_gates_figure_are_the_blends_held_out_residuals(
    blended: tuple[MachineModel, list[StepSample], list[LayerSample]],
) -> None:
    model, steps, layers = blended
    terms = step_terms(model, steps)
    held = [
        h
        for h in heldout.fold_steps(model, steps, layers, 5, bands=True, terms=terms)
        if h.evidence == "layers"
    ]
    mixed = [log(steps[h.index].seconds) - log(sqrt(h.today_s * (h.op_sum_s or 0.0))) for h in held]
    alone = [log(steps[h.index].seconds) - log(h.today_s) for h in held]
    assert mean(abs(m - a) for m, a in zip(mixed, alone, strict=True)) > 0.02, "the two differ"
    assert model.heldout_mape == pytest.approx(mean(abs(exp(-r) - 1.0) for r in mixed))
    residuals = heldout_residuals(model, steps, layers, 5)
    assert sorted(r.value for r in residuals if r.evidence == "layers") == pytest.approx(sorted(mixed))
    assert model.bands == class_bands(by_class(residuals))
    today = heldout_residuals(model.model_copy(update={"blend_weight": 1.0}), steps, layers, 5)
    assert {b.evidence: b for b in class_bands(by_class(today))}["layers"] != model.band("layers")


def test_a_blended_models_split_is_the_op_sums_scaled_to_the_served_step(
    blended: tuple[MachineModel, list[StepSample], list[LayerSample]],
) -> None:
    model, _steps, _layers = blended
    op_sum = opsum_of(model)
    assert op_sum is not None
    table = zoo_table("resnet50", 32)
    parts, summed = model.parts(table, 16, False, False), op_sum.parts(table, 16, False, False)
    total = model.predict(table, 16, False, False).step_s
    assert sum(parts.values()) == pytest.approx(total)
    assert parts == pytest.approx({p: s * total / sum(summed.values()) for p, s in summed.items()})
    today = model.model_copy(update={"blend_weight": 1.0}).parts(table, 16, False, False)
    assert today != pytest.approx({p: s * sum(today.values()) / total for p, s in parts.items()})
