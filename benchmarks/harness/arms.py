"""The arms without the advisor: (A) users' habits, (B) Slurm's estimate; (C) is `benchmarks.harness.product`.

Each factory returns an ``Arm``: a pure function of the job and the queue as the arm sees it. Both run the
user's own configuration (the user knows what fits their GPU: the step table's memory limit).
"""

from __future__ import annotations

from benchmarks.harness.model import (
    Arm,
    Inventory,
    Job,
    Pool,
    QueueView,
    ReplayConfig,
    ReplayDecision,
    ReplayQuery,
)
from benchmarks.harness.truth import Fits, StepTable, user_config


def user_pool(inventory: Inventory, job: Job) -> Pool:
    for pool in inventory.pools:
        if pool.gpu_type == job.user_gpu_type:
            return pool
    raise ValueError(f"{job.arrival.name}: the inventory has no {job.user_gpu_type} pool")


def _query(pool: Pool, config: ReplayConfig, limit_s: float) -> ReplayQuery:
    return ReplayQuery(partition=pool.partition, gpus=config.gpus, nodes=config.nodes, time_limit_s=limit_s)


def _as_user_runs_it(job: Job, pool: Pool, fits: Fits) -> ReplayConfig:
    config = user_config(job.arrival, pool.gpu_type, pool.gpus_per_node, fits)
    if config is None:
        raise ValueError(f"{job.arrival.name}: the user's configuration does not fit {pool.partition}")
    return config


def user_config_on(job: Job, pool: Pool, table: StepTable) -> ReplayConfig:
    """The configuration the job's user runs on ``pool``."""
    return _as_user_runs_it(job, pool, table.fits(job.arrival.application))


def as_submitted(job: Job, pool: Pool, table: StepTable, view: QueueView) -> ReplayDecision:
    """The job as its user runs it: their partition, configuration and limit."""
    return _habits_decision(job, pool, user_config_on(job, pool, table), view)


def _habits_decision(job: Job, pool: Pool, config: ReplayConfig, view: QueueView) -> ReplayDecision:
    (wait,) = view.slurm_waits([_query(pool, config, job.user_limit_s)])
    return ReplayDecision(
        partition=pool.partition, config=config, time_limit_s=job.user_limit_s, slurm_wait_s=wait
    )


def habits_arm(inventory: Inventory, table: StepTable) -> Arm:
    """(A) The partition the user always asks for, their configuration and their habitual limit."""

    def decide(job: Job, view: QueueView) -> ReplayDecision:
        return as_submitted(job, user_pool(inventory, job), table, view)

    return decide


def slurm_arm(inventory: Inventory, table: StepTable) -> Arm:
    """(B) The user's configuration and limit, on the partition where ``--test-only`` starts it first
    (ties: the user's own GPU type, then inventory order)."""

    def decide(job: Job, view: QueueView) -> ReplayDecision:
        fits = table.fits(job.arrival.application)
        options = [
            (pool, config)
            for pool in inventory.pools
            if (config := user_config(job.arrival, pool.gpu_type, pool.gpus_per_node, fits)) is not None
        ]
        waits = view.slurm_waits([_query(pool, config, job.user_limit_s) for pool, config in options])
        ranked = [
            (wait, pool.gpu_type != job.user_gpu_type, position, pool, config)
            for position, ((pool, config), wait) in enumerate(zip(options, waits, strict=True))
            if wait is not None
        ]
        if not ranked:
            return as_submitted(job, user_pool(inventory, job), table, view)
        wait, _, _, pool, config = min(ranked, key=lambda option: option[:3])
        return ReplayDecision(
            partition=pool.partition, config=config, time_limit_s=job.user_limit_s, slurm_wait_s=wait
        )

    return decide
