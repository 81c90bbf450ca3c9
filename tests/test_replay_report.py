"""The replay report's figures on a three-job example small enough to check by hand, and its files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.harness.model import ArmName, ReplayConfig, ReplayDecision, ReplayOutcome
from benchmarks.harness.report import (
    ArmSummary,
    agreement,
    compare,
    disagreement,
    summarize,
    wait_errors,
    write_report,
)


def outcome(
    name: str,
    arrival: float,
    start: float,
    end: float,
    *,
    arm: ArmName = "advisor",
    killed_start: float | None = None,
    limit: float = 200.0,
    slurm_wait: float | None = None,
    advisor_wait: float | None = None,
) -> ReplayOutcome:
    decision = ReplayDecision(
        partition="v100",
        config=ReplayConfig(gpu_type="v100", gpus=2, nodes=1, micro_batch=32, accumulation=1),
        time_limit_s=limit,
        slurm_wait_s=slurm_wait,
        advisor_wait_s=advisor_wait,
    )
    return ReplayOutcome(
        name=name,
        arm=arm,
        arrival_s=arrival,
        start_s=start,
        end_s=end,
        decision=decision,
        true_run_s=end - start,
        timed_out=killed_start is not None,
        killed_start_s=killed_start,
    )


def three_jobs(arm: ArmName = "advisor", shift: float = 0.0) -> list[ReplayOutcome]:
    """JCTs 100, 100 and 190 (+ shift); the third was killed after 30 s and reran from 110."""
    return [
        outcome("a", 0, 0, 100 + shift, arm=arm, slurm_wait=10, advisor_wait=0),
        outcome("b", 10, 50, 110 + shift, arm=arm, slurm_wait=50),
        outcome("c", 20, 110, 210 + shift, arm=arm, killed_start=20, limit=30, slurm_wait=60, advisor_wait=4),
    ]


def test_summary_of_three_jobs() -> None:
    summary = summarize("advisor", three_jobs())
    assert summary.jobs == 3
    assert summary.mean_jct_s == pytest.approx(130)
    assert summary.p90_jct_s == pytest.approx(172)  # 100 + 0.8 x (190 - 100), between the 2nd and 3rd
    assert summary.mean_wait_s == pytest.approx((0 + 40 + 90) / 3)
    assert summary.makespan_s == 210
    # 2 GPUs for 100 + 60 + (30 killed + 100 rerun) seconds
    assert summary.gpu_hours == pytest.approx(2 * 290 / 3600)
    assert summary.timeouts == 1


def test_wait_errors_count_only_jobs_with_an_estimate_and_judge_the_first_attempt() -> None:
    errors = wait_errors(three_jobs())
    # actual first waits 0, 40, 0 (c's killed attempt started at arrival)
    assert (errors["slurm"].jobs, errors["slurm"].median_abs_error_s) == (3, 10)
    assert (errors["advisor"].jobs, errors["advisor"].median_abs_error_s) == (2, 2)


def test_queued_wait_errors_leave_out_jobs_nobody_expected_to_wait_and_that_did_not() -> None:
    idle = outcome("d", 30, 30, 100, slurm_wait=0, advisor_wait=0)
    errors = wait_errors([*three_jobs(), idle])
    # misses: slurm 10, 10, 60, 0; advisor 0, 4, 0 (b has none)
    assert errors["slurm"].mean_abs_error_s == pytest.approx(20)
    assert (errors["slurm"].queued_jobs, errors["slurm"].queued_median_abs_error_s) == (3, 10)
    assert errors["advisor"].median_abs_error_s == 0
    assert (errors["advisor"].queued_jobs, errors["advisor"].queued_median_abs_error_s) == (2, 2)


def test_compare_gives_the_advisors_reduction_against_each_present_arm() -> None:
    summaries: dict[ArmName, ArmSummary] = {
        "habits": summarize("habits", three_jobs("habits", shift=60)),
        "advisor": summarize("advisor", three_jobs()),
    }
    reductions = compare(summaries)
    assert reductions.vs_habits == pytest.approx(1 - 130 / 190)
    assert reductions.vs_slurm is None


def test_agreement_is_the_relative_difference_of_mean_completion() -> None:
    assert agreement(three_jobs(shift=13), three_jobs()) == pytest.approx(0.1)


def test_disagreement_counts_each_job_s_miss_where_early_and_late_cancel_in_the_mean() -> None:
    """Real JCTs 100, 100, 190 (mean 130); the twin ends a 26 s late and b 26 s early: the means agree,
    the jobs miss by 26, 26, 0 s, a mean of 52/3 s over 130 s."""
    real = three_jobs()
    twin = [
        real[0].model_copy(update={"end_s": real[0].end_s + 26}),
        real[1].model_copy(update={"end_s": real[1].end_s - 26}),
        real[2],
    ]
    assert agreement(twin, real) == pytest.approx(0.0)
    assert disagreement(twin, real) == pytest.approx(52 / 3 / 130)
    assert disagreement(three_jobs(shift=13), real) == pytest.approx(0.1)


def test_write_report_writes_markdown_json_and_plots_with_the_figures(tmp_path: Path) -> None:
    results: dict[ArmName, list[ReplayOutcome]] = {
        "habits": three_jobs("habits", shift=60),
        "slurm": three_jobs("slurm", shift=30),
        "advisor": three_jobs(),
    }
    markdown = write_report(results, tmp_path / "out", "saturn 1", ["1 s of Slurm = 1 min of workload"])
    text = markdown.read_text()
    assert text.startswith("# saturn 1")
    assert "| advisor | 3 | 130 | 172 | 43 | 210 | 0.2 | 1 |" in text
    assert "| habits | 31.6% | >= 30%: met |" in text
    assert "| slurm | 18.8% | >= 10%: met |" in text
    assert "- 1 s of Slurm = 1 min of workload" in text
    figures = json.loads((tmp_path / "out" / "report.json").read_text())
    assert figures["arms"]["habits"]["mean_jct_s"] == pytest.approx(190)
    assert figures["reductions"]["vs_slurm"] == pytest.approx(1 - 130 / 160)
    assert figures["wait_errors"]["advisor"]["advisor"] == {
        "jobs": 2,
        "median_abs_error_s": 2,
        "mean_abs_error_s": 2,
        "queued_jobs": 2,
        "queued_median_abs_error_s": 2,
    }
    for plot in ("completion_cdf.png", "completion_bars.png"):
        assert (tmp_path / "out" / plot).read_bytes().startswith(b"\x89PNG")
        assert f"]({plot})" in text


def test_decision_delay_is_shown_beside_jct_and_flagged_above_five_percent_of_the_median_wait(
    tmp_path: Path,
) -> None:
    """Waits 0, 40, 90 (median 40): a 1 s mean delay is within 5% of it (2 s), a 10 s one is an artefact."""

    def delayed(arm: ArmName, delay: float) -> list[ReplayOutcome]:
        return [o.model_copy(update={"submitted_s": o.arrival_s + delay}) for o in three_jobs(arm)]

    prompt, slow = summarize("advisor", delayed("advisor", 1)), summarize("habits", delayed("habits", 10))
    assert (prompt.median_wait_s, prompt.mean_decision_delay_s) == (40, 1)
    assert not prompt.delay_is_artefact and slow.delay_is_artefact
    assert summarize("slurm", three_jobs("slurm")).mean_decision_delay_s is None  # simulated: no delay
    results: dict[ArmName, list[ReplayOutcome]] = {
        "habits": delayed("habits", 10),
        "advisor": delayed("advisor", 1),
    }
    text = write_report(results, tmp_path, "delays", []).read_text()
    assert "| advisor | 3 | 130 | 172 | 43 | 210 | 0.2 | 1 | 1 | - |" in text
    assert "| habits | 3 | 130 | 172 | 43 | 210 | 0.2 | 1 | 10 (harness artefact) | - |" in text
    assert "Harness artefact: the decision delay of habits exceeds 5% of the median wait" in text
    figures = json.loads((tmp_path / "report.json").read_text())
    assert figures["arms"]["habits"]["delay_is_artefact"] is True


def test_advised_jobs_whose_p90_outruns_their_limit_and_those_killed_are_counted(tmp_path: Path) -> None:
    """a: p90 within its limit; c: p90 beyond it, and killed; b: not advised (no prediction)."""
    a, b, c = three_jobs()

    def advised(outcome: ReplayOutcome, p90: float) -> ReplayOutcome:
        decision = outcome.decision.model_copy(update={"predicted_run_s": p90 / 2, "predicted_p90_s": p90})
        return outcome.model_copy(update={"decision": decision})

    outcomes = [advised(a, 150), b, advised(c, 45)]
    summary = summarize("advisor", outcomes)
    assert (summary.advised, summary.advised_p90_over_limit, summary.advised_killed) == (2, 1, 1)
    text = write_report({"advisor": outcomes}, tmp_path, "rails", []).read_text()
    assert "| 1 / 1 of 2 |" in text
