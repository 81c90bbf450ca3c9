"""History's predictions replayed in submission order, and how good they were.

Each job is predicted at its submission from the jobs that had ended by then; the model is retrained
every ``retrain_s`` (a night) on the jobs ended before it. Scores are for completed jobs only (a failed
job's run says little of what it needed): accuracy ``min(p, run) / max(p, run)``, the relative error, and
for a time limit, the share of jobs it would have killed against the median limit over run.
"""

from __future__ import annotations

import heapq
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from advisor.frozen import Frozen
from advisor.history.features import History
from advisor.history.past import PastJob
from advisor.history.point import accuracy
from advisor.history.predictor import (
    HistoryModel,
    Past,
    RunForecast,
    forecast,
    history_limit,
    look_back,
    train_model,
)
from advisor.policy.schema import TimeLimitRule

NIGHT_S = 86400.0
DEFAULT_RULE = TimeLimitRule()
"""The policy's built-in time-limit rule: what a site gets that writes none."""
FACTORS = (1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0, 5.0, 7.0, 10.0)
Train = Callable[[Sequence[Sequence[float]], Sequence[PastJob]], HistoryModel | None]


@dataclass(frozen=True)
class Predicted:
    job: PastJob
    tsafrir_s: float | None
    forecast: RunForecast
    trained_until: float | None
    """The night the model in use was trained: only jobs ended before it were in its training."""


def replay(
    jobs: Sequence[PastJob], retrain_s: float = NIGHT_S, train: Train = train_model
) -> list[Predicted]:
    """Every job of ``jobs`` (in submission order) predicted as the advisor would have at its submission:
    its past taken then, the model's part from the model of the night before (asked once per night)."""
    history, model, trained_until = History(), None, None
    ends: list[tuple[float, int]] = []
    ended_rows: list[list[float]] = []
    ended_jobs: list[PastJob] = []
    rows: dict[int, list[float]] = {}
    today: list[tuple[int, Past, float | None]] = []
    predicted: list[Predicted] = []

    def end_until(moment: float) -> None:
        while ends and ends[0][0] <= moment:
            _, index = heapq.heappop(ends)
            history.ended(jobs[index])
            ended_rows.append(rows[index])
            ended_jobs.append(jobs[index])

    def close_the_day() -> None:
        quantiles = model.quantiles([rows[index] for index, _, _ in today]) if model and today else None
        for position, (index, past, rule) in enumerate(today):
            pair = (
                None if quantiles is None else (float(quantiles[position][0]), float(quantiles[position][1]))
            )
            job = jobs[index]
            predicted.append(Predicted(job, rule, forecast(past, job.ask, pair), trained_until))
        today.clear()

    night = _first_night(jobs, retrain_s)
    for index, job in enumerate(jobs):
        ask = job.ask
        if night <= ask.submit_s:
            close_the_day()
            while night <= ask.submit_s:
                end_until(night)
                model = train(ended_rows, ended_jobs) or model
                trained_until, night = night, night + retrain_s
        end_until(ask.submit_s)
        rows[index] = history.features(ask)
        past = look_back(history, ask)
        today.append((index, past, past.tsafrir_s))
        heapq.heappush(ends, (job.end_s, index))
    close_the_day()
    return predicted


def _first_night(jobs: Sequence[PastJob], retrain_s: float) -> float:
    start = jobs[0].ask.submit_s if jobs else 0.0
    return (math.floor(start / retrain_s) + 1) * retrain_s


class LimitScore(Frozen):
    factor: float | None
    kill_rate: float
    """Share of completed jobs whose limit is below their run: they would have been killed."""
    median_ratio: float
    """Median limit / run."""


class PointScore(Frozen):
    jobs: int
    mean_accuracy: float
    median_error: float
    """Median |prediction - run| / run."""


