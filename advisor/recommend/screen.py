"""The first stage of a recommendation: whether the advisor may change the job at all, and where it may send
it, before anything is predicted.

A job is passed through (`PassedThrough`) where the policy turns the advisor off for its caller, where it
describes no model (its history may still advise a time limit), where its spread over nodes is not one
answer, or where its partition is not the cluster's. Otherwise `Screened` says which partitions its
candidates may use: those the policy lets the caller advise on, with a node in service, that no placement
rule refuses (`advisor.recommend.placement`); the others are kept, to be named in the reasons.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from advisor.jobscript.advisor_lines import JobDescription
from advisor.jobscript.request import JobRequest
from advisor.policy.resolve import Effective, resolve
from advisor.recommend.ask import Ask
from advisor.recommend.candidates import Offer
from advisor.recommend.estimator import Context, StepPredictor
from advisor.recommend.history_limit import HISTORY_SOURCES, HistoryAdvice, history_advice
from advisor.recommend.placement import refusal
from advisor.slurm.models import Partition

PassReason = Literal["off", "undescribed", "spread", "partition", "no model"]
"""Why a job has no candidates: the policy is off for its caller; it describes no model (or its model was
not read); it spans a range of nodes; its partition is not the cluster's; nothing predicts it."""


@dataclass(frozen=True)
class PassedThrough:
    """No candidates: the job stays as written, or takes the one change its history advises."""

    why: PassReason
    effective: Effective
    history: HistoryAdvice | None = None
    """What the caller's earlier runs advise for a job that describes no model."""
    error: str | None = None
    """Why nothing predicts the job (`NoModelError`)."""


@dataclass(frozen=True)
class Screened:
    """Where the job's candidates may go: the job as written, and the partitions it may move to."""

    effective: Effective
    description: JobDescription
    predictor: StepPredictor
    written: Partition
    """The partition the job goes to as written."""
    gpus: int
    """The GPUs the job asks for on each of its ``nodes``."""
    nodes: int
    offers: dict[str, Offer]
    """Every partition of the cluster, as candidates see it."""
    allowed: list[Offer]
    """The policy's partitions, in its order, open and not refused: where candidates may go."""
    refused: dict[str, str]
    """Why each open partition of the policy's was refused (`advisor.recommend.placement.refusal`)."""
    closed: list[str]
    """The policy's partitions where no node takes jobs."""


def screen(context: Context, ask: Ask, predictor: StepPredictor | None) -> Screened | PassedThrough:
    """The job's place before prediction; ``predictor`` None: its model was not read (``ask.unread``)."""
    request = ask.request
    partitions = context.partitions
    caller = ask.caller
    effective = resolve(context.policy, caller.user, caller.account, [p.name for p in partitions])
    if effective.mode == "off":
        return PassedThrough("off", effective)
    if ask.description is None or predictor is None:
        return PassedThrough("undescribed", effective, history=_history_only(effective, ask, partitions))
    spread = _asked_spread(request)
    if spread is None:
        return PassedThrough("spread", effective)
    offers = {p.name: _offer(p) for p in partitions}
    written = asked_partition(request, partitions)
    if written is None or written.name not in offers:
        return PassedThrough("partition", effective)
    open_now = {p.name for p in partitions if p.takes_jobs}
    considered = [p for p in partitions if p.name in effective.partitions and p.name in open_now]
    refused = {
        p.name: why
        for p in considered
        if (why := refusal(p, request, ask.standing, written.name)) is not None
    }
    mine = [name for name in effective.partitions if name in offers]
    return Screened(
        effective=effective,
        description=ask.description,
        predictor=predictor,
        written=written,
        gpus=spread[0],
        nodes=spread[1],
        offers=offers,
        allowed=[offers[name] for name in mine if name in open_now and name not in refused],
        refused=refused,
        closed=[name for name in mine if name not in open_now],
    )


def _history_only(effective: Effective, ask: Ask, partitions: Sequence[Partition]) -> HistoryAdvice | None:
    """A time limit from the caller's earlier runs, where they rest on the caller's own past and the job's
    partition is one the policy advises on."""
    history = ask.history
    if history is None or history.forecast.source not in HISTORY_SOURCES:
        return None
    partition = asked_partition(ask.request, partitions)
    if partition is None or partition.name not in effective.partitions:
        return None
    return history_advice(effective, ask.request, history.ask, history.forecast, partition)


def _offer(partition: Partition) -> Offer:
    return Offer(
        name=partition.name,
        gpu_type=partition.gpu_type,
        gpus_per_node=partition.gpus_per_node,
        max_time=partition.max_time,
        nodes=max(sum(1 for node in partition.nodes if node.serves_jobs), 1),
    )


def asked_partition(request: JobRequest, partitions: Sequence[Partition]) -> Partition | None:
    """The partition the job goes to as written: its first, else the cluster's default."""
    named = request.partitions[0] if request.partitions else None
    return next((p for p in partitions if p.name == named or (named is None and p.is_default)), None)


def _asked_spread(request: JobRequest) -> tuple[int, int] | None:
    """(GPUs on each node, nodes), whatever form the user wrote them in; None where that is not one
    answer (a range of nodes, GPUs per task over several nodes, GPUs per job that do not divide)."""
    nodes = request.nodes_min or 1
    if request.nodes_max not in (None, nodes):
        return None
    if request.gpus is None:
        return (0, 1) if nodes == 1 else None
    count, per = request.gpus.count, request.gpus.per
    if per == "task":
        return (count * (request.ntasks_per_node or request.ntasks or 1), 1) if nodes == 1 else None
    if per == "job":
        return (count // nodes, nodes) if count % nodes == 0 else None
    return count, nodes
