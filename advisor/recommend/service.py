"""A recommendation for one submission: candidates, their predicted run, wait and cost, and the choice.

The edges come in through `Context` (the policy, the cluster's partitions and a wait estimator: Slurm's
``--test-only`` and the advisor's own queue replay) and a `StepPredictor` for the job; the clock is an
argument. The daemon's predictor reads the store's models and the job's layer table; an evaluation plugs in
measured step times at the same seam.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from advisor.comm.sync import Spread
from advisor.history.jobs import JobAsk
from advisor.history.predictor import RunForecast
from advisor.jobscript.advisor_lines import JobDescription
from advisor.jobscript.request import JobRequest
from advisor.jobscript.rewrite import Advice
from advisor.policy.resolve import Effective, resolve
from advisor.policy.schema import Mode, Policy
from advisor.predict.jobtime import JobShape, job_time
from advisor.predict.service import NoModelError, Prediction
from advisor.recommend.advice import advice_for, partition_order
from advisor.recommend.candidates import (
    Candidate,
    Offer,
    baseline,
    epochs,
    job_candidates,
    optimizer_steps,
)
from advisor.recommend.choose import Estimate, Recommendation, WaitSource, choose
from advisor.recommend.history_limit import (
    HISTORY_SOURCES,
    cross_check,
    history_advice,
    history_prior,
    prior_reason,
)
from advisor.recommend.kills import Run, kill_warnings, likely_killed, outlasts
from advisor.recommend.placement import Standing, refusal
from advisor.slurm.models import Partition

BOTH = (False, True)


class StepPredictor(Protocol):
    """What the recommender asks about one job: its steps on each partition and when a model was made.

    Asked once per candidate, so many times for the same step: an implementation keeps what is costly to
    compute. May raise `NoModelError`: nothing to predict with, and the job stays as submitted.
    """

    def step(
        self, partition: str, gpus: int, nodes: int, micro_batch: int, amp: bool, channels_last: bool
    ) -> Prediction:
        """One micro-step of ``micro_batch`` samples on each of ``gpus`` devices on each of ``nodes``
        (0 GPUs: a CPU partition)."""
        ...

    def sync(self, partition: str, spread: Spread, micro_step_s: float) -> Sync:
        """What the gradient all-reduce adds to each optimizer step beyond its last micro-step (a
        ``micro_step_s`` long backward hides part of it), and whether the partition measured it."""
        ...

    def trained_at(self, machine: str, version: int) -> datetime | None:
        """When a model version was trained: the policy trusts a model only while it is young."""
        ...


@dataclass(frozen=True)
class Sync:
    added_s: float
    measured: bool
    """False: the partition never measured its communication, and the stated default was assumed."""


class WaitQuery(BaseModel):
    """The resources a candidate asks Slurm for, which is all its queue wait depends on."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    partition: str
    gpus: int
    """On each node."""
    nodes: int = 1
    gpu_type: str | None
    time_limit: timedelta


