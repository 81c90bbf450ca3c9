"""What the policy means for one caller: the one place where precedence is decided, so the recommender
and the rewriter never combine the layers themselves.

Mode: the most specific setting wins (user, then account, then the global mode); a partition's own mode is
a ceiling on top of that, never a floor. Partitions: every list that applies (account, user) narrows the
cluster's partitions, none widens them, and a partition whose mode comes out ``off`` is not offered.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from advisor.policy.schema import (
    MODE_RANK,
    Mode,
    Objective,
    Overhead,
    PartitionRules,
    Policy,
    RewriteRules,
    TimeLimitRule,
    Tuning,
)


class PartitionTerms(BaseModel):
    """A partition the caller may be sent to, on what terms."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: Literal["advise", "rewrite"]
    price_per_gpu_hour: float
    price_per_cpu_hour: float

    def cost(self, gpus: int, cpus: int, seconds: float) -> float:
        """Price of a job that holds ``gpus`` and ``cpus`` for ``seconds`` (an unpriced partition is free)."""
        return (gpus * self.price_per_gpu_hour + cpus * self.price_per_cpu_hour) * seconds / 3600


class Effective(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    user: str
    account: str | None
    mode: Mode
    """The caller's own mode; ``off`` means the submission passes through untouched and unadvised."""
    partitions: dict[str, PartitionTerms]
    """The partitions the caller may be sent to, in the cluster's order; empty when ``mode`` is off."""
    objective: Objective
    cost_weight: float | None
    rewrite: RewriteRules
    time_limit: TimeLimitRule
    overhead: Overhead
    tuning: Tuning


def resolve(policy: Policy, user: str, account: str | None, partitions: Sequence[str]) -> Effective:
    """``account`` is the one Slurm will charge (the user's default when the job names none); None applies
    no account rules. ``partitions`` are the cluster's; names the policy lists but the cluster lacks are
    ignored."""
    account_rules = policy.accounts.get(account.lower()) if account is not None else None
    user_rules = policy.users.get(user)
    layers = [rules for rules in (user_rules, account_rules) if rules is not None]
    mode = next((rules.mode for rules in layers if rules.mode is not None), policy.mode)
    objective = next((rules.objective for rules in layers if rules.objective is not None), None)
    offered: dict[str, PartitionTerms] = {}
    for name in partitions if mode != "off" else ():
        if any(rules.partitions is not None and name not in rules.partitions for rules in layers):
            continue
        own = policy.partitions.get(name, PartitionRules())
        capped = mode if own.mode is None else min(mode, own.mode, key=MODE_RANK.__getitem__)
        if capped != "off":
            offered[name] = PartitionTerms(
                mode=capped,
                price_per_gpu_hour=own.price_per_gpu_hour,
                price_per_cpu_hour=own.price_per_cpu_hour,
            )
    return Effective(
        user=user,
        account=account,
        mode=mode,
        partitions=offered,
        objective=objective or policy.objective,
        cost_weight=None if objective else policy.cost_weight,
        rewrite=policy.rewrite,
        time_limit=policy.time_limit,
        overhead=policy.overhead,
        tuning=policy.tuning,
    )
