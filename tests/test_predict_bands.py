"""Bands by evidence class and the confidence they earn, on real CPU measurements of five zoo models
(`tests/data/predict/cpu-zoo.jsonl`, as in test_predict_train)."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from math import exp, log
from pathlib import Path

import pytest

from advisor.bench.tables import zoo_table
from advisor.cli import main as cli
from advisor.machines import labelled, machine_names
from advisor.predict.bands import (
    ClassBand,
    class_bands,
    confidence_of,
    conformal_quantile,
)
from advisor.predict.heldout import fit_with_bands, heldout_residuals, without_models
from advisor.predict.machine import MachineModel, StepSample
from advisor.predict.registry import layer_samples, machines, step_samples, train_machine
from advisor.predict.service import Predictors, StepQuestion, predict
from advisor.predict.types import Evidence
from advisor.store import ModelRegistry, Store

from . import predict_support
from .predict_support import T4

ingested, store, store_file = predict_support.ingested, predict_support.store, predict_support.store_file
"""The CPU zoo fixture, a store per test."""


def test_a_conformal_quantile_is_the_ceil_n_plus_one_q_th_smallest() -> None:
    residuals = [0.01 * i for i in range(1, 21)]
    random.Random(4).shuffle(residuals)
    # n = 20: ranks ceil(21 * 0.1) = 3, ceil(21 * 0.5) = 11, ceil(21 * 0.9) = 19.
    assert conformal_quantile(residuals, 0.1) == pytest.approx(0.03)
    assert conformal_quantile(residuals, 0.5) == pytest.approx(0.11)
    assert conformal_quantile(residuals, 0.9) == pytest.approx(0.19)
    # Five residuals: rank ceil(6 * 0.9) = 6 lies past them, so the largest.
    assert conformal_quantile([0.5, -0.1, 0.3, 0.0, 0.2], 0.9) == 0.5
    assert conformal_quantile([0.5, -0.1, 0.3, 0.0, 0.2], 0.5) == 0.2


def test_confidence_labels_follow_the_cuts_and_a_wide_band_is_never_high() -> None:
    assert [confidence_of(w) for w in (1.0, 1.25, 1.26, 1.6, 1.61, 12.0)] == [
        "high",
        "high",
        "medium",
        "medium",
        "low",
        "low",
    ]
    wide = ClassBand(evidence="measured", p10=-0.1, p50=0.0, p90=log(12), samples=50, source="measured")
    assert wide.confidence == "low"
    shifted = ClassBand(evidence="zoo", p10=0.9, p50=1.0, p90=1.2, samples=50, source="zoo")
    assert shifted.confidence == "high", "a band far from the point but narrow is read by its width"


def test_a_class_with_few_samples_borrows_the_next_wider_band_recentred_and_says_so() -> None:
    residuals: dict[Evidence, list[float]] = {
        "measured": [0.01, -0.01, 0.02],
        "interpolated": [0.1 + 0.01 * i for i in range(25)],
        "layers": [0.3 * (i - 10) / 10 for i in range(21)],
        "zoo": [0.5 * (i - 15) / 15 for i in range(30)],
    }
    bands = {b.evidence: b for b in class_bands(residuals)}
    measured, interpolated = bands["measured"], bands["interpolated"]
    assert (measured.source, measured.samples) == ("interpolated", 3)
    assert measured.p50 == 0.0, "the wider class's bias belongs to its own predictions"
    assert measured.p90 - measured.p50 == pytest.approx(interpolated.p90 - interpolated.p50)
    assert interpolated.source == "interpolated" and interpolated.p50 == pytest.approx(0.1 + 0.01 * 12)
    note = measured.note("gpu-a")
    assert note is not None and "borrowed from interpolated" in note and "only 3 held-out samples" in note
    assert interpolated.note("gpu-a") is None
    few = {b.evidence: b for b in class_bands({"measured": [0.0] * 3, "zoo": [0.1, 0.2]})}
    assert few["layers"].source == "zoo" and "only 0 held-out samples" in (few["layers"].note("m") or "")
    assert few["zoo"].source == "zoo" and "band from only 2" in (few["zoo"].note("m") or "")


def _bands(widths: dict[Evidence, float]) -> tuple[ClassBand, ...]:
    return tuple(
        ClassBand(evidence=e, p10=-0.1, p50=0.05, p90=0.05 + log(w), samples=40, source=e)
        for e, w in widths.items()
    )


def test_a_prediction_of_each_class_gets_its_class_band(store: Store, tmp_path: Path) -> None:
    (machine,) = machines(store)
    train_machine(store, machine, tmp_path / "models", zoo_table)
    widths: dict[Evidence, float] = {"measured": 1.1, "interpolated": 1.3, "layers": 1.5, "zoo": 2.0}
    trained = Predictors.load(store)
    model, version = trained.models[machine]
    banded = model.model_copy(update={"bands": _bands(widths)})
    predictors = Predictors(trained.fingerprints, {machine: (banded, version)}, {})
    resnet = zoo_table("resnet18", 32)
    questions: dict[Evidence, StepQuestion] = {
        "measured": StepQuestion("cpu", resnet, 32, False, False),
        "interpolated": StepQuestion("cpu", resnet, 48, False, False),
        "layers": StepQuestion("cpu", resnet, 32, False, True),
        "zoo": StepQuestion("cpu", zoo_table("mobilenet_v2", 32), 32, False, False),
    }
    expected = {"measured": "high", "interpolated": "medium", "layers": "medium", "zoo": "low"}
    for evidence, question in questions.items():
        found = predict(predictors, question, [T4])
        point = model.model_copy(update={"bands": ()}).predict(
            question.table, question.batch, question.amp, question.channels_last
        )
        assert found.evidence == evidence and found.confidence == expected[evidence], evidence
        assert found.step_p90_s / found.step_s == pytest.approx(widths[evidence])
        assert found.step_s == pytest.approx(point.step_s * exp(0.05))
        assert found.step_p10_s == pytest.approx(point.step_s * exp(-0.1))
        assert found.note is None
    scaled = predict(predictors, StepQuestion("t4", resnet, 32, False, False), [T4])
    assert (scaled.evidence, scaled.confidence, scaled.scaled_from) == ("scaled", "low", machine)
    assert scaled.step_p90_s / scaled.step_s == pytest.approx(widths["measured"])


def test_trained_bands_come_from_each_class_and_the_measured_class_borrows_without_repeats(
    store: Store, tmp_path: Path
) -> None:
    """One run per configuration in the fixture: no repeat to hold a measured configuration out from."""
    (machine,) = machines(store)
    train_machine(store, machine, tmp_path / "models", zoo_table)
    model, _ = Predictors.load(store).models[machine]
    bands = {b.evidence: b for b in model.bands}
    assert set(bands) == {"measured", "interpolated", "layers", "zoo"}
    assert bands["measured"].samples == 0 and bands["measured"].source == "interpolated"
    assert all(bands[e].samples >= 20 and bands[e].source == e for e in ("interpolated", "layers", "zoo"))
    found = predict(
        Predictors.load(store), StepQuestion("cpu", zoo_table("resnet18", 32), 32, False, False), []
    )
    assert found.evidence == "measured" and found.confidence == bands["measured"].confidence
    assert found.note is not None and "band borrowed from interpolated" in found.note


def test_repeated_runs_give_the_measured_class_its_own_band(store: Store) -> None:
    (machine,) = machines(store)
    steps = step_samples(store.step_rows(machine), zoo_table)
    noise = random.Random(7)
    repeated = [
        replace(s, runs=tuple(s.seconds * exp(noise.gauss(0, 0.02)) for _ in range(3))) for s in steps
    ]
    model = fit_with_bands(machine, repeated, layer_samples(store.layer_rows(machine)), folds=5)
    measured = model.band("measured")
    assert measured.source == "measured" and measured.samples == 3 * len(steps)
    assert measured.confidence == "high" and measured.width < model.band("zoo").width


def test_a_version_from_before_bands_gets_the_machine_wide_band_labelled_by_the_same_cuts(
    store_file: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (machine,) = machines(store_file)
    trained = train_machine(store_file, machine, tmp_path / "models", zoo_table)
    old = json.loads(trained.path.read_text())
    del old["bands"]
    old["p90_log_ratio"] = log(12.0)
    model = MachineModel.model_validate(old)
    table = zoo_table("resnet18", 32)
    found = model.predict(table, 32, False, False)
    assert found.band.evidence == "measured" and found.band.source == "machine"
    assert found.band.confidence == "low" and found.step_p90_s / found.step_s == pytest.approx(12.0)
    assert "retrain for bands by evidence" in (found.band.note(machine) or "")
    # The registry's own file rewritten as a version from before bands: `models list` says so.
    from advisor.predict.model_files import write_version_file

    sha = write_version_file(trained.path, json.dumps(old))
    store_file.db.execute("UPDATE model_versions SET sha256 = ? WHERE machine = ?", [sha, machine])
    store_file.db.commit()
    served = predict(Predictors.load(store_file), StepQuestion("cpu", table, 32, False, False), [])
    assert served.confidence == "low" and "retrain for bands by evidence" in (served.note or "")
    assert cli(["models", "list", "--db", str(tmp_path / "advisor.db")]) == 0
    named = labelled(machine, machine_names(store_file.fingerprints()))
    assert f"{named} version {trained.version}: one band for every prediction" in capsys.readouterr().out
    assert ModelRegistry(store_file).active(machine) is not None


def test_a_machine_with_large_held_out_error_gives_no_high_prediction(store: Store) -> None:
    """As the demo's t4 (held-out MAPE 105%): every model's steps strayed at random by batch size, so no
    class predicts well, and no prediction may say high."""
    (machine,) = machines(store)
    noise = random.Random(11)
    steps: list[StepSample] = [
        replace(s, seconds=s.seconds * exp(noise.gauss(0, 0.6)))
        for s in step_samples(store.step_rows(machine), zoo_table)
    ]
    model = fit_with_bands(machine, steps, layer_samples(store.layer_rows(machine)), folds=5)
    assert model.heldout_mape is not None and model.heldout_mape > 0.4
    for name in ("resnet18", "mobilenet_v3_small", "mobilenet_v2", "squeezenet1_1"):
        for batch in (1, 8, 32, 48):
            for channels_last in (False, True):
                found = model.predict(zoo_table(name, 32), batch, False, channels_last)
                assert found.band.confidence != "high", (name, batch, found.band)
                assert found.step_p90_s / found.step_s > 1.25


def test_a_fold_whose_models_own_every_measured_layer_leaves_them_out_of_the_zoo_class(store: Store) -> None:
    """`advisor bench submit --quick` (the demo's) measures one model's layers: held out, the others have
    none, and there is no zoo for it to be priced from. Before: training stopped on an empty least squares."""
    (machine,) = machines(store)
    steps = step_samples(store.step_rows(machine), zoo_table)
    layers = layer_samples(store.layer_rows(machine))
    owner = sorted({s.model for s in steps})[0]
    kept = set(without_models(steps, layers, {owner}))
    only_its_own = [s for s in layers if s not in kept]
    assert only_its_own and without_models(steps, only_its_own, {owner}) == []
    model = fit_with_bands(machine, steps, only_its_own, folds=5)
    residuals = heldout_residuals(model, steps, only_its_own, 5)
    assert not any(r.model == owner and r.evidence == "zoo" for r in residuals)
    assert any(r.model == owner and r.evidence == "layers" for r in residuals)
    assert model.band("zoo").samples == sum(r.evidence == "zoo" for r in residuals)
