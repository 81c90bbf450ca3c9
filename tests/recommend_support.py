"""Predictors for the sandbox's GPU partitions, built from real CPU measurements.

`tests/data/predict/cpu-zoo.jsonl` holds real CPU measurements; relabelled as the sandbox's GPU
partitions with their times scaled (a100 4x and v100 2x faster than t4) and GPU memory declared, the
partitions differ the way real ones do, and every choice made on them is the recommender's own.
"""

from __future__ import annotations

import atexit
import shutil
import sqlite3
import tempfile
from pathlib import Path

from advisor.bench.results import read_jsonl
from advisor.bench.tables import zoo_table
from advisor.predict.registry import machines, train_machine
from advisor.records import ResultLine
from advisor.store import Store

FIXTURE = Path(__file__).parent / "data" / "predict" / "cpu-zoo.jsonl"
SPEED = {"a100": 4.0, "v100": 2.0, "t4": 1.0}
MEMORY_MB = {"a100": 40_000, "v100": 32_000, "t4": 155}
"""The t4 is made small: 155 MB holds resnet18 at 32x32 (135 MB of weights and state) in micro-batches of
about 16 samples."""


def relabel(line: ResultLine, partition: str) -> ResultLine:
    fingerprint = line.fingerprint.model_copy(
        update={
            "partition": partition,
            "node": f"{partition}-1",
            "device": "cuda",
            "gpu_name": partition,
            "gpu_count": 1,
            "gpu_memory_mb": MEMORY_MB[partition],
        }
    )
    measurement = line.measurement
    if measurement.median_s is not None:
        measurement = measurement.model_copy(update={"median_s": measurement.median_s / SPEED[partition]})
    return line.model_copy(update={"fingerprint": fingerprint, "measurement": measurement})


def trained_store(root: Path) -> Store:
    """A copy, in ``root``, of the predictors trained once per test process: training takes about 13 s of
    CPU and half a dozen modules want the same store. The copy is byte for byte (model files are checked
    against their recorded sha256) with the recorded paths moved to ``root``."""
    source = _trained_once()
    root.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source / "models", root / "models")
    with sqlite3.connect(source / "advisor.db") as trained, sqlite3.connect(root / "advisor.db") as copy:
        trained.backup(copy)
        copy.execute("UPDATE model_versions SET path = replace(path, ?, ?)", (str(source), str(root)))
    return Store.open(root / "advisor.db")


_TRAINED: list[Path] = []


def _trained_once() -> Path:
    if not _TRAINED:
        root = Path(tempfile.mkdtemp(prefix="advisor-trained-"))
        atexit.register(shutil.rmtree, root, True)
        _train(root).db.conn.close()
        _TRAINED.append(root)
    return _TRAINED[0]


def _train(root: Path) -> Store:
    store = Store.open(root / "advisor.db")
    lines = read_jsonl(FIXTURE)
    store.ingest(relabel(line, partition) for partition in SPEED for line in lines)
    for machine in machines(store):
        train_machine(store, machine, root / "models", zoo_table)
    return store
