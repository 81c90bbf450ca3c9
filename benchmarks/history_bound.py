"""How short could time limits made from history be? The best rule per group of jobs, chosen in hindsight.

    python -m benchmarks.history_bound TRACE [--kill-rate 0.01] [--within 2.5] [--floor F] [--json]

The product's replay (`advisor.history.replay`) says what history knew of each job at its submission: its
point prediction, its upper quantile, its script's last runs, whether its kind was seen and its last run
censored. Jobs are grouped by that knowledge alone (those flags, how many runs, their spread, the request
over the longest run) and each group gets one rule for all its jobs: the request, or a factor (1 to 10)
times one base (the point, the upper quantile, the longest or the last of those runs), in whole minutes,
within the request and above the policy's floor.

Knowing every run, the rules are chosen together and exactly (a multiple-choice knapsack over the groups)
to bring the most completed jobs to a limit of at most R times their run (the killed among them, as a
median counts them) with at most the kill rate of them run past their limit: no predictor that limits a
group's jobs alike from these bases does better. Finer groups raise this bound, and overfit it: it says
what these groups could give, not what a finer predictor could. The same rules chosen online, each job's
from its group's jobs ended by its submission, are what a deployment could have. Printed for completed
jobs: the share at most R x their run for several R and the median limit / run, for both, for users'
requests and for the product's limits at the policy's factor (whatever these kill).
"""

from __future__ import annotations

import argparse
import heapq
import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import numpy as np
from pydantic import ValidationError

from advisor.frozen import Frozen
from advisor.history.past import PastJob
from advisor.history.predictor import RunForecast, history_limit
from advisor.history.replay import DEFAULT_RULE, Predicted, replay
from advisor.policy.schema import TimeLimitRule
from benchmarks.history import read_or_say

BASES: Mapping[str, Callable[[RunForecast], float | None]] = {
    "point": lambda f: f.p50_s,
    "upper quantile": lambda f: f.upper_s,
    "longest run": lambda f: max(f.runs) if f.runs else None,
    "last run": lambda f: f.runs[-1] if f.runs else None,
}
FACTORS = (1.0, 1.1, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0, 6.0, 10.0)
LEAST_ENDED = 20
"""Ended jobs a group needs before `online` trusts what they say."""
PENALTIES = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0)
"""What `online` may weigh one killed job against one job brought within R: the trade-off's steps."""
WITHIN = (1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 8.0, 10.0, 20.0)
Group = tuple[object, ...]


class RuleLimits(Frozen):
    """One way of making limits, over a log's completed jobs."""

    killed: float
    """Share of jobs limited below their run."""
    median: float
    """Median limit / run; for the best rules, the least they reach (to 1%)."""
    within: dict[str, float]
    """Per R of `WITHIN`: the share of jobs whose limit is at most R x their run."""


class Bound(Frozen):
    trace: str
    completed: int
    groups: int
    rules: int
    """Rules each group chooses from: its request, or a base times a factor."""
    floor: float
    arms: dict[str, RuleLimits]


def group(forecast: RunForecast, request_s: float | None) -> Group:
    """What history knew of a job that a rule may go by: nothing of its own run."""
    runs = [run for run in forecast.runs if run > 0]
    spread = -1 if not runs else min(int(math.log(max(runs) / max(min(runs), 1.0)) / 0.35), 6)
    longest = max(runs) if runs else forecast.p50_s
    over = -1 if not (request_s and longest) else min(max(int(math.log2(request_s / longest)), 0), 6)
    return (forecast.source, forecast.seen, forecast.censored, min(len(runs), 5), spread, over)


def column(p: Predicted, rule: TimeLimitRule) -> list[float]:
    """A job's limit / run under each rule: its request first (infinite where there is none), then every
    base times every factor (the request again where the base is unknown)."""
    request, run = p.job.ask.limit_s, p.job.run_s
    requested = timedelta(seconds=request) if request else None
    found = [request / run if request else math.inf]
    for base in BASES.values():
        seconds = base(p.forecast)
        for factor in FACTORS:
            if not seconds:
                found.append(found[0])
                continue
            limit = rule.floored(timedelta(seconds=min(seconds * factor, request or math.inf)), requested)
            found.append(limit.total_seconds() / run)
    return found


