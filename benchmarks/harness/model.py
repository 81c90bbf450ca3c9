"""The types a replay passes between its parts: arrivals, jobs, decisions and outcomes.

All times are simulated seconds (the workload's clock); only the real-Slurm runner compresses them.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

ArmName = Literal["habits", "slurm", "advisor", "oracle"]
"""(A) users' habits, (B) Slurm's ``--test-only`` estimate only, (C) the advisor in rewrite mode, and the
oracle: the same advisor fed the true step times, the bound any predictor could reach."""


class _ReplayFrozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Arrival(_ReplayFrozen):
    """One row of a Sia workload: when the job arrives and what the user asked for."""

    name: str
    time_s: float = Field(ge=0)
    application: str
    gpus: int = Field(ge=1)
    global_batch: int = Field(ge=1)
    duration_s: float | None = Field(default=None, gt=0)
    """How long the job ran on its user's GPU type, where the trace records it (Philly's does); else a
    duration is drawn."""


class Job(_ReplayFrozen):
    """An arrival with what the workload does not say, fixed (seeded) before any arm decides."""

    arrival: Arrival
    steps: int = Field(ge=1)
    """Optimizer steps to finish: the job's length, the same whatever the arm does with it."""
    user_gpu_type: str
    """The GPU type the user habitually asks for (arm A's partition, and the type its length came from)."""
    user_limit_s: float = Field(gt=0)
    """The time limit the user habitually writes (arms A and B keep it)."""


class ReplayConfig(_ReplayFrozen):
    """How a job runs: GPU type, GPUs over how many nodes, micro-batch per GPU and accumulation."""

    gpu_type: str
    gpus: int = Field(ge=1)
    nodes: int = Field(ge=1)
    micro_batch: int = Field(ge=1)
    accumulation: int = Field(ge=1)


class Pool(_ReplayFrozen):
    """One partition of the replayed cluster: identical nodes of one GPU type."""

    partition: str
    gpu_type: str
    nodes: int = Field(ge=1)
    gpus_per_node: int = Field(ge=1)


class Inventory(_ReplayFrozen):
    pools: list[Pool] = Field(min_length=1)


class ReplayQuery(_ReplayFrozen):
    """What a job would ask Slurm for in one partition, which is all its queue wait depends on."""

    partition: str
    gpus: int
    nodes: int
    time_limit_s: float


class ReplayDecision(_ReplayFrozen):
    """What an arm submits for a job, and what the estimators said at that moment (for the report)."""

    partition: str
    config: ReplayConfig
    time_limit_s: float
    predicted_run_s: float | None = None
    """The run time the arm expected (the advisor's prediction; None for arms that do not predict)."""
    predicted_p90_s: float | None = None
    """The advisor's p90 run time for the job as advised: a limit below it likely kills the job."""
    slurm_wait_s: float | None = None
    """``--test-only``'s wait for the submitted request, asked at submission."""
    advisor_wait_s: float | None = None
    """The advisor's queue replay's wait for the submitted request, asked at submission."""
    request_id: str | None = None
    """The daemon's record of this advice (arm C on real Slurm), which the submitted job is linked to."""

    def query(self, time_limit_s: float | None = None) -> ReplayQuery:
        """What the submission asks of its partition; ``time_limit_s`` for an attempt under another limit
        (a rerun runs under the user's own)."""
        limit = self.time_limit_s if time_limit_s is None else time_limit_s
        config = self.config
        return ReplayQuery(partition=self.partition, gpus=config.gpus, nodes=config.nodes, time_limit_s=limit)


class ReplayOutcome(_ReplayFrozen):
    name: str
    arm: ArmName
    arrival_s: float
    start_s: float
    end_s: float
    decision: ReplayDecision
    true_run_s: float
    timed_out: bool
    """Killed by its time limit; the report counts these apart."""
    killed_start_s: float | None = None
    """When the first attempt started, for a job its limit killed and that reran (start_s is then the
    rerun's); None for a job that ran once."""
    submitted_s: float | None = None
    """When the first attempt reached the scheduler, where a real run's decision took time; None: at its
    arrival (the simulator decides in no time)."""
    sbatch_s: tuple[float, float] | None = None
    """A real run's first attempt: when the harness ran its sbatch and when sbatch returned, on the run's
    own clock to the millisecond (Slurm accepted it in between; ``submitted_s`` is Slurm's whole second);
    None in the simulator and in runs recorded before the harness timed it."""
    job_id: int | None = None
    """A real run's Slurm job id of the first attempt: the order of submissions within one real second,
    which is their priority; None in the simulator."""
    real_zero_s: float | None = None
    """A real run's clock (Unix seconds) at workload second 0, where Slurm's will-run test aligns its
    batches of ending jobs; None in the simulator."""


class ArmLog(_ReplayFrozen):
    """What one arm's slurmctld log says of a real run beyond its outcomes, in the workload's seconds
    (`backfill_log.arm_log`): the twin takes both as given."""

    passes_s: tuple[float, ...] = ()
    """When each backfill pass began."""
    held_s: dict[str, float] = Field(default_factory=dict)
    """By job name: how long past its run (its sleep) the job held its nodes, from the pass that started
    it to its completion: launching it, and reaping it."""


class AsRun(_ReplayFrozen):
    """What a real run's jobs did that its twin takes as given, by job name: when each reached Slurm, and
    how long past its run each held its nodes (`ArmLog.held_s`)."""

    submitted_at: dict[str, float] = Field(default_factory=dict)
    held_s: dict[str, float] = Field(default_factory=dict)

    def held(self, name: str) -> float:
        """A job's hold past its run; for a job not named, the median of the others' (none: 0)."""
        if name in self.held_s:
            return self.held_s[name]
        return statistics.median(self.held_s.values()) if self.held_s else 0.0


class QueueView(Protocol):
    """The queue as an arm sees it at a submission: both wait estimators, seconds from now (None: never)."""

    def slurm_waits(self, queries: Sequence[ReplayQuery]) -> list[float | None]: ...

    def advisor_waits(self, queries: Sequence[ReplayQuery]) -> list[float | None]: ...


Arm = Callable[[Job, QueueView], ReplayDecision]
"""An arm's decision for one arriving job, given the queue at that moment."""

TrueRunTime = Callable[[Job, ReplayConfig], float]
"""Ground truth: how long the job really runs in that configuration (steps x measured step time)."""
