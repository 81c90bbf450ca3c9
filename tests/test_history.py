"""Run times from history: the records, the features at a submission, the predictor and its fallbacks, and
the replay that must never let a job's future into its prediction. Small cases are counted by hand."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from advisor.history.features import History, past_rows
from advisor.history.jobs import TraceError, read_swf
from advisor.history.past import JobAsk, PastJob, past_job
from advisor.history.point import SHARE_OF_LIMIT
from advisor.history.predictor import (
    MIN_TRAINING_JOBS,
    HistoryModel,
    RunForecast,
    advised_limit,
    forecast,
    look_back,
    predict_run,
    train_model,
    training_target,
    tsafrir,
)
from advisor.history.replay import NIGHT_S, replay, report
from advisor.history.service import load_model, save_model
from advisor.jobscript.request import build_request
from advisor.policy.load import parse_policy
from advisor.policy.resolve import resolve
from advisor.recommend.explain import history_told
from advisor.recommend.history_limit import history_advice
from advisor.slurm.models import Partition

SWF = """; Version: 2.2
; MaxProcs: 64
    1        0     10    100    4  -1 -1    4   3600 -1 1  7 -1 12 -1 -1 -1 -1
    2       50      0   3600    8  -1 -1    8   3600 -1 0  7 -1 12 -1 -1 -1 -1
    3       60     -1     -1    8  -1 -1    8   3600 -1 5  9 -1 -1 -1 -1 -1 -1
    4     4000      5    300   16  -1 -1   16   7200 -1 1  9 -1 -1 -1  2 -1 -1
