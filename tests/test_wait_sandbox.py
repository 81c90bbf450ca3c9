"""Both wait estimators on the real sandbox cluster: a partition filled with jobs waits, an idle one not."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from advisor.sandbox.cluster import Sandbox
from advisor.slurm.client import SlurmClient
from advisor.slurm.runner import LocalRunner
from advisor.wait.collect import take_snapshot
from advisor.wait.estimate import QueueReading, ask_test_only, estimate_waits
from advisor.wait.snapshot import SlotRequest

SLEEP = "#!/bin/sh\nsleep 600\n"
#: A script whose own task layout the candidate's resources override.
LAYOUT = "#!/bin/sh\n#SBATCH --ntasks=4\n#SBATCH -N 2\ntrue\n"
# t4 has two nodes of two GPUs: two ten-minute jobs of two GPUs fill it, and a third waits.
T4_JOB = ["--partition=t4", "--gres=gpu:2", "--mem=100", "--time=10", "--job-name=wait-blocker"]


def states(slurm: SlurmClient, job_ids: list[int], wanted: list[str], timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while [next(j.state for j in slurm.jobs() if j.job_id == job_id) for job_id in job_ids] != wanted:
        assert time.monotonic() < deadline, f"jobs {job_ids} did not become {wanted}"
        time.sleep(0.2)


def candidate(partition: str) -> SlotRequest:
    return SlotRequest(
        partitions=[partition], gpus_per_node=1, memory_mb_per_node=100, time_limit=timedelta(minutes=5)
    )


def test_a_full_partition_waits_for_its_jobs_and_an_idle_one_starts_now(sandbox: Sandbox) -> None:
    slurm = SlurmClient(LocalRunner(env=sandbox.client_env()), timeout_s=20)
    history = slurm.history(datetime.now(UTC) - timedelta(days=1))
    jobs = [slurm.submit(SLEEP, T4_JOB).job_id for _ in range(3)]
    try:
        states(slurm, jobs, ["RUNNING", "RUNNING", "PENDING"])
        now = datetime.now(UTC)
        state = take_snapshot(slurm, now)
        held = {job.job_id: job for job in state.running if job.job_id in jobs}
        assert sorted(alloc.node for job in held.values() for alloc in job.allocations) == ["t4-1", "t4-2"]
        assert {(alloc.gpus, alloc.memory_mb) for job in held.values() for alloc in job.allocations} == {
            (2, 100)
        }
        first = held[jobs[0]]
        assert first.limit_end == first.start_time + timedelta(minutes=10)
        (waiting,) = [job for job in state.pending if job.job_id == jobs[2]]
        assert waiting.request == SlotRequest(
            partitions=["t4"], gpus_per_node=2, memory_mb_per_node=100, time_limit=timedelta(minutes=10)
        )

        # The advisor predicted its jobs: the first ends two minutes after it started, the second after
        # ten; the waiting one will start then and take five more, and only then is a GPU free again.
        predictions = {jobs[0]: 120.0, jobs[1]: 600.0, jobs[2]: 300.0}
        queue = QueueReading.now(slurm, now)
        t4, a100 = estimate_waits([candidate("t4"), candidate("a100")], now, predictions, history, queue)
        # A script's own task layout gives way to the candidate's.
        scripted = QueueReading(queue.snapshot, lambda request: ask_test_only(slurm, request, LAYOUT))
        (own,) = estimate_waits([candidate("a100")], now, predictions, history, scripted)
        assert own.slurm_error is None
        assert (a100.slurm_error, a100.advisor_wait_s) == (None, 0)
        assert a100.slurm_wait_s is not None and a100.slurm_wait_s < 5
        assert t4.advisor_wait_s is not None and t4.slurm_wait_s is not None
        advisor_start, slurm_start = (
            now + timedelta(seconds=t4.advisor_wait_s),
            now + timedelta(seconds=t4.slurm_wait_s),
        )
        assert abs((advisor_start - (first.start_time + timedelta(seconds=420))).total_seconds()) < 1
        # Slurm plans with time limits: the waiting job takes the first node when its job's limit is up,
        # and the candidate gets the second node when that one's is.
        assert slurm_start >= first.start_time + timedelta(minutes=9)
        assert slurm_start > advisor_start
        assert t4.advisor_wait_s is not None and t4.advisor_wait_s > a100.advisor_wait_s + 60
        assert t4.slurm_wait_s is not None and t4.slurm_wait_s > a100.slurm_wait_s + 60
        assert (t4.preferred, a100.preferred) == ("slurm", "slurm")
    finally:
        for job_id in jobs:
            slurm.cancel(job_id)
