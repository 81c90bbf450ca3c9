"""A recommendation for one submission: candidates, their predicted run, wait and cost, and the choice.

The edges come in through `Context` (the policy, the cluster's partitions and a wait estimator: Slurm's
``--test-only`` and the advisor's own queue replay) and a `StepPredictor` for the job, both defined with the
`Estimator` that asks them (`advisor.recommend.estimator`); the clock is an argument. The daemon's
predictor reads the store's models and the job's layer table; an evaluation plugs in measured step times at
the same seam.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from advisor.history.past import JobAsk
from advisor.history.predictor import RunForecast
from advisor.jobscript.advisor_lines import JobDescription
from advisor.jobscript.request import JobRequest
from advisor.jobscript.rewrite import Advice
from advisor.policy.resolve import resolve
from advisor.policy.schema import Mode
from advisor.predict.types import NoModelError
from advisor.recommend.advice import advice_for, partition_order
from advisor.recommend.candidates import Offer, baseline, job_candidates
from advisor.recommend.choose import Recommendation, choose
from advisor.recommend.estimator import Context, Estimator, StepPredictor
from advisor.recommend.history_limit import (
    HISTORY_SOURCES,
    cross_check,
    history_advice,
    history_prior,
    prior_reason,
)
from advisor.recommend.kills import Run, kill_warnings
from advisor.recommend.placement import Standing, refusal
from advisor.slurm.models import Partition

BOTH = (False, True)


def recommend(
    context: Context,
    request: JobRequest,
    description: JobDescription | None,
    predictor: StepPredictor | None,
    user: str,
    account: str | None,
    now: datetime,
    standing: Standing | None = None,
    history: tuple[JobAsk, RunForecast] | None = None,
    unread: str | None = None,
) -> Recommendation:
    """``standing``: the caller's groups and associations, checked against each partition's access lists
    (None where nothing is known of them, as in a replay: only the nodes are checked); ``history``: what
    the caller's earlier runs say of a job that describes no model, or one whose model was not read (no
    ``predictor``); ``unread``: why it was not (a factory that came without its layer table), said first."""
    effective = resolve(context.policy, user, account, [p.name for p in context.partitions])

    def nothing(*reasons: str, advice: Advice | None = None, apply: bool = False) -> Recommendation:
        """No candidates: the job as it is, or with the one change history advises."""
        return Recommendation(
            user=user,
            account=account,
            mode=effective.mode,
            candidates=[],
            baseline=None,
            chosen=None,
            apply=apply,
            advice=advice,
            reasons=list(reasons),
        )

    if effective.mode == "off":
        return nothing("the policy turns the advisor off for this user")
    if description is None or predictor is None:
        said = [unread] if unread is not None else []
        known = history is not None and history[1].source in HISTORY_SOURCES
        partition = asked_partition(request, context.partitions) if known else None
        if history is not None and partition is not None and partition.name in effective.partitions:
            advice, apply, reasons = history_advice(effective, request, *history, partition)
            return nothing(*said, *reasons, advice=advice, apply=apply)
        return nothing(*(said or ["no #ADVISOR job description: nothing to predict"]))
    spread_asked = _asked_spread(request)
    if spread_asked is None:
        return nothing("a job on a range of nodes, or with GPUs per task on several, is passed through")
    offers = {p.name: _offer(p) for p in context.partitions}
    written = asked_partition(request, context.partitions)
    if written is None or written.name not in offers:
        return nothing("the job's partition is not one of the cluster's")
    asked_name = written.name
    gpus, nodes = spread_asked
    estimator = Estimator(context, effective, request, description, predictor, now)
    asked = baseline(description, offers[asked_name], gpus, nodes)
    open_now = {p.name for p in context.partitions if p.takes_jobs}
    considered = [p for p in context.partitions if p.name in effective.partitions and p.name in open_now]
    refused = {
        p.name: why for p in considered if (why := refusal(p, request, standing, asked_name)) is not None
    }
    allowed = [
        offers[name]
        for name in effective.partitions
        if name in offers and name in open_now and name not in refused
    ]
    closed = [name for name in effective.partitions if name in offers and name not in open_now]
    try:
        largest = {(o.name, amp): estimator.largest_batch(o.name, amp) for o in allowed for amp in BOTH}
        others = job_candidates(description, allowed, gpus, effective.tuning, largest, nodes)
        # A job that counts its tasks (--ntasks) keeps its devices: the tasks are its ranks.
        ranked_by_tasks = request.ntasks not in (None, 1)
        found = [
            c for c in others if c != asked and not (ranked_by_tasks and (c.gpus, c.nodes) != (gpus, nodes))
        ]
        prior = None if history is None else history_prior(history[1], *estimator.predicted(asked))
        estimator.scale = prior or 1.0
        estimates = estimator.estimate([asked, *found])
    except NoModelError as error:
        return nothing(f"nothing to predict with ({error}): benchmark, then run advisor models train")
    modes: dict[str, Mode] = {name: terms.mode for name, terms in effective.partitions.items()}
    rules = effective.rewrite
    least = effective.tuning.min_scaling_efficiency
    decision = choose(
        estimates, estimates[0], effective.objective, effective.cost_weight, rules, modes, least
    )
    order = partition_order(decision, request, estimator.runs_on, {offer.name: offer for offer in allowed})
    if order is not None:
        decision = decision.model_copy(update={"reasons": [*decision.reasons, *order.reasons]})
    left_out = [f"not considered, no node takes jobs: {', '.join(closed)}"] if closed else []
    left_out += [f"not considered, {name}: {why}" for name, why in refused.items()]
    if history is not None and history[1].runs and decision.baseline is not None:
        left_out.append(cross_check(history[0], history[1], decision.baseline.run_s / estimator.scale))
    if prior is not None:
        left_out.append(prior_reason(prior))
    if left_out:
        decision = decision.model_copy(update={"reasons": [*decision.reasons, *left_out]})
    advice = advice_for(decision, request, offers, order)
    written_limit = request.time_limit or written.default_time or written.max_time
    runs = [Run("as submitted", decision.baseline.run_p90_s, written_limit)]
    if advice is not None:
        runs.append(Run("as advised", decision.chosen.run_p90_s, advice.time_limit or written_limit))
    return Recommendation(
        user=user,
        account=account,
        mode=effective.mode,
        candidates=decision.ranked,
        baseline=decision.baseline,
        chosen=decision.chosen,
        apply=decision.apply,
        advice=advice,
        reasons=decision.reasons,
        kill_warnings=kill_warnings(runs),
    )


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
