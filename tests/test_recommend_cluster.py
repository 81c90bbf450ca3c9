"""What requests cost Slurm: the queue read once for a few seconds of requests, Slurm's start estimate
shared by every request for the same resources and account, the history read by the scheduler alone.
Slurm is the sandbox's recorded output (`advisor.slurm.testing`), which counts each command asked."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from advisor.recommend.cluster import SNAPSHOT_FRESH_FOR, TEST_ONLY_FRESH_FOR, ClusterView
from advisor.slurm.client import SlurmClient
from advisor.slurm.testing import RecordedRunner
from advisor.wait.snapshot import SlotRequest

RECORDING = Path(__file__).parent / "data" / "slurm" / "sandbox-22.05.recording.json"


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def view() -> tuple[ClusterView, RecordedRunner, Clock]:
    runner, clock = RecordedRunner.load(RECORDING), Clock()
    return ClusterView(SlurmClient(runner), clock), runner, clock


def asked(runner: RecordedRunner, command: str) -> int:
    return sum(command in words for words in runner.commands())


PLAIN = "#!/bin/sh\ntrue\n"


def candidate(partition: str, gpus: int) -> SlotRequest:
    return SlotRequest(partitions=[partition], gpus_per_node=gpus, time_limit=timedelta(hours=2))


def test_one_queue_read_serves_every_request_for_a_few_seconds() -> None:
    cluster, runner, clock = view()
    first = cluster.snapshot(clock.now)
    assert cluster.snapshot(clock.now + timedelta(seconds=1)) is first
    assert asked(runner, "squeue") == 1
    clock.now += SNAPSHOT_FRESH_FOR
    cluster.snapshot(clock.now)
    assert asked(runner, "squeue") == 2, "then read again"


def test_slurms_estimate_is_shared_by_requests_for_the_same_resources_and_account() -> None:
    cluster, runner, clock = view()
    alice = cluster.start_estimate(candidate("t4", 1), "#!/bin/sh\n#SBATCH --job-name=a\n", "physics")
    bob = cluster.start_estimate(candidate("t4", 1), "#!/bin/sh\n#SBATCH --job-name=b\n", "physics")
    assert alice == bob and alice[0] is not None
    assert asked(runner, "sbatch") == 1
    cluster.start_estimate(candidate("t4", 2), PLAIN, "physics")
    cluster.start_estimate(candidate("t4", 1), PLAIN, "chemistry")
    assert asked(runner, "sbatch") == 3, "other resources, another account: asked anew"
    clock.now += TEST_ONLY_FRESH_FOR
    cluster.start_estimate(candidate("t4", 1), PLAIN, "physics")
    assert asked(runner, "sbatch") == 4


def test_with_a_scheduler_refreshing_it_no_request_reads_the_history() -> None:
    cluster, runner, clock = view()
    cluster.refresh_history()
    assert asked(runner, "sacct") == 1
    clock.now += timedelta(hours=1)  # long past its freshness: the scheduler, not a request, reads it
    assert cluster.history() and asked(runner, "sacct") == 1
    cold, cold_runner, _ = view()
    cold.history()
    assert asked(cold_runner, "sacct") == 1, "with no scheduler, the first ask reads it"
