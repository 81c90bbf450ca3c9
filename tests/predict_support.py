"""The CPU zoo fixture (`tests/data/predict/cpu-zoo.jsonl`) as a store per test, for the predictor tests."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from advisor.bench.results import read_jsonl
from advisor.predict.scaling import DeviceSpec
from advisor.store import Store

FIXTURE = Path(__file__).parent / "data" / "predict" / "cpu-zoo.jsonl"
T4 = DeviceSpec(name="Tesla T4", flops=8141e9, bandwidth=320e9, memory_bytes=15 * 10**9)


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture's lines ingested once per module: each test then opens a copy of its own."""
    path = tmp_path_factory.mktemp("ingested") / "advisor.db"
    Store.open(path).ingest(read_jsonl(FIXTURE))
    return path


@pytest.fixture
def store(ingested: Path) -> Store:
    """The fixture's measurements in a database in memory, of this test alone."""
    copy = Store.memory()
    with sqlite3.connect(ingested) as source:
        source.backup(copy.db.conn)
    return copy


@pytest.fixture
def store_file(ingested: Path, tmp_path: Path) -> Store:
    """The same in ``tmp_path / "advisor.db"``, for a test that runs a command on it."""
    copy = tmp_path / "advisor.db"
    with sqlite3.connect(ingested) as source, sqlite3.connect(copy) as target:
        source.backup(target)
    return Store.open(copy)
