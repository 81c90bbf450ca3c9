"""What the caller's earlier runs of the same script took (`advisor.history`): a time limit for a job that
describes no model, as the policy's time-limit rule turns it into one; for a job that does, a cross-check,
and the level of predictions the model predictor is not confident of."""

from __future__ import annotations

from advisor.history.past import JobAsk
from advisor.history.point import explained
from advisor.history.predictor import HistoryLimit, RunForecast, limit_and_rule
from advisor.jobscript.request import JobRequest
from advisor.jobscript.rewrite import Advice
from advisor.policy.resolve import Effective
from advisor.policy.schema import TimeLimitRule
from advisor.slurm.models import Partition
from advisor.slurm.values import format_duration, format_seconds

HISTORY_SOURCES = ("model", "history")
"""Forecasts that rest on the caller's own past; one that only repeats the request advises nothing."""


def history_advice(
    effective: Effective, request: JobRequest, ask: JobAsk, forecast: RunForecast, partition: Partition
) -> tuple[Advice | None, bool, list[str]]:
    """The advice (a shorter time limit, or None), whether the policy lets it be applied, and why."""
    rule = effective.time_limit
    reasons = [_what_history_says(forecast, ask)]
    maximum = partition.max_time.total_seconds() if partition.max_time else None
    decided = limit_and_rule(rule, forecast, ask, rule.history_factor, maximum)
    if decided is None:
        return None, False, [*reasons, "history: the job keeps its own time limit"]
    requested, limit = request.time_limit, decided.limit
    if requested is not None and limit >= requested:
        return None, False, [*reasons, f"history: the job's own limit ({format_duration(requested)}) fits"]
    named = _rule_named(decided, forecast, rule, ask, maximum)
    told = f"history: time limit {format_duration(limit)} set by {named}"
    if requested is not None:
        told += f", instead of {format_duration(requested)}"
    terms = effective.partitions.get(partition.name)
    apply = terms is not None and terms.mode == "rewrite"
    return Advice(time_limit=limit), apply, [*reasons, told]


def _rule_named(
    decided: HistoryLimit, forecast: RunForecast, rule: TimeLimitRule, ask: JobAsk, maximum: float | None
) -> str:
    """The rule that set the limit, then what history alone said where another rule overrode it."""
    said = ""
    if decided.upper_s is not None:
        how = "its p95 (learned from accounting)" if forecast.source == "model" else "its longest recent run"
        product = format_seconds(decided.upper_s * rule.history_factor)
        said = f"{how} {format_seconds(decided.upper_s)} x {rule.history_factor:g} = {product}"
    if decided.rule == "factor":
        return said
    if decided.rule == "floor":
        asked = format_seconds(ask.limit_s or 0)
        named = f"the policy's floor ({rule.min_fraction_of_request:.0%} of the {asked} asked)"
    elif decided.rule == "partition":
        named = f"the partition's maximum ({format_seconds(maximum or 0)})"
    else:
        named = f"the request ({format_seconds(ask.limit_s or 0)})"
    return f"{named}; {said}" if said else named


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


def prior_reason(factor: float) -> str:
    return f"history: the low-confidence predictions are scaled by {factor:.2f} to this script's earlier runs"


def cross_check(ask: JobAsk, forecast: RunForecast, predicted_s: float) -> str:
    """For a job the model predictor predicted: what its earlier runs took, beside what it predicts."""
    said = _what_history_says(forecast, ask)
    return f"{said}; predicted as submitted: {format_seconds(predicted_s)}"


def _what_history_says(forecast: RunForecast, ask: JobAsk) -> str:
    name = ask.script or "this job"
    if not forecast.runs:
        return f"history: no earlier run of {name} by {ask.user}; from their other jobs"
    runs = ", ".join(format_seconds(run) for run in forecast.runs)
    count = len(forecast.runs)
    last = f"last {count} runs" if count > 1 else "last run"
    said = f"history: your {last} of {name} took {runs}"
    said += " (the last one hit its time limit)" if forecast.censored else ""
    if forecast.rule and forecast.p50_s:
        said += f"; expected {format_seconds(forecast.p50_s)}: {explained(forecast.rule)}"
    return said
