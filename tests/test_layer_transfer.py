"""`benchmarks/layer_transfer.py`: an architecture no zoo has, its layers measured by the product and priced
by the zoo database's layer fit."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from advisor.bench.results import read_jsonl
from advisor.records import LayerConfig, LayerMeasurement, ResultLine
from advisor.store import Store
from benchmarks.architecture_transfer import slug
from benchmarks.layer_transfer import main, paced_layers, priced_layers

from . import predict_support

ingested, store_file = predict_support.ingested, predict_support.store_file
FIRST_LAYER = next(
    line for line in read_jsonl(predict_support.FIXTURE) if isinstance(line.measurement, LayerMeasurement)
)


def _config() -> LayerConfig:
    measured = FIRST_LAYER.measurement
    assert isinstance(measured, LayerMeasurement)
    return measured.config


def _layer(ratio: float, run: str, batch: int = 2) -> ResultLine:
    measured = FIRST_LAYER.measurement
    assert isinstance(measured, LayerMeasurement)
    config = measured.config.model_copy(update={"batch": batch})
    update = {"config": config, "fits": True, "pace_ratio": ratio, "pace_s": 0.03, "median_s": ratio * 0.03}
    return FIRST_LAYER.model_copy(update={"run_id": run, "measurement": measured.model_copy(update=update)})


def test_a_layers_truth_is_its_median_ratio_at_the_zoos_pace() -> None:
    """Three runs of one layer, the stray one last: 0.6 x 0.05 s, not the last row's 2.0 x; against a zoo
    without a pace step, the median of the seconds."""
    store = Store.memory()
    store.ingest([_layer(0.5, "a"), _layer(0.6, "b"), _layer(2.0, "c"), _layer(0.2, "d", batch=8)])
    config = _config()
    found = paced_layers(store, 0.05)
    assert found == {
        config.model_copy(update={"batch": 2}): pytest.approx(0.03),
        config.model_copy(update={"batch": 8}): pytest.approx(0.01),
    }
    unpaced = paced_layers(store, None)
    assert unpaced[config.model_copy(update={"batch": 2})] == pytest.approx(0.6 * 0.03), "in seconds"


def test_a_layer_counts_as_often_as_the_step_runs_it() -> None:
    config = _config()
    other = config.model_copy(update={"batch": 64})
    (priced,) = priced_layers(Counter({config: 3, other: 1}), {config: 0.002}, {config: 0.001, other: 1.0})
    assert priced.measured_s == pytest.approx(0.006) and priced.predicted_s == pytest.approx(0.003)


def test_an_architectures_layers_are_measured_once_and_reported(
    store_file: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The product measures the encoder's layers at batch 2 into the work folder; a second run reads them."""
    work = tmp_path / "work"
    reference = "benchmarks.harness.transfer_nets:encoder"
    argv = ["--zoo", str(tmp_path / "advisor.db"), "--work", str(work), "--architectures", reference]
    assert main([*argv, "--batches", "2", "--layers", "1"]) == 0
    out = capsys.readouterr().out
    assert "encoder (6)" in out and "batch 2" in out and "%" in out
    db = work / f"{slug(reference)}-layers.db"
    rows = Store.open(db).layer_rows()
    assert {row.batch for row in rows} == {2} and len(rows) == 6
    assert main([*argv, "--batches", "2", "--reuse", "--seconds"]) == 0
    assert len(Store.open(db).layer_rows()) == 6, "read, not measured again"


def test_a_missing_zoo_database_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--zoo", str(tmp_path / "missing.db"), "--work", str(tmp_path)])
    assert "no advisor database at" in capsys.readouterr().err
