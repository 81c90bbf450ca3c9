"""What the recommender is asked: one submission, by whom, when, and what is already known of its caller.

Plain values: the daemon, `advisor recommend` and the evaluation harness each fill an `Ask` from their own
sources (Slurm, the store, a replayed trace) and hand it to `advisor.recommend.service.recommend`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from advisor.history.past import JobAsk
from advisor.history.predictor import RunForecast
from advisor.jobscript.advisor_lines import JobDescription
from advisor.jobscript.request import JobRequest
from advisor.recommend.placement import Standing


@dataclass(frozen=True)
class Caller:
    """Who submits: the policy is resolved for this user and account (None: the user's default)."""

    user: str
    account: str | None = None


@dataclass(frozen=True)
class PastRuns:
    """What the caller's earlier runs of the same script say of this one (`advisor.history`)."""

    ask: JobAsk
    """The submission as accounting will record it."""
    forecast: RunForecast


@dataclass(frozen=True)
class Ask:
    """One submission to advise. ``standing``: the caller's groups and associations, checked against each
    partition's access lists (None where nothing is known of them, as in a replay: only the nodes are
    checked); ``history``: what the caller's earlier runs say, for a job that describes no model or whose
    model was not read; ``unread``: why the job gets no model advice though it names a model: a described
    model not read here, or a training command whose length is not known (said first)."""

    request: JobRequest
    description: JobDescription | None
    caller: Caller
    now: datetime
    standing: Standing | None = None
    history: PastRuns | None = None
    unread: str | None = None
