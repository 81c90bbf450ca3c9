"""The advice on a compressed clock, as a daemon beside the compressed sandbox gives it.

A real replay runs ``compression`` workload seconds in each real one, and the daemon that advises its jobs
lives in that real time: it reads the sandbox's queue, asks its ``--test-only`` and keeps its caches in
real seconds. So it is handed the workload compressed alike: step times (`compressed_times`), the user's
limit in the job's script, and the policy's durations (`compressed_policy`: the gain worth a rewrite, the
limit's margin, start-up and per-epoch work); what it answers is stretched back to workload seconds
(`stretched`). Slurm's whole minutes then round its limits as they round the real jobs', and its caches'
windows are the product's own. The simulated twin decides on the same compressed clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from advisor.daemon.step_times import StepPoint, StepTimes
from advisor.policy.schema import Policy


def compressed_times(times: StepTimes, compression: float) -> StepTimes:
    """The same curves with each step ``compression`` times shorter."""

    def point(given: StepPoint) -> StepPoint:
        shorter = {"step_s": given.step_s / compression, "step_p90_s": given.step_p90_s / compression}
        return given.model_copy(update=shorter)

    curves = [curve.model_copy(update={"points": [point(p) for p in curve.points]}) for curve in times.curves]
    return times.model_copy(update={"curves": curves})


def compressed_policy(policy: Policy, compression: float) -> Policy:
    """The policy's durations ``compression`` times shorter; its model age (days of real time) as it is."""
    rewrite, limit, overhead = policy.rewrite, policy.time_limit, policy.overhead
    gain = rewrite.min_gain_minutes / compression
    return policy.model_copy(
        update={
            "rewrite": rewrite.model_copy(update={"min_gain_minutes": gain}),
            "time_limit": limit.model_copy(update={"margin_minutes": limit.margin_minutes / compression}),
            "overhead": overhead.model_copy(
                update={
                    "startup_minutes": overhead.startup_minutes / compression,
                    "per_epoch_seconds": overhead.per_epoch_seconds / compression,
                }
            ),
        }
    )


def stretched(seconds: float | None, compression: float) -> float | None:
    """A compressed duration in workload seconds."""
    return None if seconds is None else seconds * compression


def shrunk(seconds: float | None, compression: float) -> float | None:
    """A workload duration on the compressed clock."""
    return None if seconds is None else seconds / compression


def policy_toml(policy: Policy) -> str:
    """The policy as a file the daemon loads (`advisor.policy.load`): every key that differs from the
    built-in default, tables after the top-level keys."""
    data = policy.model_dump(mode="json", exclude_defaults=True)
    return _table(data, []) + "\n"


def _table(data: Mapping[str, Any], path: list[str]) -> str:
    lines = [f"[{'.'.join(path)}]"] if path else []
    lines += [f"{key} = {_value(value)}" for key, value in data.items() if not isinstance(value, dict)]
    tables = [_table(value, [*path, _key(key)]) for key, value in data.items() if isinstance(value, dict)]
    return "\n".join(part for part in ["\n".join(lines), *tables] if part)


def _key(key: str) -> str:
    return key if key.replace("-", "").replace("_", "").isalnum() else _value(key)


def _value(value: Any) -> str:
    """TOML's scalars and arrays; JSON writes them alike, but for booleans' and strings' quoting rules."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)
