"""`benchmarks/history_bound.py`: the best limit rule per group in hindsight, and the same chosen online,
counted by hand on jobs whose history said 600 s."""

from __future__ import annotations

import pytest

from advisor.history.past import JobAsk, past_job
from advisor.history.predictor import RunForecast
from advisor.history.replay import DEFAULT_RULE, Predicted
from benchmarks.history_bound import LEAST_ENDED, best_share, bound, judged, least_median, online, ratios

FLOORLESS = DEFAULT_RULE.model_copy(update={"min_fraction_of_request": 0.0})


def predicted(submit: float, run: float, request: float = 60000.0, seen: bool = True) -> Predicted:
    """A completed job whose history said 600 s (the same script's last two runs, its point and upper),
    or, not ``seen``, nothing but its request."""
    ask = JobAsk(user="u", script="a.sh", partition="p", submit_s=submit, limit_s=request, cpus=1)
    said = RunForecast(600.0, 600.0, "model", (600.0, 600.0))
    if not seen:
        said = RunForecast(request, None, "request", (), seen=False)
    return Predicted(past_job(ask, run, submit + run, True, False), None, said, None)


def test_the_kill_budget_decides_between_a_tight_rule_and_a_safe_one() -> None:
    # Three runs of 600 s and one of 6000 s: 600 s x 1 brings all four within 2.5x and kills one; 600 s
    # x 10 kills none and brings only the long one (its limit equal to its run); the request brings none.
    groups = ratios(
        judged([predicted(0, 600), predicted(1, 600), predicted(2, 600), predicted(3, 6000)], FLOORLESS)
    )
    assert best_share(groups, 2.5, kill_rate=0.0) == 0.25
    assert best_share(groups, 2.5, kill_rate=0.25) == 1.0
    assert least_median(groups, 0.0) == pytest.approx(10.0, rel=0.01), "the three short ones at 10x"
    assert least_median(groups, 0.25) == pytest.approx(1.0, rel=0.01)


def test_a_group_history_never_saw_keeps_its_requests() -> None:
    unseen = [predicted(2, 6000, seen=False), predicted(3, 600, seen=False)]
    groups = ratios(judged([predicted(0, 600), predicted(1, 600), *unseen], FLOORLESS))
    assert len(groups) == 2
    # The seen pair at 1x; the unseen pair only at their requests: 10x and 100x.
    assert best_share(groups, 2.5, 0.0) == 0.5
    assert best_share(groups, 10.0, 0.0) == 0.75
    assert least_median(groups, 0.0) == pytest.approx(1.0, rel=0.01), "the lower median: half at 1x"


def test_online_rules_learn_only_from_jobs_ended_before_each_submission() -> None:
    # Each job ends before the next is submitted: the first LEAST_ENDED keep their requests (100x), the
    # rest get 600 s x 1, which fitted every one of them.
    jobs = [predicted(1000.0 * index, 600) for index in range(LEAST_ENDED + 5)]
    limits = online(judged(jobs, FLOORLESS), 2.5, penalty=10.0)
    assert limits.killed == 0.0
    assert limits.within["2.5"] == pytest.approx(5 / len(jobs))
    assert limits.median == pytest.approx(100.0)
    # Submitted together, none has ended at any submission: every job keeps its request.
    together = [predicted(0.0, 600) for _ in range(LEAST_ENDED + 5)]
    assert online(judged(together, FLOORLESS), 2.5, penalty=10.0).within["2.5"] == 0.0


def test_the_report_puts_the_bound_beside_users_and_the_product() -> None:
    jobs = [predicted(1000.0 * index, 600) for index in range(LEAST_ENDED + 5)]
    figures = bound("t", jobs, FLOORLESS, kill_rate=0.01, within=2.5)
    hindsight, learned, users, product = figures.arms.values()
    assert figures.completed == len(jobs) and figures.groups == 1 and figures.rules == 45
    assert hindsight.within["1.5"] == 1.0 and hindsight.median == pytest.approx(1.0, rel=0.01)
    assert learned.within["2.5"] < hindsight.within["2.5"]
    assert users.median == 100.0 and users.killed == 0.0
    # The product: 600 s x 1.5, in whole minutes: 15 minutes for a 10-minute run.
    assert product.median == pytest.approx(1.5) and product.killed == 0.0


@pytest.mark.parametrize(
    ("option", "said"),
    [
        (["--kill-rate", "-0.1"], "--kill-rate is a share"),
        (["--within", "0.5"], "--within a limit / run"),
        (["--floor", "2"], "--floor 2: Input should be less than or equal to 1"),
    ],
)
def test_out_of_range_options_are_refused_by_name_before_the_trace_is_read(
    option: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from benchmarks.history_bound import main

    with pytest.raises(SystemExit) as exit_:
        main(["/nonexistent.swf", *option])
    assert exit_.value.code == 2 and said in capsys.readouterr().err
