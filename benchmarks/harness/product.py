"""Arm C and the oracle: the product's own recommender deciding for replayed jobs.

Each arriving job is written as the batch script its user would submit (their partition, GPUs and limit,
an ``#ADVISOR`` line with the application, global batch and steps), parsed by the product's parser, and
handed to ``advisor.recommend.service.recommend`` under the policy file the replay names: the daemon's
candidates, time-limit rule, objective and thresholds. Only the seams differ: the step times come from a
`StepPredictor` over Sia's table (learned models with the workload's batches held out for arm C, the
measured truth itself for the oracle), the waits from the replayed queue. A recommendation the policy would
not apply leaves the job as its user runs it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

from advisor.comm.sync import Spread
from advisor.jobscript.submission import parse_job
from advisor.policy.schema import Policy
from advisor.predict.types import NoModelError, Prediction
from advisor.recommend.ask import Ask, Caller
from advisor.recommend.estimator import Context, StepPredictor, Sync, WaitEstimator, Waits
from advisor.recommend.estimator import WaitQuery as CandidateQuery
from advisor.recommend.service import recommend
from advisor.slurm.models import Gpus, Node, Partition
from advisor.slurm.values import format_duration
from advisor.wait.accuracy import DEFAULT_ESTIMATOR
from benchmarks.harness.arms import as_submitted, user_pool
from benchmarks.harness.model import Arm, Config, Decision, Inventory, Job, Pool, QueueView, WaitQuery
from benchmarks.harness.predictor import StepModels
from benchmarks.harness.truth import StepTable, nodes_for

MAX_TIME = timedelta(days=1)
CPUS_PER_GPU, MEMORY_MB_PER_GPU = 8, 64 * 1024
"""Sia's traces count GPUs only: each node gets a GPU node's usual CPUs and memory, so that no job's
placement (`advisor.recommend.placement`) hinges on what the traces do not say."""
"""Every replayed partition's MaxTime (Slurm's common site default)."""
TRAINED_AT = datetime(2026, 1, 1, tzinfo=UTC)
"""The replay's models are as fresh at every decision as a nightly retrain keeps them."""
USER = "replay"


class _Steps:
    """A `StepPredictor` for one application over Sia's step curves, on one node or several.

    ``curve(gpu_type, gpus, nodes)`` (``gpus`` over all the nodes) gives the measured (or trained-on)
    batch range of that placement, ``times`` the (p50, p90) of one micro-step. A micro-batch above the
    range does not fit (nothing larger was measured); one below it is extrapolated, so ``low`` confidence,
    which the policy never applies. Sia's step times include their placement's all-reduce, so ``sync``
    adds nothing.
    """

    def __init__(
        self,
        application: str,
        gpu_types: dict[str, str],
        curve: Callable[[str, int, int], tuple[int, int] | None],
        times: Callable[[str, int, int, int], tuple[float, float]],
        machine: str,
    ) -> None:
        self.application = application
        self.gpu_types = gpu_types
        self.curve = curve
        self.times = times
        self.machine = machine

    def step(
        self, partition: str, gpus: int, nodes: int, micro_batch: int, amp: bool, channels_last: bool
    ) -> Prediction:
        gpu_type = self.gpu_types[partition]
        devices = max(gpus, 1) * nodes
        seen = self.curve(gpu_type, devices, nodes)
        if seen is None:
            where = f"{devices} {gpu_type} GPUs on {nodes} node{'s' if nodes > 1 else ''}"
            raise NoModelError(f"no {self.application} steps measured on {where}")
        low, high = seen
        p50, p90 = self.times(gpu_type, devices, nodes, micro_batch)
        return Prediction(
            partition=partition,
            machine=f"{self.machine}:{gpu_type}",
            model_version=1,
            batch_size=micro_batch,
            amp=amp,
            channels_last=channels_last,
            step_s=p50,
            step_p90_s=p90,
            peak_memory_bytes=0,
            memory_bytes=None,
            fits=micro_batch <= high,
            largest_batch=high,
            confidence="high" if micro_batch >= low else "low",
            note=None if micro_batch >= low else f"below the smallest batch measured ({low})",
        )

    def sync(self, partition: str, spread: Spread, micro_step_s: float) -> Sync:
        return Sync(added_s=0.0, measured=True)

    def trained_at(self, machine: str, version: int) -> datetime | None:
        return TRAINED_AT


