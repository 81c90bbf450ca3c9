"""The committed benchmark results (`benchmarks/results/<machine>/*.jsonl`): each folder is one machine's, its
predictors train and evaluate from them with no GPU, and the next slice of the grid starts where they stop.
The H200's folder is picked up here as soon as it is committed; until then the CPU rehearsal's stands in."""

from __future__ import annotations

import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from advisor.bench.architectures import measured_tables
from advisor.bench.night import MeasuredOn
from advisor.bench.plan import DeviceProfile, Phase, build_plan, nightly_grid
from advisor.bench.results import read_jsonl
from advisor.bench.tables import zoo_table
from advisor.predict.evaluate import evaluate_machine
from advisor.predict.registry import layer_samples, machines, step_samples
from advisor.records import ResultLine
from advisor.store import Store
from benchmarks.gpu.slice_plan import main as slice_main
from benchmarks.gpu.slice_plan import measured_on, next_slice

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results"
FOLDERS = sorted(folder for folder in RESULTS.iterdir() if any(folder.glob("*.jsonl")))


def _lines(folder: Path) -> list[ResultLine]:
    return [line for path in sorted(folder.glob("*.jsonl")) for line in read_jsonl(path)]


def test_the_cpu_rehearsal_stands_in_until_a_gpu_has_measured() -> None:
    assert "cpu-rehearsal" in [folder.name for folder in FOLDERS]


@pytest.mark.parametrize("folder", FOLDERS, ids=[folder.name for folder in FOLDERS])
def test_each_folder_holds_one_machines_fingerprinted_lines_with_a_log_each(folder: Path) -> None:
    lines = _lines(folder)
    assert lines and len({line.fingerprint.machine() for line in lines}) == 1
    assert all(path.with_suffix(".log").is_file() for path in folder.glob("*.jsonl"))


@pytest.mark.long
@pytest.mark.parametrize("folder", FOLDERS, ids=[folder.name for folder in FOLDERS])
def test_the_committed_results_train_and_evaluate_without_a_gpu(folder: Path) -> None:
    store = Store.memory()
    stored = store.ingest(_lines(folder))
    assert stored == len(_lines(folder)), "each committed line is a row"
    tables = measured_tables(store)
    (machine,) = machines(store)
    steps = step_samples(store.step_rows(machine), tables)
    evaluation = evaluate_machine(machine, steps, layer_samples(store.layer_rows(machine)))
    assert evaluation.machine == machine
    assert set(evaluation.lomo_mape_by_model) == {sample.model for sample in steps}
    assert evaluation.lomo_mape is not None and evaluation.memory_mape is not None


def test_the_next_slice_starts_where_the_committed_results_stop() -> None:
    lines = _lines(RESULTS / "cpu-rehearsal")
    machine = lines[0].fingerprint.machine()
    history = measured_on(lines, machine)
    grid = replace(nightly_grid("cpu"), models=("squeezenet1_1",), layer_models=("squeezenet1_1",))
    device = DeviceProfile.assumed("cpu")
    items = build_plan(grid, device, zoo_table).items
    whole = {item.config.key() for item in items}
    assert whole & set(history.measured), "the rehearsal measured some of this grid"
    night = next_slice(grid, device, zoo_table, history, budget_s=1e9)
    planned = [entry.item.config.key() for entry in night.entries]
    unmeasured = whole - set(history.measured)
    # An update configuration measured for the first time is measured at its places (`Sweeps.update_places`):
    # the 256-tensor split the rehearsal predates.
    updates = {item.config.key() for item in items if item.phase is Phase.UPDATES} & unmeasured
    assert updates, "the rehearsal predates the 256-tensor updates"
    copies = [key for key in updates for _ in range(grid.sweeps.update_places - 1)]
    assert sorted(planned) == sorted([*unmeasured, *copies]), (
        "each unmeasured item once, an update at its places"
    )
    assert night.machine == machine and night.covered == len(whole) - len(unmeasured)
    first = next_slice(grid, device, zoo_table, MeasuredOn(machine, {}), budget_s=1e9)
    assert {entry.item.config.key() for entry in first.entries} == whole, "a new machine's: all of it"
    cut = next_slice(grid, device, zoo_table, history, budget_s=10)
    order = iter(entry.item for entry in night.entries)
    assert all(entry.item in order for entry in cut.entries), "a budget keeps the night's order"
    assert 0 < sum(entry.item.estimate_s for entry in cut.entries) <= 10 < night.estimate_s


def test_another_machines_lines_do_not_count_as_measured() -> None:
    lines = _lines(RESULTS / "cpu-rehearsal")[:5]
    other = [
        line.model_copy(update={"fingerprint": line.fingerprint.model_copy(update={"cpu_model": "other"})})
        for line in lines
    ]
    machine = lines[0].fingerprint.machine()
    assert len(measured_on(lines, machine).measured) == len({line.measurement.config.key() for line in lines})
    assert measured_on(other, machine).measured == {}


def test_rebuild_says_where_no_results_are(tmp_path: Path) -> None:
    result = subprocess.run(
        [str(REPO / "benchmarks" / "gpu" / "rebuild.sh"), str(tmp_path), str(tmp_path / "x.db")],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "ADVISOR": "false"},
    )
    assert result.returncode == 2 and f"no results (*.jsonl) in {tmp_path}" in result.stderr


def test_a_cuda_slice_without_cuda_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert slice_main(["--device", "cuda", "--out", str(tmp_path / "plan.json")]) == 2
    assert "torch sees no CUDA device" in capsys.readouterr().err
    assert not (tmp_path / "plan.json").exists()