"""


def job(user: str, submit: float, run: float, limit: float | None = 3600.0, script: str = "a.sh") -> PastJob:
    ask = JobAsk(user=user, script=script, partition="cpu", submit_s=submit, limit_s=limit, cpus=4)
    return past_job(ask, run, submit + run, completed=run < (limit or run + 1), timed_out=False)


def test_an_swf_log_is_read_field_by_field_and_a_bad_line_is_placed(tmp_path: Path) -> None:
    log = tmp_path / "x.swf"
    log.write_text(SWF)
    first, killed, later = read_swf(log)
    assert (first.ask.user, first.ask.script, first.ask.submit_s, first.ask.limit_s) == ("7", "12", 0, 3600)
    assert (first.run_s, first.end_s, first.completed, first.censored) == (100, 110, True, False)
    assert killed.censored and not killed.completed, "failed at its limit: it needed at least that"
    assert (later.ask.script, later.ask.partition, later.ask.cpus) == ("", "2", 16), "job 3 never ran"
    log.write_text(SWF + "    5   4100   0   x   1\n")
    with pytest.raises(TraceError, match=rf"{log}:7: 5 fields"):
        read_swf(log)


def test_tsafrir_is_the_mean_of_the_users_last_two_capped_at_the_request() -> None:
    history = History()
    ask = JobAsk(user="u", script="a.sh", partition="cpu", submit_s=10_000, limit_s=150, cpus=4)
    assert tsafrir(history, ask) is None
    for past in (job("u", 0, 50), job("u", 100, 100), job("u", 300, 300), job("v", 0, 5)):
        history.ended(past)
    assert tsafrir(history, dataclasses.replace(ask, limit_s=None)) == 200.0
    assert tsafrir(history, ask) == 150.0
    no_history = forecast(look_back(History(), ask), ask, None)
    assert (no_history.source, no_history.p50_s, no_history.upper_s) == ("request", 150, None)
    fallback = forecast(look_back(history, ask), ask, None)
    assert (fallback.source, fallback.p50_s, fallback.upper_s) == ("history", 150, 150), "capped at 150"
    assert fallback.runs == (50, 100, 300)


def test_a_censored_run_is_a_lower_bound_and_keeps_the_request() -> None:
    killed = job("u", 0, 3600)
    assert killed.censored and training_target(killed) == pytest.approx(8.1887, abs=1e-3)  # log 3600
    history = History()
    history.ended(job("u", 0, 100, script="other.sh"))
    history.ended(killed)
    ask = JobAsk(user="u", script="a.sh", partition="cpu", submit_s=9000, limit_s=7200, cpus=4)
    predicted = forecast(look_back(history, ask), ask, (900.0, 1200.0))
    assert predicted.censored
    assert advised_limit(predicted, ask, 1.5) == 7200, "its last run hit its limit: never shorter"


def test_the_point_prediction_is_the_median_of_completed_runs_failed_ones_left_out() -> None:
    history = History()
    history.ended(job("u", 0, 1000))
    for start in (2000, 3000):  # crashed after ten seconds: what the next run needs is still 1000
        failed = job("u", start, 10)
        history.ended(dataclasses.replace(failed, completed=False))
    ask = JobAsk(user="u", script="a.sh", partition="cpu", submit_s=9000, limit_s=3600, cpus=4)
    predicted = forecast(look_back(history, ask), ask, (10.0, 50.0))
    assert (predicted.source, predicted.p50_s, predicted.upper_s) == ("model", 1000, 1000)
    other = JobAsk(user="u", script="b.sh", partition="cpu", submit_s=9000, limit_s=7200, cpus=4)
    assert history.point(other) == (1000 * 7200 / 3600, SHARE_OF_LIMIT)
    assert History().point(ask) is None


def test_a_user_whose_runs_grow_is_predicted_by_the_last_run_counted_by_hand() -> None:
    """Runs of 100..600 s, each ended before the next submission. Scored on the second to the sixth job,
    "last run" made 100, 200, ..., 500 (accuracy 1/2, 2/3, 3/4, 4/5, 5/6: 3.55, with its prior of 3 jobs at
    0.55: 5.2 / 8 = 0.65); the median of 5 made half of each run (2.5, with 3 at 0.6: 4.3 / 8 = 0.54)."""
    history = History()
    for index in range(6):
        history.ended(job("u", index * 1000.0, 100.0 * (index + 1)))
    scores = history.scores("u")
    assert scores.jobs == 5
    assert scores.sums["last run"] == pytest.approx(1 / 2 + 2 / 3 + 3 / 4 + 4 / 5 + 5 / 6)
    assert scores.sums["median of the last 5"] == pytest.approx(2.5)
    ask = JobAsk(user="u", script="a.sh", partition="cpu", submit_s=9000, limit_s=3600, cpus=4)
    assert scores.best() == "last run"
    assert history.point(ask) == (600, "last run")
    assert History().point(ask) is None
    newcomer = History()
    newcomer.ended(job("v", 0, 100))
    newcomer.ended(job("v", 1000, 300))
    vs = dataclasses.replace(ask, user="v")
    assert newcomer.point(vs) == (200, "median of the last 5")


def test_a_job_still_running_when_another_was_submitted_is_not_scored_on_its_past() -> None:
    """Submitted at 0, 200 and 300 s, the jobs end at 100, 600 and 5200 s (fed to history in that order).
    The job submitted at 200 is scored on what history had then, the first run alone (100 against 5000),
    not on the third, which ended before it but was submitted after it (300 against 5000)."""
    history = History()
    for past in (job("u", 0, 100), job("u", 300, 300), job("u", 200, 5000, limit=7200)):
        history.ended(past)
    scores = history.scores("u")
    assert scores.jobs == 2 and scores.sums["last run"] == pytest.approx(100 / 300 + 100 / 5000)


def test_the_partitions_maximum_caps_every_limit() -> None:
    ask = JobAsk(user="u", script="a.sh", partition="cpu", submit_s=0, limit_s=7200, cpus=4)
    history = History()
    for index in range(3):
        history.ended(job("u", index * 10.0, 3000, limit=7200))
    predicted = forecast(look_back(history, ask), ask, (3000.0, 3000.0))
    assert advised_limit(predicted, ask, 2.0) == 6000
    assert advised_limit(predicted, ask, 2.0, partition_max_s=3600) == 3600
    unknown = forecast(look_back(History(), ask), ask, None)
    assert advised_limit(unknown, ask, 2.0, partition_max_s=3600) == 3600
    unlimited = JobAsk(user="u", script="a.sh", partition="cpu", submit_s=0, limit_s=None, cpus=4)
    assert advised_limit(forecast(look_back(History(), unlimited), unlimited, None), unlimited, 2.0) is None


def test_a_job_still_running_at_a_submission_is_not_its_past() -> None:
    jobs = [job("u", 0, 1000), job("u", 10, 50), job("u", 2000, 50)]
    _, second, third = replay(jobs)
    assert second.forecast.source == "request", "the first job had not ended when the second came"
    assert third.forecast.runs == (50, 1000), "by the third, both had, in the order they ended"
    assert third.tsafrir_s == 525


def synthetic(users: int = 6, per_user: int = 80) -> list[PastJob]:
    """Each user runs one script of their own length, a job an hour, ending within the hour."""
    jobs = [
        job(f"u{user}", hour * 3600.0 + user, 600.0 * (user + 1) + (hour % 3) * 10, limit=4 * 3600.0)
        for user in range(users)
        for hour in range(per_user)
    ]
    return sorted(jobs, key=lambda past: past.ask.submit_s)


def test_training_never_sees_a_job_that_ended_after_its_night() -> None:
    nights: list[tuple[int, float]] = []

    def spy(rows: list[list[float]], jobs: list[PastJob]) -> HistoryModel | None:
        nights.append((len(jobs), max((past.end_s for past in jobs), default=0.0)))
        return train_model(rows, jobs)

    jobs = synthetic()
    predicted = replay(jobs, train=spy)
    first_night = (jobs[0].ask.submit_s // NIGHT_S + 1) * NIGHT_S
    for number, (_, latest_end) in enumerate(nights):
        assert latest_end <= first_night + number * NIGHT_S, f"night {number} trained on a later job"
    assert [count for count, _ in nights] == sorted(count for count, _ in nights)
    assert all(p.trained_until is None or p.trained_until <= p.job.ask.submit_s for p in predicted)
    late = [p for p in predicted if p.forecast.source == "model"]
    assert late, "once enough jobs ended, the model predicts"
    assert all(p.forecast.upper_s is not None and p.forecast.p50_s is not None for p in late)
    assert all(
        p.forecast.upper_s >= p.forecast.p50_s for p in late if p.forecast.upper_s and p.forecast.p50_s
    )


def test_the_model_learns_each_users_length_and_keeps_its_file(tmp_path: Path) -> None:
    jobs = synthetic()
    rows, ended = past_rows(jobs, until=jobs[-1].end_s)
    assert len(ended) == len(jobs) >= MIN_TRAINING_JOBS
    model = train_model(rows, ended)
    assert model is not None and train_model(rows[:10], ended[:10]) is None
    history = History()
    for past in ended:
        history.ended(past)
    ask = JobAsk(
        user="u3", script="a.sh", partition="cpu", submit_s=jobs[-1].end_s, limit_s=4 * 3600.0, cpus=4
    )
    predicted = predict_run(model, history, ask)
    assert predicted.source == "model" and predicted.p50_s == pytest.approx(2400 + 10, rel=0.02)
    assert predicted.upper_s is not None and 2400 <= predicted.upper_s <= 2 * 2420
    save_model(tmp_path / "h.json", model, datetime(2026, 12, 1))
    loaded = load_model(tmp_path / "h.json")
    assert loaded is not None and loaded.model.jobs == model.jobs
    assert predict_run(loaded.model, history, ask) == predicted


def test_the_report_scores_completed_jobs_only() -> None:
    jobs = [job("u", 0, 100), job("u", 200, 3600), job("u", 4000, 100)]
    result = report("t", replay(jobs))
    assert result.completed == 2 and result.jobs == 3
    assert result.users.mean_accuracy == pytest.approx(100 / 3600)
    # Tsafrir for the third: the mean of 100 and 3600 = 1850; the first has no history: its request.
    assert result.tsafrir.mean_accuracy == pytest.approx((100 / 3600 + 100 / 1850) / 2)
    assert result.user_limits.kill_rate == 0 and result.user_limits.median_ratio == pytest.approx(36)
    # No model in three jobs: the first keeps its request, the third gets Tsafrir's rule.
    assert {label: score.jobs for label, score in result.rules.items()} == {
        "the request": 1,
        "Tsafrir's rule": 1,
    }
    assert result.rules["Tsafrir's rule"].mean_accuracy == pytest.approx(100 / 1850)


def test_the_report_shows_what_the_policys_floor_costs_counted_by_hand() -> None:
    """Four runs of one script asking 4 h; with no model, the limit is the user's longest run x factor."""
    jobs = [job("u", 1000.0 * index, run, limit=4 * 3600.0) for index, run in enumerate((600, 660, 720, 700))]
    result = report("t", replay(jobs), factors=(1.0,))
    (floored,), (floorless,) = result.tradeoff, result.tradeoff_floorless
    # The first keeps its 4 h; then 10, 11 and 12 min, of which the first two kill (660 s, 720 s runs). A
    # quarter of the request (1 h) lifts all three and kills none.
    assert (floorless.kill_rate, floored.kill_rate) == (0.5, 0.0)
    assert floorless.median_ratio == pytest.approx((660 / 720 + 720 / 700) / 2)
    assert floored.median_ratio == pytest.approx((3600 / 700 + 3600 / 660) / 2)
    # Each job limited to its own run, in whole minutes: 11, 12 and 12 min.
    assert result.exact_floorless.kill_rate == result.exact.kill_rate == 0
    assert result.exact_floorless.median_ratio == pytest.approx((1 + 720 / 700) / 2)
    assert result.exact.median_ratio == pytest.approx(result.tradeoff[0].median_ratio)


