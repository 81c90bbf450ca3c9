"""Replaying a workload on the sandbox Slurm cluster: each job is a sleep job, in compressed time.

Simulated seconds become real ones divided by ``compression`` (60: a real second is a simulated minute).
What that costs in fidelity, for the report to state:

- Slurm's time limits have a one-minute resolution, so a job's real limit is its simulated limit rounded
  up to ``compression`` simulated minutes. Slurm would kill it late; the job kills itself instead, by
  sleeping ``min(true run, limit)``, and is marked timed out when its true run exceeds its limit.
- Slurm's timestamps have a one-second resolution: starts and ends are known to ``compression`` seconds.
  Submissions the harness times itself, to the millisecond (``ReplayOutcome.sbatch_s``), and the twin
  takes those.
- Jobs start only in backfill passes, one every real second (``sched_interval=-1``: Slurm's main
  scheduler off). With it on, a job started 50-1,000 ms after the event that freed its nodes (the main
  scheduler's latency; nothing on a real cluster, 20-400 workload seconds here), and which job took a
  node that freed within a real second followed that order, which no twin can know; a pass instead sees
  all that a second brought at once, in priority order, at times its log records.
- Scheduling passes, job launch and the runner's own polling take real time, a second or so each, which
  is ``compression`` simulated seconds of extra wait per job that a real cluster would not have.
- The backfill scheduler plans at ``bf_resolution`` (one real second) and looks ``BACKFILL_WINDOW_MIN``
  real minutes ahead; a job whose compressed limit is longer is not planned for.
- Slurm's will-run test (behind backfill's slots and ``--test-only``) frees running jobs in batches that
  end at marks on the real clock (the first planned end rounded up to 30 s, then 30, 60, 120 ... s on),
  walking every partition's running jobs, so it plans a later start up to ``compression`` times that
  late, and a start or an end in one partition can move another's slots; the twin plans the same
  batches on the real run's clock (`ReplayOutcome.real_zero_s`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from advisor.sandbox.cluster import Sandbox
from advisor.sandbox.spec import PartitionSpec, SandboxSpec, SchedulerSpec
from advisor.slurm.models import FinishedJob
from advisor.wait.estimate import sbatch_options
from benchmarks.harness.daemon import AdvisorDaemon
from benchmarks.harness.live_queue import (
    BACKFILL_WINDOW_MIN,
    JOB_MEMORY_MB,
    LiveQueue,
    job_request,
)
from benchmarks.harness.model import (
    Arm,
    ArmName,
    Inventory,
    Job,
    ReplayDecision,
    ReplayOutcome,
    TrueRunTime,
)

#: Slurm's ``sched_interval`` that turns its main scheduler off: jobs then start only in backfill passes.
MAIN_SCHEDULER_OFF = -1
#: Backfill as often as Slurm allows, so that a real second of delay is the most any job sees, and no main
#: scheduler (see the module's notes).
REPLAY_SCHEDULER = SchedulerSpec(
    sched_interval_s=MAIN_SCHEDULER_OFF,
    bf_interval_s=1,
    bf_resolution_s=1,
    bf_window_min=BACKFILL_WINDOW_MIN,
    bf_continue=True,
    # Ended jobs leave squeue soon, but not before a poll has seen them end.
    min_job_age_s=30,
)
#: Real seconds between looks at the queue for jobs that ended.
POLL_S = 0.5
#: Decisions under way at once per arm: more than the arrivals of any few real seconds.
DECIDERS = 16
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


def sleep_script(real_s: float) -> str:
    return f"#!/bin/sh\nexec sleep {real_s:.3f}\n"


@dataclass(frozen=True)
class ReplaySubmission:
    """One sbatch of a job: its first run, or the user's rerun after the first hit its time limit."""

    job: Job
    decision: ReplayDecision
    true_run_s: float
    limit_s: float
    job_id: int
    rerun_of: int | None
    """The first run's job id, for a rerun."""
    sbatch_s: tuple[float, float]
    """When sbatch was run and when it returned, in workload seconds on the replay's own clock."""

    @property
    def timed_out(self) -> bool:
        return self.true_run_s > self.limit_s


