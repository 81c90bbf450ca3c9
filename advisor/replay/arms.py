"""The three arms' decisions for an arriving job: (A) users' habits, (B) Slurm's estimate, (C) the advisor.

Each factory returns an ``Arm``: a pure function of the job and the queue as the arm sees it. Arms A and B
run the user's own configuration (the user knows what fits their GPU: the step table's memory limit); arm C
sees only its predictors and its queue replay, never the ground truth.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from advisor.replay.model import Arm, Config, Decision, Inventory, Job, Pool, QueueView, WaitQuery
from advisor.replay.predictor import Predictors
from advisor.replay.truth import Fits, StepTable, configs_for, nodes_for, user_config

HOUR_S = 3600.0


class LimitRule(BaseModel):
    """The advisor's time limit: predicted p90 run x ``factor`` + ``margin_s``, at most the partition's."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    factor: float = Field(default=1.25, ge=1)
    margin_s: float = Field(default=600.0, ge=0)
    partition_max_s: float = Field(default=24 * HOUR_S, gt=0)

    def limit_s(self, p90_run_s: float) -> float:
        return min(p90_run_s * self.factor + self.margin_s, self.partition_max_s)


def _user_pool(inventory: Inventory, job: Job) -> Pool:
    for pool in inventory.pools:
        if pool.gpu_type == job.user_gpu_type:
            return pool
    raise ValueError(f"{job.arrival.name}: the inventory has no {job.user_gpu_type} pool")


def _query(pool: Pool, config: Config, limit_s: float) -> WaitQuery:
    return WaitQuery(partition=pool.partition, gpus=config.gpus, nodes=config.nodes, time_limit_s=limit_s)


def _as_user_runs_it(job: Job, pool: Pool, fits: Fits) -> Config:
    config = user_config(job.arrival, pool.gpu_type, pool.gpus_per_node, fits)
    if config is None:
        raise ValueError(f"{job.arrival.name}: the user's configuration does not fit {pool.partition}")
    return config


def _habits_decision(job: Job, pool: Pool, config: Config, view: QueueView) -> Decision:
    (wait,) = view.slurm_waits([_query(pool, config, job.user_limit_s)])
    return Decision(partition=pool.partition, config=config, time_limit_s=job.user_limit_s, slurm_wait_s=wait)


def habits_arm(inventory: Inventory, table: StepTable) -> Arm:
    """(A) The partition the user always asks for, their configuration and their habitual limit."""

    def decide(job: Job, view: QueueView) -> Decision:
        pool = _user_pool(inventory, job)
        config = _as_user_runs_it(job, pool, table.fits(job.arrival.application))
        return _habits_decision(job, pool, config, view)

    return decide


def slurm_arm(inventory: Inventory, table: StepTable) -> Arm:
    """(B) The user's configuration and limit, on the partition where ``--test-only`` starts it first
    (ties: the user's own GPU type, then inventory order)."""

    def decide(job: Job, view: QueueView) -> Decision:
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
            pool = _user_pool(inventory, job)
            return _habits_decision(job, pool, _as_user_runs_it(job, pool, fits), view)
        wait, _, _, pool, config = min(ranked, key=lambda option: option[:3])
        return Decision(
            partition=pool.partition, config=config, time_limit_s=job.user_limit_s, slurm_wait_s=wait
        )

    return decide


def gpu_counts(requested: int, pool: Pool) -> list[int]:
    """Powers of two up to the request, and the request itself, that the pool can hold."""
    counts = {requested} | {1 << power for power in range(requested.bit_length()) if 1 << power <= requested}
    return sorted(count for count in counts if count <= pool.nodes * pool.gpus_per_node)


def _advisor_fits(predictors: Predictors, application: str) -> Fits:
    def fits(config: Config) -> bool:
        seen = predictors.batch_range(application, config.gpu_type, config.gpus, config.nodes)
        return seen is not None and seen[0] <= config.micro_batch <= seen[1]

    return fits


class _Candidate(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    pool: Pool
    config: Config
    p50_run_s: float
    limit_s: float


def advisor_arm(inventory: Inventory, predictors: Predictors, limit_rule: LimitRule | None = None) -> Arm:
    """(C) Rewrite mode: partition, GPUs, micro-batch, accumulation and limit that finish the job first by
    the advisor's own estimate (its queue replay's wait + its p50 run; ties: fewer GPUs)."""
    rule = limit_rule or LimitRule()

    def decide(job: Job, view: QueueView) -> Decision:
        candidates = _candidates(job, inventory, predictors, rule)
        queries = sorted({_query(c.pool, c.config, c.limit_s) for c in candidates}, key=_query_order)
        waits = dict(zip(queries, view.advisor_waits(queries), strict=True))
        scored = [
            (wait + c.p50_run_s, c.config.gpus, position, c)
            for position, c in enumerate(candidates)
            if (wait := waits[_query(c.pool, c.config, c.limit_s)]) is not None
        ]
        if not scored:
            pool = _user_pool(inventory, job)
            fits = _advisor_fits(predictors, job.arrival.application)
            config = user_config(job.arrival, pool.gpu_type, pool.gpus_per_node, fits)
            return _habits_decision(job, pool, config or _as_requested(job, pool), view)
        chosen = min(scored, key=lambda option: option[:3])[3]
        query = _query(chosen.pool, chosen.config, chosen.limit_s)
        (slurm_wait,) = view.slurm_waits([query])
        return Decision(
            partition=chosen.pool.partition,
            config=chosen.config,
            time_limit_s=chosen.limit_s,
            predicted_run_s=chosen.p50_run_s,
            slurm_wait_s=slurm_wait,
            advisor_wait_s=waits[query],
        )

    return decide


def _query_order(query: WaitQuery) -> tuple[str, int, int, float]:
    return query.partition, query.gpus, query.nodes, query.time_limit_s


def _as_requested(job: Job, pool: Pool) -> Config:
    """The user's literal request, for the rare job whose every split lies outside what the advisor saw."""
    gpus = job.arrival.gpus
    return Config(
        gpu_type=pool.gpu_type,
        gpus=gpus,
        nodes=nodes_for(gpus, pool.gpus_per_node),
        micro_batch=max(1, round(job.arrival.global_batch / gpus)),
        accumulation=1,
    )


def _candidates(job: Job, inventory: Inventory, predictors: Predictors, rule: LimitRule) -> list[_Candidate]:
    arrival = job.arrival
    fits = _advisor_fits(predictors, arrival.application)
    found = []
    for pool in inventory.pools:
        counts = gpu_counts(arrival.gpus, pool)
        for config in configs_for(arrival, pool.gpu_type, pool.gpus_per_node, counts, fits):
            p50, p90 = predictors.predict(
                arrival.application, config.gpu_type, config.gpus, config.nodes, config.micro_batch
            )
            per_step = job.steps * config.accumulation
            if per_step * p50 < rule.partition_max_s:
                found.append(
                    _Candidate(
                        pool=pool,
                        config=config,
                        p50_run_s=per_step * p50,
                        limit_s=rule.limit_s(per_step * p90),
                    )
                )
    return found