PARTITION = Partition.model_construct(name="cpu", max_time=timedelta(hours=12))


def test_a_history_limit_is_floored_by_the_policy_and_applied_only_in_rewrite() -> None:
    request = build_request("#!/bin/sh\n#SBATCH --time=4:00:00\ntrue\n", ["job.sh"], {}, "job.sh")
    ask = JobAsk(user="u", script="job.sh", partition="cpu", submit_s=9000, limit_s=4 * 3600.0, cpus=1)
    history = History()
    for index in range(3):
        history.ended(job("u", index * 100.0, 600 + index * 60, limit=4 * 3600.0, script="job.sh"))
    predicted = forecast(look_back(history, ask), ask, None)
    rewrite = resolve(parse_policy('mode = "rewrite"\n', "p.toml"), "u", None, ["cpu"])
    found = history_advice(rewrite, request, ask, predicted, PARTITION)
    advice, apply, reasons = found.advice, found.apply, history_told(found)
    # Longest run 12 min x 1.5 = 18 min, below the floor of a quarter of 4 h.
    assert advice is not None and advice.time_limit == timedelta(hours=1) and apply
    assert reasons[0] == "history: your last 3 runs of job.sh took 00:10:00, 00:11:00, 00:12:00", reasons
    assert "instead of 04:00:00" in reasons[1]
    advise = resolve(parse_policy('mode = "advise"\n', "p.toml"), "u", None, ["cpu"])
    assert history_advice(advise, request, ask, predicted, PARTITION).apply is False


