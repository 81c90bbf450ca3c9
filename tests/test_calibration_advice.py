"""What advice gives calibration to record: each candidate's p10 run, the correction it feeds (a scaled
prediction's partition) and its predicted start-up plus one epoch. The recommender on the sandbox cluster,
with t4's predictor of `tests/recommend_support.py`."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from advisor.bench.results import read_jsonl
from advisor.bench.tables import zoo_table
from advisor.introspect.run import introspect
from advisor.jobscript.submission import parse_submission
from advisor.policy.load import parse_policy
from advisor.predict.registry import machines, train_machine
from advisor.recommend.choose import Recommendation
from advisor.recommend.cluster import ClusterView
from advisor.recommend.edges import Sources, recommend_now
from advisor.slurm.client import SlurmClient
from advisor.store import Store

from .recommend_support import FIXTURE, relabel

START_UP_S = 5 * 60
POLICY = f'mode = "rewrite"\n[overhead]\nstartup_minutes = {START_UP_S // 60}\nper_epoch_seconds = 30\n'
SCRIPT = """#!/bin/sh
#SBATCH --partition=t4
#SBATCH --gres=gpu:1
#SBATCH --time=2-00:00:00
#SBATCH --output=/dev/null
#ADVISOR --model=resnet18 --num-classes=10 --input-shape=3,32,32 --global-batch=32 {length}
python train.py
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """Only t4 benchmarked and trained (about 8 s): a100 and v100 are scaled from it."""
    root = tmp_path_factory.mktemp("advice")
    store = Store.open(root / "advisor.db")
    store.ingest(relabel(line, "t4") for line in read_jsonl(FIXTURE))
    (machine,) = machines(store)
    train_machine(store, machine, root / "models", zoo_table)
    return store


def advise(client: SlurmClient, store: Store, tmp_path: Path, length: str) -> Recommendation:
    script = tmp_path / "train.sbatch"
    script.write_text(SCRIPT.format(length=length), encoding="utf-8")
    parsed = parse_submission(script, [], {})
    assert parsed.description is not None
    table = introspect("resnet18", (3, 32, 32), {"num_classes": 10}, allow_factories=False)
    now = datetime.now(UTC)
    policy = parse_policy(POLICY, "policy.toml")
    return recommend_now(
        Sources(ClusterView(client, lambda: now), store, policy, []), parsed, table, "alice", now
    )


def test_each_candidate_carries_its_p10_its_calibration_key_and_its_start_up_and_one_epoch(
    local_slurm: SlurmClient, store: Store, tmp_path: Path
) -> None:
    """20 epochs of 50,000 samples: start-up plus one epoch is the 5-minute start-up and a twentieth of
    the rest. Given as steps with no dataset size, a job's epochs are unknown: no such figure."""
    result = advise(local_slurm, store, tmp_path, "--epochs=20 --dataset-size=50000")
    assert {c.candidate.partition for c in result.candidates} == {"a100", "v100", "t4"}
    for candidate in result.candidates:
        assert candidate.run_p10_s is not None and candidate.run_p10_s < candidate.run_s < candidate.run_p90_s
        partition = candidate.candidate.partition
        scaled = "scaled:" + partition
        assert candidate.calibration_key == (candidate.machine if partition == "t4" else scaled), partition
        first = START_UP_S + (candidate.run_s - START_UP_S) / 20
        assert candidate.comparable_from_s == pytest.approx(first), partition
    by_steps = advise(local_slurm, store, tmp_path, "--steps=30000")
    assert by_steps.candidates and all(c.comparable_from_s is None for c in by_steps.candidates)
