"""The last stage of a recommendation: the reasons, worded here and nowhere else.

The stages before it keep facts (`PassedThrough`, `Screened`, `Estimated`, `Decision`, `PartitionOrder`,
`HistoryAdvice`); this module turns them into the sentences every surface shows, in a fixed order: the
choice, the partition order, then what was left out (closed and refused partitions, history's
cross-check and the level it set).
"""

from __future__ import annotations

from advisor.history.past import JobAsk
from advisor.history.point import explained
from advisor.history.predictor import HistoryLimit, RunForecast
from advisor.policy.schema import Objective, RewriteRules
from advisor.recommend.advice import PartitionOrder
from advisor.recommend.ask import Ask
from advisor.recommend.choose import Criteria, Decision, Estimate, describe
from advisor.recommend.estimate import Estimated
from advisor.recommend.history_limit import HistoryAdvice
from advisor.recommend.kills import likely_killed
from advisor.recommend.screen import PassedThrough, Screened
from advisor.slurm.values import format_duration, format_seconds

_PASSED = {
    "off": "the policy turns the advisor off for this user",
    "undescribed": "no #ADVISOR job description: nothing to predict",
    "spread": "a job on a range of nodes, or with GPUs per task on several, is passed through",
    "partition": "the job's partition is not one of the cluster's",
}


def explain(
    ask: Ask, screened: Screened, estimated: Estimated, decision: Decision, order: PartitionOrder | None
) -> list[str]:
    """Why the job is advised as it is: the choice, the partition order, what was left out."""
    reasons = choice(decision, Criteria.of(screened.effective))
    if order is not None:
        asked = ",".join(ask.request.partitions)
        reasons.append(f"partitions in order: {','.join(order.partitions)} (the job asked for {asked})")
        if order.dropped:
            dropped = ", ".join(order.dropped)
            reasons.append(f"not kept, the advised configuration does not run there: {dropped}")
    if screened.closed:
        reasons.append(f"not considered, no node takes jobs: {', '.join(screened.closed)}")
    reasons += [f"not considered, {name}: {why}" for name, why in screened.refused.items()]
    reasons += [
        f"not considered, {name}: nothing predicts the job there ({why})"
        for name, why in estimated.unpredicted.items()
    ]
    history = ask.history
    if history is not None and history.forecast.runs:
        reasons.append(
            cross_check(history.ask, history.forecast, decision.baseline.run_s / (estimated.prior or 1.0))
        )
    if estimated.prior is not None:
        reasons.append(
            f"history: the low-confidence predictions are scaled by {estimated.prior:.2f} to this script's "
            "earlier runs"
        )
    return reasons


def cross_check(job: JobAsk, forecast: RunForecast, predicted_s: float) -> str:
    """For a job the model predictor predicted: what its earlier runs took, beside what it predicts."""
    said = _what_history_says(forecast, job.user, job.script)
    return f"{said}; predicted as submitted: {format_seconds(predicted_s)}"


def passed(outcome: PassedThrough, ask: Ask) -> list[str]:
    """Why a job has no candidates; a job that describes no model says why first (``ask.unread``), then
    what its history advises."""
    if outcome.why == "no model":
        return [f"nothing to predict with ({outcome.error}): benchmark, then run advisor models train"]
    if outcome.why != "undescribed":
        return [_PASSED[outcome.why]]
    said = [ask.unread] if ask.unread is not None else []
    if outcome.history is not None:
        return [*said, *history_told(outcome.history)]
    return said or [_PASSED["undescribed"]]


def choice(decision: Decision, criteria: Criteria) -> list[str]:
    """The choice among the candidates: those passed over first, then the verdict."""
    objective, rules, least = criteria.objective, criteria.rules, criteria.min_efficiency
    reasons = [
        f"not chosen: {describe(e.candidate)}, {likely_killed(e.run_p90_s, e.time_limit)}"
        for e in decision.passed_over
    ]
    if decision.inefficient is not None:
        efficiency = decision.inefficient.efficiency or 0.0
        reasons.append(
            f"not chosen: {describe(decision.inefficient.candidate)}, whose scaling is predicted at "
            f"{efficiency:.2f} of ideal (the policy takes at least {least:.2f})"
        )
    verdict, best, baseline = decision.verdict, decision.best, decision.baseline
    if verdict == "nothing fits":
        return [*reasons, "kept as submitted: no candidate is predicted to fit in memory"]
    if verdict == "all killed":
        return [
            *reasons,
            "kept as submitted: every trusted candidate is likely killed at the time limit it would get",
        ]
    if verdict == "none trusted":
        return [
            *reasons,
            f"kept as submitted: no candidate that fits has a prediction of at least {rules.min_confidence} "
            f"confidence from a model younger than {rules.max_model_age_days:g} days",
        ]
    if verdict == "already best" or best is None:
        return [*reasons, "the job as submitted is already the best candidate"]
    reasons.append(_why_best(best, baseline, objective))
    if verdict == "gain too small":
        reasons.append(_too_small(best, baseline, objective, rules))
    elif decision.mode != "rewrite":
        partition = best.candidate.partition
        reasons.append(f"advice only: the policy's mode for partition {partition} is {decision.mode}")
    return reasons


