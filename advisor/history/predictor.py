"""A job's run time from its history: a learned quantile model, and Tsafrir's rule where it cannot speak.

The point prediction is the user's best-fitting rule over the same kind's last completed runs
(`advisor.history.point`); the model (XGBoost, the log run time's upper quantile) learns from every job
that ended what its past said at its submission (`advisor.history.features`), and that quantile times the
policy's factor is the advised time limit (0.95: see benchmarks/README.md). A user with too little history
gets the classic rule (Tsafrir, Etsion, Feitelson 2007: the mean of the user's last two runs, capped at the
request). Neither ever exceeds what the job asked for nor the partition's maximum, and a script whose last
run hit its limit is never advised a shorter one.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

import numpy as np
import xgboost as xgb

from advisor.history.features import FEATURES, History
from advisor.history.past import JobAsk, PastJob
from advisor.history.point import ExpectedRun
from advisor.policy.schema import TimeLimitRule

UPPER = 0.95
"""The quantile the time limit is built on; the policy's factor covers the rest."""
MIN_USER_RUNS = 2
"""Below this many ended jobs of the user the model has nothing of theirs to go on."""
MIN_TRAINING_JOBS = 200
TRAINING_WINDOW = 10000
"""The most recent ended jobs a night trains on: habits drift, and a night's training stays short."""
_PARAMS = {
    "objective": "reg:quantileerror",
    "quantile_alpha": UPPER,
    "tree_method": "hist",
    "max_depth": 4,
    "eta": 0.05,
    "min_child_weight": 20,
    "max_bin": 64,
    "subsample": 0.8,
    "nthread": 1,
    "seed": 0,
}
_ROUNDS = 100
_MEDIAN_FROM = ("request_median5", "user_median5")
_UPPER_FROM = ("request_max5", "user_max5")
"""What the median and the upper quantile start from: trees cannot copy a feature into their output, and
"as long as the last runs of the same request" is most of what history knows, so the booster learns the
correction to the upper one; the median of the same request's last runs beat every learned median tried
(benchmarks/README.md)."""

Source = Literal["model", "history", "request", "none"]


@dataclass(frozen=True)
class RunForecast:
    """One job's predicted run: the median and the upper quantile, in seconds, and what said so."""

    p50_s: float | None
    upper_s: float | None
    source: Source
    runs: Sequence[float] = ()
    """The same script's last runs (seconds, oldest first): what an explanation shows."""
    censored: bool = False
    """The same script's last run ended at its limit."""
    seen: bool = True
    """The user ran this script or made this very request before: a job of a new kind keeps its limit."""
    rule: str | None = None
    """How history made the median (`History.point`), where it did: what an explanation shows."""


class HistoryModel:
    """The trained booster; `train_model` makes one, `from_json` reads one back."""

    def __init__(self, booster: xgb.Booster, jobs: int) -> None:
        self.booster, self.jobs = booster, jobs

    def quantiles(self, rows: Sequence[Sequence[float]]) -> np.ndarray:
        """(median, upper) seconds per row."""
        features = np.asarray(rows, dtype=float).reshape(len(rows), len(FEATURES))
        matrix = xgb.DMatrix(features, base_margin=_reference(features, _UPPER_FROM))
        upper = np.asarray(self.booster.predict(matrix))
        median = _reference(features, _MEDIAN_FROM)
        return np.asarray(np.exp(np.stack([median, np.maximum(upper, median)], axis=1)))

    def to_json(self) -> bytes:
        return bytes(self.booster.save_raw("json"))

    @classmethod
    def from_json(cls, raw: bytes, jobs: int) -> HistoryModel:
        booster = xgb.Booster(params={"nthread": 1})
        booster.load_model(bytearray(raw))
        return cls(booster, jobs)


def _reference(features: np.ndarray, names: Sequence[str]) -> np.ndarray:
    """The first of ``names`` each row knows, else its limit, else an hour (log seconds)."""
    found = np.full(len(features), np.nan)
    for name in (*names, "limit"):
        found = np.where(np.isnan(found), features[:, FEATURES.index(name)], found)
    return np.where(np.isnan(found), math.log(3600.0), found)


def training_target(job: PastJob) -> float:
    """The log run; a censored job's run is only a lower bound, and its limit the best one known."""
    run = max(job.run_s, job.ask.limit_s or 0.0) if job.censored else job.run_s
    return math.log(max(run, 1.0))


def train_model(rows: Sequence[Sequence[float]], jobs: Sequence[PastJob]) -> HistoryModel | None:
    """``rows[i]`` is what `History.features` said at ``jobs[i]``'s submission; None with too few jobs.
    Only the last `TRAINING_WINDOW` are used."""
    if len(jobs) < MIN_TRAINING_JOBS:
        return None
    features = np.asarray(rows[-TRAINING_WINDOW:], dtype=float)
    labels = np.asarray([training_target(job) for job in jobs[-TRAINING_WINDOW:]], dtype=float)
    matrix = xgb.DMatrix(features, label=labels, base_margin=_reference(features, _UPPER_FROM))
    return HistoryModel(xgb.train(_PARAMS, matrix, _ROUNDS), len(labels))


