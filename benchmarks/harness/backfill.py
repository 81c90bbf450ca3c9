"""How the twin's scheduler plans (`Backfill`): Slurm's backfill settings, in the workload's seconds, and
what of Slurm's timing it follows (will-run batches, its whole-second clock, when passes come)."""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field

from advisor.wait.simulate import BACKFILL_WINDOW


class Backfill(BaseModel):
    """How far a pass plans: Slurm's ``bf_window`` (in the workload's seconds) and ``bf_max_job_test``.

    A replay compared with a real-Slurm one must use that cluster's window in simulated time (its real
    window times the compression).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    window_s: float = Field(default=BACKFILL_WINDOW.total_seconds(), gt=0)
    max_jobs: int = Field(default=500, ge=1)
    limit_resolution_s: float = Field(default=0.0, ge=0)
    """Slurm keeps time limits in whole minutes; in a replay compressed c times a minute is 60c workload
    seconds, so the twin of a compressed run plans on limits rounded up to that (jobs still end at their
    own limit). Zero: limits as given."""
    will_run_batch_s: float = Field(default=0.0, ge=0)
    """Slurm's will-run test (``select/cons_tres``'s ``_will_run_test`` in 22.05, behind backfill's slots
    and ``--test-only``) frees running jobs by planned end a batch at a time and plans a later start at
    the last end of the batch it first fits after. The batches end at fixed marks: the first job's end
    rounded up to the next multiple of 30 real seconds on the clock, plus 30, 60, 120 ... seconds.
    Compressed c times, 30 real seconds are 30c workload seconds. Zero: no batches."""
    pass_interval_s: float = Field(default=0.0, ge=0)
    """Slurm's ``bf_interval``: backfill passes come this often (from workload second 0 here), and
    between them only the main scheduler starts jobs, at each event, in priority order while they fit.
    Zero: a full pass at every event."""
    pass_times_s: tuple[float, ...] = ()
    """When a real run's backfill passes began (its controller's log), in the workload's seconds: the
    twin's passes until the last, then every ``pass_interval_s``. Slurm's passes drift from a fixed clock
    (each comes a second after the last one ended) and skip seconds with nothing new."""
    main_scheduler: bool = True
    """Whether jobs also start between passes, in priority order at each event, as Slurm's main scheduler
    starts them; False: only passes start jobs (the replay's cluster, ``sched_interval=-1``)."""
    will_run_walk: bool = False
    """Whether the batches' walk goes over every partition's running jobs, as Slurm's does (see
    ``SimPartition._batched``); False: this partition's only."""
    will_run_origin_s: float = 0.0
    """A workload second at which the real clock is a multiple of 30 s, where the marks align
    (`matching_backfill` takes it from the real run's clock)."""

    tick_s: float = Field(default=0.0, ge=0)
    """Slurm's clock tick, a real second (in the workload's seconds), from ``will_run_origin_s``: Slurm
    keeps a job's start, and so its planned end, to the whole second below. Zero: exact."""

    def planned(self, limit_s: float) -> float:
        """The limit the scheduler plans with."""
        step = self.limit_resolution_s
        return limit_s if step == 0 else math.ceil(limit_s / step - 1e-9) * step

    def planned_end(self, start_s: float, limit_s: float) -> float:
        """When Slurm plans a job started at ``start_s`` to end: its start to the tick, plus its limit."""
        tick, origin = self.tick_s, self.will_run_origin_s
        whole = start_s if tick == 0 else origin + math.floor((start_s - origin) / tick + 1e-9) * tick
        return whole + self.planned(limit_s)
