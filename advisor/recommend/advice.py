"""The advice a decision becomes: the sbatch-level changes in the user's own form, and where a request for
several partitions may still run (reordered, never shrunk)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from advisor.jobscript.request import JobRequest
from advisor.jobscript.rewrite import Advice
from advisor.precision import amp_mode, has_bf16, mixed_precision
from advisor.recommend.candidates import Candidate, Offer
from advisor.recommend.choose import Decision

RunsOn = Callable[[Candidate], timedelta | None]
"""The time limit a candidate needs, or None where its micro-batch does not fit."""


@dataclass(frozen=True)
class PartitionOrder:
    """A request for several partitions, advised: where the chosen configuration may still run."""

    partitions: list[str]
    """The chosen partition first, then the user's others it runs on, in the user's order."""
    time_limit: timedelta
    """Enough for the slowest of them: Slurm starts the job wherever it can first."""
    dropped: list[str]
    """The user's other partitions where the advised configuration does not run."""


def partition_order(
    decision: Decision, request: JobRequest, runs_on: RunsOn, allowed: dict[str, Offer]
) -> PartitionOrder | None:
    """``-p a100,v100`` is reordered, not shrunk: each other partition the user named stays where the
    advised configuration fits there (GPUs per node, memory, the GPU type a typed request names, bf16 for
    AMP) and its limit does not pass the chosen partition's MaxTime. None for a one-partition request."""
    chosen = decision.chosen
    if len(request.partitions) < 2 or chosen == decision.baseline:
        return None
    target = allowed[chosen.candidate.partition]
    limits, dropped = [chosen.time_limit], []
    kept = [target.name]
    for name in request.partitions:
        offer = allowed.get(name)
        if name == target.name or offer is None:
            continue
        limit = _limit_on(chosen.candidate, offer, target, request, runs_on)
        if limit is None or (target.max_time is not None and limit > target.max_time):
            dropped.append(name)
            continue
        kept.append(name)
        limits.append(limit)
    limit = max(limits)
    for name in kept[1:]:
        if (allowed[name].max_time or limit) < limit:
            kept.remove(name)
            dropped.append(name)
    return PartitionOrder(partitions=kept, time_limit=limit, dropped=dropped)


def _limit_on(
    candidate: Candidate, offer: Offer, target: Offer, request: JobRequest, runs_on: RunsOn
) -> timedelta | None:
    typed = request.gpus is not None and request.gpus.type is not None
    too_big = candidate.gpus > offer.gpus_per_node or candidate.nodes > offer.nodes
    if too_big or (typed and offer.gpu_type != target.gpu_type):
        return None
    if candidate.amp and has_bf16(offer.gpu_type) != has_bf16(target.gpu_type):
        return None
    return runs_on(candidate.model_copy(update={"partition": offer.name}))


def advice_for(
    decision: Decision, request: JobRequest, offers: dict[str, Offer], order: PartitionOrder | None
) -> Advice | None:
    chosen, asked = decision.chosen.candidate, decision.baseline.candidate
    if decision.chosen == decision.baseline:
        return None
    target = offers[chosen.partition]
    moved = chosen.partition != asked.partition
    if order is not None:
        moved = order.partitions != request.partitions
    typed = chosen.partition != asked.partition and request.gpus is not None and request.gpus.type is not None
    unit = request.gpus.per if request.gpus is not None else "task"
    count = chosen.gpus * chosen.nodes if unit == "job" else chosen.gpus
    changed = (chosen.gpus, chosen.nodes) != (asked.gpus, asked.nodes)
    one_task_per_gpu = request.ntasks_per_node is not None and request.ntasks_per_node == asked.gpus
    return Advice(
        partition=chosen.partition if moved else None,
        other_partitions=order.partitions[1:] if moved and order is not None else [],
        gpus=count if unit != "task" and changed and chosen.gpus > 0 else None,
        nodes=chosen.nodes if chosen.nodes != asked.nodes else None,
        tasks_per_node=chosen.gpus if one_task_per_gpu and chosen.gpus != asked.gpus else None,
        gpu_type=target.gpu_type if typed else None,
        time_limit=decision.chosen.time_limit if order is None else order.time_limit,
        global_batch=chosen.global_batch if chosen.global_batch != asked.global_batch else None,
        micro_batch=chosen.micro_batch,
        grad_accum=chosen.accumulation,
        amp=amp_mode(mixed_precision(has_bf16(target.gpu_type))) if chosen.amp else "off",
        channels_last=chosen.channels_last,
    )
