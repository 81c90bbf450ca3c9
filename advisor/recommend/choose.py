"""The choice among predicted candidates, and the words that explain it.

Pure: the service hands in every candidate with its predicted run, wait, cost and confidence; this module
ranks them by the policy's objective and decides whether the winner is worth changing the job for.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from advisor.recommend.candidates import Shape
from advisor.slurm.values import format_duration

Confidence = Literal["high", "medium", "low"]
Mode = Literal["off", "advise", "rewrite"]
WaitSource = Literal["slurm", "advisor"]
_RANK: dict[Confidence, int] = {"low": 0, "medium": 1, "high": 2}


class Estimate(BaseModel):
    """One candidate with everything predicted about it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    shape: Shape
    run_s: float = Field(ge=0)
    run_p90_s: float = Field(ge=0)
    peak_memory_bytes: int
    fits: bool
    confidence: Confidence
    machine: str
    model_version: int
    slurm_wait_s: float | None
    advisor_wait_s: float | None
    wait_source: WaitSource
    cost: float | None
    """Price of the GPU (or node) hours the run holds; None where the policy names no price."""
    time_limit: timedelta
    """What the advisor would ask Slurm for: p90 x factor + margin, within the partition's maximum."""
    note: str | None = None

    @property
    def wait_s(self) -> float:
        chosen = self.slurm_wait_s if self.wait_source == "slurm" else self.advisor_wait_s
        other = self.advisor_wait_s if self.wait_source == "slurm" else self.slurm_wait_s
        return chosen if chosen is not None else other if other is not None else 0.0

    @property
    def total_s(self) -> float:
        return self.wait_s + self.run_s


