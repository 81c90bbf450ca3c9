"""The Slurm adapter against the real sandbox cluster, locally and over SSH."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

import pytest

from advisor.sandbox.cluster import Sandbox
from advisor.slurm.client import SlurmClient
from advisor.slurm.models import FinishedJob, Gpus, QueuedJob
from advisor.slurm.runner import SlurmError

SCRIPT = "#!/bin/sh\nsleep {seconds}\n"


T = TypeVar("T")


def wait_for(probe: Callable[[], T | None], timeout_s: float = 60, what: str = "condition") -> T:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = probe()
        if value is not None:
            return value
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}")


def job_state(slurm: SlurmClient, job_id: int) -> str | None:
    jobs = [job for job in slurm.jobs(states=["all"]) if job.job_id == job_id]
    return jobs[0].state if jobs else None


def finished(slurm: SlurmClient, job_id: int, since: datetime) -> FinishedJob | None:
    jobs = [job for job in slurm.history(since, job_ids=[job_id]) if job.end_time is not None]
    return jobs[0] if jobs else None


def test_partitions_match_the_sandbox_description(slurm: SlurmClient, sandbox: Sandbox) -> None:
    partitions = {p.name: p for p in slurm.partitions()}
    assert set(partitions) == {p.name for p in sandbox.spec.partition}
    for spec in sandbox.spec.partition:
        part = partitions[spec.name]
        assert part.gpu_type == spec.gpu_type
        assert part.gpus_per_node == spec.gpus_per_node
        assert part.cpus_per_node == spec.cpus_per_node
        assert part.memory_per_node_mb == spec.memory_mb
        assert sorted(part.node_names) == spec.node_names()
        assert part.is_default == (spec.name == sandbox.spec.default_partition())
    assert partitions["a100"].max_time == timedelta(days=2)
    assert partitions["cpu"].max_time == timedelta(hours=4)


def test_nodes_report_their_gpus(slurm: SlurmClient) -> None:
    nodes = {n.name: n for n in slurm.nodes()}
    assert nodes["a100-1"].gpus is not None
    assert (nodes["a100-1"].gpus.type, nodes["a100-1"].gpus.count) == ("a100", 4)
    assert nodes["cpu-1"].gpus is None
    assert nodes["t4-2"].gpus == Gpus(type="t4", count=2)
    assert {n.name: n for n in slurm.partitions()}["v100"].node_names == ["v100-1", "v100-2"]


def test_a_job_goes_from_pending_through_running_to_completed_and_into_history(slurm: SlurmClient) -> None:
    since = datetime.now(UTC) - timedelta(seconds=5)
    submitted = slurm.submit(
        SCRIPT.format(seconds=3),
        ["--partition=t4", "--gres=gpu:t4:2", "--mem=100", "--time=2", "--begin=now+3", "--job-name=life"],
    )
    seen = [wait_for(lambda: job_state(slurm, submitted.job_id), what="the job in squeue")]
    while seen[-1] != "COMPLETED":
        state = wait_for(lambda: job_state(slurm, submitted.job_id), what="a state")
        if state != seen[-1]:
            seen.append(state)
        time.sleep(0.2)
    assert seen[0] == "PENDING"
    assert "RUNNING" in seen
    record = wait_for(lambda: finished(slurm, submitted.job_id, since), what="the job in sacct")
    assert record.state == "COMPLETED"
    assert record.name == "life"
    assert record.partition == "t4"
    assert record.gpus == 2
    assert record.exit_code == 0
    assert record.elapsed >= timedelta(seconds=3)
    assert record.time_limit == timedelta(minutes=2)
    assert record.start_time is not None and record.submit_time <= record.start_time


def test_submit_a_script_file_with_parsable_output(slurm: SlurmClient, tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    script.write_text(SCRIPT.format(seconds=0))
    result = slurm.submit(None, ["-p", "cpu", "--mem=50", "-t", "1"], script_path=str(script), parsable=True)
    assert result.job_id > 0
    assert slurm.show_job(result.job_id)["JobId"] == str(result.job_id)


def test_pending_jobs_carry_their_request_and_a_start_estimate(slurm: SlurmClient) -> None:
    options = ["-p", "v100", "--gres=gpu:v100:4", "--mem=100", "-t", "10"]
    blockers = [slurm.submit(SCRIPT.format(seconds=120), options).job_id for _ in range(2)]
    waiting = slurm.submit(SCRIPT.format(seconds=120), options).job_id
    try:

        def estimated() -> QueuedJob | None:
            job = next(j for j in slurm.jobs() if j.job_id == waiting)
            # Right after submission the reason may still read "None" until the scheduler looks at it.
            return job if job.start_time is not None and job.reason in {"Resources", "Priority"} else None

        job = wait_for(estimated, timeout_s=30, what="a start estimate from the backfill scheduler")
        assert job.state == "PENDING"
        assert (job.gpus, job.gpu_type) == (4, "v100")
        assert job.time_limit == timedelta(minutes=10)
        assert job.start_time > datetime.now(UTC)
        running = [j for j in slurm.jobs() if j.job_id in blockers]
        assert {j.state for j in running} == {"RUNNING"}
    finally:
        for job_id in [*blockers, waiting]:
            slurm.cancel(job_id)


def test_test_only_predicts_a_start_without_submitting(slurm: SlurmClient) -> None:
    before = {j.job_id for j in slurm.jobs(states=["all"])}
    estimate = slurm.test_only(SCRIPT.format(seconds=1), ["-p", "a100", "--gpus=2", "--mem=100", "-t", "5"])
    assert estimate.partition == "a100"
    assert estimate.start_time <= datetime.now(UTC) + timedelta(minutes=1)
    # Nothing new in the queue; finished jobs of earlier tests may have left it meanwhile (MinJobAge).
    assert {j.job_id for j in slurm.jobs(states=["all"])} <= before


def test_cancel_ends_a_running_job(slurm: SlurmClient) -> None:
    since = datetime.now(UTC) - timedelta(seconds=5)
    job_id = slurm.submit(SCRIPT.format(seconds=300), ["-p", "cpu", "--mem=50", "-t", "10"]).job_id
    wait_for(lambda: True if job_state(slurm, job_id) == "RUNNING" else None, what="RUNNING")
    slurm.cancel(job_id)
    record = wait_for(lambda: finished(slurm, job_id, since), what="the cancelled job in sacct")
    assert record.state.startswith("CANCELLED")


def test_sbatch_rejecting_a_job_raises_with_its_reason(slurm: SlurmClient) -> None:
    with pytest.raises(SlurmError) as caught:
        slurm.submit(SCRIPT.format(seconds=0), ["--partition=nonexistent", "--mem=50"])
    assert caught.value.returncode == 1
    assert "invalid partition" in caught.value.stderr.lower()
    assert "sbatch" in str(caught.value)


def test_users_sbatch_environment_does_not_leak_into_adapter_commands(
    slurm: SlurmClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SBATCH_PARTITION", "nonexistent")
    monkeypatch.setenv("SQUEUE_FORMAT", "%i")
    job_id = slurm.submit(SCRIPT.format(seconds=0), ["--mem=50", "-t", "1"]).job_id
    assert slurm.show_job(job_id)["Partition"] == "cpu"
    assert any(job.job_id == job_id for job in slurm.jobs(states=["all"]))


def test_a_jobs_owner_is_read_apart_from_what_the_owner_wrote(slurm: SlurmClient) -> None:
    """A comment with a newline split ``scontrol show -o job`` (the job's record was lost), and a name with
    ``UserId=`` of its own shadowed the real one; the owner's uid is asked for alone."""
    words = ["--mem=50", "-t", "1", "--hold", "--job-name=x UserId=4242(4242)"]
    words.append("--comment=a UserId=4243(4243)\nJobId=1 UserId=4244(4244)")
    job_id = slurm.submit(SCRIPT.format(seconds=0), words).job_id
    try:
        assert slurm.job_owner(job_id) == os.getuid()
    finally:
        slurm.cancel(job_id)
    assert slurm.job_owner(4_000_000_000) is None


def test_an_array_jobs_owner_is_read_once_its_tasks_have_started(slurm: SlurmClient) -> None:
    """squeue lists a started array's tasks a line each: the owner was 'not one uid', and the daemon told
    advise-submit that Slurm did not answer (CI, 752dd56)."""
    job_id = slurm.submit(SCRIPT.format(seconds=30), ["--mem=50", "-t", "1", "--array=0-1"]).job_id
    try:
        wait_for(
            lambda: [j for j in slurm.jobs() if j.array_job_id == job_id][1:] or None,
            what="a task started, listed apart from the rest",
        )
        assert slurm.job_owner(job_id) == os.getuid()
    finally:
        slurm.cancel(job_id)
