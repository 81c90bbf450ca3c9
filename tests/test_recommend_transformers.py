"""Issue 52's done-when: each of six jobs as written, without `#ADVISOR` lines, gets a model-based
prediction with an explanation from the recommender on the sandbox, offline (models built on the meta
device from configurations and timm's registry: the network is refused throughout)."""

from __future__ import annotations

import json
import os
import socket
from datetime import UTC, datetime
from pathlib import Path

import pytest

from advisor.factory_table import table_for
from advisor.introspect.run import TaskInput, introspect
from advisor.introspect.table import TrainingSettings
from advisor.introspect.training import training_time_factor
from advisor.policy.load import parse_policy
from advisor.predict.registry import active_models
from advisor.recommend.cluster import ClusterView
from advisor.recommend.edges import Sources, recommend_now
from advisor.slurm.client import SlurmClient
from advisor.store import Store

from .recommend_support import trained_store
from .test_introspect_training import CHECKPOINTING, LORA, TINY, TOKENS
from .test_jobscript_trainers import JOBS, parsed_in, write_jobs
from .test_recommend_sandbox import POLICY


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    return trained_store(tmp_path_factory.mktemp("recommend"))


@pytest.mark.parametrize("job", list(JOBS))
def test_each_job_as_written_gets_a_model_prediction_with_an_explanation(
    job: str, local_slurm: SlurmClient, store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the advice tried the network")

    parsed = parsed_in(tmp_path, write_jobs(tmp_path)[job], monkeypatch)
    assert parsed.description is not None
    monkeypatch.setattr(socket, "getaddrinfo", refuse)  # Slurm is asked over its own local sockets
    table = table_for(parsed.description, allow_factories=True, environ=dict(os.environ))
    now = datetime.now(UTC)
    sources = Sources(ClusterView(local_slurm, lambda: now), store, parse_policy(POLICY, "policy.toml"), [])
    result = recommend_now(sources, parsed, table, "alice", now)
    assert result.candidates, result.reasons
    assert all(e.model_version >= 1 and e.peak_memory_bytes > 0 for e in result.candidates), "from the model"
    assert result.reasons and all(reason.strip() for reason in result.reasons)


@pytest.mark.parametrize("training", [LORA, CHECKPOINTING], ids=["lora", "checkpointing"])
def test_each_machines_predictor_applies_how_the_job_trains(
    training: TrainingSettings, store: Store, tmp_path: Path
) -> None:
    """The stored predictors, asked about a tiny GPT-2 as trained in full and with the setting: the step
    moves by the counted work (`training_time_factor`), the memory as `estimate_peak_memory` says."""
    (tmp_path / "config.json").write_text(json.dumps(TINY), encoding="utf-8")
    full = introspect(f"hf:{tmp_path}", allow_factories=True, given=TaskInput(TOKENS, "causal-lm"))
    trained = full.trained(training)
    for model, _version in active_models(store).values():
        plain, changed = (model.predict(table, 8, False, False) for table in (full, trained))
        factor = training_time_factor(trained, 8)
        assert changed.step_s == pytest.approx(plain.step_s * factor, rel=1e-9), model.machine
        assert changed.peak_memory_bytes < plain.peak_memory_bytes, model.machine