def learned_steps(models: StepModels, inventory: Inventory) -> Callable[[str], StepPredictor]:
    """Arm C's predictor: the models trained without the workload's own batch sizes."""
    types = _gpu_types(inventory)

    def for_application(application: str) -> StepPredictor:
        def curve(gpu_type: str, gpus: int, nodes: int) -> tuple[int, int] | None:
            return models.batch_range(application, gpu_type, gpus, nodes)

        def times(gpu_type: str, gpus: int, nodes: int, batch: int) -> tuple[float, float]:
            return models.predict(application, gpu_type, gpus, nodes, batch)

        return _Steps(application, types, curve, times, "learned")

    return for_application


def true_steps(table: StepTable, inventory: Inventory) -> Callable[[str], StepPredictor]:
    """The oracle's predictor: the replay's truth, p90 equal to p50 (no uncertainty to pad)."""
    types = _gpu_types(inventory)

    def for_application(application: str) -> StepPredictor:
        def curve(gpu_type: str, gpus: int, nodes: int) -> tuple[int, int] | None:
            return table.batch_range(application, gpu_type, gpus, nodes)

        def times(gpu_type: str, gpus: int, nodes: int, batch: int) -> tuple[float, float]:
            # Outside the measured range the truth has no answer; the nearest measurement stands in (such
            # a candidate does not fit, or is low-confidence, and is never applied). `_Steps.step` asks
            # only for a placement that has a curve.
            low, high = curve(gpu_type, gpus, nodes) or (batch, batch)
            step = table.micro_step_s(application, gpu_type, gpus, nodes, min(max(batch, low), high))
            assert step is not None, "a batch within a measured curve has a time"
            return step, step

        return _Steps(application, types, curve, times, "truth")

    return for_application


def product_arm(
    inventory: Inventory, policy: Policy, steps_for: Callable[[str], StepPredictor], table: StepTable
) -> Arm:
    """``table`` is used only to run a job its user's way when the advice is not applied."""
    partitions = partitions_of(inventory)
    pools = {pool.partition: pool for pool in inventory.pools}

    def decide(job: Job, view: QueueView) -> Decision:
        pool = user_pool(inventory, job)
        where = f"{job.arrival.name}.sbatch"
        parsed = parse_job(job_script(job, pool).encode(), where, [where], {})
        context = Context(policy=policy, partitions=partitions, waits=queue_estimator(view))
        predictor = steps_for(job.arrival.application)
        ask = Ask(parsed.request, parsed.description, Caller(USER), TRAINED_AT)
        found = recommend(context, ask, predictor)
        if not found.apply or found.chosen is None:
            kept = as_submitted(job, pool, table, view)
            (own,) = view.advisor_waits([kept.query()])  # what `advise-submit --explain` shows for it
            return kept.model_copy(update={"advisor_wait_s": own})
        chosen = found.chosen
        candidate = chosen.candidate
        config = Config(
            gpu_type=pools[candidate.partition].gpu_type,
            gpus=candidate.gpus * candidate.nodes,
            nodes=candidate.nodes,
            micro_batch=candidate.micro_batch,
            accumulation=candidate.accumulation,
        )
        return Decision(
            partition=candidate.partition,
            config=config,
            time_limit_s=chosen.time_limit.total_seconds(),
            predicted_run_s=chosen.run_s,
            predicted_p90_s=chosen.run_p90_s,
            slurm_wait_s=chosen.slurm_wait_s,
            advisor_wait_s=chosen.advisor_wait_s,
        )

    return decide


def job_script(job: Job, pool: Pool) -> str:
    """The script the job's user submits: their partition, GPUs (packed on the fewest nodes), limit."""
    arrival = job.arrival
    nodes = nodes_for(arrival.gpus, pool.gpus_per_node)
    limit = timedelta(minutes=math.ceil(job.user_limit_s / 60))
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


def queue_estimator(view: QueueView) -> WaitEstimator:
    """Both of the replayed queue's estimators for each candidate, as the daemon asks Slurm's and its own.
    With no finished jobs to compare them on, the daemon prefers its default (Slurm's), and so does this."""

    def waits(queries: Sequence[CandidateQuery]) -> list[Waits]:
        asked = [
            WaitQuery(
                partition=query.partition,
                gpus=query.gpus * query.nodes,
                nodes=query.nodes,
                time_limit_s=query.time_limit.total_seconds(),
            )
            for query in queries
        ]
        pairs = zip(view.slurm_waits(asked), view.advisor_waits(asked), strict=True)
        return [Waits(slurm_s=slurm, advisor_s=own, preferred=DEFAULT_ESTIMATOR) for slurm, own in pairs]

    return waits


def _gpu_types(inventory: Inventory) -> dict[str, str]:
    return {pool.partition: pool.gpu_type for pool in inventory.pools}


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
