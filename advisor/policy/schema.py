"""The admin policy as validated data: strict types and no unknown keys, so a typo is an error, not a
silently ignored setting. Every key is documented in ``policies/README.md``."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

Mode = Literal["off", "advise", "rewrite"]
Objective = Literal["completion", "cost", "weighted"]
OwnObjective = Literal["completion", "cost"]
"""An account's or user's own objective: the weighted mix, with its weight, stays site-wide."""
BatchRule = Literal["never", "keep-global-batch", "within-declared-range"]
Confidence = Literal["high", "medium", "low"]
"""A prediction's confidence (`advisor.predict.types.Prediction`), read off its band; declared here once."""

MODE_RANK: dict[Mode, int] = {"off": 0, "advise": 1, "rewrite": 2}
CONFIDENCE_RANK: dict[Confidence, int] = {"low": 0, "medium": 1, "high": 2}

PartitionName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")]
# Slurm stores account names in lower case, so an upper-case one here could never match.
AccountName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9_][a-z0-9_.-]*$")]
UserName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.@-]*$")]
CostUnit = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=24)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class RewriteRules(_Strict):
    """When a recommendation is good and trustworthy enough to be applied rather than only shown."""

    min_gain_fraction: Annotated[float, Field(ge=0, lt=1)] = 0.1
    min_gain_minutes: Annotated[float, Field(ge=0)] = 10.0
    max_model_age_days: Annotated[float, Field(gt=0)] = 14.0
    min_confidence: Confidence = "medium"

    def gain_is_enough(self, current_s: float, proposed_s: float) -> bool:
        """Both thresholds must hold: a small relative gain on a long job, or a large one on a short job
        worth seconds, is not worth surprising the user."""
        gain = current_s - proposed_s
        return gain >= self.min_gain_minutes * 60 and gain >= self.min_gain_fraction * current_s

    def trusts(self, confidence: Confidence, model_age: timedelta) -> bool:
        """A stale or low-confidence prediction may be shown but never acted upon."""
        fresh = model_age <= timedelta(days=self.max_model_age_days)
        return fresh and CONFIDENCE_RANK[confidence] >= CONFIDENCE_RANK[self.min_confidence]


class TimeLimitRule(_Strict):
    """A rewritten time limit: p90 x factor + margin, never far above what the user asked for, and never
    far below it either: a prediction that short may have missed what the job does besides training."""

    factor: Annotated[float, Field(ge=1, le=10)] = 1.2
    margin_minutes: Annotated[float, Field(ge=0, le=24 * 60)] = 15.0
    max_factor_of_request: Annotated[float, Field(ge=1)] | None = 4.0
    min_fraction_of_request: Annotated[float, Field(ge=0, le=1)] = 0.25
    history_factor: Annotated[float, Field(ge=1, le=10)] = 1.5
    """For a job with no model description: its history's upper quantile (p95) times this
    (`benchmarks/history.py` prints the kills each factor costs)."""

    def limit(self, p90: timedelta, requested: timedelta | None) -> timedelta | None:
        """Whole minutes (Slurm's unit), rounded up; None when the limit would exceed the cap relative to
        the user's own limit: such a job is advised, not rewritten, since the prediction may be wrong."""
        limit = self.floored(p90 * self.factor + timedelta(minutes=self.margin_minutes), requested)
        cap = self.max_factor_of_request
        if requested is not None and cap is not None and limit > requested * cap:
            return None
        return limit

    def floored(self, limit: timedelta, requested: timedelta | None) -> timedelta:
        """Whole minutes, rounded up, and never below the share of the user's own limit a shortened one
        keeps."""
        minutes = math.ceil(limit.total_seconds() / 60 - 1e-9)
        if requested is not None:
            minutes = max(minutes, math.ceil(requested.total_seconds() * self.min_fraction_of_request / 60))
        return timedelta(minutes=minutes)


