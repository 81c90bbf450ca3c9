"""The history model's file is trusted only as written: a corrupted one never reaches xgboost, is quarantined,
named in the log and in /health, and Tsafrir's rule serves. Real xgboost; every load that a corrupted file
could crash runs in a child process, whose exit status a crash would be (-11 before the checksum)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest

from advisor.daemon.app import AdviceService, ServiceInputs
from advisor.history.features import past_rows
from advisor.history.predictor import train_model
from advisor.history.service import save_model
from advisor.predict.model_files import QUARANTINE_SUFFIX, digest
from advisor.slurm.client import SlurmClient

from .model_file_support import flipped, truncated
from .test_history import synthetic

NOW = datetime(2026, 12, 4, tzinfo=UTC)
CHILD = """
import json, logging, sys
from pathlib import Path
from advisor.history.predictor import FEATURES
from advisor.history.service import RunHistory

logging.basicConfig(level=logging.INFO, stream=sys.stderr)
history = RunHistory(Path(sys.argv[1]))
trained = history.trained()
if trained is not None:  # what a forecast does with it
    trained.model.quantiles([[1.0] * len(FEATURES)] * 4)
print(json.dumps({"used": trained is not None, "problem": getattr(history, "problem", None)}))
"""


def in_trees(seed: int) -> Callable[[bytes], bytes]:
    """One child index or split feature of a tree set far out of range, the file still valid JSON: what
    xgboost's parser takes without a word and then crashes on (a segfault, -11, when this was written)."""

    def corrupt(data: bytes) -> bytes:
        rng = random.Random(seed)
        record = json.loads(data)
        trees = record["booster"]["learner"]["gradient_booster"]["model"]["trees"]
        tree = trees[rng.randrange(len(trees))]
        field = rng.choice(["left_children", "right_children", "split_indices"])
        tree[field][rng.randrange(len(tree[field]))] = rng.randrange(1 << 20, 1 << 30)
        return json.dumps(record).encode()

    return corrupt


CORRUPTIONS: dict[str, Callable[[bytes], bytes]] = {
    **{f"in-trees-{seed}": in_trees(seed) for seed in range(42, 46)},
    **{f"truncated-{seed}": truncated(seed) for seed in range(3)},
    **{f"flipped-{seed}": flipped(seed) for seed in range(3)},
    "empty": lambda _data: b"",
    "garbage": lambda _data: random.Random(46).randbytes(4096),
    "json-list": lambda _data: b"[]",
    "no-booster": lambda data: json.dumps({**json.loads(data), "booster": None}).encode(),
}


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A history model file as a night writes it."""
    jobs = synthetic()
    rows, ended = past_rows(jobs, until=jobs[-1].end_s)
    model = train_model(rows, ended)
    assert model is not None
    path = tmp_path_factory.mktemp("history") / "history-model.json"
    save_model(path, model, NOW)
    return path.read_bytes()


def load_in_child(path: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    loaded = subprocess.run(
        [sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, timeout=120
    )
    assert loaded.returncode == 0, f"the loader died ({loaded.returncode}): {loaded.stderr[-2000:]}"
    return loaded, json.loads(loaded.stdout)


def degraded(root: Path) -> list[str]:
    inputs = ServiceInputs(
        database=root / "advisor.db", policy=root / "policy.toml", specs=[], history_model=root / "h.json"
    )
    service = AdviceService(inputs, cast(SlurmClient, None), lambda: NOW)
    assert service.run_history is not None
    service.run_history.trained()
    return service.health().degraded


def test_a_history_model_is_written_with_the_checksum_of_what_xgboost_reads(
    written: bytes, tmp_path: Path
) -> None:
    record = json.loads(written)
    assert record["sha256"] == digest(json.dumps(record["booster"]).encode())
    (tmp_path / "h.json").write_bytes(written)
    loaded, answer = load_in_child(tmp_path / "h.json")
    assert answer == {"used": True, "problem": None}, loaded.stderr
    assert not [line for line in degraded(tmp_path) if "history model" in line]


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_a_corrupted_history_model_is_quarantined_and_tsafrirs_rule_serves(
    written: bytes, tmp_path: Path, corruption: str
) -> None:
    path = tmp_path / "h.json"
    path.write_bytes(CORRUPTIONS[corruption](written))
    loaded, answer = load_in_child(path)
    assert not answer["used"]
    assert answer["problem"] is not None and answer["problem"].startswith("the history model h.json ")
    assert answer["problem"].endswith(
        ": quarantined; history advice uses Tsafrir's rule until a new one is trained (tonight, or "
        "`advisor history train`)"
    )
    assert not path.exists() and path.with_name(path.name + QUARANTINE_SUFFIX).exists(), "moved aside"
    assert f"history model {path} " in loaded.stderr and "quarantined, moved to" in loaded.stderr
    path.write_bytes(CORRUPTIONS[corruption](written))
    assert [line for line in degraded(tmp_path) if "history model" in line] == [answer["problem"]]


def test_a_history_model_from_before_checksums_is_not_loaded_nor_quarantined(
    written: bytes, tmp_path: Path
) -> None:
    path = tmp_path / "h.json"
    record = json.loads(written)
    del record["sha256"]
    path.write_text(json.dumps(record), encoding="utf-8")
    loaded, answer = load_in_child(path)
    assert answer == {"used": False, "problem": None}
    assert path.exists(), "not corrupted: left for the retrain to replace"
    assert f"history model {path} not used, Tsafrir's rule serves: written before checksums" in loaded.stderr
