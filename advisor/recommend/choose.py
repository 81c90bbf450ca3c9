"""The choice among predicted candidates.

Pure: the service hands in every candidate with its predicted run, wait, cost and confidence; this module
ranks them by the policy's objective and decides whether the winner is worth changing the job for; the
facts behind the choice are kept in the `Decision`, and `advisor.recommend.explain` words them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from advisor.jobscript.rewrite import Advice
from advisor.policy.resolve import Effective
from advisor.policy.schema import Confidence, Mode, Objective, RewriteRules
from advisor.recommend.arrays import ArrayFigures
from advisor.recommend.candidates import Candidate
from advisor.recommend.kills import outlasts
from advisor.wait.accuracy import WaitSource, preferred_wait


class Estimate(BaseModel):
    """One candidate with everything predicted about it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    candidate: Candidate
    run_s: float = Field(ge=0)
    run_p90_s: float = Field(ge=0)
    peak_memory_bytes: int
    fits: bool
    confidence: Confidence
    machine: str
    model_version: int
    model_age: timedelta
    slurm_wait_s: float | None
    advisor_wait_s: float | None
    wait_source: WaitSource
    cost: float | None
    """Price of the GPU (or node) hours the run holds; None where the policy names no price."""
    time_limit: timedelta
    """What the advisor would ask Slurm for: p90 x factor + margin, within the partition's maximum."""
    note: str | None = None
    efficiency: float | None = None
    """Predicted scaling: the same micro-steps on one device of the partition, over the devices times
    this candidate's step; None on one device."""
    run_p10_s: float | None = None
    """None where the predictor gave no p10."""
    calibration_key: str | None = None
    """The correction its finished job feeds (`Prediction.calibration_key`); None in advice recorded
    before it was kept: its machine."""
    comparable_from_s: float | None = None
    """Its predicted start-up plus one epoch (`advisor.predict.calibration.start_up_and_epoch`)."""
    applied_correction: float = 1.0
    """What already moved ``run_s`` off the predictor's own: its calibration (`Prediction.calibration`)
    times the level the job's history set (the prior)."""
    array: ArrayFigures | None = None
    """A job array's whole figures (all tasks' cost, when the last task ends); None for a single job."""

    @property
    def killed(self) -> bool:
        """Its p90 run outlasts the limit it would get: likely killed there."""
        return outlasts(self.run_p90_s, self.time_limit)

    @property
    def wait_known(self) -> bool:
        """Whether either estimator gave a wait: an unknown one is not a short one."""
        return self.slurm_wait_s is not None or self.advisor_wait_s is not None

    @property
    def wait_s(self) -> float:
        """The preferred source's wait, else the other's (`preferred_wait`); 0 where neither knows."""
        wait = preferred_wait(self.slurm_wait_s, self.advisor_wait_s, self.wait_source)
        return 0.0 if wait is None else wait

    @property
    def total_s(self) -> float:
        """Until the job ends: for an array, until its last task does (its waves of runs)."""
        return self.array.last_end_s if self.array is not None else self.wait_s + self.run_s


Verdict = Literal["nothing fits", "all killed", "none trusted", "already best", "gain too small", "moved"]
"""What the choice came to: no candidate fits in memory; every trusted one is likely killed; none is
trusted (confidence, model age); the job as submitted is the best; the best gains too little to move it;
the best is chosen (applied where the mode there is rewrite)."""


class Decision(BaseModel):
    """The choice and the facts behind it; `advisor.recommend.explain` words them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ranked: list[Estimate]
    """Every candidate, best first by the objective; those that do not fit come last, and among the rest
    those whose wait no estimator knows come after every known one."""
    baseline: Estimate
    chosen: Estimate
    """The winner, or the baseline when nothing is worth changing."""
    apply: bool
    """True only when the policy's mode for the winner's partition is rewrite and every threshold holds."""
    verdict: Verdict
    best: Estimate | None = None
    """The best eligible candidate, chosen or not (None where none is eligible)."""
    mode: Mode = "advise"
    """The caller's mode on the best candidate's partition."""
    passed_over: list[Estimate] = []
    """Likely killed candidates ranked above the winner: the best of each partition."""
    inefficient: Estimate | None = None
    """The best safe candidate, where its scaling is below the policy's least (the next one wins)."""


