"""Replaying a workload on the sandbox Slurm cluster: each job is a sleep job, in compressed time.

Simulated seconds become real ones divided by ``compression`` (60: a real second is a simulated minute).
What that costs in fidelity, for the report to state:

- Slurm's time limits have a one-minute resolution, so a job's real limit is its simulated limit rounded
  up to ``compression`` simulated minutes. Slurm would kill it late; the job kills itself instead, by
  sleeping ``min(true run, limit)``, and is marked timed out when its true run exceeds its limit.
- Slurm's timestamps have a one-second resolution: starts and ends are known to ``compression`` seconds.
- Scheduling passes, job launch and the runner's own polling take real time, a second or so each, which
  is ``compression`` simulated seconds of extra wait per job that a real cluster would not have.
- The backfill scheduler plans at ``bf_resolution`` (one real second) and looks ``BACKFILL_WINDOW_MIN``
  real minutes ahead; a job whose compressed limit is longer is not planned for.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from advisor.sandbox.cluster import Sandbox
from advisor.sandbox.spec import PartitionSpec, SandboxSpec, SchedulerSpec
from advisor.slurm.client import SlurmClient
from advisor.slurm.models import FinishedJob
from advisor.wait.collect import take_snapshot
from advisor.wait.estimate import WaitRequest, ask_test_only, sbatch_options, slurm_start_estimates
from advisor.wait.remaining import MIN_REMAINING_S, RatioTable, estimate_runtimes
from advisor.wait.simulate import predict_starts
from advisor.wait.snapshot import SlotRequest
from benchmarks.harness.model import (
    Arm,
    ArmName,
    Decision,
    Inventory,
    Job,
    Outcome,
    TrueRunTime,
    WaitQuery,
)

#: Real minutes the backfill scheduler (and the advisor's replay of it) looks ahead: a real day.
BACKFILL_WINDOW_MIN = 1440
#: Scheduling as often as Slurm allows, so that a real second of delay is the most any job sees.
REPLAY_SCHEDULER = SchedulerSpec(
    sched_interval_s=1,
    bf_interval_s=1,
    bf_resolution_s=1,
    bf_window_min=BACKFILL_WINDOW_MIN,
    bf_continue=True,
    # Ended jobs leave squeue soon, but not before a poll has seen them end.
    min_job_age_s=30,
)
#: Each job takes one CPU and this much memory per node; nodes have one CPU and this much per GPU, so
#: only GPUs constrain.
JOB_MEMORY_MB = 100
#: Real seconds between looks at the queue for jobs that ended.
POLL_S = 0.5
#: Slurm states of a job that has not ended.
_LIVE = frozenset({"PENDING", "CONFIGURING", "RUNNING", "SUSPENDED", "REQUEUED", "RESIZING"})
#: Accounting states of a sleep job that ended as planned; TIMEOUT when its sleep met a whole-minute limit.
_ENDED_AS_PLANNED = frozenset({"COMPLETED", "TIMEOUT"})


class ReplayError(RuntimeError):
    """The replay could not produce a trustworthy outcome (a job failed, accounting lost a job)."""


def replay_spec(inventory: Inventory, base_port: int) -> SandboxSpec:
    """A sandbox with one partition per pool, scheduling in compressed time."""
    partitions = [
        PartitionSpec(
            name=pool.partition,
            nodes=pool.nodes,
            cpus_per_node=pool.gpus_per_node,
            memory_mb=JOB_MEMORY_MB * pool.gpus_per_node,
            gpu_type=pool.gpu_type,
            gpus_per_node=pool.gpus_per_node,
        )
        for pool in inventory.pools
    ]
    return SandboxSpec(name="replay", base_port=base_port, partition=partitions, scheduler=REPLAY_SCHEDULER)


def real_limit(limit_s: float, compression: float) -> timedelta:
    """A simulated limit in real time, rounded up to Slurm's whole minutes."""
    return timedelta(minutes=max(1, math.ceil(limit_s / compression / 60)))


def job_request(query: WaitQuery, compression: float) -> SlotRequest:
    """What a replayed job asks Slurm for: GPUs spread evenly over its nodes, one CPU and a little memory."""
    return SlotRequest(
        partitions=[query.partition],
        nodes=query.nodes,
        gpus_per_node=math.ceil(query.gpus / query.nodes),
        cpus_per_node=1,
        memory_mb_per_node=JOB_MEMORY_MB,
        time_limit=real_limit(query.time_limit_s, compression),
    )


def sleep_script(real_s: float) -> str:
    return f"#!/bin/sh\nexec sleep {real_s:.3f}\n"