def _why_best(best: Estimate, baseline: Estimate, objective: Objective) -> str:
    head = f"best: {describe(best.candidate)}"
    if not baseline.fits:
        where = baseline.candidate.partition
        return f"{head}; as submitted the job needs more memory than a device of {where} has"
    if objective == "cost" and best.cost is not None and baseline.cost is not None:
        return f"{head}: costs {best.cost:.2f} against {baseline.cost:.2f} as submitted"
    if best.array is not None and baseline.array is not None:
        return (
            f"{head}: the array's last task expected to end in {format_seconds(best.total_s)} "
            f"({_waves(best)}) against {format_seconds(baseline.total_s)} as submitted ({_waves(baseline)})"
        )
    return (
        f"{head}: expected to finish in {format_seconds(best.total_s)} "
        f"(wait {format_seconds(best.wait_s)}, run "
        f"{format_seconds(best.run_s)}) against {format_seconds(baseline.total_s)} as submitted "
        f"(wait {format_seconds(baseline.wait_s)}, run {format_seconds(baseline.run_s)})"
    )


def _waves(estimate: Estimate) -> str:
    array = estimate.array
    shape = "" if array is None else f"{array.waves} waves of {array.at_once}, "
    return f"{shape}wait {format_seconds(estimate.wait_s)}, run {format_seconds(estimate.run_s)} each"


def _too_small(best: Estimate, baseline: Estimate, objective: Objective, rules: RewriteRules) -> str:
    """Why the best candidate is not worth moving the job for: in cost, or in completion time."""
    if objective == "cost":
        return f"kept as submitted: it saves less than {rules.min_gain_fraction:.0%} of the cost"
    gain = baseline.total_s - best.total_s
    return (
        f"kept as submitted: finishing {format_seconds(max(gain, 0))} earlier is below the policy's "
        f"minimum of {rules.min_gain_fraction:.0%} and {format_seconds(rules.min_gain_minutes * 60)}"
    )


def history_told(found: HistoryAdvice) -> list[str]:
    """What the earlier runs took, then the limit they advise and the rule that set it (or why none)."""
    said = _what_history_says(found.forecast, found.job.user, found.job.script)
    decided, requested = found.decided, found.requested
    if decided is None:
        return [said, "history: the job keeps its own time limit"]
    if requested is not None and decided.limit >= requested:
        return [said, f"history: the job's own limit ({format_duration(requested)}) fits"]
    told = f"history: time limit {format_duration(decided.limit)} set by {_rule_named(found, decided)}"
    if requested is not None:
        told += f", instead of {format_duration(requested)}"
    return [said, told]


def _rule_named(found: HistoryAdvice, decided: HistoryLimit) -> str:
    """The rule that set the limit, then what history alone said where another rule overrode it."""
    forecast, rule, asked_s = found.forecast, found.rule, found.job.limit_s
    said = ""
    if decided.upper_s is not None:
        how = "its p95 (learned from accounting)" if forecast.source == "model" else "its longest recent run"
        product = format_seconds(decided.upper_s * rule.history_factor)
        said = f"{how} {format_seconds(decided.upper_s)} x {rule.history_factor:g} = {product}"
    if decided.rule == "factor":
        return said
    if decided.rule == "floor":
        share = f"{rule.min_fraction_of_request:.0%}"
        named = f"the policy's floor ({share} of the {format_seconds(asked_s or 0)} asked)"
    elif decided.rule == "partition":
        named = f"the partition's maximum ({format_seconds(found.maximum_s or 0)})"
    else:
        named = f"the request ({format_seconds(asked_s or 0)})"
    return f"{named}; {said}" if said else named


def _what_history_says(forecast: RunForecast, user: str, script: str) -> str:
    name = script or "this job"
    if not forecast.runs:
        return f"history: no earlier run of {name} by {user}; from their other jobs"
    runs = ", ".join(format_seconds(run) for run in forecast.runs)
    count = len(forecast.runs)
    last = f"last {count} runs" if count > 1 else "last run"
    said = f"history: your {last} of {name} took {runs}"
    said += " (the last one hit its time limit)" if forecast.censored else ""
    if forecast.rule and forecast.p50_s:
        said += f"; expected {format_seconds(forecast.p50_s)}: {explained(forecast.rule)}"
    return said
