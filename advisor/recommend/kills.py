"""The kill warning: a run whose p90 outlasts the time limit it runs under is likely killed at that limit.

One wording, made here and nowhere else: the daemon writes it into the recommendation, and every surface
(advise-submit, the cli_filter, `advisor explain`, the web page) shows it as it came, so a user reads the
same words wherever they meet the job.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from advisor.slurm.values import format_duration, format_seconds


@dataclass(frozen=True)
class Run:
    """One configuration of a job: what it is called, its p90 run and the time limit it runs under (None:
    no limit)."""

    called: str
    p90_s: float
    limit: timedelta | None


def outlasts(p90_s: float, limit: timedelta) -> bool:
    return p90_s > limit.total_seconds()


def likely_killed(p90_s: float, limit: timedelta) -> str:
    """``likely killed at 04:00:00: p90 run 12:28:57``: the limit as ``--time`` reads, the run as the
    candidates table shows it."""
    return f"likely killed at {format_duration(limit)}: p90 run {format_seconds(p90_s)}"


def kill_warnings(runs: Sequence[Run]) -> list[str]:
    """``as submitted, likely killed at ...`` for each of ``runs`` whose p90 outlasts its limit."""
    return [
        f"{run.called}, {likely_killed(run.p90_s, run.limit)}"
        for run in runs
        if run.limit is not None and outlasts(run.p90_s, run.limit)
    ]
