"""FSDP's hybrid sharding: the state sharded among one node's GPUs and replicated across nodes, read from the
job's files and predicted per GPU; and `advisor predict --zero N --gpus N`: one GPU's memory of such a job."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.cli import main as cli
from advisor.introspect import LayerTable
from advisor.introspect.table import TrainingSettings
from advisor.predict.peak_memory import MemoryFit
from advisor.predict.service import Predictors
from advisor.recommend.edges import StoredModels
from advisor.store import Store

from .recommend_support import trained_store
from .test_jobscript_trainers import HEADER, RECIPE, parsed_in
from .test_recommend_zero import _linears

ACCELERATE = "distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: {strategy}\nnum_processes: 4\n"


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("hybrid")
    trained_store(folder)
    return folder


@pytest.fixture
def store(root: Path) -> Store:
    return Store.open(root / "advisor.db")


@pytest.mark.parametrize(
    ("strategy", "stage", "hybrid"),
    [("HYBRID_SHARD", 3, True), ("4", 3, True), ("HYBRID_SHARD_ZERO2", 2, True), ("FULL_SHARD", 3, False)],
)
def test_accelerates_hybrid_sharding_is_read_with_its_stage(
    strategy: str, stage: int, hybrid: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "recipe.yaml").write_text(RECIPE, encoding="utf-8")
    (tmp_path / "fsdp.yaml").write_text(ACCELERATE.format(strategy=strategy), encoding="utf-8")
    script = tmp_path / "sft.sh"
    command = "accelerate launch --config_file fsdp.yaml sft.py --config recipe.yaml\n"
    script.write_text(HEADER.format(gpus=4) + command, encoding="utf-8")
    description = parsed_in(tmp_path, script, monkeypatch).description
    assert description is not None
    assert (description.zero_stage, description.hybrid_shard) == (stage, hybrid)


def test_the_trainers_hybrid_shard_flag_is_read_and_deepspeed_wins_over_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = (
        "torchrun --nproc_per_node 4 run_clm.py --model_name_or_path gpt2 --dataset_name wikitext"
        " --per_device_train_batch_size 8 --block_size 1024 --max_steps 100 --output_dir out"
    )
    script = tmp_path / "clm.sh"
    script.write_text(HEADER.format(gpus=4) + base + ' --fsdp "hybrid_shard auto_wrap"\n', encoding="utf-8")
    description = parsed_in(tmp_path, script, monkeypatch).description
    assert description is not None and (description.zero_stage, description.hybrid_shard) == (3, True)
    (tmp_path / "ds.json").write_text('{"zero_optimization": {"stage": 1}}', encoding="utf-8")
    script.write_text(HEADER.format(gpus=4) + base + " --deepspeed ds.json\n", encoding="utf-8")
    description = parsed_in(tmp_path, script, monkeypatch).description
    assert description is not None and (description.zero_stage, description.hybrid_shard) == (1, False)


@pytest.mark.parametrize(
    ("options", "stage", "hybrid"),
    [
        ("--use_fsdp --fsdp_sharding_strategy HYBRID_SHARD", 3, True),
        ("--use_fsdp", 3, False),  # accelerate's default strategy
        ("--config_file fsdp.yaml --fsdp_sharding_strategy 5", 2, True),  # the command line wins
        ("--use_deepspeed --zero_stage 2", 2, False),
    ],
)
def test_accelerates_command_line_reads_as_its_config_file(
    options: str, stage: int, hybrid: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "recipe.yaml").write_text(RECIPE, encoding="utf-8")
    (tmp_path / "fsdp.yaml").write_text(ACCELERATE.format(strategy="FULL_SHARD"), encoding="utf-8")
    script = tmp_path / "sft.sh"
    command = f"accelerate launch {options} --num_processes 4 sft.py --config recipe.yaml\n"
    script.write_text(HEADER.format(gpus=4) + command, encoding="utf-8")
    description = parsed_in(tmp_path, script, monkeypatch).description
    assert description is not None
    assert (description.zero_stage, description.hybrid_shard) == (stage, hybrid)


def test_hybrid_sharding_divides_the_state_among_one_nodes_gpus_only(store: Store) -> None:
    """One 10 -> 20 linear (200 fp32 parameters: 800 B each of weights, gradients and momentum), micro-batch
    8 (320 B saved, 960 B transient), on 2 GPUs on each of 2 nodes: full sharding divides the state by 4,
    hybrid by the node's 2."""
    trained = Predictors.load(store)
    machine = next(f.machine() for f in trained.fingerprints if f.partition == "a100")
    model, version = trained.models[machine]
    summed = model.model_copy(update={"memory": MemoryFit()})
    predictors = Predictors(trained.fingerprints, {machine: (summed, version)}, {})
    peaks = {}
    for hybrid in (False, True):
        table = _linears(1, 10, 20).trained(TrainingSettings(zero_stage=3, hybrid_shard=hybrid))
        models = StoredModels(store, predictors, [], table, [], {})
        peaks[hybrid] = models.step("a100", 2, 2, 8, False, False).peak_memory_bytes
        assert models.step("a100", 2, 1, 8, False, False).peak_memory_bytes == 3 * 400 + 320 + 960
    assert peaks == {False: 3 * 200 + 320 + 960, True: 3 * 400 + 320 + 960}


def test_a_table_stored_before_hybrid_sharding_keeps_its_hash() -> None:
    table = _linears(1, 10, 20).trained(TrainingSettings(zero_stage=3))
    stored = json.loads(table.model_dump_json())
    del stored["training"]["hybrid_shard"]  # as written before the field
    assert LayerTable.model_validate(stored).architecture_hash == table.architecture_hash
    hybrid = _linears(1, 10, 20).trained(TrainingSettings(zero_stage=3, hybrid_shard=True))
    assert hybrid.architecture_hash != table.architecture_hash


def test_predict_shows_one_gpus_memory_of_a_sharded_job(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    words = ["predict", "--model", "resnet18", "--input-shape", "3,32,32", "--batch-size", "8"]
    words += ["--partition", "a100", "--db", str(root / "advisor.db"), "--json"]
    peaks = {}
    for name, sharding in {
        "alone": [],
        "zero-3 on 8": ["--zero", "3", "--gpus", "8"],
        "hybrid on 2 x 4": ["--zero", "3", "--gpus", "8", "--nodes", "2", "--hybrid-shard"],
    }.items():
        assert cli([*words, *sharding]) == 0, name
        said = json.loads(capsys.readouterr().out)
        peaks[name] = said["peak_memory_bytes"]
        assert said.get("sharded_among", 1) == {"alone": 1, "zero-3 on 8": 8, "hybrid on 2 x 4": 4}[name]
    assert peaks["alone"] > peaks["hybrid on 2 x 4"] > peaks["zero-3 on 8"]
    assert cli([*words, "--hybrid-shard"]) == 2
    assert cli([*words, "--zero", "2", "--gpus", "6", "--nodes", "4"]) == 2
    assert "do not lie evenly" in capsys.readouterr().out