class HistoryReport(Frozen):
    trace: str
    jobs: int
    completed: int
    floor: float
    """The policy's ``min_fraction_of_request`` the limits were made with."""
    users: PointScore
    tsafrir: PointScore
    advisor: PointScore
    sources: dict[str, int]
    """How many completed jobs each source predicted (model, history, request)."""
    rules: dict[str, PointScore]
    """The advisor's median by how it was made (the point rule, else the source), most jobs first."""
    user_limits: LimitScore
    tradeoff: list[LimitScore]
    """The advised limit as the factor varies."""
    tradeoff_floorless: list[LimitScore]
    """The same without the policy's floor (``min_fraction_of_request = 0``): what history alone gives."""
    exact: LimitScore
    exact_floorless: LimitScore
    """Every job history would advise limited to its own run (whole minutes; the floor, then none): the
    best any prediction could do under the policy, which shows what the floor itself costs."""


def report(
    trace: str,
    predicted: Sequence[Predicted],
    factors: Sequence[float] = FACTORS,
    rule: TimeLimitRule = DEFAULT_RULE,
) -> HistoryReport:
    """Limits as the policy's ``rule`` makes them (whole minutes, its floor), the factor varied."""
    done = [p for p in predicted if p.job.completed and p.job.run_s > 0]
    floorless = rule.model_copy(update={"min_fraction_of_request": 0.0})
    if not done:
        raise ValueError(f"{trace}: no completed job to score")
    sources: dict[str, int] = {}
    for p in done:
        sources[p.forecast.source] = sources.get(p.forecast.source, 0) + 1
    return HistoryReport(
        trace=trace,
        floor=rule.min_fraction_of_request,
        jobs=len(predicted),
        completed=len(done),
        users=_points([(p.job.ask.limit_s, p.job.run_s) for p in done]),
        tsafrir=_points([(p.tsafrir_s or p.job.ask.limit_s, p.job.run_s) for p in done]),
        advisor=_points([(p.forecast.p50_s, p.job.run_s) for p in done]),
        sources=sources,
        rules=_by_rule(done),
        user_limits=_limits(None, [(p.job.ask.limit_s, p.job.run_s) for p in done]),
        tradeoff=_tradeoff(rule, done, factors),
        tradeoff_floorless=_tradeoff(floorless, done, factors),
        exact=_limits(None, [(_seconds(rule, _exact(p), 1.0), p.job.run_s) for p in done]),
        exact_floorless=_limits(None, [(_seconds(floorless, _exact(p), 1.0), p.job.run_s) for p in done]),
    )


_UNRULED = {"model": "the model's median", "history": "Tsafrir's rule", "request": "the request"}


def _by_rule(done: Sequence[Predicted]) -> dict[str, PointScore]:
    groups: dict[str, list[tuple[float | None, float]]] = {}
    for p in done:
        label = p.forecast.rule or _UNRULED.get(p.forecast.source, "nothing")
        groups.setdefault(label, []).append((p.forecast.p50_s, p.job.run_s))
    return {label: _points(pairs) for label, pairs in sorted(groups.items(), key=lambda item: -len(item[1]))}


def _tradeoff(rule: TimeLimitRule, done: Sequence[Predicted], factors: Sequence[float]) -> list[LimitScore]:
    return [_limits(factor, [(_seconds(rule, p, factor), p.job.run_s) for p in done]) for factor in factors]


def _exact(p: Predicted) -> Predicted:
    """``p`` as if its upper quantile were its own run (a job history advises nothing keeps its limit)."""
    return replace(p, forecast=replace(p.forecast, upper_s=p.job.run_s)) if p.forecast.upper_s else p


def _seconds(rule: TimeLimitRule, p: Predicted, factor: float) -> float | None:
    limit = history_limit(rule, p.forecast, p.job.ask, factor)
    return None if limit is None else limit.total_seconds()


def _points(pairs: Sequence[tuple[float | None, float]]) -> PointScore:
    return PointScore(
        jobs=len(pairs),
        mean_accuracy=statistics.fmean(accuracy(p, run) for p, run in pairs),
        median_error=statistics.median(abs((p or 0.0) - run) / run for p, run in pairs),
    )


def _limits(factor: float | None, pairs: Sequence[tuple[float | None, float]]) -> LimitScore:
    known = [(limit, run) for limit, run in pairs if limit is not None]
    return LimitScore(
        factor=factor,
        kill_rate=sum(limit < run for limit, run in known) / max(len(known), 1),
        median_ratio=statistics.median(limit / run for limit, run in known) if known else math.nan,
    )
