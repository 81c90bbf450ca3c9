"""History advice names the rule that set the limit: the policy's floor, the p95 x factor, the partition's
maximum (issue 48: a 12-hour limit cut to 3 hours after one run was explained as "longest run x 1.5")."""

from __future__ import annotations

from datetime import timedelta

from advisor.history.features import History
from advisor.history.past import JobAsk
from advisor.history.predictor import forecast, look_back
from advisor.jobscript.request import build_request
from advisor.policy.load import parse_policy
from advisor.policy.resolve import resolve
from advisor.recommend.explain import history_told
from advisor.recommend.history_limit import history_advice
from advisor.slurm.models import Partition

from .test_history import job

REWRITE = resolve(parse_policy('mode = "rewrite"\n', "p.toml"), "u", None, ["cpu"])


def advised(limit: str | None, runs: list[float], maximum: timedelta) -> tuple[timedelta, str]:
    """The advised limit and its reason for a job asking ``limit`` after ``runs`` of the same script."""
    asked = f"#SBATCH --time={limit}\n" if limit else ""
    request = build_request(f"#!/bin/sh\n{asked}true\n", ["job.sh"], {}, "job.sh")
    limit_s = None if request.time_limit is None else request.time_limit.total_seconds()
    ask = JobAsk(user="u", script="job.sh", partition="cpu", submit_s=90_000, limit_s=limit_s, cpus=1)
    history = History()
    for index, run in enumerate(runs):
        history.ended(job("u", index * 100.0, run, limit=limit_s, script="job.sh"))
    partition = Partition.model_construct(name="cpu", max_time=maximum)
    found = history_advice(REWRITE, request, ask, forecast(look_back(history, ask), ask, None), partition)
    advice, reasons = found.advice, history_told(found)
    assert advice is not None and advice.time_limit is not None, reasons
    return advice.time_limit, reasons[-1]


def test_the_policys_floor_is_named_when_it_set_the_limit() -> None:
    """One run of 20 min asking 12 h: 20 min x 1.5 = 30 min, the floor (a quarter of 12 h) lifts it to 3 h."""
    limit, reason = advised("12:00:00", [1200.0], timedelta(days=2))
    assert limit == timedelta(hours=3)
    assert reason == (
        "history: time limit 03:00:00 set by the policy's floor (25% of the 12:00:00 asked); "
        "its longest recent run 00:20:00 x 1.5 = 00:30:00, instead of 12:00:00"
    )


def test_the_longest_run_times_the_factor_is_named_when_it_set_the_limit() -> None:
    limit, reason = advised("01:00:00", [1500.0, 1800.0], timedelta(days=2))
    assert limit == timedelta(minutes=45)
    assert reason == (
        "history: time limit 00:45:00 set by its longest recent run 00:30:00 x 1.5 = 00:45:00, "
        "instead of 01:00:00"
    )


def test_the_partitions_maximum_is_named_when_it_set_the_limit() -> None:
    """No limit asked (no floor): 2 h x 1.5 = 3 h, above the partition's 2.5 h."""
    limit, reason = advised(None, [7200.0, 7000.0], timedelta(hours=2, minutes=30))
    assert limit == timedelta(hours=2, minutes=30)
    assert reason == (
        "history: time limit 02:30:00 set by the partition's maximum (02:30:00); "
        "its longest recent run 02:00:00 x 1.5 = 03:00:00"
    )