@dataclass(frozen=True)
class Judged:
    """A completed job, its `group` and its `column`: made once, read by the hindsight and online arms."""

    job: PastJob
    group: Group
    column: np.ndarray


def judged(done: Sequence[Predicted], rule: TimeLimitRule) -> list[Judged]:
    return [Judged(p.job, group(p.forecast, p.job.ask.limit_s), np.asarray(column(p, rule))) for p in done]


def ratios(jobs: Sequence[Judged]) -> dict[Group, np.ndarray]:
    """Per group, the `column` of each of its jobs: rules in rows, jobs in columns."""
    found: dict[Group, list[np.ndarray]] = defaultdict(list)
    for job in jobs:
        found[job.group].append(job.column)
    return {key: np.stack(columns, axis=1) for key, columns in found.items()}


def best_share(groups: Mapping[Group, np.ndarray], within: float, kill_rate: float) -> float:
    """The largest share of jobs whose limit is at most ``within`` x their run, one rule per group, with at
    most ``kill_rate`` of the jobs limited below their run: a knapsack over kills, solved exactly."""
    jobs: int = sum(options.shape[1] for options in groups.values())
    budget = math.floor(kill_rate * jobs + 1e-9)
    best = np.zeros(budget + 1)
    for options in groups.values():
        kills, kept = (options < 1).sum(axis=1), (options <= within).sum(axis=1)
        after = np.full(budget + 1, -np.inf)
        for killed, count in zip(kills, kept, strict=True):
            if killed <= budget:
                after[killed:] = np.maximum(after[killed:], best[: budget + 1 - killed] + count)
        best = after
    return float(best[budget]) / max(jobs, 1)


def least_median(groups: Mapping[Group, np.ndarray], kill_rate: float) -> float:
    """The least R (to 1%) that the best rules bring half the jobs to: their (lower) median limit / run."""
    low, high = 1.0, 1000.0
    if best_share(groups, high, kill_rate) < 0.5:
        return math.inf
    while high / low > 1.01:
        middle = math.sqrt(low * high)
        low, high = (middle, high) if best_share(groups, middle, kill_rate) < 0.5 else (low, middle)
    return high


def as_limits(pairs: Sequence[tuple[float | None, float]]) -> RuleLimits:
    """``(limit, run)`` pairs made some other way; no limit counts as none reached."""
    known = [(limit, run) for limit, run in pairs if limit is not None]
    return RuleLimits(
        killed=sum(limit < run for limit, run in known) / max(len(pairs), 1),
        median=statistics.median(limit / run for limit, run in known) if known else math.inf,
        within={f"{r:g}": sum(limit <= r * run for limit, run in known) / max(len(pairs), 1) for r in WITHIN},
    )


def online(jobs: Sequence[Judged], within: float, penalty: float) -> RuleLimits:
    """The same groups and rules as a deployment could choose them: each job gets the rule that did best on
    its group's jobs ended by its submission (jobs brought to at most ``within`` x their run, less
    ``penalty`` per job killed), and its request until `LEAST_ENDED` of them had ended."""
    scores: dict[Group, np.ndarray] = {}
    ended: dict[Group, int] = defaultdict(int)
    ends: list[tuple[float, int]] = []
    limits = []
    for index, job in enumerate(jobs):
        while ends and ends[0][0] <= job.job.ask.submit_s:
            past = jobs[heapq.heappop(ends)[1]]
            score = (past.column <= within) - penalty * (past.column < 1)
            scores[past.group] = scores[past.group] + score if past.group in scores else score
            ended[past.group] += 1
        best = int(np.argmax(scores[job.group])) if ended[job.group] >= LEAST_ENDED else 0
        limits.append((job.column[best] * job.job.run_s, job.job.run_s))
        heapq.heappush(ends, (job.job.end_s, index))
    return as_limits(limits)