class Waits(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    slurm_s: float | None
    advisor_s: float | None
    preferred: WaitSource
    """The estimator with the smaller measured error on this partition."""


WaitEstimator = Callable[[Sequence[WaitQuery]], list[Waits]]
"""Both estimators' waits for each query, in order; None where one could not say."""


@dataclass(frozen=True)
class Context:
    policy: Policy
    partitions: list[Partition]
    waits: WaitEstimator


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
    estimator = _Estimator(context, effective, request, description, predictor, now)
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


@dataclass(frozen=True)
class _Run:
    candidate: Candidate
    prediction: Prediction
    run_s: float
    p90_s: float
    query: WaitQuery


class _Estimator:
    """One recommendation's predictions and waits; model ages are read once per model version."""

    def __init__(
        self,
        context: Context,
        effective: Effective,
        request: JobRequest,
        description: JobDescription,
        predictor: StepPredictor,
        now: datetime,
    ) -> None:
        self.context = context
        self.effective = effective
        self.request = request
        self.description = description
        self.predictor = predictor
        self.now = now
        self.partitions = {p.name: p for p in context.partitions}
        self.overhead_s = effective.overhead.seconds(epochs(description))
        """Start-up and per-epoch work: the same on every candidate, since each keeps the job's epochs."""
        self._trained_at: dict[tuple[str, int], datetime | None] = {}
        self.scale = 1.0
        """What history sets the predicted runs' level by (`history_prior`); 1 without it."""

    def largest_batch(self, partition: str, amp: bool) -> int | None:
        """The largest micro-batch one device holds, as its smallest placement sees it."""
        gpus = 1 if self.partitions[partition].gpus_per_node else 0
        return self.predictor.step(partition, gpus, 1, 1, amp, False).largest_batch

    def estimate(self, candidates: list[Candidate]) -> list[Estimate]:
        """The first candidate (the job as submitted) must be predicted; another that cannot be (a
        placement a predictor knows nothing of) is left out."""
        first, *others = candidates
        runs = [self._run(first)]
        for candidate in others:
            with contextlib.suppress(NoModelError):
                runs.append(self._run(candidate))
        unique = sorted(
            {run.query for run in runs}, key=lambda q: (q.partition, q.gpus, q.nodes, q.time_limit)
        )
        waits = dict(zip(unique, self.context.waits(unique), strict=True))
        return [self._estimate(run, waits[run.query], self._efficiency(run)) for run in runs]

    def _efficiency(self, run: _Run) -> float | None:
        """The same micro-steps on one device (accumulated), over the devices times this run's steps."""
        candidate = run.candidate
        if candidate.devices == 1:
            return None
        alone = candidate.model_copy(
            update={"gpus": 1, "nodes": 1, "accumulation": candidate.accumulation * candidate.devices}
        )
        fixed_s = self.overhead_s * self.scale  # start-up and epochs, at the level history set
        try:
            single_s = self._run(alone).run_s - fixed_s
        except NoModelError:
            return None
        return single_s / (candidate.devices * max(run.run_s - fixed_s, 1e-9))

    def _run(self, candidate: Candidate) -> _Run:
        prediction = self.predictor.step(
            candidate.partition,
            candidate.gpus,
            candidate.nodes,
            candidate.micro_batch,
            candidate.amp,
            candidate.channels_last,
        )
        steps = optimizer_steps(self.description, candidate.global_batch)
        length = JobShape(steps=steps, accumulation=candidate.accumulation)
        whole = job_time(prediction.step_s, prediction.step_p90_s, length)
        spread = Spread(devices=candidate.devices, nodes=candidate.nodes)
        sync = self.predictor.sync(candidate.partition, spread, prediction.step_s)
        besides_s = steps * sync.added_s + self.overhead_s
        if candidate.devices > 1 and not sync.measured:
            prediction = prediction.model_copy(update={"confidence": "low", "note": _joined(prediction.note)})
        p50_s, p90_s = (whole.p50_s + besides_s) * self.scale, (whole.p90_s + besides_s) * self.scale
        limit = self._time_limit(candidate, p90_s)
        gpu_type = self.partitions[candidate.partition].gpu_type
        query = WaitQuery(
            partition=candidate.partition,
            gpus=candidate.gpus,
            nodes=candidate.nodes,
            gpu_type=gpu_type,
            time_limit=limit,
        )
        return _Run(candidate, prediction, p50_s, p90_s, query)

    def predicted(self, candidate: Candidate) -> tuple[float, str]:
        """The candidate's predicted run (unscaled) and its confidence; no wait asked."""
        run = self._run(candidate)
        return run.run_s / self.scale, run.prediction.confidence

    def runs_on(self, candidate: Candidate) -> timedelta | None:
        """The time limit ``candidate`` needs, or None where its micro-batch does not fit; no wait asked."""
        run = self._run(candidate)
        return run.query.time_limit if run.prediction.fits else None

    def _time_limit(self, candidate: Candidate, p90_s: float) -> timedelta:
        partition = self.partitions[candidate.partition]
        requested = self.request.time_limit
        limit = self.effective.time_limit.limit(timedelta(seconds=p90_s), requested)
        if limit is None:
            limit = requested or partition.default_time or partition.max_time or timedelta(days=1)
        return limit if partition.max_time is None else min(limit, partition.max_time)

    def _estimate(self, run: _Run, waits: Waits, efficiency: float | None) -> Estimate:
        candidate, prediction, limit = run.candidate, run.prediction, run.query.time_limit
        terms = self.effective.partitions.get(candidate.partition)
        cpus = self.request.cpus_per_task or 1
        cpus_held = cpus if candidate.gpus == 0 else 0
        held = candidate.gpus * candidate.nodes
        cost = None if terms is None else terms.cost(held, cpus_held, run.run_s)
        notes = [prediction.note] if prediction.note else []
        if outlasts(run.p90_s, limit):
            notes.append(likely_killed(run.p90_s, limit))
        version = (prediction.machine, prediction.model_version)
        if version not in self._trained_at:  # a few model versions serve every candidate
            self._trained_at[version] = self.predictor.trained_at(*version)
        created = self._trained_at[version]
        return Estimate(
            candidate=candidate,
            run_s=run.run_s,
            run_p90_s=run.p90_s,
            peak_memory_bytes=prediction.peak_memory_bytes,
            fits=prediction.fits,
            confidence=prediction.confidence,
            machine=prediction.machine,
            model_version=prediction.model_version,
            model_age=self.now - (created or self.now),
            slurm_wait_s=waits.slurm_s,
            advisor_wait_s=waits.advisor_s,
            wait_source=waits.preferred,
            cost=cost,
            time_limit=limit,
            note="; ".join(notes) or None,
            efficiency=efficiency,
        )


def _joined(note: str | None) -> str:
    unmeasured = "communication never measured here: a default all-reduce assumed (`advisor comm measure`)"
    return unmeasured if note is None else f"{note}; {unmeasured}"


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