def test_easy_backfills_only_what_delays_no_reservation_counted_by_hand() -> None:
    from benchmarks.harness.easy import Replayed, easy

    def submitted(at: float, procs: int, run: float) -> Replayed:
        return Replayed(submit_s=at, procs=procs, run_s=run, estimate_s=run, limit_s=1000, fallback_s=1000)

    # A holds 3 of 4; B (all 4) reserves A's end at 100; C (1 proc, ends at 52) jumps B; D (ends too late
    # for B's reservation) waits for B, which runs 100-110.
    jobs = [submitted(0, 3, 100), submitted(1, 4, 10), submitted(2, 1, 50), submitted(3, 1, 200)]
    schedule = easy(jobs, processors=4)
    assert schedule.mean_wait_s == pytest.approx((0 + 99 + 0 + 107) / 4)
    assert schedule.mean_bounded_slowdown == pytest.approx((1 + 109 / 10 + 1 + 307 / 200) / 4)
    short = [*jobs[:3], Replayed(submit_s=3, procs=1, run_s=200, estimate_s=200, limit_s=150, fallback_s=150)]
    assert easy(short, processors=4).killed == 1


def test_shaking_moves_each_submission_within_the_shift_alike_for_every_arm() -> None:
    from benchmarks.harness.easy import Replayed, easy, replays, shaken

    jobs = [
        Replayed(submit_s=100.0 * i, procs=1, run_s=50, estimate_s=50, limit_s=60, fallback_s=60)
        for i in range(50)
    ]
    moved = shaken(jobs, 30.0, seed=1)
    shifts = [after.submit_s - before.submit_s for before, after in zip(jobs, moved, strict=True)]
    assert all(-30.0 <= shift <= 30.0 for shift in shifts) and len(set(shifts)) == 50
    assert [job.run_s for job in moved] == [job.run_s for job in jobs]
    assert shaken(jobs, 30.0, seed=1) == moved and shaken(jobs, 30.0, seed=2) != moved
    # One processor, jobs every 100 s running 50 s: a shift under 25 s never makes one wait.
    arm = replays(jobs, processors=1, shakes=3, shift_s=24.0)
    assert arm.log == easy(jobs, 1) and len(arm.shaken) == 3
    assert all(schedule.mean_wait_s == 0.0 for schedule in arm.shaken)
    # Shifted by up to 200 s, some jobs arrive while another runs and wait.
    assert any(schedule.mean_wait_s > 0 for schedule in replays(jobs, 1, 3, 200.0).shaken)


