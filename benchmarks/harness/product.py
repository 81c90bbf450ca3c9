"""Arm C and the oracle: the product's own recommender deciding for replayed jobs.

Each arriving job is written as the batch script its user would submit (their partition, GPUs and limit,
an ``#ADVISOR`` line with the application, global batch and steps), parsed by the product's parser, and
handed to ``advisor.recommend.service.recommend`` under the policy file the replay names: the daemon's
candidates, time-limit rule, objective and thresholds. Only the seams differ: the step times are a
`StepTimes`, the daemon's ``--step-times`` file read by its own `MeasuredSteps` (arm C's learned models'
predictions, the oracle's measured truth: `benchmarks.harness.step_file`), the waits come from the
replayed queue. A recommendation the policy would not apply leaves the job as its user runs it.

On real Slurm arm C asks a running daemon instead (`benchmarks.harness.daemon`); `decision_of` reads its
answer the same way. ``compression`` decides on the compressed clock that daemon lives on
(`benchmarks.harness.compressed`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from advisor.daemon.step_times import MeasuredSteps, StepTimes
from advisor.jobscript.submission import parse_job
from advisor.policy.schema import Policy
from advisor.recommend.ask import Ask, Caller
from advisor.recommend.choose import Estimate, Recommendation
from advisor.recommend.estimator import Context, WaitEstimator
from advisor.recommend.service import recommend
from advisor.slurm.models import Gpus, Node, Partition
from advisor.slurm.values import format_duration
from advisor.wait.accuracy import DEFAULT_SOURCE, WaitEstimate
from advisor.wait.snapshot import SlotRequest
from benchmarks.harness.arms import user_config_on, user_pool
from benchmarks.harness.compressed import compressed_policy, compressed_times, shrunk, stretched
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
from benchmarks.harness.truth import StepTable, nodes_for

MAX_TIME = timedelta(days=1)
CPUS_PER_GPU, MEMORY_MB_PER_GPU = 8, 64 * 1024
"""Sia's traces count GPUs only: each node gets a GPU node's usual CPUs and memory, so that no job's
placement (`advisor.recommend.placement`) hinges on what the traces do not say."""
"""Every replayed partition's MaxTime (Slurm's common site default)."""
TRAINED_AT = datetime(2026, 1, 1, tzinfo=UTC)
"""The replay's models are as fresh at every decision as a nightly retrain keeps them."""
USER = "replay"


def product_arm(
    inventory: Inventory,
    policy: Policy,
    times: StepTimes,
    table: StepTable,
    compression: float = 1.0,
) -> Arm:
    """``table`` is used only to run a job its user's way when the advice is not applied."""
    partitions = partitions_of(inventory)
    policy = compressed_policy(policy, compression)
    times = compressed_times(times, compression)
    steps = {model: MeasuredSteps(times, model, partitions) for model in times.models()}

    def decide(job: Job, view: QueueView) -> ReplayDecision:
        pool = user_pool(inventory, job)
        where = f"{job.arrival.name}.sbatch"
        parsed = parse_job(job_script(job, pool, compression).encode(), where, [where], {})
        context = Context(policy=policy, partitions=partitions, waits=queue_estimator(view, compression))
        application = job.arrival.application
        predictor = steps.get(application) or MeasuredSteps(times, application, partitions)
        ask = Ask(parsed.request, parsed.description, Caller(USER), TRAINED_AT)
        found = recommend(context, ask, predictor)
        return decision_of(found, job, inventory, table, compression)

    return decide


def decision_of(
    found: Recommendation, job: Job, inventory: Inventory, table: StepTable, compression: float
) -> ReplayDecision:
    """What the job goes in with: the advice where the policy applies it, else the job as its user runs it
    (with what the advisor said of that, as ``advise-submit --explain`` shows it); in workload seconds."""
    chosen = found.chosen if found.apply else None
    if chosen is None:
        return _kept(job, user_pool(inventory, job), table, found.baseline, compression)
    candidate = chosen.candidate
    pools = {pool.partition: pool for pool in inventory.pools}
    config = ReplayConfig(
        gpu_type=pools[candidate.partition].gpu_type,
        gpus=candidate.gpus * candidate.nodes,
        nodes=candidate.nodes,
        micro_batch=candidate.micro_batch,
        accumulation=candidate.accumulation,
    )
    return ReplayDecision(
        partition=candidate.partition,
        config=config,
        time_limit_s=chosen.time_limit.total_seconds() * compression,
        predicted_run_s=chosen.run_s * compression,
        predicted_p90_s=chosen.run_p90_s * compression,
        slurm_wait_s=stretched(chosen.slurm_wait_s, compression),
        advisor_wait_s=stretched(chosen.advisor_wait_s, compression),
    )


