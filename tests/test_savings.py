"""What advice saved (`advisor.recommend.savings`), counted by hand on two jobs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from advisor.recommend.candidates import baseline
from advisor.recommend.savings import saving, savings

from .test_recommend_pure import T4, describe, estimate, recommended

SUBMITTED = datetime(2026, 12, 2, 9, tzinfo=UTC)


def test_each_job_as_written_is_set_against_its_advice_and_against_what_slurm_says_it_took() -> None:
    written = estimate(baseline(describe(), T4, 1), run=4 * 3600, wait=2 * 3600)
    two = written.candidate.model_copy(update={"partition": "a100", "gpus": 2})
    advised = estimate(two, run=3600, wait=1800)
    result = recommended([advised, written], written, advised)
    ran = saving(7, result, SUBMITTED, (SUBMITTED + timedelta(minutes=10), 5400.0))
    pending = saving(8, result, SUBMITTED, None)
    unchanged = saving(9, recommended([written], written, written), SUBMITTED, None)
    assert unchanged is None, "advice that changed nothing saved nothing"
    assert ran is not None and pending is not None
    # As written: 2 h wait + 4 h on one GPU. As advised: 0.5 h + 1 h on two. Really: 10 min + 1.5 h on two.
    assert (ran.written_completion_s, ran.advised_completion_s) == (6 * 3600, 1.5 * 3600)
    assert (ran.written_gpu_hours, ran.advised_gpu_hours, ran.actual_gpu_hours) == (4.0, 2.0, 3.0)
    assert ran.actual_completion_s == 600 + 5400 and pending.actual_completion_s is None
    total = savings(offered=3, jobs=[ran, pending, unchanged])
    assert total.offered == 3 and [job.job_id for job in total.jobs] == [7, 8]
    assert total.completion_saved_s == 2 * 4.5 * 3600 and total.gpu_hours_saved == 4.0
    assert [job.job_id for job in total.completed] == [7]
    assert total.actual_completion_saved_s == 6 * 3600 - 6000 and total.actual_gpu_hours_saved == 1.0
