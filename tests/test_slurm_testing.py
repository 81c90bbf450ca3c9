"""The recorded Slurm (`advisor.slurm.testing`) and the adapter's users on it, with no cluster running."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from advisor.daemon.views import overview, queue_summary
from advisor.recommend.cluster import ClusterView
from advisor.slurm.client import SlurmClient
from advisor.slurm.runner import CommandResult, SlurmError
from advisor.slurm.testing import RecordedCall, RecordedRunner
from advisor.store import Store

from .slurm_recording import RECORDING

NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)


@pytest.fixture
def runner() -> RecordedRunner:
    return RecordedRunner.load(RECORDING)


def test_the_longest_recorded_words_answer_and_every_call_is_kept() -> None:
    runner = RecordedRunner(
        [
            CommandResult(("squeue",), 0, "short", ""),
            CommandResult(("squeue", "--json"), 0, "long", ""),
        ]
    )
    assert runner.run(["squeue", "--json", "--user=me"], timeout=1).stdout == "long"
    assert runner.run(["squeue", "--me"], stdin="x", timeout=1).stdout == "short"
    with pytest.raises(SlurmError, match="no recorded answer"):
        runner.run(["sinfo"], timeout=1)
    assert runner.calls == [
        RecordedCall(("squeue", "--json", "--user=me"), None),
        RecordedCall(("squeue", "--me"), "x"),
        RecordedCall(("sinfo",), None),
    ]


def test_the_recording_reads_as_the_sandbox(runner: RecordedRunner) -> None:
    client = SlurmClient(runner)
    partitions = {partition.name: partition for partition in client.partitions()}
    assert list(partitions) == ["a100", "v100", "t4", "cpu"]
    assert (partitions["t4"].gpu_type, partitions["t4"].gpus_per_node) == ("t4", 2)
    assert {(job.name, job.state) for job in client.jobs()} >= {("run", "RUNNING"), ("wait", "PENDING")}
    assert client.test_only("#!/bin/sh\ntrue\n", ["--partition=t4"]).partition == "t4"
    assert [job.name for job in client.history(NOW - timedelta(days=400))] == ["done"]


def test_the_cluster_view_asks_slurm_once_per_freshness_window(runner: RecordedRunner) -> None:
    now = [NOW]
    view = ClusterView(SlurmClient(runner), lambda: now[0], fresh_for=timedelta(minutes=1))
    for _ in range(5):
        assert view.partitions()[0].name == "a100"
    assert runner.commands() == [("scontrol", "show"), ("sinfo",)], "one query set for five requests"
    now[0] += timedelta(minutes=2)
    view.partitions()
    assert len(runner.calls) == 4, "asked again once the window has passed"
    view.history()
    view.history()
    assert runner.commands()[4:] == [("env", "TZ=UTC", "sacct")]


def test_status_sums_each_partitions_gpus_and_jobs(runner: RecordedRunner, tmp_path: Path) -> None:
    client = SlurmClient(runner)
    rows = {row.partition: row.model_dump() for row in queue_summary(client.partitions(), client.jobs())}
    assert rows["t4"] == {"partition": "t4", "gpus_used": 2, "gpus": 4, "running": 1, "pending": 1}
    assert rows["a100"]["gpus"] == 8 and rows["a100"]["running"] == 0
    unreachable = ClusterView(SlurmClient(RecordedRunner([])), lambda: NOW)
    seen = overview(Store.open(tmp_path / "advisor.db"), unreachable, None, NOW)
    assert seen.queue == [] and seen.tonight is None and seen.problems[0].startswith("Slurm did not answer")
    assert seen.models == [] and seen.savings.jobs == [], "the rest of the view is still there"


def test_a_partition_takes_jobs_while_one_of_its_nodes_serves_them(runner: RecordedRunner) -> None:
    t4 = {partition.name: partition for partition in SlurmClient(runner).partitions()}["t4"]
    assert t4.takes_jobs and all(node.serves_jobs for node in t4.nodes)
    first, second = t4.nodes
    drained = first.model_copy(update={"flags": ["DRAIN"]})
    down = second.model_copy(update={"state": "DOWN"})
    assert not drained.serves_jobs and not down.serves_jobs
    assert t4.model_copy(update={"nodes": [drained, second]}).takes_jobs, "one node still serves"
    assert not t4.model_copy(update={"nodes": [drained, down]}).takes_jobs
    assert not t4.model_copy(update={"state": "DOWN"}).takes_jobs, "a partition set down takes none"