def simulated_wait(start: datetime | None, now: datetime, compression: float) -> float | None:
    """Whole real seconds, as Slurm reports starts: a start "now" may print a second early or late, and
    compressed that jitter would be ``compression`` seconds of made-up difference between partitions."""
    return None if start is None else max(round((start - now).total_seconds()), 0) * compression


class LiveQueue:
    """The queue view of a replay: both estimators asked of the live sandbox, in simulated seconds.

    ``predicted_run_s`` maps Slurm job ids to the simulated run time their arm predicted; the replay adds
    to it as it submits, and the advisor's estimator reads it (jobs without a prediction run to their limit).
    """

    def __init__(self, client: SlurmClient, compression: float, predicted_run_s: Mapping[int, float]) -> None:
        self._client = client
        self._compression = compression
        self._predicted_run_s = predicted_run_s

    def slurm_waits(self, queries: Sequence[WaitQuery]) -> list[float | None]:
        now = datetime.now(UTC)
        candidates = [WaitRequest(request=job_request(query, self._compression)) for query in queries]
        answers = slurm_start_estimates(lambda candidate: ask_test_only(self._client, candidate), candidates)
        return [simulated_wait(start, now, self._compression) for start, _ in answers]

    def advisor_waits(self, queries: Sequence[WaitQuery]) -> list[float | None]:
        now = datetime.now(UTC)
        snapshot = take_snapshot(self._client, now)
        predictions = {job_id: run_s / self._compression for job_id, run_s in self._predicted_run_s.items()}
        runtimes = estimate_runtimes(
            snapshot, now, RatioTable(), predictions, minimum_s=MIN_REMAINING_S / self._compression
        )
        requests = [job_request(query, self._compression) for query in queries]
        starts = predict_starts(snapshot, runtimes, requests, now, timedelta(minutes=BACKFILL_WINDOW_MIN))
        return [simulated_wait(start, now, self._compression) for start in starts]


@dataclass(frozen=True)
class Submission:
    """One sbatch of a job: its first run, or the user's rerun after the first hit its time limit."""

    job: Job
    decision: Decision
    true_run_s: float
    limit_s: float
    job_id: int
    rerun_of: int | None
    """The first run's job id, for a rerun."""

    @property
    def timed_out(self) -> bool:
        return self.true_run_s > self.limit_s


class SlurmReplay:
    """Replays one arm's decisions on a running sandbox; ``run`` returns once every job has ended."""

    def __init__(
        self, sandbox: Sandbox, arm: Arm, arm_name: ArmName, truth: TrueRunTime, compression: float
    ) -> None:
        self._client = sandbox.client
        self._scripts = sandbox.layout.root / "jobs"
        self._arm = arm
        self._arm_name = arm_name
        self._truth = truth
        self._compression = compression
        self._predicted_run_s: dict[int, float] = {}
        self.queue = LiveQueue(self._client, compression, self._predicted_run_s)
        self._submissions: list[Submission] = []
        self._live: dict[int, Submission] = {}

    def run(self, jobs: Sequence[Job]) -> list[Outcome]:
        """Submit each job at its compressed arrival time, rerun the timed-out ones, wait for all."""
        self._scripts.mkdir(parents=True, exist_ok=True)
        arrivals = sorted(jobs, key=lambda job: job.arrival.time_s)
        started, clock = datetime.now(UTC), time.monotonic()
        while arrivals or self._live:
            while arrivals and arrivals[0].arrival.time_s / self._compression <= time.monotonic() - clock:
                self._arrive(arrivals.pop(0))
            self._handle_ended()
            until_next = (
                arrivals[0].arrival.time_s / self._compression - (time.monotonic() - clock)
                if arrivals
                else POLL_S
            )
            time.sleep(min(max(until_next, 0.0), POLL_S))
        return self._outcomes(started)

    def _arrive(self, job: Job) -> None:
        decision = self._arm(job, self.queue)
        self._submit(job, decision, self._truth(job, decision.config), decision.time_limit_s, rerun_of=None)

    def _submit(
        self, job: Job, decision: Decision, true_run_s: float, limit_s: float, rerun_of: int | None
    ) -> None:
        script = self._scripts / f"{len(self._submissions)}.sh"
        script.write_text(sleep_script(min(true_run_s, limit_s) / self._compression))
        query = decision.query(limit_s)
        options = [
            f"--job-name={job.arrival.name}",
            "--output=/dev/null",
            *sbatch_options(job_request(query, self._compression)),
        ]
        job_id = self._client.submit(None, options, script_path=str(script), parsable=True).job_id
        submission = Submission(job, decision, true_run_s, limit_s, job_id, rerun_of)
        self._submissions.append(submission)
        self._live[job_id] = submission
        if decision.predicted_run_s is not None:
            self._predicted_run_s[job_id] = decision.predicted_run_s

    def _handle_ended(self) -> None:
        """Forget jobs that left the queue; a first run that hit its limit is rerun under the user's limit."""
        if not self._live:
            return
        live = {job.job_id for job in self._client.jobs() if job.state in _LIVE}
        for job_id in [job_id for job_id in self._live if job_id not in live]:
            ended = self._live.pop(job_id)
            if ended.timed_out and ended.rerun_of is None:
                self._submit(
                    ended.job, ended.decision, ended.true_run_s, ended.job.user_limit_s, rerun_of=job_id
                )

    def _outcomes(self, started: datetime, timeout_s: float = 60.0) -> list[Outcome]:
        records = self._accounting(started, timeout_s)
        last_run = {s.rerun_of: s.job_id for s in self._submissions if s.rerun_of is not None}
        return [
            outcome(
                self._arm_name,
                first,
                records[first.job_id],
                records[last_run.get(first.job_id, first.job_id)],
                started,
                self._compression,
            )
            for first in self._submissions
            if first.rerun_of is None
        ]

    def _accounting(self, started: datetime, timeout_s: float) -> dict[int, FinishedJob]:
        """Every submission's record from sacct, which slurmdbd may write a moment after the job ends."""
        wanted = {s.job_id for s in self._submissions}
        deadline = time.monotonic() + timeout_s
        while True:
            history = self._client.history(started - timedelta(minutes=1), job_ids=sorted(wanted))
            records = {record.job_id: record for record in history if record.job_id in wanted}
            if len(records) == len(wanted):
                break
            if time.monotonic() > deadline:
                raise ReplayError(f"accounting has no record of jobs {sorted(wanted - set(records))}")
            time.sleep(POLL_S)
        failed = [f"{r.job_id} ({r.state})" for r in records.values() if r.state not in _ENDED_AS_PLANNED]
        if failed:
            raise ReplayError(f"sleep jobs that did not end as planned: {', '.join(failed)}")
        return records


