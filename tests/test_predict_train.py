"""Training, registry and prediction on real CPU measurements of five small zoo models.

``tests/data/predict/cpu-zoo.jsonl`` holds the lines of one ``benchmarks/predict_zoo.py`` run on a shared
2-core x86 VM (one thread) for five models: their steps (32x32, batches 1-128) and the micro-benchmarks of
their layer geometries (batches 1, 16, 128). Measuring them here would take minutes.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from math import exp
from pathlib import Path

import pytest
from rich.console import Console

from advisor.bench.results import read_jsonl
from advisor.bench.sweeps import CPU_SWEEPS, bandwidth_configs
from advisor.bench.tables import zoo_table
from advisor.cli import main as cli
from advisor.ops import KernelPath, op_of
from advisor.predict import evaluate
from advisor.predict.cli import add_commands
from advisor.predict.evaluate import leave_one_model_out, unseen_batches
from advisor.predict.features import kernel_path, layer_bytes, layer_flops, timed_layers
from advisor.predict.machine import LayerSample, MachineModel, StepSample, fit_layers, fit_machine
from advisor.predict.registry import (
    active_models,
    layer_samples,
    machines,
    passes_gate,
    step_samples,
    train_machine,
)
from advisor.predict.service import Predictors, StepQuestion, predict
from advisor.records import LayerConfig, LayerMeasurement, ResultLine, StepMeasurement, StepPart
from advisor.settings import load_settings
from advisor.store import AdvisedJobRow, AdvisedJobs, LayerMeasurementRow, ModelRegistry, Store

from . import predict_support
from .predict_support import FIXTURE, T4

ingested, store, store_file = predict_support.ingested, predict_support.store, predict_support.store_file
"""The CPU zoo fixture, a store per test."""


def test_a_left_out_model_is_predicted_within_a_loose_bound(store: Store) -> None:
    (machine,) = machines(store)
    steps = step_samples(store.step_rows(machine), zoo_table)
    points = leave_one_model_out(machine, steps, layer_samples(store.layer_rows(machine)))
    assert {p.model for p in points} == {s.model for s in steps}
    errors = [p.error for p in points]
    assert sum(errors) / len(errors) < 0.35
    assert max(errors) < 1.0


def test_layer_times_are_lines_in_the_batch_size_measured_or_not(store: Store) -> None:
    (machine,) = machines(store)
    steps = step_samples(store.step_rows(machine), zoo_table)
    layers = layer_samples(store.layer_rows(machine))
    model = fit_machine(machine, steps, layers)
    measured = layers[0].config
    unmeasured = measured.model_copy(update={"in_channels": 7, "out_channels": 11})
    assert all(s.config.in_channels != 7 for s in layers)
    for config in (measured, unmeasured):
        at = {b: model.layer_seconds([config.model_copy(update={"batch": b})]) for b in (1, 16, 48, 128)}
        t1, t16, t48, t128 = (next(iter(at[b].values())) for b in (1, 16, 48, 128))
        assert 0 < t1 <= t16 <= t48 <= t128
        assert t48 - t16 == pytest.approx((t128 - t16) * 32 / 112)


def test_a_layer_a_little_larger_than_any_benchmarked_follows_the_line_of_the_layers(store: Store) -> None:
    """Up to twice the bytes of the largest benchmarked layer of its family, a layer is the line's and the
    layer booster's: fitted on layers whose time is a line in FLOPs and bytes, it is priced on that line."""
    (machine,) = machines(store)
    steps = step_samples(store.step_rows(machine), zoo_table)

    def law(config: LayerConfig) -> float:
        return 2e-5 + layer_flops(config) * 3e-11 + layer_bytes(config) * 4e-10

    layers = [LayerSample(s.config, law(s.config)) for s in layer_samples(store.layer_rows(machine))]
    model = fit_machine(machine, steps, layers)
    assert model.layer_base == pytest.approx((2e-5, 3e-11, 4e-10), rel=1e-3)
    linear = max((s.config for s in layers if s.config.op == "linear"), key=layer_bytes)
    wider = linear.model_copy(update={"out_channels": linear.out_channels * 3 // 2, "batch": 2})
    assert layer_bytes(linear.model_copy(update={"batch": 2})) < layer_bytes(wider) < 2 * layer_bytes(linear)
    (seconds,) = model.layer_seconds([wider]).values()
    assert seconds == pytest.approx(law(wider), rel=0.1)


def test_a_layer_far_larger_than_any_benchmarked_is_priced_by_what_it_does(store: Store) -> None:
    """The fixture's layers and the nightly grid's swept memory-bound ops, each taking 20 us and its
    arithmetic at 50 GFLOP/s or its bytes at 4 GB/s, whichever is longer, so the machine's rates read off
    them are those. Three layers far larger than any of them, where a tree is flat outside its data, are
    priced by those rates, their arithmetic and their bytes one after the other (the 25088 x 4096 linear of
    vgg11_bn so measured on this project's CPU: its weights stream at batch 1 and it computes at 128,
    benchmarks/README.md, issue 51): that linear at batch 2 (its weights read twice and their gradient
    written, 1.23 GB: 0.31 s, and 1.2e9 FLOPs: 25 ms), a dense 3x3 convolution of 2048 channels on 16 x 16
    at batch 8 (3 x 2 x 2048 x 2048 x 9 x 256 x 8 = 4.6e11 FLOPs, 9.3 s; 0.54 GB, 0.13 s) and a depthwise
    one of 4096 channels on 128 x 128 at batch 2 (2.7 GB, 0.67 s; 7.2e9 FLOPs, 0.14 s); not by the layer
    booster, which would price each as the largest layer it saw."""
    (machine,) = machines(store)
    steps = step_samples(store.step_rows(machine), zoo_table)

    def law(config: LayerConfig) -> float:
        cost = op_of(config).cost(config)
        return 2e-5 + max(cost.train_flops / 5e10, (cost.forward_bytes + cost.backward_bytes) / 4e9)

    def priced(config: LayerConfig) -> float:
        cost = op_of(config).cost(config)
        return cost.train_flops / 5e10 + (cost.forward_bytes + cost.backward_bytes) / 4e9

    measured = [s.config for s in layer_samples(store.layer_rows(machine))]
    swept = bandwidth_configs(CPU_SWEEPS)  # the nightly grid's memory-bound ops, at 4 GB/s
    samples = [LayerSample(config, law(config)) for config in (*measured, *swept)]
    model = fit_machine(machine, steps, samples)
    conv = next(config for config in measured if config.kernel == (3, 3))
    vgg = conv.model_copy(update={"op": "linear", "in_channels": 25088, "out_channels": 4096, "height": 1})
    vgg = vgg.model_copy(update={"width": 1, "kernel": (1, 1), "padding": (0, 0), "batch": 2})
    dense = conv.model_copy(update={"in_channels": 2048, "out_channels": 2048, "groups": 1, "height": 16})
    dense = dense.model_copy(update={"width": 16, "stride": (1, 1), "padding": (1, 1), "batch": 8})
    wide = {"in_channels": 4096, "out_channels": 4096, "groups": 4096, "height": 128, "width": 128}
    depthwise = dense.model_copy(update={**wide, "batch": 2})
    assert max(config.in_channels for config in measured) < 2048
    expected = [0.333, 9.409, 0.815]
    assert [priced(c) for c in (vgg, dense, depthwise)] == pytest.approx(expected, rel=0.01)
    for config in (vgg, dense, depthwise):
        (seconds,) = model.layer_seconds([config]).values()
        assert seconds == pytest.approx(priced(config), rel=0.05), config


def test_an_unseen_batch_size_is_never_trained_on(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    (machine,) = machines(store)
    steps = step_samples(store.step_rows(machine), zoo_table)
    layers = layer_samples(store.layer_rows(machine))
    trained_on: list[set[int]] = []

    def recording(name: str, train: Sequence[StepSample], layer_list: Sequence[LayerSample]) -> MachineModel:
        trained_on.append({s.batch for s in train})
        return fit_machine(name, train, layer_list)

    monkeypatch.setattr(evaluate, "fit_machine", recording)
    points, held = unseen_batches(machine, steps, layers)
    assert held == (2, 4, 8, 16, 32, 64)
    assert [sorted({p.batch for p in points if p.batch == b}) for b in held] == [[b] for b in held]
    assert all(b not in batches for b, batches in zip(held, trained_on, strict=True))
    assert {p.model for p in points} == {s.model for s in steps}
    assert sum(p.error for p in points) / len(points) < 0.35


def test_a_model_measured_whole_keeps_its_own_ratio_at_an_unmeasured_batch(store: Store) -> None:
    (machine,) = machines(store)
    steps = step_samples(store.step_rows(machine), zoo_table)
    layers = layer_samples(store.layer_rows(machine))
    own = steps[0].model
    train = [s for s in steps if not (s.model == own and s.batch == 8)]
    slower = [replace(s, seconds=s.seconds * 1.3) if s.model == own else s for s in train]
    table = next(s.table for s in steps if s.model == own)
    as_measured, made_slower = (
        fit_machine(machine, data, layers).predict(table, 8, False, False).step_s for data in (train, slower)
    )
    assert made_slower / as_measured == pytest.approx(1.3, rel=0.05)
    model = fit_machine(machine, steps, layers)
    for sample in (s for s in steps if s.model == own):
        predicted = model.predict(sample.table, sample.batch, sample.amp, sample.channels_last).step_s
        assert predicted == pytest.approx(sample.seconds)


def test_layers_timed_slow_alone_at_one_batch_size_are_weighed_down_in_the_step_base(store: Store) -> None:
    """Stride-1 1x1 convolutions timed 40% slow at batch 16, the rest as measured: the step base weighs
    that part down in proportion (the steps did not change) and leaves the other parts as they were."""
    (machine,) = machines(store)
    steps = step_samples(store.step_rows(machine), zoo_table)
    layers = layer_samples(store.layer_rows(machine))

    def slow(sample: LayerSample) -> LayerSample:
        pointwise = kernel_path(sample.config) is KernelPath.POINTWISE and sample.config.batch == 16
        return replace(sample, seconds=sample.seconds * 1.4) if pointwise else sample

    as_measured, slowed = (
        {(path, batch): m for path, batch, m in fit_machine(machine, steps, data).layer_calibration}
        for data in (layers, [slow(s) for s in layers])
    )
    part = (KernelPath.POINTWISE, 16)
    assert as_measured.keys() == slowed.keys() and part in slowed
    assert slowed[part] / as_measured[part] == pytest.approx(1 / 1.4, rel=0.1)
    others = [p for p in as_measured if p[0] is KernelPath.OTHER and as_measured[p] > 0.1]
    assert others and all(slowed[p] == pytest.approx(as_measured[p], rel=0.05) for p in others)


def test_a_model_predicts_every_geometry_of_a_new_model(store: Store) -> None:
    (machine,) = machines(store)
    steps = step_samples(store.step_rows(machine), zoo_table)
    model = fit_machine(machine, steps, layer_samples(store.layer_rows(machine)))
    table = zoo_table("resnet50", 32)
    seconds = model.layer_seconds(timed_layers(table, 24, False))
    assert len(seconds) == len(set(timed_layers(table, 24, False))) and min(seconds.values()) > 0
    small, large = (model.predict(table, b, False, False).step_s for b in (8, 64))
    assert 0 < small < large


def test_a_crash_between_file_and_registry_keeps_the_previous_version(store: Store, tmp_path: Path) -> None:
    (machine,) = machines(store)
    first = train_machine(store, machine, tmp_path / "models", zoo_table)

    def die(path: Path) -> None:
        assert path.exists()
        raise KeyboardInterrupt("killed after the file, before the registry")

    with pytest.raises(KeyboardInterrupt):
        train_machine(store, machine, tmp_path / "models", zoo_table, written=die)
    loaded = active_models(store).get(machine)
    assert loaded is not None and loaded[1] == first.version
    assert loaded[0].predict(zoo_table("resnet18", 32), 8, False, False).step_s > 0

    second = train_machine(store, machine, tmp_path / "models", zoo_table)
    assert second.version == first.version + 1
    rows = ModelRegistry(store).versions(machine)
    assert [(r.version, r.active) for r in rows] == [(first.version, False), (second.version, True)]
    assert first.path.exists() and second.path.exists()
    assert not list((tmp_path / "models").rglob("*.tmp"))


def test_a_partition_without_benchmarks_is_scaled_with_low_confidence(store: Store, tmp_path: Path) -> None:
    (machine,) = machines(store)
    train_machine(store, machine, tmp_path / "models", zoo_table)
    table = zoo_table("resnet18", 32)
    own = predict(Predictors.load(store), StepQuestion("cpu", table, 32, False, False), [T4])
    assert own.evidence == "measured" and own.machine == machine and own.scaled_from is None
    scaled = predict(Predictors.load(store), StepQuestion("t4", table, 32, False, False), [T4])
    assert scaled.confidence == "low" and scaled.scaled_from == machine
    assert scaled.step_s < own.step_s and scaled.memory_bytes == T4.memory_bytes and scaled.fits
    assert scaled.note is not None and "Tesla T4" in scaled.note
    unknown = predict(Predictors.load(store), StepQuestion("mystery", table, 32, False, False), [T4])
    assert unknown.confidence == "low" and unknown.step_s == own.step_s
    assert unknown.note is not None and "no GPU specification" in unknown.note


def test_predict_prints_json(store_file: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "advisor.db"
    settings = load_settings(os.environ)
    parser = argparse.ArgumentParser()
    add_commands(parser.add_subparsers(), settings)
    train = parser.parse_args(["models", "train", "--db", str(db), "--models-dir", str(tmp_path / "m")])
    train.settings = settings
    assert train.handler(train, Console(quiet=True)) == 0
    words = ["predict", "--model", "mobilenet_v2", "--input-shape", "3,32,32", "--batch-size", "16"]
    args = parser.parse_args([*words, "--partition", "cpu", "--db", str(db), "--json"])
    assert args.handler(args, Console()) == 0
    output = json.loads(capsys.readouterr().out)
    assert output["evidence"] == "zoo" and output["confidence"] in {"medium", "low"}
    assert output["step_s"] < output["step_p90_s"]
    expected = {"step_s", "step_p90_s", "peak_memory_bytes", "fits", "machine", "model_version", "confidence"}
    assert expected <= set(output)
    factory = [
        "predict",
        "--model",
        "tests.factories.cnn:build",
        "--input-shape",
        "3,32,32",
        "--batch-size",
        "8",
    ]
    args = parser.parse_args([*factory, "--partition", "cpu", "--db", str(db), "--json"])
    assert args.handler(args, Console()) == 0, "the user's own factory, as `advisor inspect` takes it"
    assert json.loads(capsys.readouterr().out)["step_s"] > 0


def test_the_measured_steps_own_error_by_hand() -> None:
    """Two measurements 0.2 apart in log (sample variance 0.02, sd 0.1414) and a step measured once: the
    first's mean errs sqrt(2/pi) x 0.1414 / sqrt(2) = 0.0798, the second 0.1128; their mean 0.0963."""
    table = zoo_table("resnet18", 32)
    twice = StepSample(table, "resnet18", 2, False, False, 1.1, None, runs=(1.0, exp(0.2)))
    once = StepSample(table, "resnet18", 4, False, False, 2.0, None, runs=(2.0,))
    assert evaluate.measurement_error([twice, once]) == pytest.approx(0.09631, abs=1e-4)
    assert evaluate.measurement_error([once]) is None


def test_evaluate_says_how_far_the_measured_steps_err_themselves(store_file: Store, tmp_path: Path) -> None:
    """A second night whose steps came out 20% slower and faster by turns: the text says by how much the
    measured steps err themselves."""
    steps = [line for line in read_jsonl(FIXTURE) if isinstance(line.measurement, StepMeasurement)]
    again = []
    for number, line in enumerate(steps):  # the fixture's steps are unpaced: their seconds are read
        seconds = (line.measurement.median_s or 0.0) * (1.2 if number % 2 else 1 / 1.2)
        measurement = line.measurement.model_copy(update={"median_s": seconds})
        again.append(line.model_copy(update={"run_id": "a second night", "measurement": measurement}))
    store_file.ingest(again)
    parser = argparse.ArgumentParser()
    add_commands(parser.add_subparsers(), load_settings(os.environ))
    args = parser.parse_args(["models", "evaluate", "--db", str(tmp_path / "advisor.db")])
    console = Console(record=True, width=300)
    assert args.handler(args, console) == 0
    # Each step's two seconds lie log(1.2) apart, sd 0.129; its mean errs sqrt(2/pi) x 0.129 / sqrt(2).
    assert "the measured steps err by about 7.3% themselves (their repeated measurements' spread)" in (
        console.export_text()
    )


def test_evaluate_reports_each_held_out_batch_size_and_plots(
    store_file: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser()
    add_commands(parser.add_subparsers(), load_settings(os.environ))
    plot = tmp_path / "evaluation.png"
    args = parser.parse_args(
        ["models", "evaluate", "--db", str(tmp_path / "advisor.db"), "--json", "--plot", str(plot)]
    )
    assert args.handler(args, Console(quiet=True)) == 0
    (machine,) = json.loads(capsys.readouterr().out)
    assert machine["blend_weight"] == 1.0, "the served model's: the fixture's op sum errs more"
    assert machine["measurement_error"] is None, "the fixture measured each step once"
    by_batch = machine["unseen_batch_mape_by_batch"]
    assert list(by_batch) == ["2", "4", "8", "16", "32", "64"]
    # Every model ran every batch size, so the overall figure is the mean of the batch sizes' figures.
    assert machine["unseen_batch_mape"] == pytest.approx(sum(by_batch.values()) / len(by_batch))
    assert set(machine["lomo_mape_by_model"]) == {
        s.model for s in step_samples(store_file.step_rows(), zoo_table)
    }
    bands = {b["evidence"]: b for b in machine["bands"]}
    assert list(bands) == ["measured", "interpolated", "layers", "zoo"]
    assert bands["measured"]["samples"] == 0 and bands["measured"]["share_under_p90"] is None
    for evidence in ("interpolated", "layers", "zoo"):
        band = bands[evidence]
        assert band["samples"] >= 20 and band["band_source"] == evidence
        assert band["under_p10"] <= band["under_p50"] <= band["under_p90"] <= band["samples"]
        assert band["share_under_p90"] == pytest.approx(band["under_p90"] / band["samples"])
        assert 0.75 <= band["share_under_p90"] <= 1.0 and 0.3 <= band["share_under_p50"] <= 0.7
        assert band["p10_ratio"] < band["p50_ratio"] < band["p90_ratio"]
    assert plot.read_bytes().startswith(b"\x89PNG")


def test_finished_jobs_correct_their_machines_predictions(store: Store, tmp_path: Path) -> None:
    (machine,) = machines(store)
    train_machine(store, machine, tmp_path / "models", zoo_table)
    table = zoo_table("resnet18", 32)
    before = predict(Predictors.load(store), StepQuestion("cpu", table, 32, False, False), [T4])
    advised = AdvisedJobs(store)
    for job_id in range(20):
        submitted_at = datetime(2026, 11, 30, 10, tzinfo=UTC)
        advised.record(
            AdvisedJobRow(
                job_id=job_id,
                submitted_at=submitted_at,
                user="alice",
                partition="cpu",
                machine=machine,
                predicted_s=100.0,
                predicted_p90_s=120.0,
            )
        )
        advised.finish(job_id, "COMPLETED", 150.0, datetime(2026, 11, 30, 11, tzinfo=UTC), None)
    after = predict(Predictors.load(store), StepQuestion("cpu", table, 32, False, False), [T4])
    assert 1.3 < after.calibration < 1.5, "20 jobs ran 1.5x longer; the prior keeps a little doubt"
    assert after.step_s == pytest.approx(before.step_s * after.calibration)
    scaled = predict(Predictors.load(store), StepQuestion("t4", table, 32, False, False), [T4])
    assert scaled.calibration == 1.0, "jobs on the cpu partition say nothing about the scaled t4 estimate"


def test_partitions_of_identical_nodes_share_one_machine_and_its_predictor(
    store: Store, tmp_path: Path
) -> None:
    twins = [
        line.model_copy(update={"fingerprint": line.fingerprint.model_copy(update={"partition": "twin"})})
        for line in read_jsonl(FIXTURE)
    ]
    store.ingest(twins)
    (machine,) = machines(store)
    train_machine(store, machine, tmp_path / "models", zoo_table)
    table = zoo_table("resnet18", 32)
    for partition in ("cpu", "twin"):
        found = predict(Predictors.load(store), StepQuestion(partition, table, 32, False, False), [T4])
        assert found.machine == machine and found.scaled_from is None and found.evidence == "measured"


def test_paced_steps_take_their_median_ratio_at_the_machines_median_pace(tmp_path: Path) -> None:
    steps = {
        line.measurement.config.model: line
        for line in read_jsonl(FIXTURE)
        if isinstance(line.measurement, StepMeasurement) and line.measurement.fits
    }
    (first_model, first), (second_model, second) = list(steps.items())[:2]

    def measured(
        line: ResultLine, night: int, raw: float, ratio: float | None, pace: float | None
    ) -> ResultLine:
        update = {"median_s": raw, "pace_ratio": ratio, "pace_s": pace}
        return line.model_copy(
            update={"run_id": f"night-{night}", "measurement": line.measurement.model_copy(update=update)}
        )

    store = Store.memory()
    store.ingest(
        [
            measured(first, 1, 0.001, None, None),
            measured(first, 2, 5.0, 2.0, 0.1),
            measured(first, 3, 0.002, 3.0, 0.3),
            measured(first, 4, 9.0, 10.0, 0.2),
            measured(second, 1, 0.5, None, None),
            measured(second, 2, 0.4, None, None),
        ]
    )
    samples = {s.model: s.seconds for s in step_samples(store.step_rows(), zoo_table)}
    # The median ratio (3) at the median pace (0.2 s); neither the raw times nor the unpaced night count.
    assert samples[first_model] == pytest.approx(0.6)
    # Unpaced, the fastest night: a shared node's noise only adds time.
    assert samples[second_model] == pytest.approx(0.4)


def paced_layers(store: Store) -> list[LayerMeasurementRow]:
    """Every layer that fit, as if run A had paced it at 0.1 s."""
    return [
        row.model_copy(update={"run_id": "A", "pace_ratio": (row.median_s or 0) / 0.1, "pace_s": 0.1})
        for row in store.layer_rows()
        if row.fits
    ]


def test_a_run_whose_pace_step_ran_slow_throughout_bends_no_layer_curve(store: Store) -> None:
    """Two runs 30% slower against the pace, one of them only at batch 128: the plain median per layer
    would lift batch 128 against the others; with each run's level taken out, every layer keeps run A's
    proportions."""
    rows = paced_layers(store)
    slow = [row.model_copy(update={"run_id": "B", "pace_ratio": (row.pace_ratio or 0) * 1.3}) for row in rows]
    slow_large = [row.model_copy(update={"run_id": "C"}) for row in slow if row.batch == 128]
    alone = {s.config: s.seconds for s in layer_samples(rows)}
    together = {s.config: s.seconds for s in layer_samples(rows + slow + slow_large)}
    assert {c.batch for c in alone} >= {1, 128} and together.keys() == alone.keys()
    scale = [together[c] / alone[c] for c in alone]
    assert min(scale) == pytest.approx(max(scale), rel=1e-9)


@pytest.mark.parametrize(
    ("factors", "expected"),
    [
        ((1.0, 1.1, 1.3), (1.0 * 1.1 * 1.3) ** (1 / 3)),
        ((4.0, 1.2, 1.1, 1.3, 0.5), (1.1 * 1.2 * 1.3) ** (1 / 3)),
    ],
)
def test_a_layers_runs_count_by_their_interquartile_mean(
    store: Store, factors: tuple[float, ...], expected: float
) -> None:
    """Runs that agree on every other layer: the middle half of one layer's ratios is averaged (the median
    would take 1.1 and 1.2), and a wild quarter at either end is cut."""
    rows = paced_layers(store)
    odd = rows[0]
    runs = [
        row.model_copy(
            update={
                "run_id": f"run-{i}",
                "pace_ratio": (row.pace_ratio or 0) * (factor if row is odd else 1.0),
            }
        )
        for i, factor in enumerate(factors)
        for row in rows
    ]
    alone = {s.config: s.seconds for s in layer_samples(rows)}
    (config,) = {s.config for s in layer_samples([odd])}
    together = {s.config: s.seconds for s in layer_samples(runs)}
    assert len(alone) > 3 and together.keys() == alone.keys()
    assert together[config] == pytest.approx(alone[config] * expected, rel=1e-9)
    assert all(together[c] == pytest.approx(alone[c], rel=1e-9) for c in alone if c != config)


def test_a_database_from_before_pacing_gains_its_columns(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    old = Store.open(path)
    for column in ("pace_ratio", "pace_s"):
        old.db.execute(f"ALTER TABLE step_measurements DROP COLUMN {column}")
    old.db.close()
    store = Store.open(path)
    store.ingest(read_jsonl(FIXTURE))
    assert all(row.pace_ratio is None for row in store.step_rows())
    assert step_samples(store.step_rows(), zoo_table)


def test_a_version_worse_than_the_active_one_is_held_back_and_activate_rolls_either_way(
    store_file: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (machine,) = machines(store_file)
    first = train_machine(store_file, machine, tmp_path / "models", zoo_table)
    assert first.activated and first.heldout_mape is not None and first.heldout_mape > 0.01
    # The active version claims a perfect held-out score: no new fit of the same data can match it.
    store_file.db.execute("UPDATE model_versions SET heldout_mape = 0.0 WHERE version = ?", [first.version])
    store_file.db.conn.commit()
    held = train_machine(store_file, machine, tmp_path / "models", zoo_table, max_worse_mape=0.01)
    assert not held.activated and held.path.exists()
    assert active_models(store_file)[machine][1] == first.version, "the gate kept the active version serving"

    def models(*words: str) -> int:
        return cli(["models", *words, "--db", str(tmp_path / "advisor.db")])

    assert models("activate", machine, str(held.version)) == 0
    assert active_models(store_file)[machine][1] == held.version, "the held-back version, served by hand"
    assert models("activate", machine, str(first.version)) == 0
    assert active_models(store_file)[machine][1] == first.version, "rolled back"
    assert models("activate", machine, "99") == 1
    assert "has no version 99" in capsys.readouterr().out
    assert models("list", "--json") == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(row["version"], row["active"]) for row in listed] == [
        (first.version, True),
        (held.version, False),
    ]


def test_the_gate_compares_held_out_errors_within_the_margin() -> None:
    assert passes_gate(0.10, 0.09, 0.02) and not passes_gate(0.12, 0.09, 0.02)
    assert passes_gate(0.5, None, 0.02) and passes_gate(None, 0.1, 0.02) and passes_gate(0.9, 0.1, None)


def test_an_architecture_whose_own_layers_were_measured_is_predicted_with_its_layers_band(
    store: Store, tmp_path: Path
) -> None:
    """Its layers measured (as `advisor bench run --architecture --layers-only` does), no whole step."""
    from advisor.bench.architectures import measured_tables
    from advisor.bench.plan import nightly_grid
    from advisor.bench.zoo import distinct_layers
    from advisor.introspect.run import introspect

    (machine,) = machines(store)
    table = introspect("tests.factories.cnn:build", (3, 32, 32), {"width": 24}, allow_factories=True)
    question = StepQuestion("cpu", table, 8, False, False)
    train_machine(store, machine, tmp_path / "models", measured_tables(store))
    before = predict(Predictors.load(store), question, [])
    assert before.evidence == "zoo"
    (first, *_) = read_jsonl(FIXTURE)
    lines = [
        ResultLine(
            run_id="own-layers",
            fingerprint=first.fingerprint,
            measured_at=datetime(2026, 12, 1, tzinfo=UTC),
            measurement=LayerMeasurement(
                config=config.model_copy(update={"batch": batch}), median_s=1e-4 * batch, fits=True
            ),
        )
        for config, _ in distinct_layers(table)
        for batch in nightly_grid("cpu").layer_batches
    ]
    store.ingest(lines)
    train_machine(store, machine, tmp_path / "models", measured_tables(store), max_worse_mape=None)
    after = predict(Predictors.load(store), question, [])
    assert after.evidence == "layers" and after.model_version == before.model_version + 1
    (model, _version) = active_models(store)[machine]
    assert after.confidence == model.band("layers").confidence
    wider = introspect("tests.factories.cnn:build", (3, 32, 32), {"width": 40}, allow_factories=True)
    other = predict(Predictors.load(store), StepQuestion("cpu", wider, 8, False, False), [])
    assert other.evidence == "zoo", "another width has other layers, which were never measured"


def test_profile_sets_a_profiled_step_beside_the_predictions_split(
    store_file: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`advisor profile`: every part measured here and predicted, the predicted parts adding up to the
    prediction `advisor predict` gives."""
    from advisor.bench.profile import op_part

    assert (
        op_part("aten::mkldnn_convolution") is StepPart.LAYERS and op_part("aten::addmm") is StepPart.LAYERS
    )
    assert (
        op_part("aten::native_batch_norm") is StepPart.MEMORY_BOUND and op_part("Optimizer.step#SGD") is None
    )
    (machine,) = machines(store_file)
    train_machine(store_file, machine, tmp_path / "models", zoo_table)
    (model, _version) = active_models(store_file)[machine]
    table = zoo_table("resnet18", 32)
    parts = model.parts(table, 8, False, False)
    assert set(parts) == set(StepPart) and all(seconds >= 0 for seconds in parts.values())
    assert sum(parts.values()) == pytest.approx(model.predict(table, 8, False, False).step_s)
    words = ["profile", "resnet18", "--batch-size", "8", "--partition", "cpu", "--steps", "2"]
    monkeypatch.setenv("COLUMNS", "120")
    assert cli([*words, "--db", str(tmp_path / "advisor.db")]) == 0
    shown = capsys.readouterr().out
    assert all(str(part) in shown for part in StepPart) and "step" in shown


def test_profile_takes_a_language_model_at_a_length_it_is_built_at(
    store_file: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A language model's step profiled at its tokens a sample, as JSON: each part measured here and
    predicted; a length it is not built at, or tokens for an image model, say what to give instead."""
    (machine,) = machines(store_file)
    train_machine(store_file, machine, tmp_path / "models", zoo_table)
    db = ["--db", str(tmp_path / "advisor.db"), "--partition", "cpu"]
    words = ["profile", "tiny_gpt2", "--sequence-length", "32", "--batch-size", "2", "--steps", "1", *db]
    assert cli([*words, "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["input"] == "32 tokens" and answer["model"] == "tiny_gpt2"
    parts = {part["part"]: part for part in answer["parts"]}
    assert set(parts) == {*map(str, StepPart), "step"}
    assert all(part["measured_s"] >= 0 and part["predicted_s"] >= 0 for part in parts.values())
    assert parts["step"]["measured_s"] > parts[str(StepPart.LAYERS)]["measured_s"] > 0
    monkeypatch.setenv("COLUMNS", "120")
    assert cli(["profile", "gpt2", "--batch-size", "1", *db]) == 2
    assert "gpt2 is a language model built at 128, 512, 1024 tokens" in capsys.readouterr().out
    assert cli(["profile", "resnet18", "--sequence-length", "128", "--batch-size", "1", *db]) == 2
    assert "resnet18 takes images, not tokens: say --input-shape 3,H,H" in capsys.readouterr().out


def test_the_layers_a_model_predicts_are_kept_for_a_bounded_number_of_layers(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A daemon's model is asked for every user's layers: the booster's polylines it keeps between
    questions (made once for the blend's two step models) are forgotten past a bound, not kept forever,
    and a question answered after a forgetting is answered alike."""
    monkeypatch.setattr("advisor.predict.machine._PREDICTED_MOST", 10)
    (machine,) = machines(store)
    model = fit_layers(machine, layer_samples(store.layer_rows(machine)))
    fresh = fit_layers(machine, layer_samples(store.layer_rows(machine)))
    base = timed_layers(zoo_table("resnet18", 32), 4, False)[0]
    asked = [[base.model_copy(update={"out_channels": 7 + 6 * q + i}) for i in range(6)] for q in range(5)]
    for configs in asked:
        assert model.layer_seconds(configs) == fresh.layer_seconds(configs)
        assert len(model._predicted) <= 10 + 6, "the bound and one question's layers"
    again = asked[0]
    assert model.layer_seconds(again) == fresh.layer_seconds(again)
