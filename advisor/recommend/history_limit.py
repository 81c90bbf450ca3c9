"""What the caller's earlier runs of the same script took (`advisor.history`): a time limit for a job that
describes no model, as the policy's time-limit rule turns it into one; for a job that does, a cross-check,
and the level of predictions the model predictor is not confident of."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import timedelta

from advisor.history.past import JobAsk
from advisor.history.predictor import HistoryLimit, RunForecast, limit_and_rule
from advisor.jobscript.request import JobRequest
from advisor.jobscript.rewrite import Advice
from advisor.policy.resolve import Effective
from advisor.policy.schema import TimeLimitRule
from advisor.slurm.models import Partition

HISTORY_SOURCES = ("model", "history")
"""Forecasts that rest on the caller's own past; one that only repeats the request advises nothing."""


@dataclass(frozen=True)
class HistoryAdvice:
    """What the caller's earlier runs advise for a job that describes no model: a shorter time limit, or
    nothing, and what decided it (`advisor.recommend.explain.history_told` words it)."""

    advice: Advice | None
    apply: bool
    """Whether the policy lets the advice be applied (its mode on the partition is rewrite)."""
    job: JobAsk
    forecast: RunForecast
    rule: TimeLimitRule
    decided: HistoryLimit | None
    """The limit the rule set, and which rule; None: the job keeps its own."""
    requested: timedelta | None
    """The job's own limit."""
    maximum_s: float | None
    """The partition's MaxTime."""


def history_advice(
    effective: Effective, request: JobRequest, ask: JobAsk, forecast: RunForecast, partition: Partition
) -> HistoryAdvice:
    rule = effective.time_limit
    maximum = partition.max_time.total_seconds() if partition.max_time else None
    decided = limit_and_rule(rule, forecast, ask, rule.history_factor, maximum)
    requested = request.time_limit
    found = HistoryAdvice(None, False, ask, forecast, rule, decided, requested, maximum)
    if decided is None or (requested is not None and decided.limit >= requested):
        return found
    terms = effective.partitions.get(partition.name)
    apply = terms is not None and terms.mode == "rewrite"
    return replace(found, advice=Advice(time_limit=decided.limit), apply=apply)


PRIOR_RANGE = (0.2, 5.0)
"""History rescales low-confidence predictions by at most this much either way: a script whose runs are
that far from its prediction has likely changed what it runs (its steps, its data)."""


def history_prior(forecast: RunForecast, predicted_s: float, confidence: str) -> float | None:
    """The factor that brings the job's predicted run, as submitted, to the median of its earlier runs,
    where the prediction is of low confidence and history has uncensored runs of the same script; else
    None. The candidates keep the model's differences between them; history sets their level."""
    if confidence != "low" or not forecast.runs or forecast.censored or forecast.p50_s is None:
        return None
    if forecast.source not in HISTORY_SOURCES or predicted_s <= 0:
        return None
    low, high = PRIOR_RANGE
    return min(max(forecast.p50_s / predicted_s, low), high)