def outcome(
    arm_name: ArmName,
    first: Submission,
    first_record: FinishedJob,
    last_record: FinishedJob,
    started: datetime,
    compression: float,
) -> Outcome:
    """A job in simulated seconds; a rerun job starts with its rerun, and its killed run is kept apart."""

    def simulated(when: datetime | None) -> float:
        if when is None:
            raise ReplayError(f"job {first_record.job_id} or its rerun ended without starting")
        # Slurm truncates to whole seconds: the middle of that second halves the worst error.
        return ((when - started).total_seconds() + 0.5) * compression

    rerun = last_record is not first_record
    return Outcome(
        name=first.job.arrival.name,
        arm=arm_name,
        arrival_s=first.job.arrival.time_s,
        start_s=simulated(last_record.start_time),
        end_s=simulated(last_record.end_time),
        decision=first.decision,
        true_run_s=first.true_run_s,
        timed_out=first.timed_out,
        killed_start_s=simulated(first_record.start_time) if rerun else None,
        submitted_s=simulated(first_record.submit_time),
    )


def run_on_slurm(
    jobs: Sequence[Job],
    arm: Arm,
    arm_name: ArmName,
    inventory: Inventory,
    truth: TrueRunTime,
    compression: float,
    root: Path,
    base_port: int,
    *,
    keep_up: bool = False,
) -> list[Outcome]:
    """Replay one arm on its own sandbox in ``root`` (ports from ``base_port``), then take it down."""
    sandbox = Sandbox(replay_spec(inventory, base_port), root)
    sandbox.up(timeout_s=300)
    try:
        return SlurmReplay(sandbox, arm, arm_name, truth, compression).run(jobs)
    finally:
        if not keep_up:
            sandbox.down()


def run_arms_on_slurm(
    jobs: Sequence[Job],
    arms: Sequence[tuple[ArmName, Arm]],
    inventory: Inventory,
    truth: TrueRunTime,
    compression: float,
    root: Path,
    base_port: int,
) -> dict[ArmName, list[Outcome]]:
    """Replay every arm at once, each on its own sandbox (``root/NAME``, consecutive port blocks).

    The arms run in threads of this process, so an arm's models must tolerate being called concurrently.
    """
    ports = replay_spec(inventory, base_port).port_count()
    with ThreadPoolExecutor(max_workers=len(arms)) as pool:
        futures = {
            name: pool.submit(
                run_on_slurm,
                jobs,
                arm,
                name,
                inventory,
                truth,
                compression,
                root / name,
                base_port + i * ports,
            )
            for i, (name, arm) in enumerate(arms)
        }
        return {name: future.result() for name, future in futures.items()}
