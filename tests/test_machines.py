"""Machines by name: readable names for fingerprinted machines, and commands that take a partition or a
name (`advisor.machines`, `advisor models list|activate`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import nullcontext
from datetime import UTC, datetime
from pathlib import Path

import pytest

from advisor.bench.results import read_jsonl
from advisor.cli import main as cli
from advisor.daemon.metrics import Metrics
from advisor.machines import UnknownMachine, labelled, machine_names, name_of, resolve
from advisor.records import Fingerprint
from advisor.store import ModelRegistry, ModelVersionRow, Store
from tests.recommend_support import FIXTURE, relabel

CPU = Fingerprint(
    partition="cpu",
    node="cpu-1",
    device="cpu",
    gpu_name=None,
    gpu_count=0,
    gpu_memory_mb=None,
    driver=None,
    cuda=None,
    cudnn=None,
    cpu_model="AMD EPYC 9654 96-Core Processor",
    cpu_cores=2,
    torch="2.14.1",
)


def test_a_machine_is_named_by_its_gpu_or_its_cpu() -> None:
    gpu = CPU.model_copy(update={"device": "cuda", "gpu_name": "NVIDIA A100-SXM4-80GB", "gpu_count": 1})
    assert name_of(gpu) == "a100-sxm4-80gb"
    assert name_of(gpu.model_copy(update={"gpu_name": "Tesla V100-SXM2-16GB", "gpu_count": 4})) == (
        "v100-sxm2-16gbx4"
    )
    assert name_of(CPU) == "cpu-epyc-9654-2c"
    assert name_of(CPU.model_copy(update={"cpu_quota": 0.8})) == "cpu-epyc-9654-2c-quota0.8"
    intel = CPU.model_copy(update={"cpu_model": "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz"})
    assert name_of(intel) == "cpu-xeon-platinum-8375c-2c"


def test_names_are_unique_and_each_machine_has_one() -> None:
    slow = CPU.model_copy(update={"partition": "t4", "node": "t4-1", "cpu_quota": 0.8})
    other = CPU.model_copy(update={"cpu_model": "AMD EPYC 9654 (R)"})  # another hash, the same words
    names = machine_names([CPU, slow, other, CPU.model_copy(update={"node": "cpu-2"})])
    assert len(names) == 3 and len(set(names.values())) == 3
    assert names[slow.machine()] == "cpu-epyc-9654-2c-quota0.8"
    assert names[CPU.machine()] == f"cpu-epyc-9654-2c-{CPU.machine()[:4]}"
    assert labelled(slow.machine(), names) == f"cpu-epyc-9654-2c-quota0.8 ({slow.machine()[:8]})"


def test_a_word_resolves_as_a_partition_a_name_or_a_hash() -> None:
    slow = CPU.model_copy(update={"partition": "t4", "node": "t4-1", "cpu_quota": 0.8})
    every, latest = [CPU, slow], {"cpu": CPU.machine(), "t4": slow.machine()}
    assert resolve("t4", every, latest) == slow.machine()
    assert resolve("cpu-epyc-9654-2c", every, latest) == CPU.machine()
    assert resolve(slow.machine(), every, latest) == slow.machine()
    assert resolve(slow.machine()[:8], every, latest) == slow.machine()
    with pytest.raises(UnknownMachine, match="'v10': known are cpu, cpu-epyc-9654-2c"):
        resolve("v10", every, latest)


def _version(path: Path, machine: str) -> Callable[[int], ModelVersionRow]:
    def write(version: int) -> ModelVersionRow:
        return ModelVersionRow(
            machine=machine,
            version=version,
            path=path / f"v{version}.json",
            created_at=datetime.fromisoformat("2026-12-04T21:46:39.477963+00:00"),
            step_rows=36,
            layer_rows=330,
            models="resnet18",
            heldout_mape=0.2625438571703242,
        )

    return write


@pytest.fixture
def sandbox_store(tmp_path: Path) -> Path:
    """The three GPU partitions' machines, each with two versions (the second active)."""
    store = Store.open(tmp_path / "advisor.db")
    lines = read_jsonl(FIXTURE)[:3]
    store.ingest(relabel(line, partition) for partition in ("a100", "v100", "t4") for line in lines)
    registry = ModelRegistry(store)
    for machine in machine_names(store.fingerprints()):
        registry.add_version(machine, _version(tmp_path, machine), activate=True)
        registry.add_version(machine, _version(tmp_path, machine), activate=True)
    return tmp_path / "advisor.db"


def test_models_activate_takes_a_partition_and_list_names_each_machine(
    sandbox_store: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``advisor models activate v100 1`` (before: 'v100 has no version 1', only the hash was taken)."""
    db = ["--db", str(sandbox_store)]
    store = Store.existing(sandbox_store)
    v100 = store.latest_machines()["v100"]
    assert cli(["models", "activate", "v100", "1", *db]) == 0
    assert capsys.readouterr().out.startswith(f"v100 ({v100[:8]}): version 1 is active")
    active = ModelRegistry(store).active(v100)
    assert active is not None and active.version == 1
    assert cli(["models", "list", "v100", "--json", *db]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {(row["name"], row["machine"], row["active"]) for row in listed} == {
        ("v100", v100, True),
        ("v100", v100, False),
    }
    assert cli(["models", "activate", "v100", "7", *db]) == 1
    assert f"v100 ({v100[:8]}) has no version 7" in capsys.readouterr().out
    monkeypatch.setenv("COLUMNS", "160")
    assert cli(["models", "list", *db]) == 0
    shown = capsys.readouterr().out
    assert all(f"{name} " in shown and f" {name} " in shown for name in ("a100", "v100", "t4"))
    assert v100 not in shown, "the hash shortened beside the name"
    assert "26.3%" in shown and "2026-12-04 21:46 UTC" in shown


def test_the_metrics_name_each_machine_beside_its_hash(sandbox_store: Path) -> None:
    """Prometheus's model gauges carry the name a person reads (before: the hash alone)."""
    metrics = Metrics()
    store = Store.existing(sandbox_store)
    metrics.watch_models(lambda: nullcontext(store), lambda: datetime.now(UTC))
    text = metrics.exposition().decode()
    v100 = store.latest_machines()["v100"]
    assert f'advisor_model_heldout_mape{{machine="{v100}",name="v100"}} 0.2625' in text