class SlurmReplay:
    """Replays one arm's decisions on a running sandbox; ``run`` returns once every job has ended.

    Each arrival is decided on a thread of its own as it comes, the way users' jobs reach the daemon: a
    slow decision delays its own job, never the arrivals behind it. ``linked(decision, job_id)`` is told
    each first submission (arm C's `AdvisorDaemon.submitted`).
    """

    def __init__(
        self,
        sandbox: Sandbox,
        arm: Arm,
        arm_name: ArmName,
        truth: TrueRunTime,
        compression: float,
        *,
        linked: Callable[[ReplayDecision, int], None] | None = None,
    ) -> None:
        self._client = sandbox.client
        self._scripts = sandbox.layout.root / "jobs"
        self._arm = arm
        self._arm_name = arm_name
        self._truth = truth
        self._compression = compression
        self._predicted_run_s: dict[int, float] = {}
        self._linked = linked
        self.queue = LiveQueue(self._client, compression, self._predicted_run_s)
        self._submissions: list[ReplaySubmission] = []
        self._live: dict[int, ReplaySubmission] = {}
        self._lock = threading.Lock()
        self._clock = time.monotonic()
        """The real clock (monotonic) at workload second 0, set when ``run`` starts."""

    def run(self, jobs: Sequence[Job]) -> list[ReplayOutcome]:
        """Submit each job once decided, deciding from its compressed arrival time on; rerun the timed-out
        ones; wait for all."""
        self._scripts.mkdir(parents=True, exist_ok=True)
        arrivals = sorted(jobs, key=lambda job: job.arrival.time_s)
        started, clock = datetime.now(UTC), time.monotonic()
        self._clock = clock
        deciding: list[Future[None]] = []
        with ThreadPoolExecutor(max_workers=DECIDERS, thread_name_prefix=self._arm_name) as deciders:
            while arrivals or deciding or self._live:
                while arrivals and arrivals[0].arrival.time_s / self._compression <= time.monotonic() - clock:
                    deciding.append(deciders.submit(self._arrive, arrivals.pop(0)))
                for done in [future for future in deciding if future.done()]:
                    deciding.remove(done)
                    done.result()  # a decision that failed stops the replay with its error
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
        true_run_s = self._truth(job, decision.config)
        job_id = self._submit(job, decision, true_run_s, decision.time_limit_s, rerun_of=None)
        if self._linked is not None:
            self._linked(decision, job_id)

    def _submit(
        self, job: Job, decision: ReplayDecision, true_run_s: float, limit_s: float, rerun_of: int | None
    ) -> int:
        with self._lock:
            script = self._scripts / f"{len(self._submissions)}.sh"
            script.write_text(sleep_script(min(true_run_s, limit_s) / self._compression))
            query = decision.query(limit_s)
            options = [
                f"--job-name={job.arrival.name}",
                "--output=/dev/null",
                *sbatch_options(job_request(query, self._compression)),
            ]
            sent_s = self._workload_now()
            job_id = self._client.submit(None, options, script_path=str(script), parsable=True).job_id
            sbatch_s = (sent_s, self._workload_now())
            submission = ReplaySubmission(job, decision, true_run_s, limit_s, job_id, rerun_of, sbatch_s)
            self._submissions.append(submission)
            self._live[job_id] = submission
            if decision.predicted_run_s is not None:
                self._predicted_run_s[job_id] = decision.predicted_run_s
        return job_id

    def _workload_now(self) -> float:
        """Now on the workload's clock, to the millisecond (Slurm's records have whole seconds)."""
        return (time.monotonic() - self._clock) * self._compression

    def _handle_ended(self) -> None:
        """Forget jobs that left the queue; a first run that hit its limit is rerun under the user's limit."""
        with self._lock:
            if not self._live:
                return
            # Read under the lock: a job submitted after this squeue must not pass for one that ended.
            live = {job.job_id for job in self._client.jobs() if job.state in _LIVE}
            ended = [self._live.pop(job_id) for job_id in list(self._live) if job_id not in live]
        for first in ended:
            if first.timed_out and first.rerun_of is None:
                self._submit(
                    first.job, first.decision, first.true_run_s, first.job.user_limit_s, rerun_of=first.job_id
                )

    def _outcomes(self, started: datetime, timeout_s: float = 60.0) -> list[ReplayOutcome]:
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
    first: ReplaySubmission,
    first_record: FinishedJob,
    last_record: FinishedJob,
    started: datetime,
    compression: float,
) -> ReplayOutcome:
    """A job in simulated seconds; a rerun job starts with its rerun, and its killed run is kept apart."""

    def simulated(when: datetime | None) -> float:
        if when is None:
            raise ReplayError(f"job {first_record.job_id} or its rerun ended without starting")
        # Slurm truncates to whole seconds: the middle of that second halves the worst error.
        return ((when - started).total_seconds() + 0.5) * compression

    rerun = last_record is not first_record
    return ReplayOutcome(
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
        sbatch_s=first.sbatch_s,
        job_id=first.job_id,
        real_zero_s=started.timestamp(),
    )


def run_on_slurm(
    jobs: Sequence[Job],
    arm: Arm | AdvisorDaemon,
    arm_name: ArmName,
    inventory: Inventory,
    truth: TrueRunTime,
    compression: float,
    root: Path,
    base_port: int,
    *,
    keep_up: bool = False,
) -> list[ReplayOutcome]:
    """Replay one arm on its own sandbox in ``root`` (ports from ``base_port``), then take it down; an
    `AdvisorDaemon` is started beside the sandbox and decides."""
    sandbox = Sandbox(replay_spec(inventory, base_port), root)
    sandbox.up(timeout_s=300)
    try:
        trace_backfill(sandbox)
        if isinstance(arm, AdvisorDaemon):
            arm.start(sandbox, root / "daemon")
            replay = SlurmReplay(sandbox, arm.decide, arm_name, truth, compression, linked=arm.submitted)
        else:
            replay = SlurmReplay(sandbox, arm, arm_name, truth, compression)
        return replay.run(jobs)
    finally:
        if isinstance(arm, AdvisorDaemon):
            arm.stop()
        if not keep_up:
            sandbox.down()


def trace_backfill(sandbox: Sandbox) -> None:
    """Each backfill pass logs its plan (the planned start and nodes of every job it tests) in the
    sandbox's slurmctld log, where `backfill_log` and `twin_nodes` read a run that ``replay --keep`` kept;
    logging only, the scheduling is unchanged."""
    argv = ["scontrol", "setdebugflags", "+Backfill"]
    result = sandbox.runner.run(argv, timeout=15)
    if result.returncode != 0:
        raise ReplayError(f"{' '.join(argv)} failed: {result.stderr.strip()}")


def run_arms_on_slurm(
    jobs: Sequence[Job],
    arms: Sequence[tuple[ArmName, Arm | AdvisorDaemon]],
    inventory: Inventory,
    truth: TrueRunTime,
    compression: float,
    root: Path,
    base_port: int,
) -> dict[ArmName, list[ReplayOutcome]]:
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
