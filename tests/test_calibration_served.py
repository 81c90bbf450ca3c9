"""Calibration as predictions serve it: which correction a prediction takes (its architecture's, else its
machine's; a scaled one its partition's), and that no correction raises its confidence. On the CPU zoo
fixture's trained predictor (`tests/predict_support.py`), in a real SQLite store."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.bench.tables import zoo_table
from advisor.policy.schema import Confidence
from advisor.predict.calibration import ARCHITECTURE_JOBS, Outcome, fit_corrections
from advisor.predict.registry import machines, train_machine
from advisor.predict.service import Predictors, StepQuestion, predict
from advisor.store import Store

from . import predict_support
from .predict_support import T4

ingested = predict_support.ingested
"""The CPU zoo fixture, ingested once."""

RANK: dict[Confidence, int] = {"low": 0, "medium": 1, "high": 2}


def finished(key: str, architecture: str | None, ratio: float, count: int, first_id: int) -> list[Outcome]:
    """``count`` comparable jobs on ``key`` that each ran ``ratio`` times their prediction."""
    return [
        Outcome(
            job_id=first_id + i,
            partition="cpu",
            machine=key,
            state="COMPLETED",
            predicted_s=1000.0,
            predicted_p90_s=1200.0,
            actual_s=1000.0 * ratio,
            architecture=architecture,
        )
        for i in range(count)
    ]


@pytest.fixture(scope="module")
def trained(ingested: Path, tmp_path_factory: pytest.TempPathFactory) -> Predictors:
    """Trained once for the module (a few seconds): the tests only read it."""
    store = Store.open(ingested)
    (machine,) = machines(store)
    train_machine(store, machine, tmp_path_factory.mktemp("models"), zoo_table)
    return Predictors.load(store)


def test_a_prediction_takes_its_architectures_correction_where_enough_jobs_ran_else_the_machines(
    trained: Predictors,
) -> None:
    (machine,) = trained.models
    resnet, mobilenet = zoo_table("resnet18", 32), zoo_table("mobilenet_v2", 32)
    outcomes = finished(machine, resnet.architecture_hash, 2.0, ARCHITECTURE_JOBS, 0)
    outcomes += finished(machine, mobilenet.architecture_hash, 1.0, ARCHITECTURE_JOBS - 1, 100)
    fitted = fit_corrections(outcomes)
    predictors = Predictors(trained.fingerprints, trained.models, fitted)
    plain = Predictors(trained.fingerprints, trained.models, {})
    for table, expected in ((resnet, f"{machine}@{resnet.architecture_hash}"), (mobilenet, machine)):
        question = StepQuestion("cpu", table, 32, False, False)
        found, before = predict(predictors, question, []), predict(plain, question, [])
        assert found.calibration == pytest.approx(fitted[expected].factor), expected
        assert found.step_s == pytest.approx(before.step_s * fitted[expected].factor)
    assert fitted[f"{machine}@{resnet.architecture_hash}"].factor == pytest.approx(2 ** (10 / 20))
    assert fitted[machine].factor != pytest.approx(2 ** (10 / 20)), "the machine's mixes both"


def test_a_scaled_prediction_takes_its_partitions_correction_not_its_source_machines(
    trained: Predictors,
) -> None:
    (machine,) = trained.models
    question = StepQuestion("t4", zoo_table("resnet18", 32), 32, False, False)
    plain = predict(Predictors(trained.fingerprints, trained.models, {}), question, [T4])
    assert plain.calibration_key == "scaled:t4"
    on_source = fit_corrections(finished(machine, None, 1.5, 5, 0))
    assert predict(Predictors(trained.fingerprints, trained.models, on_source), question, [T4]) == plain
    own = fit_corrections(finished("scaled:t4", None, 1.5, 5, 0))
    found = predict(Predictors(trained.fingerprints, trained.models, own), question, [T4])
    assert found.step_s == pytest.approx(plain.step_s * own["scaled:t4"].factor)


@pytest.mark.parametrize("ratio", [0.3, 0.8, 1.25, 3.0])
def test_calibration_never_raises_a_confidence_and_a_flagged_one_lowers_it(
    trained: Predictors, ratio: float
) -> None:
    """Thirty jobs at 0.3x or 3x their prediction are beyond the bound with all agreeing: flagged, and the
    predictions a step less confident; 0.8x and 1.25x move them and keep the band's label."""
    (machine,) = trained.models
    fitted = fit_corrections(finished(machine, None, ratio, 30, 0))
    flagged = fitted[machine].beyond_bound
    assert flagged == (ratio in (0.3, 3.0))
    plain = Predictors(trained.fingerprints, trained.models, {})
    predictors = Predictors(trained.fingerprints, trained.models, fitted)
    labels = set()
    for name, batch, channels_last in (
        ("resnet18", 32, False),
        ("resnet18", 48, False),
        ("mobilenet_v2", 32, True),
    ):
        question = StepQuestion("cpu", zoo_table(name, 32), batch, False, channels_last)
        before, after = predict(plain, question, []), predict(predictors, question, [])
        labels.add(before.confidence)
        assert after.calibration == pytest.approx(fitted[machine].factor) != 1.0
        assert RANK[after.confidence] <= RANK[before.confidence], (name, batch)
        if flagged:
            assert RANK[after.confidence] == max(RANK[before.confidence] - 1, 0)
            assert after.note is not None and "beyond its bound" in after.note
        else:
            assert after.confidence == before.confidence and after.note == before.note
    assert labels - {"low"}, "some prediction had a label to lose"