def test_the_benchmark_prints_every_figure_for_a_log(tmp_path: Path) -> None:
    from benchmarks.history import main

    log = tmp_path / "small.swf"
    log.write_text(SWF)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main([str(log), "--json", "--plot", str(tmp_path / "tradeoff.png"), "--shakes", "2"]) == 0
    figures = json.loads(printed.getvalue())
    assert figures["report"]["completed"] == 2 and len(figures["schedules"]) == 4
    assert all(len(arm["shaken"]) == 2 for arm in figures["schedules"].values())
    with pytest.raises(SystemExit), contextlib.redirect_stderr(io.StringIO()) as said:
        main([str(log), "--shakes", "-1"])
    assert "cannot be negative" in said.getvalue()
    assert (tmp_path / "tradeoff.png").stat().st_size > 1000


def test_queued_jobs_of_users_with_a_history_are_planned_by_it(tmp_path: Path) -> None:
    from advisor.history.service import RunHistory
    from advisor.slurm.models import FinishedJob
    from advisor.wait.snapshot import PendingJob, QueueSnapshot, SlotRequest

    start = datetime(2026, 12, 1, tzinfo=UTC)
    finished = [
        FinishedJob(
            job_id=index,
            array_job_id=None,
            array_task_id=None,
            name="sim.sh",
            user="u",
            partition="cpu",
            state="COMPLETED",
            submit_time=start + timedelta(hours=index),
            start_time=start + timedelta(hours=index),
            end_time=start + timedelta(hours=index, seconds=run),
            elapsed=timedelta(seconds=run),
            time_limit=timedelta(hours=1),
            node_count=1,
            alloc_tres={"cpu": "4"},
            gpus=0,
            exit_code=0,
        )
        for index, run in enumerate((500, 600, 700))
    ]
    ask = SlotRequest(partitions=["cpu"], cpus_per_node=4, time_limit=timedelta(hours=1))
    snapshot = QueueSnapshot(
        taken_at=start + timedelta(days=1),
        nodes=[],
        partitions={"cpu": []},
        running=[],
        pending=[PendingJob(job_id=10, user="u", request=ask), PendingJob(job_id=11, user="z", request=ask)],
    )
    runs = RunHistory(tmp_path / "none.json").queue_runs(finished, snapshot)
    assert runs == {10: 650.0}, "Tsafrir's mean of u's last two; z has no history and keeps its limit"


def test_a_described_jobs_history_is_shown_beside_its_prediction() -> None:
    from advisor.recommend.explain import cross_check

    ask = JobAsk(user="u", script="train.sh", partition="a100", submit_s=0, limit_s=7200, cpus=8)
    history = History()
    history.ended(job("u", 0, 3000, limit=7200, script="train.sh"))
    told = cross_check(ask, forecast(look_back(history, ask), ask, None), 2400.4)
    assert told == "history: your last run of train.sh took 00:50:00; predicted as submitted: 00:40:00"