def _kept(
    job: Job, pool: Pool, table: StepTable, baseline: Estimate | None, compression: float
) -> ReplayDecision:
    return ReplayDecision(
        partition=pool.partition,
        config=user_config_on(job, pool, table),
        time_limit_s=job.user_limit_s,
        slurm_wait_s=None if baseline is None else stretched(baseline.slurm_wait_s, compression),
        advisor_wait_s=None if baseline is None else stretched(baseline.advisor_wait_s, compression),
    )


def job_script(job: Job, pool: Pool, compression: float = 1.0) -> str:
    """The script the job's user submits: their partition, GPUs (packed on the fewest nodes), limit (in
    Slurm's whole minutes, on the compressed clock where one is given)."""
    arrival = job.arrival
    nodes = nodes_for(arrival.gpus, pool.gpus_per_node)
    limit = timedelta(minutes=max(math.ceil(job.user_limit_s / compression / 60 - 1e-9), 1))
    return "\n".join(
        [
            "#!/bin/bash",
            f"#SBATCH --job-name={arrival.name}",
            f"#SBATCH --partition={pool.partition}",
            f"#SBATCH --nodes={nodes}",
            f"#SBATCH --gres=gpu:{math.ceil(arrival.gpus / nodes)}",
            f"#SBATCH --time={format_duration(limit)}",
            f"#ADVISOR --model {arrival.application} --global-batch {arrival.global_batch} "
            f"--steps {job.steps} --amp no",
            f"python train.py --batch-size {arrival.global_batch}",
            "",
        ]
    )


def queue_estimator(view: QueueView, compression: float = 1.0) -> WaitEstimator:
    """Both of the replayed queue's estimators for each candidate, as the daemon asks Slurm's and its own.
    With no finished jobs to compare them on, the daemon prefers its default (Slurm's), and so does this.
    The candidates' limits and the waits are on the compressed clock, the view's in workload seconds."""

    def waits(queries: Sequence[SlotRequest]) -> list[WaitEstimate]:
        asked = [
            ReplayQuery(
                partition=query.partitions[0],
                gpus=query.gpus_per_node * query.nodes,
                nodes=query.nodes,
                time_limit_s=(query.time_limit or timedelta.max).total_seconds() * compression,
            )
            for query in queries
        ]
        pairs = zip(view.slurm_waits(asked), view.advisor_waits(asked), strict=True)
        preferred = DEFAULT_SOURCE
        return [
            WaitEstimate(
                slurm_wait_s=shrunk(s, compression),
                advisor_wait_s=shrunk(a, compression),
                preferred=preferred,
            )
            for s, a in pairs
        ]

    return waits


def partitions_of(inventory: Inventory) -> list[Partition]:
    """The replayed cluster as ``sinfo`` would describe it to the daemon; the first pool is the default."""
    return [_partition(pool, first=index == 0) for index, pool in enumerate(inventory.pools)]


def _partition(pool: Pool, first: bool) -> Partition:
    names = [f"{pool.partition}-{index}" for index in range(pool.nodes)]
    return Partition(
        name=pool.partition,
        state="up",
        is_default=first,
        node_names=names,
        total_cpus=pool.nodes * pool.gpus_per_node * CPUS_PER_GPU,
        max_time=MAX_TIME,
        default_time=None,
        gpu_type=pool.gpu_type,
        gpus_per_node=pool.gpus_per_node,
        cpus_per_node=pool.gpus_per_node * CPUS_PER_GPU,
        memory_per_node_mb=pool.gpus_per_node * MEMORY_MB_PER_GPU,
        nodes=[_node(name, pool) for name in names],
    )


def _node(name: str, pool: Pool) -> Node:
    gpus = Gpus(type=pool.gpu_type, count=pool.gpus_per_node)
    return Node(
        name=name,
        state="IDLE",
        flags=[],
        partitions=[pool.partition],
        cpus=pool.gpus_per_node * CPUS_PER_GPU,
        alloc_cpus=0,
        memory_mb=pool.gpus_per_node * MEMORY_MB_PER_GPU,
        alloc_memory_mb=0,
        gpus=gpus,
        gpus_used=0,
    )