class Objective(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["completion", "cost", "weighted"] = "completion"
    cost_weight: float = Field(default=0.5, ge=0, le=1)
    """Only for ``weighted``: 0 is pure completion time, 1 pure cost, each relative to the job as given."""


class Thresholds(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    min_gain_fraction: float = Field(default=0.1, ge=0)
    min_gain_s: float = Field(default=600.0, ge=0)
    """Absolute gain for the completion objective (seconds of expected completion)."""
    min_confidence: Confidence = "medium"


class Decision(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    ranked: list[Estimate]
    """Every candidate, best first by the objective; those that do not fit come last."""
    baseline: Estimate
    chosen: Estimate
    """The winner, or the baseline when nothing is worth changing."""
    apply: bool
    """True only when the policy's mode for the winner's partition is rewrite and every threshold holds."""
    reasons: list[str]


def choose(
    estimates: Sequence[Estimate],
    baseline: Estimate,
    objective: Objective,
    thresholds: Thresholds,
    modes: Mapping[str, Mode],
) -> Decision:
    """``modes`` maps each candidate partition to the caller's effective mode there."""

    def score(estimate: Estimate) -> float:
        return _score(estimate, baseline, objective)

    ranked = sorted(estimates, key=lambda e: (not e.fits, score(e), _changes(e.shape, baseline.shape)))
    reasons: list[str] = []
    eligible = [e for e in ranked if e.fits and _RANK[e.confidence] >= _RANK[thresholds.min_confidence]]
    if not eligible:
        reasons.append(_no_eligible(ranked, thresholds))
        return Decision(ranked=ranked, baseline=baseline, chosen=baseline, apply=False, reasons=reasons)
    best = eligible[0]
    if best.shape == baseline.shape:
        reasons.append("the job as submitted is already the best candidate")
        return Decision(ranked=ranked, baseline=baseline, chosen=baseline, apply=False, reasons=reasons)
    reasons.append(_why_best(best, baseline, objective))
    worth = _worth_it(best, baseline, objective, thresholds, score(best), score(baseline))
    mode = modes.get(best.shape.partition, "advise")
    if worth is not None:
        reasons.append(worth)
    elif mode != "rewrite":
        reasons.append(f"advice only: the policy's mode for partition {best.shape.partition} is {mode}")
    return Decision(
        ranked=ranked,
        baseline=baseline,
        chosen=best if worth is None else baseline,
        apply=worth is None and mode == "rewrite",
        reasons=reasons,
    )


def _score(estimate: Estimate, baseline: Estimate, objective: Objective) -> float:
    if objective.kind == "completion":
        return estimate.total_s
    cost = estimate.cost if estimate.cost is not None else math.inf
    if objective.kind == "cost":
        return cost
    reference_time = max(baseline.total_s, 1e-9)
    reference_cost = baseline.cost if baseline.cost else 1.0
    weight = objective.cost_weight
    return (1 - weight) * estimate.total_s / reference_time + weight * cost / reference_cost


def _changes(shape: Shape, baseline: Shape) -> int:
    """Fewer changes first among equals: the user's own choices win ties."""
    fields = ("partition", "gpus", "global_batch", "micro_batch", "accumulation", "amp", "channels_last")
    return sum(getattr(shape, name) != getattr(baseline, name) for name in fields)


def _worth_it(
    best: Estimate,
    baseline: Estimate,
    objective: Objective,
    thresholds: Thresholds,
    best_score: float,
    baseline_score: float,
) -> str | None:
    """None when the gain clears the policy's bar, else why it does not."""
    if not baseline.fits:
        return None
    gain = baseline_score - best_score
    fraction = gain / baseline_score if baseline_score > 0 and math.isfinite(baseline_score) else math.inf
    if fraction < thresholds.min_gain_fraction:
        return (
            f"kept as submitted: the gain of {fraction:.0%} is below the policy's minimum of "
            f"{thresholds.min_gain_fraction:.0%}"
        )
    if objective.kind == "completion" and gain < thresholds.min_gain_s:
        return (
            f"kept as submitted: {format_duration(timedelta(seconds=gain))} earlier is below the policy's "
            f"minimum of {format_duration(timedelta(seconds=thresholds.min_gain_s))}"
        )
    return None


def _why_best(best: Estimate, baseline: Estimate, objective: Objective) -> str:
    head = f"best: {describe(best.shape)}"
    if not baseline.fits:
        where = baseline.shape.partition
        return f"{head}; as submitted the job needs more memory than a device of {where} has"
    if objective.kind == "cost" and best.cost is not None and baseline.cost is not None:
        return f"{head}: costs {best.cost:.2f} against {baseline.cost:.2f} as submitted"
    return (
        f"{head}: expected to finish in {_span(best.total_s)} (wait {_span(best.wait_s)}, run "
        f"{_span(best.run_s)}) against {_span(baseline.total_s)} as submitted "
        f"(wait {_span(baseline.wait_s)}, run {_span(baseline.run_s)})"
    )


def _no_eligible(ranked: Sequence[Estimate], thresholds: Thresholds) -> str:
    if not any(e.fits for e in ranked):
        return "kept as submitted: no candidate is predicted to fit in memory"
    return (
        "kept as submitted: no candidate that fits has a prediction of at least "
        f"{thresholds.min_confidence} confidence"
    )


def describe(shape: Shape) -> str:
    devices = f"{shape.gpus} GPU{'s' if shape.gpus != 1 else ''}" if shape.gpus else "CPU"
    split = f"micro-batch {shape.micro_batch}"
    if shape.accumulation > 1:
        split += f" x {shape.accumulation} accumulated"
    extras = [name for name, on in (("AMP", shape.amp), ("channels_last", shape.channels_last)) if on]
    return ", ".join([f"{shape.partition} with {devices}", split, *extras])


def _span(seconds: float) -> str:
    return format_duration(timedelta(seconds=round(seconds)))


def advised_time_limit(
    p90_s: float, factor: float, margin: timedelta, ceiling: timedelta | None
) -> timedelta:
    """p90 x factor + margin in whole minutes (Slurm's unit), never above the partition's maximum:
    a tight limit lets the backfill scheduler fit the job, and everyone else's, into gaps."""
    minutes = math.ceil((p90_s * factor + margin.total_seconds()) / 60)
    limit = timedelta(minutes=max(minutes, 1))
    return limit if ceiling is None else min(limit, ceiling)
