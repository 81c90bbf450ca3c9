"""Version files are trusted only as written: a corrupted one is quarantined, named in the log and in
/health, and only its machine loses its predictor. Real xgboost, real SQLite; every load that a corrupted
file could crash runs in a child process, whose exit status a crash would be."""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

import pytest

from advisor.bench.tables import zoo_table
from advisor.daemon.app import AdviceService, ServiceInputs
from advisor.machines import labelled, machine_names
from advisor.ops import known
from advisor.predict import layout
from advisor.predict.layout import current_layout
from advisor.predict.model_files import QUARANTINE_SUFFIX, digest
from advisor.predict.registry import active_models, train_machine
from advisor.slurm.client import SlurmClient
from advisor.store import ModelRegistry, Store

from .daemon_support import BIN
from .model_file_support import (
    CORRUPTIONS,
    PARTITIONS,
    SEGFAULTING,
    active_file,
    copy_trained,
    load_in_child,
)
from .ops_support import TIMED_POOL
from .recommend_support import trained_store

NOW = datetime(2026, 12, 4, tzinfo=UTC)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Three machines' predictors, trained once; and a layer table that reaches both boosters (resnet50:
    never measured whole, and layer geometries never benchmarked)."""
    root = tmp_path_factory.mktemp("trained")
    trained_store(root).db.conn.close()
    (root / "table.json").write_text(zoo_table("resnet50", 32).model_dump_json(), encoding="utf-8")
    yield root


def degraded(root: Path) -> list[str]:
    inputs = ServiceInputs(database=root / "advisor.db", policy=root / "policy.toml", specs=[])
    return AdviceService(inputs, cast(SlurmClient, None), lambda: NOW).health().degraded


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_a_corrupted_version_file_is_quarantined_and_the_other_machines_still_predict(
    trained: Path, tmp_path: Path, corruption: str
) -> None:
    store = copy_trained(trained, tmp_path / "root")
    machine, path = active_file(store, "a100")
    path.write_bytes(CORRUPTIONS[corruption](path.read_bytes()))
    loaded = load_in_child(tmp_path / "root")
    assert loaded.returncode == 0, f"the loader died ({loaded.returncode}): {loaded.stderr[-2000:]}"
    answer = json.loads(loaded.stdout)
    assert machine not in answer["loaded"] and len(answer["loaded"]) == 2
    for partition in ("v100", "t4"):
        own = answer["answers"][partition]
        assert own["scaled_from"] is None and own["evidence"] != "scaled" and own["step_s"] > 0
    scaled = answer["answers"]["a100"]
    assert scaled["scaled_from"] in answer["loaded"] and scaled["confidence"] == "low"
    assert not path.exists() and path.with_name(path.name + QUARANTINE_SUFFIX).exists(), "moved aside"
    assert f"model file {path} (the predictor of {machine}, version 1) failed its checksum" in loaded.stderr
    assert ModelRegistry(store).quarantined(machine, 1) == "failed its checksum"
    assert [line for line in degraded(tmp_path / "root") if machine in line] == [
        f"the predictor of {machine} (version 1) failed its checksum: quarantined; its partitions get no "
        "model advice of their own (scaled from another machine, low confidence) until `advisor models train`"
    ]
    assert load_in_child(tmp_path / "root").returncode == 0, "a quarantined version is not read again"


def test_a_version_is_written_with_its_checksum(trained: Path) -> None:
    store = Store.open(trained / "advisor.db")
    rows = ModelRegistry(store).versions()
    assert len(rows) == len(PARTITIONS)
    assert all(row.sha256 == digest(row.path.read_bytes()) for row in rows)


def forget_checksums(store: Store) -> None:
    """The registry as a version before checksums left it."""
    with store.db.conn:
        store.db.execute("UPDATE model_versions SET sha256 = NULL")


def test_a_version_trained_before_checksums_is_loaded_once_in_a_child_and_its_checksum_kept(
    trained: Path, tmp_path: Path
) -> None:
    store = copy_trained(trained, tmp_path / "root")
    forget_checksums(store)
    loaded = load_in_child(tmp_path / "root")
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    assert len(json.loads(loaded.stdout)["loaded"]) == len(PARTITIONS)
    rows = ModelRegistry(store).versions()
    assert all(row.sha256 == digest(row.path.read_bytes()) for row in rows)
    assert degraded(tmp_path / "root") == []


def test_a_version_without_checksum_that_crashes_its_check_is_quarantined_and_the_loader_lives(
    trained: Path, tmp_path: Path
) -> None:
    store = copy_trained(trained, tmp_path / "root")
    forget_checksums(store)
    machine, path = active_file(store, "v100")
    path.write_bytes(SEGFAULTING(path.read_bytes()))
    loaded = load_in_child(tmp_path / "root")
    assert loaded.returncode == 0, f"the loader died ({loaded.returncode}): {loaded.stderr[-2000:]}"
    assert machine not in json.loads(loaded.stdout)["loaded"]
    why = ModelRegistry(store).quarantined(machine, 1)
    assert why is not None and why.startswith("has no checksum and did not load in a check process ("), why
    assert any(
        f"the predictor of {machine} (version 1) {why}: quarantined" in line
        for line in degraded(tmp_path / "root")
    )
    others = [row for row in ModelRegistry(store).versions() if row.machine != machine]
    assert all(row.sha256 for row in others), "the sound versions got their checksums"


def test_a_quarantined_version_is_not_activated_and_holds_no_new_version_back(
    trained: Path, tmp_path: Path
) -> None:
    store = copy_trained(trained, tmp_path / "root")
    machine, path = active_file(store, "t4")
    path.write_bytes(b"")
    assert load_in_child(tmp_path / "root").returncode == 0
    registry = ModelRegistry(store)
    with pytest.raises(LookupError, match="version 1 failed its checksum: quarantined; train a new one"):
        registry.set_active(machine, 1)
    listed = subprocess.run(
        [str(BIN / "advisor"), "models", "list", "--db", str(tmp_path / "root" / "advisor.db")],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    named = labelled(machine, machine_names(store.fingerprints()))  # e.g. "t4 (b1a8f6cb)"
    assert f"{named} version 1 failed its checksum: quarantined" in listed.stdout, listed.stderr
    with store.db.conn:  # a held-out error no new version could beat
        store.db.execute("UPDATE model_versions SET heldout_mape = 0 WHERE machine = ?", [machine])
    again = train_machine(store, machine, tmp_path / "root" / "models", zoo_table)
    assert again.activated and again.version == 2
    assert load_in_child(tmp_path / "root").returncode == 0
    assert [line for line in degraded(tmp_path / "root") if machine in line] == []


def test_an_older_database_gains_the_checksum_columns(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "old.db") as db:
        db.execute("CREATE TABLE model_versions (machine TEXT, version INTEGER, path TEXT)")
        db.execute("PRAGMA user_version = 3")
    store = Store.open(tmp_path / "old.db")
    assert {"sha256", "quarantined"} <= set(store.db.table("model_versions").columns_dict)


def test_a_version_fitted_with_another_feature_layout_is_refused_until_a_retrain(
    trained: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A new timed op kind (one registry entry) adds a step feature: every stored booster would read its
    columns one place off, so none is served, and none is moved aside or quarantined for it."""
    store = copy_trained(trained, tmp_path / "root")
    assert len(active_models(store)) == len(PARTITIONS)
    width = len(current_layout().step)
    monkeypatch.setattr(known, "OPS", (*known.OPS, TIMED_POOL))
    with caplog.at_level(logging.ERROR, logger="advisor.predict"):
        assert active_models(store) == {}
    machine, path = active_file(store, "a100")
    assert path.exists() and ModelRegistry(store).quarantined(machine, 1) is None
    assert (
        f"model file {path} (the predictor of {machine}, version 1) is not served: its step booster was "
        f"fitted with another feature layout ({width} columns, this advisor's {width + 1}; new here: "
        "log_pooling_s); its "
        "partitions are predicted as if never benchmarked until `advisor models train` fits a new version"
    ) in caplog.text
    monkeypatch.undo()
    assert len(active_models(store)) == len(PARTITIONS), "served again with the layout it was fitted with"


