"""The candidates table as people read it: candidates predicted alike in one row, the p90 ratio with the
digits its confidence cut needs, cells folded to the terminal's width rather than cut."""

from __future__ import annotations

import re
from datetime import timedelta

from rich.console import Console

from advisor import readable
from advisor.recommend.candidates import Candidate
from advisor.recommend.choose import Estimate, Recommendation
from advisor.recommend.cli import alike, show
from tests.test_outputs import UNREADABLE

CPU_JOB = Candidate(
    partition="cpu", gpus=0, global_batch=64, micro_batch=64, accumulation=1, amp=False, channels_last=False
)


def estimate(candidate: Candidate, run: float, p90: float, wait: float) -> Estimate:
    return Estimate(
        candidate=candidate,
        run_s=run,
        run_p90_s=p90,
        peak_memory_bytes=1,
        fits=True,
        confidence="medium",
        machine="0123456789abcdef",
        model_version=1,
        model_age=timedelta(days=1),
        slurm_wait_s=wait,
        advisor_wait_s=wait,
        wait_source="advisor",
        cost=None,
        time_limit=timedelta(seconds=p90 * 1.2),
    )


def recommendation(candidates: list[Estimate], asked: Estimate) -> Recommendation:
    return Recommendation(
        user="alice",
        account=None,
        mode="advise",
        candidates=candidates,
        baseline=asked,
        chosen=asked,
        apply=False,
        advice=None,
        reasons=[],
    )


def test_candidates_that_differ_only_in_channels_last_and_are_predicted_alike_share_a_row() -> None:
    """On a CPU channels_last changes nothing: before, each such pair took two identical rows."""
    asked = estimate(CPU_JOB, run=3600, p90=5832, wait=0)  # p90 / p50 = 1.62: medium's cut is 1.6
    twin = asked.model_copy(update={"candidate": CPU_JOB.model_copy(update={"channels_last": True})})
    larger = CPU_JOB.model_copy(update={"micro_batch": 32, "accumulation": 2})
    other = estimate(larger, run=4000, p90=4800, wait=0)
    other_twin = other.model_copy(update={"candidate": larger.model_copy(update={"channels_last": True})})
    assert alike([asked, twin, other, other_twin]) == [[asked, twin], [other, other_twin]]
    console = Console(record=True, width=200)
    show(recommendation([asked, twin, other, other_twin], asked), console)
    text = console.export_text()
    rows = [line for line in text.splitlines() if "cpu with CPU" in line]
    assert len(rows) == 2, text
    assert "cpu with CPU, micro-batch 64, channels_last either way (same prediction)" in rows[0]
    assert "p90 1.62x" in rows[0], "1.62 would read 1.6: the cut it crosses"
    assert "more candidates" not in text
    for what, pattern in UNREADABLE.items():  # what advise-submit, explain and the demo show
        assert not pattern.search(text), f"{what}:\n{text}"
    assert not re.search(r"\b[0-9a-f]{16}\b", text), "a machine's hash"
    priced = asked.model_copy(update={"cost": 1234.5})
    console = Console(record=True, width=200)
    show(recommendation([priced], priced).model_copy(update={"cost_unit": "EUR"}), console)
    assert "1,234.50 EUR" in console.export_text(), "the cost in the policy's unit (before: 1234.50)"


def test_a_group_without_every_combination_names_each_it_has() -> None:
    """AMP alone, channels_last alone and both predicted alike, the plain candidate not: not 'either way'."""
    plain = estimate(CPU_JOB, run=3600, p90=4000, wait=0)
    variants = [
        estimate(CPU_JOB.model_copy(update=knobs), run=3700, p90=4100, wait=0)
        for knobs in ({"amp": True}, {"channels_last": True}, {"amp": True, "channels_last": True})
    ]
    console = Console(record=True, width=200)
    show(recommendation([plain, *variants], plain), console)
    text = console.export_text()
    assert "micro-batch 64, AMP, channels_last or both (same prediction)" in text, text


def test_the_table_folds_to_a_narrow_terminal_and_keeps_every_word() -> None:
    asked = estimate(CPU_JOB, run=1970 * 86400 + 3 * 3600 + 40 * 60 + 31, p90=1971 * 86400, wait=0)
    console = Console(record=True, width=80)
    show(recommendation([asked], asked), console)
    text = console.export_text()
    assert all(len(line) <= 80 for line in text.splitlines())
    assert "…" not in text, "nothing cut short"
    assert "1,970d 03:40" in text and "1970-03:40:31" not in text


def test_an_array_says_its_columns_are_a_task_s_and_what_the_whole_array_costs() -> None:
    """100 tasks, 10 at once: the table's run, wait and cost are each task's; a line says the array's."""
    from tests.test_recommend_arrays import estimated

    asked = estimated("0-99%10")
    assert asked.array is not None
    console = Console(record=True, width=200)
    show(recommendation([asked], asked).model_copy(update={"cost_unit": "EUR"}), console)
    text = console.export_text()
    assert "each task" in text and "(last task)" in text
    whole = asked.array.describe(readable.duration, lambda value: readable.cost(value, "EUR"))
    assert f"as chosen: {whole}" in text and "all 100 array tasks, at most 10 at once (%10)" in whole
    assert text.count("array tasks") == 1, "chosen as submitted: said once"
