"""A job as history knows it: plain values, apart from the readers of logs and accounting
(`advisor.history.jobs`), so that the pure core may import them.

A job is known at its submission by what it asked for (`JobAsk`); once it ended, by how long it ran
(`PastJob`). A job that ran into its time limit is **censored**: it would have run at least that long, and
is never taken for a job that needed exactly its limit.
"""

from __future__ import annotations

from dataclasses import dataclass

CENSORED_SHARE = 0.99
"""A job that ran this share of its limit or more ended at it (Slurm kills it a little after)."""


@dataclass(frozen=True, slots=True)
class JobAsk:
    """What a job asked for when it was submitted: all a prediction may look at."""

    user: str
    script: str
    """What says "the same job again": the job's script or executable, else its name; "" when unknown."""
    partition: str
    submit_s: float
    limit_s: float | None
    cpus: int
    gpus: int = 0
    nodes: int = 1


@dataclass(frozen=True, slots=True)
class PastJob:
    ask: JobAsk
    run_s: float
    end_s: float
    completed: bool
    """Ended by itself without an error (SWF status 1, Slurm's COMPLETED)."""
    censored: bool


def past_job(ask: JobAsk, run_s: float, end_s: float, completed: bool, timed_out: bool) -> PastJob:
    at_limit = ask.limit_s is not None and run_s >= CENSORED_SHARE * ask.limit_s
    return PastJob(ask, run_s, end_s, completed and not timed_out, timed_out or (at_limit and not completed))