def tsafrir(history: History, ask: JobAsk) -> float | None:
    """The mean of the user's last two ended jobs (the one, if only one), capped at the request."""
    runs = [job.run_s for job in history.user_runs(ask.user)[-2:]]
    if not runs:
        return None
    mean = statistics.fmean(runs)
    return min(mean, ask.limit_s) if ask.limit_s else mean


@dataclass(frozen=True)
class Past:
    """What history says of a job at its submission, before any model: the part of a forecast that must
    be taken then (the model's part may come later, for many jobs at once)."""

    runs: tuple[float, ...]
    censored: bool
    seen: bool
    user_runs: int
    tsafrir_s: float | None
    user_max_s: float | None
    point: ExpectedRun | None = None
    """`History.point`: the point prediction where the model speaks."""


def look_back(history: History, ask: JobAsk) -> Past:
    """Call before the job is `submitted` to ``history``."""
    same, mine = history.same_script(ask), history.user_runs(ask.user)
    return Past(
        runs=tuple(job.run_s for job in same[-5:]),
        censored=bool(same) and same[-1].censored,
        seen=history.seen(ask),
        user_runs=len(mine),
        tsafrir_s=tsafrir(history, ask),
        user_max_s=max((job.run_s for job in mine), default=None),
        point=history.point(ask),
    )


def forecast(past: Past, ask: JobAsk, quantiles: tuple[float, float] | None) -> RunForecast:
    """The model's (median, upper) where it has them and the user enough history, else Tsafrir's."""
    if quantiles is not None and past.user_runs >= MIN_USER_RUNS:
        p50, upper = quantiles
        rule = None
        if past.point is not None:  # the features' median counts failed runs too
            p50, upper, rule = past.point.run_s, max(upper, past.point.run_s), past.point.rule
        return RunForecast(
            _capped(p50, ask), _capped(upper, ask), "model", past.runs, past.censored, past.seen, rule
        )
    if past.tsafrir_s is None or past.user_max_s is None:
        source: Source = "request" if ask.limit_s else "none"
        return RunForecast(ask.limit_s, None, source, past.runs, past.censored, past.seen)
    upper = _capped(past.user_max_s, ask)
    return RunForecast(past.tsafrir_s, upper, "history", past.runs, past.censored, past.seen)


def predict_run(model: HistoryModel | None, history: History, ask: JobAsk) -> RunForecast:
    """One job's forecast now, as the daemon asks for it."""
    quantiles = None
    if model is not None:
        median, upper = (float(value) for value in model.quantiles([history.features(ask)])[0])
        quantiles = (median, upper)
    return forecast(look_back(history, ask), ask, quantiles)


def advised_limit(
    forecast: RunForecast, ask: JobAsk, factor: float, partition_max_s: float | None = None
) -> float | None:
    """The time limit to ask for: the upper quantile times ``factor``, never above the request or the
    partition's maximum; the request itself where history cannot tell, the job is of a kind the user never
    ran, or the script's last run hit its limit."""
    ceiling = min(value for value in (ask.limit_s, partition_max_s, math.inf) if value is not None)
    if forecast.upper_s is None or forecast.censored or not forecast.seen:
        return None if math.isinf(ceiling) else ceiling
    return min(forecast.upper_s * factor, ceiling)


LimitRule = Literal["floor", "factor", "request", "partition"]
"""What set a history limit: the policy's floor (its share of the request), the upper quantile times the
factor, the request itself, or the partition's maximum."""


@dataclass(frozen=True)
class HistoryLimit:
    """The advised limit and the rule that set it, so an explanation names what decided."""

    limit: timedelta
    rule: LimitRule
    upper_s: float | None
    """The upper quantile the factor multiplied; None where history could not tell."""


def history_limit(
    rule: TimeLimitRule,
    forecast: RunForecast,
    ask: JobAsk,
    factor: float,
    partition_max_s: float | None = None,
) -> timedelta | None:
    """The limit a deployment advises: `advised_limit` in whole minutes, never below the policy's share of
    the user's own (``rule.floored``)."""
    decided = limit_and_rule(rule, forecast, ask, factor, partition_max_s)
    return None if decided is None else decided.limit


def limit_and_rule(
    rule: TimeLimitRule,
    forecast: RunForecast,
    ask: JobAsk,
    factor: float,
    partition_max_s: float | None = None,
) -> HistoryLimit | None:
    """`history_limit` with the rule that set it: the last one to bind, in the order they apply."""
    seconds = advised_limit(forecast, ask, factor, partition_max_s)
    if seconds is None:
        return None
    requested = timedelta(seconds=ask.limit_s) if ask.limit_s else None
    limit = rule.floored(timedelta(seconds=seconds), requested)
    usable = forecast.upper_s is not None and not forecast.censored and forecast.seen
    upper = forecast.upper_s if usable else None
    decided: LimitRule
    if limit > rule.floored(timedelta(seconds=seconds), None):
        decided = "floor"
    elif upper is not None and upper * factor <= seconds:
        decided = "factor"
    else:
        decided = "request" if ask.limit_s is not None and seconds >= ask.limit_s else "partition"
    return HistoryLimit(limit=limit, rule=decided, upper_s=upper)


def _capped(seconds: float, ask: JobAsk) -> float:
    return min(seconds, ask.limit_s) if ask.limit_s else seconds