def test_a_job_of_a_kind_the_user_never_ran_keeps_its_limit() -> None:
    history = History()
    for index in range(3):
        history.ended(job("u", index * 10.0, 600, limit=3600, script="a.sh"))
    known = JobAsk(user="u", script="a.sh", partition="cpu", submit_s=100, limit_s=7200, cpus=4)
    new = JobAsk(user="u", script="b.sh", partition="cpu", submit_s=100, limit_s=7200, cpus=4)
    again = JobAsk(user="u", script="b.sh", partition="cpu", submit_s=100, limit_s=3600, cpus=4)
    told = {
        ask.script + str(ask.limit_s): forecast(look_back(history, ask), ask, (600.0, 700.0))
        for ask in (known, new, again)
    }
    assert advised_limit(told["a.sh7200"], known, 1.5) == 1050, "its script ran before"
    assert advised_limit(told["b.sh7200"], new, 1.5) == 7200, "neither its script nor this request"
    assert advised_limit(told["b.sh3600"], again, 1.5) == 1050, "the same request as the user's a.sh"


def test_a_sacct_text_dump_reads_jobs_not_steps_and_names_a_bad_line() -> None:
    from advisor.slurm.sacct_text import DUMP_FIELDS, parse_sacct_parsable

    header = "|".join(DUMP_FIELDS)
    rows = [
        "7|ann|prep.sh|cpu|COMPLETED|2026-12-01T10:00:00|2026-12-01T10:00:05|2026-12-01T10:12:05|00:12:00|01:00:00"
        "|7|1|billing=4,cpu=4,mem=8G,node=1|0:0",
        "7.batch|ann|batch|cpu|COMPLETED|2026-12-01T10:00:00|2026-12-01T10:00:05|2026-12-01T10:12:05|00:12:00|"
        "|7|1|cpu=4|0:0",
        "9_3|bob|sweep|a100|TIMEOUT|2026-12-01T09:00:00|2026-12-01T09:01:00|2026-12-01T11:01:00|02:00:00"
        "|Partition_Limit|12|1|cpu=8,gres/gpu:a100=2|0:15",
        "10|bob|live|a100|RUNNING|2026-12-01T09:00:00|2026-12-01T09:01:00|Unknown|02:00:00|1-00:00:00|10|1||0:0",
    ]
    first, array = parse_sacct_parsable("\n".join([header, *rows]), "dump.txt")
    assert (first.job_id, first.elapsed, first.time_limit, first.alloc_tres["cpu"]) == (
        7,
        timedelta(minutes=12),
        timedelta(hours=1),
        "4",
    )
    assert first.end_time == datetime(2026, 12, 1, 10, 12, 5, tzinfo=UTC)
    assert (array.job_id, array.array_job_id, array.array_task_id, array.gpus, array.time_limit) == (
        12,
        9,
        3,
        2,
        None,
    )
    with pytest.raises(ValueError, match=r"dump.txt:1: the header lacks Timelimit"):
        parse_sacct_parsable(header.replace("Timelimit", "Limit"), "dump.txt")
    with pytest.raises(ValueError, match=r"dump.txt:2: 3 fields, the header has 14"):
        parse_sacct_parsable(header + "\n1|2|3\n", "dump.txt")


def test_a_model_file_that_does_not_read_leaves_tsafrirs_rule(tmp_path: Path) -> None:
    from advisor.history.service import RunHistory

    broken = tmp_path / "history-model.json"
    broken.write_text('{"trained_at": "2026-12-01", "jobs": 3, "booster": {"not": "a booster"}}')
    assert RunHistory(broken).trained() is None
    broken.write_text("{")
    assert RunHistory(broken).trained() is None


def test_history_sets_the_level_only_of_low_confidence_predictions_and_within_bounds() -> None:
    from advisor.recommend.history_limit import history_prior

    runs = (600.0, 660.0)
    earlier = RunForecast(p50_s=630.0, upper_s=700.0, source="history", runs=runs)
    assert history_prior(earlier, 315.0, "low") == pytest.approx(2.0)
    assert history_prior(earlier, 315.0, "medium") is None, "a confident prediction keeps its level"
    assert history_prior(earlier, 6.3, "low") == 5.0, "a hundredfold miss is a changed script: capped"
    censored = RunForecast(p50_s=630.0, upper_s=700.0, source="history", runs=runs, censored=True)
    assert history_prior(censored, 315.0, "low") is None, "a run cut at its limit says only 'at least'"
    request_only = RunForecast(p50_s=630.0, upper_s=700.0, source="request", runs=runs)
    assert history_prior(request_only, 315.0, "low") is None