def bound(
    trace: str, predicted: Sequence[Predicted], rule: TimeLimitRule, kill_rate: float, within: float
) -> Bound:
    """The best rules in hindsight, the same chosen online (for ``within``, with the least median among the
    penalties that kill at most ``kill_rate``, else the one that kills least), users' requests and the
    product's limits."""
    done = [p for p in predicted if p.job.completed and p.job.run_s > 0]
    jobs = judged(done, rule)
    groups = ratios(jobs)
    advised = []
    for p in done:
        limit = history_limit(rule, p.forecast, p.job.ask, rule.history_factor)
        advised.append((p.job.ask.limit_s if limit is None else limit.total_seconds(), p.job.run_s))
    best = RuleLimits(
        killed=kill_rate,
        median=least_median(groups, kill_rate),
        within={f"{r:g}": best_share(groups, r, kill_rate) for r in WITHIN},
    )
    tried = {penalty: online(jobs, within, penalty) for penalty in PENALTIES}
    safe = [penalty for penalty, limits in tried.items() if limits.killed <= kill_rate]
    penalty = min(safe, key=lambda p: tried[p].median) if safe else min(tried, key=lambda p: tried[p].killed)
    return Bound(
        trace=trace,
        completed=len(done),
        groups=len(groups),
        rules=1 + len(BASES) * len(FACTORS),
        floor=rule.min_fraction_of_request,
        arms={
            "best rules in hindsight": best,
            f"online, penalty {penalty:g}": tried[penalty],
            "users' requests": as_limits([(p.job.ask.limit_s, p.job.run_s) for p in done]),
            f"advisor x{rule.history_factor:g}": as_limits(advised),
        },
    )


def show(figures: Bound) -> None:
    print(
        f"{figures.trace}: {figures.completed} completed jobs in {figures.groups} groups, {figures.rules} "
        f"rules each; the policy's floor {figures.floor:g}"
    )
    arms = figures.arms.values()
    print(f"  {'limit':18}" + "".join(f"{name:>25}" for name in figures.arms))
    print(f"  {'killed':18}" + "".join(f"{100 * arm.killed:24.2f}%" for arm in arms))
    for within in WITHIN:
        key = f"{within:g}"
        print(f"  {f'at most {key}x run':18}" + "".join(f"{100 * arm.within[key]:24.1f}%" for arm in arms))
    print(f"  {'median limit/run':18}" + "".join(f"{arm.median:25.2f}" for arm in arms))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.history_bound", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("trace", type=Path, help="SWF (.swf, .swf.gz), sacct --json or sacct -P")
    parser.add_argument("--kill-rate", type=float, default=0.01, help="share of jobs killed (default 0.01)")
    parser.add_argument("--floor", type=float, help="the policy's min_fraction_of_request (default its own)")
    parser.add_argument(
        "--within", type=float, default=2.5, help="the R online rules aim at (default 2.5, issue 26's)"
    )
    parser.add_argument("--json", action="store_true", help="the figures as JSON")
    args = parser.parse_args(argv)
    if not 0 <= args.kill_rate < 1 or args.within < 1:
        parser.error("--kill-rate is a share of jobs below 1, --within a limit / run of at least 1")
    rule = DEFAULT_RULE
    if args.floor is not None:
        try:  # validated as a policy file's value is, not copied past the schema's bounds
            rule = TimeLimitRule.model_validate(
                {**DEFAULT_RULE.model_dump(), "min_fraction_of_request": args.floor}
            )
        except ValidationError as error:
            parser.error(f"--floor {args.floor:g}: {error.errors()[0]['msg']}")
    jobs = read_or_say(args.trace, "history_bound")
    if jobs is None:
        return 1
    figures = bound(args.trace.name, replay(jobs), rule, args.kill_rate, args.within)
    if args.json:
        print(figures.model_dump_json())
    else:
        show(figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
