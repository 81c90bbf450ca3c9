"""What a job's link to its advice records for calibration (`advisor.daemon.links`): the correction it feeds
(a scaled prediction's partition, not the machine it was scaled from), its p10 run, its start-up plus one
epoch and its architecture. A real job on the sandbox (its owner is Slurm's word), a real SQLite store."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from advisor.api import Submitted
from advisor.cli import main
from advisor.daemon.links import JobLinks
from advisor.daemon.metrics import Metrics
from advisor.daemon.transport import Peer
from advisor.predict.outcomes import collect_outcomes, corrections, load_outcomes
from advisor.recommend.candidates import baseline
from advisor.sandbox.cluster import Sandbox
from advisor.slurm.client import SlurmClient
from advisor.slurm.runner import LocalRunner
from advisor.store import AdvisedJobs, Audit, AuditRow, Store

from .test_recommend_pure import T4, describe, estimate, recommended

ARCHITECTURE = "ab" * 32


def test_a_job_advised_on_a_scaled_prediction_feeds_its_partitions_correction_with_its_p10(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Advised on t4, never benchmarked: its prediction was scaled from machine m-a100, so its run corrects
    ``scaled:t4``; before, it corrected m-a100, whose own predictions it says nothing of. A 1-s job
    predicted at 2 s with a p10 of 0.5 s and 0.8 s of start-up and one epoch: comparable, over its p10."""
    client = SlurmClient(LocalRunner(env=sandbox.client_env()))
    store = Store.open(tmp_path / "advisor.db")
    chosen = estimate(
        baseline(describe(), T4, 1),
        run=2.0,
        wait=0.0,
        machine="m-a100",
        calibration_key="scaled:t4",
        run_p10_s=0.5,
        comparable_from_s=0.8,
    )
    Audit(store).record(
        AuditRow(
            request_id="r1",
            at=datetime.now(UTC),
            uid=os.getuid(),
            user="alice",
            where="job.sh",
            argv="[]",
            request="{}",
            recommendation=recommended([chosen], chosen, chosen).model_dump_json(),
            offered=False,
            latency_ms=1.0,
            architecture_hash=ARCHITECTURE,
        )
    )
    job = client.submit("#!/bin/sh\nsleep 1\n", ["--partition=t4", "--time=2", "--output=/dev/null"])
    links = JobLinks(client, lambda: datetime.now(UTC), Metrics())
    links.link(
        store,
        Peer(pid=os.getpid(), uid=os.getuid(), gid=os.getgid()),
        Submitted(request_id="r1", job_id=job.job_id, applied=True),
    )
    (row,) = AdvisedJobs(store).unfinished()
    assert (row.machine, row.calibration_key, row.architecture) == (
        "m-a100",
        "scaled:t4",
        ARCHITECTURE,
    )
    assert (row.predicted_p10_s, row.comparable_from_s) == (0.5, 0.8)

    deadline = time.monotonic() + 60
    while collect_outcomes(store, client) == 0:
        assert time.monotonic() < deadline, "the job never showed in Slurm's history"
        time.sleep(1)
    (outcome,) = load_outcomes(store)
    assert outcome.state == "COMPLETED" and outcome.comparable and outcome.actual_s >= 1
    assert (outcome.machine, outcome.architecture, outcome.predicted_p10_s) == (
        "scaled:t4",
        ARCHITECTURE,
        0.5,
    )
    assert set(corrections(store)) == {"scaled:t4"}, "not m-a100: its predictions were not the ones tested"

    monkeypatch.setenv("SLURM_CONF", sandbox.client_env()["SLURM_CONF"])
    monkeypatch.setenv("COLUMNS", "300")  # the report's table on one line a row
    assert main(["report", "--db", str(tmp_path / "advisor.db"), "--json"]) == 0
    (partition,) = json.loads(capsys.readouterr().out)["partitions"]
    under = {c["quantile"]: (c["under"], c["judged"]) for c in partition["coverage"]}
    assert under["p10"] == (0, 1), "the p10 recorded, and the job ran past it"
    assert main(["report", "--db", str(tmp_path / "advisor.db")]) == 0
    (line,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("│ t4")]
    assert "0% of 1 (10% expected)" in line, "under p10 filled, not '-'"