class Recommendation(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    user: str
    account: str | None
    mode: Mode
    candidates: list[Estimate]
    baseline: Estimate | None
    chosen: Estimate | None
    apply: bool
    advice: Advice | None
    """The change to make (or to show, when ``apply`` is false); None when the job stays as it is."""
    reasons: list[str]
    cost_unit: str = "credits"
    """What the costs are in: the policy's ``cost_unit``."""
    kill_warnings: list[str] = []
    """The job as submitted, and as advised, where its p90 run outlasts its time limit
    (`advisor.recommend.kills`): every surface shows them as they are."""


@dataclass(frozen=True)
class Criteria:
    """What the policy judges the candidates by, for one caller: its objective (and the weight of cost in
    the weighted one), the thresholds a change must clear, its mode on each partition, and the least
    scaling efficiency it takes."""

    objective: Objective = "completion"
    cost_weight: float | None = None
    rules: RewriteRules = field(default_factory=RewriteRules)
    modes: Mapping[str, Mode] = field(default_factory=dict)
    min_efficiency: float = 0.0

    @classmethod
    def of(cls, effective: Effective) -> Criteria:
        modes = {name: terms.mode for name, terms in effective.partitions.items()}
        least = effective.tuning.min_scaling_efficiency
        return cls(effective.objective, effective.cost_weight, effective.rewrite, modes, least)


def choose(estimates: Sequence[Estimate], baseline: Estimate, criteria: Criteria) -> Decision:
    """``baseline`` (the job as submitted) is one of ``estimates``; a candidate below the least scaling
    efficiency, or whose p90 run outlasts the limit it would get, is ranked, never chosen: a job is never
    moved to where it is likely killed."""
    ranked = _ranked(estimates, baseline, criteria)
    trusted = [e for e in ranked if e.fits and criteria.rules.trusts(e.confidence, e.model_age)]
    safe = [e for e in trusted if e.candidate == baseline.candidate or not e.killed]
    eligible = [e for e in safe if not _inefficient(e, criteria.min_efficiency)]
    facts = Decision(
        ranked=ranked,
        baseline=baseline,
        chosen=baseline,
        apply=False,
        verdict="already best",
        passed_over=_passed_over(trusted, safe, eligible[0] if eligible else None),
        inefficient=safe[0] if safe and eligible and safe[0] != eligible[0] else None,
    )
    if not eligible:
        return facts.model_copy(update={"verdict": _no_eligible(ranked, trusted)})
    best = eligible[0]
    if best.candidate == baseline.candidate:
        return facts.model_copy(update={"best": best})
    mode = criteria.modes.get(best.candidate.partition, "advise")
    worth = _worth_it(best, baseline, criteria.objective, criteria.rules)
    return facts.model_copy(
        update={
            "best": best,
            "mode": mode,
            "verdict": "moved" if worth else "gain too small",
            "chosen": best if worth else baseline,
            "apply": worth and mode == "rewrite",
        }
    )


def _ranked(estimates: Sequence[Estimate], baseline: Estimate, criteria: Criteria) -> list[Estimate]:
    """Best first by the objective; what does not fit last, and an unknown wait after every known one."""
    score = _scorer(estimates, criteria.objective, criteria.cost_weight or 0.0)
    return sorted(
        estimates,
        key=lambda e: (
            not e.fits,
            not e.wait_known,
            _tied(score(e)),
            _cost(e),
            e.candidate.gpus,
            _changes(e.candidate, baseline.candidate),
        ),
    )


def _scorer(
    estimates: Sequence[Estimate], objective: Objective, weight: float
) -> Callable[[Estimate], float]:
    """Lower is better. Weighted: completion time and cost each scaled over the candidates from 0 (the
    best) to 1 (the worst), so the weight means the same whatever the units."""
    if objective == "completion":
        return lambda e: e.total_s
    if objective == "cost":
        return _cost
    times = [e.total_s for e in estimates]
    costs = [_cost(e) for e in estimates if math.isfinite(_cost(e))]

    def scaled(value: float, values: list[float]) -> float:
        low, high = (min(values), max(values)) if values else (0.0, 0.0)
        if not math.isfinite(value):
            return 1.0
        return 0.0 if high == low else (value - low) / (high - low)

    return lambda e: (1 - weight) * scaled(e.total_s, times) + weight * scaled(_cost(e), costs)


def _tied(score: float) -> float:
    """Scores equal to four significant digits tie (predictions are not finer than that); ties go to the
    cheaper candidate, then the one with fewer GPUs, then the one closest to what the user asked."""
    return float(f"{score:.4g}")


def _cost(estimate: Estimate) -> float:
    return estimate.cost if estimate.cost is not None else math.inf


def _changes(candidate: Candidate, baseline: Candidate) -> int:
    """Fewer changes first among equals: the user's own choices win ties."""
    fields = ("partition", "gpus", "global_batch", "micro_batch", "accumulation", "amp", "channels_last")
    return sum(getattr(candidate, name) != getattr(baseline, name) for name in fields)


def _worth_it(best: Estimate, baseline: Estimate, objective: Objective, rules: RewriteRules) -> bool:
    """Whether the gain clears the policy's bar. A job that would not fit is always worth moving. The bar
    is in completion time, in cost for the cost objective, and in either for the weighted one (the winner
    already scores better on the mix)."""
    if not baseline.fits:
        return True
    current, proposed = _cost(baseline), _cost(best)
    cheaper = (
        current > 0 and math.isfinite(current) and (current - proposed) / current >= rules.min_gain_fraction
    )
    if objective == "cost":
        return cheaper
    return rules.gain_is_enough(baseline.total_s, best.total_s) or (objective == "weighted" and cheaper)


def _inefficient(estimate: Estimate, least: float) -> bool:
    return estimate.efficiency is not None and estimate.efficiency < least


def _passed_over(
    trusted: Sequence[Estimate], safe: Sequence[Estimate], winner: Estimate | None
) -> list[Estimate]:
    """The likely killed candidates ranked above the winner: the best of each partition, so a partition's
    batch variants do not repeat it."""
    ahead = trusted if winner is None else trusted[: trusted.index(winner)]
    named: dict[str, Estimate] = {}
    for estimate in ahead:
        if estimate not in safe:
            named.setdefault(estimate.candidate.partition, estimate)
    return list(named.values())


def _no_eligible(ranked: Sequence[Estimate], trusted: Sequence[Estimate]) -> Verdict:
    if not any(e.fits for e in ranked):
        return "nothing fits"
    if trusted and all(e.killed for e in trusted):
        return "all killed"
    return "none trusted"


def describe(candidate: Candidate) -> str:
    devices = f"{candidate.gpus} GPU{'s' if candidate.gpus != 1 else ''}" if candidate.gpus else "CPU"
    if candidate.nodes > 1:
        devices = f"{candidate.nodes} nodes x {devices}"
    split = f"micro-batch {candidate.micro_batch}"
    if candidate.accumulation > 1:
        split += f" x {candidate.accumulation} accumulated"
    extras = [name for name, on in (("AMP", candidate.amp), ("channels_last", candidate.channels_last)) if on]
    return ", ".join([f"{candidate.partition} with {devices}", split, *extras])
