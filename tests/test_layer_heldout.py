"""`benchmarks/layer_heldout.py`: a model's own layers priced by a layer fit that never saw them."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.bench.tables import zoo_table
from advisor.ops import op_of
from advisor.ops.configs import dense_convolutions
from advisor.predict.features import layer_bytes, layer_flops, timed_layers
from advisor.predict.machine import LayerSample
from advisor.predict.registry import layer_samples, machines, step_samples
from advisor.records import LayerConfig
from advisor.store import Store
from benchmarks.layer_heldout import PricedLayer, by_batch, geometry, held_out_layers, main

from . import predict_support

ingested, store, store_file = predict_support.ingested, predict_support.store, predict_support.store_file


def _layer(batch: int) -> LayerConfig:
    (conv,) = dense_convolutions((3,), (16,), (8,), most=1024)
    return conv.model_copy(update={"batch": batch})


def test_a_batch_sizes_layers_are_summed_before_their_ratio() -> None:
    """At batch 2: 1 ms priced 2 and 3 ms priced 2 are (2 + 2) / (1 + 3) = 1.0, not the mean of 2.0 and
    0.67; at batch 8 one layer of 4 ms priced 3: 0.75."""
    priced = [
        PricedLayer(_layer(2), 0.001, 0.002),
        PricedLayer(_layer(2), 0.003, 0.002),
        PricedLayer(_layer(8), 0.004, 0.003),
    ]
    assert by_batch(priced) == pytest.approx({2: 1.0, 8: 0.75})


def test_a_models_own_layers_are_those_no_other_model_has_priced_by_a_fit_without_them(store: Store) -> None:
    """Layer times that follow one law in FLOPs and bytes: a fit without a model's own layers recovers the
    law from the others' and prices each of them within 10%; every layer it prices is the model's and no
    other model's."""
    (machine,) = machines(store)
    steps = step_samples(store.step_rows(machine), zoo_table)

    def law(config: LayerConfig) -> float:
        return 2e-5 + layer_flops(config) * 3e-11 + layer_bytes(config) * 4e-10

    layers = [LayerSample(s.config, law(s.config)) for s in layer_samples(store.layer_rows(machine))]

    def shapes(model: str) -> set[str]:
        return {geometry(c) for s in steps if s.model == model for c in timed_layers(s.table, 1, False)}

    models = sorted({s.model for s in steps})
    owned = {m: shapes(m) - set().union(*(shapes(o) for o in models if o != m)) for m in models}
    model = max(models, key=lambda m: len(owned[m]))
    priced = held_out_layers(machine, steps, layers, model)
    assert priced and {geometry(p.config) for p in priced} == owned[model]
    assert all(op_of(p.config).timed for p in priced)
    for layer in priced:
        assert layer.predicted_s == pytest.approx(layer.measured_s, rel=0.1)


def test_the_report_names_each_models_layers_and_batches(
    store_file: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (machine,) = machines(store_file)
    model = step_samples(store_file.step_rows(machine), zoo_table)[0].model
    assert main(["--db", str(tmp_path / "advisor.db"), "--models", model, "--layers", "2"]) == 0
    out = capsys.readouterr().out
    assert model in out and "batch 1" in out and "batch 128" in out
    assert "%" in out


def test_a_model_without_steps_or_a_missing_database_is_named(
    store_file: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "advisor.db"
    with pytest.raises(SystemExit) as exited:
        main(["--db", str(db), "--models", "no_such_net"])
    assert exited.value.code == 2
    assert f"--models: no steps of no_such_net in {db}" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--db", str(tmp_path / "missing.db")])
    assert "no advisor database at" in capsys.readouterr().err
