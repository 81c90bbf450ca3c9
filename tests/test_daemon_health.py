"""/health answers anyone (on the socket, and unauthenticated on the metrics and service ports): it names
what is degraded, never a user's data. Real commands through the daemon's own counting runner."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import cast

import pytest

from advisor.daemon.app import AdviceService, ServiceInputs
from advisor.daemon.metrics import CountingRunner, Metrics
from advisor.slurm.client import SlurmClient
from advisor.slurm.runner import LocalRunner, SlurmError

NOW = datetime(2026, 12, 4, tzinfo=UTC)
USERS_DATA = "/home/alice/thesis/train.sbatch"


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["sh", "-c", "sleep 5", f"--chdir={USERS_DATA}", "--job-name=alice-thesis"], "sh"),
        ([str(Path("/nonexistent") / "sbatch"), "--test-only", f"--chdir={USERS_DATA}"], "sbatch"),
    ],
    ids=["timed-out", "not-found"],
)
def test_health_names_the_slurm_command_that_failed_never_its_arguments(
    tmp_path: Path, argv: list[str], named: str
) -> None:
    runner = CountingRunner(LocalRunner(), Metrics())
    with pytest.raises(SlurmError) as failed:
        runner.run(argv, timeout=0.5)
    assert USERS_DATA in str(failed.value), "the error itself (for the log) keeps the whole command"
    inputs = ServiceInputs(database=tmp_path / "advisor.db", policy=tmp_path / "policy.toml", specs=[])
    advisor = AdviceService(inputs, cast(SlurmClient, None), lambda: NOW, slurm_failure=runner.failure_since)
    health = advisor.health()
    assert "alice" not in health.model_dump_json()
    said = f"Slurm did not answer: {named} did not complete (it timed out or could not run)"
    assert said in health.degraded