def test_a_version_from_before_feature_layouts_is_judged_by_its_boosters_widths(
    trained: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    store = copy_trained(trained, tmp_path / "root")
    machine, path = active_file(store, "t4")
    document = json.loads(path.read_bytes())
    del document["layout"]
    data = json.dumps(document).encode()
    path.write_bytes(data)
    with store.db.conn:  # the file as written by a version before layouts, with its checksum
        store.db.execute("UPDATE model_versions SET sha256 = ? WHERE path = ?", [digest(data), str(path)])
    assert machine in active_models(store), "its boosters read as many columns as this advisor's"
    layout = current_layout()
    layer, step = len(layout.layer), len(layout.step)
    monkeypatch.setattr(known, "OPS", (*known.OPS, TIMED_POOL))
    with caplog.at_level(logging.ERROR, logger="advisor.predict"):
        assert machine not in active_models(store)
    assert (
        f"its boosters read {layer} and {step} features, this advisor's layout has {layer} and {step + 1} "
        "(fitted before model files kept their feature layout)"
    ) in caplog.text


def test_a_version_whose_op_sum_was_fitted_with_another_layout_is_refused_and_one_without_is_served(
    trained: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A term added to the op sum adds a column to its booster: a file holding an op sum of the old columns
    waits for a retrain; one holding none predicts as it did, so it is served."""
    store = copy_trained(trained, tmp_path / "root")
    machine, path = active_file(store, "t4")
    document = json.loads(path.read_bytes())
    assert document["op_sum"] is not None
    del document["op_sum"], document["blend_weight"]
    data = json.dumps(document).encode()
    path.write_bytes(data)
    with store.db.conn:  # the file as written by a version before the blend, with its checksum
        store.db.execute("UPDATE model_versions SET sha256 = ? WHERE path = ?", [digest(data), str(path)])
    width = len(current_layout().op_sum)
    monkeypatch.setattr(layout, "OP_SUM_COLUMNS", (*layout.OP_SUM_COLUMNS, "share_modules"))
    with caplog.at_level(logging.ERROR, logger="advisor.predict"):
        assert set(active_models(store)) == {machine}
    other, other_path = active_file(store, "a100")
    assert (
        f"model file {other_path} (the predictor of {other}, version 1) is not served: its op sum's booster "
        f"was fitted with another feature layout ({width} columns, this advisor's {width + 1}; new here: "
        "share_modules); its partitions are predicted as if never benchmarked until `advisor models train` "
        "fits a new version"
    ) in caplog.text
