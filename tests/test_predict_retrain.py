"""The retraining use case (`advisor/predict/retrain.py`) that `advisor models train` and the daemon share."""

from __future__ import annotations

from pathlib import Path

from advisor.bench.results import read_jsonl
from advisor.predict.machine import NotEnoughDataError
from advisor.predict.registry import active_models, machines
from advisor.predict.retrain import retrain_all
from advisor.records import StepMeasurement
from advisor.store import Store

from . import predict_support
from .predict_support import FIXTURE

ingested, store = predict_support.ingested, predict_support.store


def test_every_machine_is_retrained_and_one_without_enough_data_keeps_no_other_from_its_version(
    store: Store, tmp_path: Path
) -> None:
    (measured,) = machines(store)
    one_step = next(line for line in read_jsonl(FIXTURE) if isinstance(line.measurement, StepMeasurement))
    elsewhere = one_step.fingerprint.model_copy(update={"cpu_model": "another CPU", "node": "elsewhere-1"})
    store.ingest([one_step.model_copy(update={"fingerprint": elsewhere})])
    (lacking,) = set(machines(store)) - {measured}

    outcomes = {outcome.machine: outcome for outcome in retrain_all(store, tmp_path / "models", None)}
    assert sorted(outcomes) == sorted([measured, lacking]), "each machine once"
    trained = outcomes[measured].trained
    assert trained is not None and trained.activated and outcomes[measured].error is None
    assert outcomes[lacking].trained is None and isinstance(outcomes[lacking].error, NotEnoughDataError)
    assert set(active_models(store)) == {measured}, "the machine that lacks data has no version"