class Overhead(_Strict):
    """What a job spends besides its training steps, which the benchmarks do not see: start-up (the
    environment, the data's first read, the model's build) once, evaluation and a checkpoint each epoch."""

    startup_minutes: Annotated[float, Field(ge=0, le=24 * 60)] = 2.0
    per_epoch_seconds: Annotated[float, Field(ge=0, le=24 * 3600)] = 10.0

    def seconds(self, epochs: float) -> float:
        return self.startup_minutes * 60 + self.per_epoch_seconds * epochs


class Tuning(_Strict):
    """What besides partition, GPU count and time limit the advisor may change (the user's ``#ADVISOR``
    lines can refuse more)."""

    batch: BatchRule = "keep-global-batch"
    amp: bool = True
    channels_last: bool = True
    max_gpus: Annotated[int, Field(ge=1, le=4096)] | None = None
    max_nodes: Annotated[int, Field(ge=1, le=1024)] = 1
    """How many nodes the advisor may spread one job over (a job that asks for more keeps its own)."""
    min_scaling_efficiency: Annotated[float, Field(ge=0, le=1)] = 0.7
    """The least speed-up per device worth taking: a candidate on more GPUs whose step is predicted to run
    below this share of ideal scaling is shown, not chosen."""


class PartitionRules(_Strict):
    """Prices make the cost objective possible; mode caps what any caller may get on this partition."""

    price_per_gpu_hour: Annotated[float, Field(ge=0)] = 0.0
    price_per_cpu_hour: Annotated[float, Field(ge=0)] = 0.0
    mode: Mode | None = None


class AccountRules(_Strict):
    partitions: list[PartitionName] | None = None
    mode: Mode | None = None
    objective: OwnObjective | None = None
    """A lab that pays for its own GPU hours may want the cheapest partition, not the earliest."""


class UserRules(_Strict):
    partitions: list[PartitionName] | None = None
    mode: Mode | None = None
    objective: OwnObjective | None = None


class FirstSightRules(_Strict):
    """A short benchmark job, at low priority, of an architecture no machine of a partition has measured,
    as soon as a user first asks advice for it: its next submission is predicted from its own parts."""

    enabled: bool = False
    minutes: Annotated[float, Field(gt=0, le=120)] = 5.0
    """Measuring time of each such job (one per partition that lacks the architecture)."""


class AuditRules(_Strict):
    """How long the daemon keeps what users submitted (argv, ``--export`` values, paths, the candidates)."""

    retention_days: Annotated[float, Field(gt=0, le=3650)] = 90.0


class Policy(_Strict):
    """The whole file. All defaults together are the built-in policy: advise only, earliest completion."""

    mode: Mode = "advise"
    objective: Objective = "completion"
    cost_weight: Annotated[float, Field(ge=0, le=1)] | None = None
    cost_unit: CostUnit = "credits"
    """What the prices below are in (``EUR``, ``core-hours``): every cost shown names it."""
    rewrite: RewriteRules = RewriteRules()
    time_limit: TimeLimitRule = TimeLimitRule()
    overhead: Overhead = Overhead()
    audit: AuditRules = AuditRules()
    first_sight: FirstSightRules = FirstSightRules()
    tuning: Tuning = Tuning()
    partitions: dict[PartitionName, PartitionRules] = {}
    accounts: dict[AccountName, AccountRules] = {}
    users: dict[UserName, UserRules] = {}

    @model_validator(mode="after")
    def _weight_goes_with_weighted(self) -> Policy:
        """Each conflict is reported at the key that is written in the file, so it gets a line."""
        if self.objective == "weighted" and self.cost_weight is None:
            message = '"weighted" needs cost_weight (0 = completion only, 1 = cost only)'
            raise _conflict("objective", self.objective, message)
        if self.objective != "weighted" and self.cost_weight is not None:
            message = f'cost_weight applies only to objective = "weighted", not "{self.objective}"'
            raise _conflict("cost_weight", self.cost_weight, message)
        return self


def _conflict(key: str, value: object, message: str) -> ValidationError:
    """A model validator names a key only through a ValidationError of its own (pydantic keeps its loc)."""
    error = PydanticCustomError("policy_conflict", message)
    return ValidationError.from_exception_data(
        "Policy", [InitErrorDetails(type=error, loc=(key,), input=value)]
    )
