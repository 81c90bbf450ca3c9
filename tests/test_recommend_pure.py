"""Candidates and the choice among them, with every prediction given: no cluster, no clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from rich.console import Console

from advisor.jobscript.advisor_lines import JobDescription
from advisor.jobscript.request import build_request
from advisor.jobscript.rewrite import Advice
from advisor.policy.load import parse_policy
from advisor.policy.schema import Mode, Objective, RewriteRules, TimeLimitRule, Tuning
from advisor.predict.types import NoModelError, Prediction
from advisor.recommend.arrays import ArrayFigures
from advisor.recommend.ask import Ask, Caller
from advisor.recommend.candidates import Candidate, Offer, baseline, job_candidates
from advisor.recommend.choose import Criteria, Decision, Estimate, Recommendation, choose
from advisor.recommend.choose import describe as describe_candidate
from advisor.recommend.cli import HEADERS, candidates_table, show
from advisor.recommend.estimator import Context
from advisor.recommend.explain import choice
from advisor.recommend.kills import Run, kill_warnings
from advisor.recommend.service import recommend
from advisor.submit_guard import added_words
from advisor.wait.accuracy import WaitEstimate

from .test_recommend_arrays import A100 as PARTITION
from .test_recommend_arrays import FixedSteps

A100 = Offer(name="a100", gpu_type="a100", gpus_per_node=4, max_time=timedelta(days=1))
T4 = Offer(name="t4", gpu_type="t4", gpus_per_node=2, max_time=timedelta(hours=4))
CPU = Offer(name="cpu", gpu_type=None, gpus_per_node=0, max_time=None)


def describe(**fields: object) -> JobDescription:
    return JobDescription.model_validate({"model": "resnet18", "global_batch": 256, "steps": 1000, **fields})


def test_a_global_batch_too_big_for_a_device_becomes_micro_batches_with_the_same_product() -> None:
    largest = {("t4", False): 48, ("t4", True): 96}
    found = job_candidates(describe(), [T4], 2, Tuning(channels_last=False), largest)
    assert {(s.gpus, s.amp, s.micro_batch, s.accumulation) for s in found} == {
        (1, False, 32, 8),
        (1, True, 64, 4),
        (2, False, 32, 4),
        (2, True, 64, 2),
    }
    assert all(s.devices * s.micro_batch * s.accumulation == 256 for s in found)


def test_gpu_counts_stay_within_the_request_the_node_and_the_policy() -> None:
    fits = {("a100", False): 1024, ("t4", False): 1024}
    limits = Tuning(amp=False, channels_last=False, max_gpus=2)
    found = job_candidates(describe(global_batch=96), [A100, T4, CPU], 4, limits, fits)
    assert sorted({(s.partition, s.gpus) for s in found}) == [("a100", 1), ("a100", 2), ("t4", 1), ("t4", 2)]
    cpu_only = job_candidates(describe(), [A100, CPU], 0, limits, {("cpu", False): None})
    assert [(s.partition, s.gpus, s.micro_batch) for s in cpu_only] == [("cpu", 0, 256)]


def test_a_job_spreads_over_more_nodes_only_where_the_policy_lets_it() -> None:
    two_nodes = A100.model_copy(update={"nodes": 2})
    fits = {("a100", amp): 256 for amp in (False, True)}
    one = {(c.gpus, c.nodes) for c in job_candidates(describe(), [two_nodes], 4, Tuning(), fits)}
    assert one == {(1, 1), (2, 1), (4, 1)}, "one node unless the policy says more"
    wide = Tuning(max_nodes=2)
    spread = {(c.gpus, c.nodes) for c in job_candidates(describe(), [two_nodes], 4, wide, fits)}
    assert spread == {(1, 1), (2, 1), (1, 2), (4, 1), (2, 2)}
    # Eight GPUs asked as two nodes of four stay within the partition's two nodes, whatever the policy.
    eight = {(c.gpus, c.nodes) for c in job_candidates(describe(), [two_nodes], 4, Tuning(), fits, 2)}
    assert (4, 2) in eight and (8, 1) not in eight and (2, 2) in eight
    found = job_candidates(describe(), [two_nodes], 4, wide, fits)
    (split,) = {c for c in found if (c.gpus, c.nodes, c.amp, c.channels_last) == (2, 2, False, False)}
    assert split.devices == 4 and split.micro_batch == 64, "the global batch of 256 over 4 devices"
    assert describe_candidate(split) == "a100 with 2 nodes x 2 GPUs, micro-batch 64"


def test_a_script_that_keeps_its_own_flags_only_moves_partition_and_time() -> None:
    """Read from its training command, a job keeps its GPUs (its batch is per device), precision, layout."""
    fits = {("a100", False): 1024, ("t4", False): 1024, ("a100", True): 1024, ("t4", True): 1024}
    own = describe(global_batch=256, follows_advice=False, allow_amp=False, allow_grad_accum=False)
    found = job_candidates(own, [A100, T4], 4, Tuning(), fits)
    assert {(s.partition, s.gpus, s.micro_batch, s.amp, s.channels_last) for s in found} == {
        ("a100", 4, 64, False, False)
    }, "t4's nodes have 2 GPUs: on them the script's per-device batch would halve its global batch"
    following = job_candidates(describe(global_batch=256), [A100], 4, Tuning(), fits)
    assert {s.gpus for s in following} == {1, 2, 4} and {s.amp for s in following} == {False, True}
    mixed = own.model_copy(update={"own_amp": True, "own_accumulation": 2})
    (candidate,) = job_candidates(mixed, [A100, T4], 4, Tuning(), fits)
    assert (candidate.amp, candidate.micro_batch, candidate.accumulation) == (True, 32, 2), (
        "its own --amp and accumulation are what it runs: 4 GPUs x 32 x 2 = 256"
    )
    assert baseline(mixed, A100, 4) == candidate, "and so is the job as submitted"
    tight = {**fits, ("a100", True): 16}
    assert job_candidates(mixed, [A100], 4, Tuning(), tight) == [], "its micro-batch of 32 does not fit"


def test_batch_rules() -> None:
    small = {("t4", False): 50}
    keep = Tuning(amp=False, channels_last=False)
    never = job_candidates(describe(), [T4], 1, keep.model_copy(update={"batch": "never"}), small)
    assert [(s.micro_batch, s.accumulation) for s in never] == [(256, 1)], "left as is; it will not fit"
    no_accumulation = job_candidates(describe(allow_grad_accum=False), [T4], 1, keep, small)
    assert no_accumulation == [], "the user forbids accumulation and the batch does not fit"
    ranged = describe(global_batch=256, batch_range=(128, 512))
    declared = keep.model_copy(update={"batch": "within-declared-range"})
    within = job_candidates(ranged, [T4], 2, declared, small)
    assert (2, 100, 50, 1) not in {(s.gpus, s.global_batch, s.micro_batch, s.accumulation) for s in within}
    assert {(s.gpus, s.global_batch, s.micro_batch, s.accumulation) for s in within} >= {
        (1, 256, 32, 8),
        (2, 256, 32, 4),
    }
    assert not any(s.global_batch < 128 for s in within), "the range's floor holds"
    amp_off = job_candidates(describe(allow_amp=False), [T4], 1, Tuning(channels_last=False), small)
    assert {s.amp for s in amp_off} == {False}, "the job said it cannot run mixed precision"


def estimate(candidate: Candidate, run: float, wait: float, **fields: object) -> Estimate:
    """The p90 run 1.2 x the p50, and the limit the default policy gives it (p90 x 1.2 + 15 minutes)."""
    values: dict[str, object] = {
        "candidate": candidate,
        "run_s": run,
        "run_p90_s": run * 1.2,
        "peak_memory_bytes": 1,
        "fits": True,
        "confidence": "high",
        "machine": f"m-{candidate.partition}",
        "model_version": 1,
        "model_age": timedelta(days=1),
        "slurm_wait_s": wait,
        "advisor_wait_s": wait,
        "wait_source": "advisor",
        "cost": None,
        "time_limit": TimeLimitRule().limit(timedelta(seconds=run * 1.2), None),
    }
    return Estimate.model_validate({**values, **fields})


def recommended(
    candidates: list[Estimate], asked: Estimate, chosen: Estimate | None, **fields: object
) -> Recommendation:
    """Alice's recommendation under a rewriting policy, applied unless ``fields`` say otherwise."""
    values: dict[str, object] = {
        "user": "alice",
        "account": None,
        "mode": "rewrite",
        "candidates": candidates,
        "baseline": asked,
        "chosen": chosen,
        "apply": True,
        "advice": None,
        "reasons": [],
    }
    return Recommendation.model_validate({**values, **fields})


REWRITE: dict[str, Mode] = {"a100": "rewrite", "t4": "rewrite"}


def decide(
    estimates: list[Estimate],
    asked: Estimate,
    objective: Objective = "completion",
    weight: float | None = None,
    rules: RewriteRules | None = None,
    modes: dict[str, Mode] = REWRITE,
) -> Decision:
    return choose(estimates, asked, Criteria(objective, weight, rules or RewriteRules(), modes))


def said(
    decision: Decision,
    objective: Objective = "completion",
    rules: RewriteRules | None = None,
    least: float = 0.0,
) -> list[str]:
    """The reasons the choice is worded with (`advisor.recommend.explain.choice`)."""
    return choice(decision, Criteria(objective, rules=rules or RewriteRules(), min_efficiency=least))


def test_a_busy_fast_partition_loses_to_an_idle_slow_one() -> None:
    asked = estimate(baseline(describe(), A100, 1), run=3600, wait=6 * 3600)
    slow = estimate(asked.candidate.model_copy(update={"partition": "t4"}), run=3 * 3600, wait=0)
    decision = decide([asked, slow], asked)
    assert decision.chosen.candidate.partition == "t4" and decision.apply
    assert "against 07:00:00 as submitted" in said(decision)[0]
    idle = estimate(asked.candidate, run=3600, wait=0)
    stays = decide([idle, slow.model_copy(update={"slurm_wait_s": 0.0})], idle)
    assert stays.chosen == idle and not stays.apply
    assert said(stays) == ["the job as submitted is already the best candidate"]


def test_a_candidate_below_the_least_scaling_efficiency_is_shown_not_chosen() -> None:
    asked = estimate(baseline(describe(), A100, 1), run=4000, wait=0)
    two = estimate(baseline(describe(), A100, 2), run=2500, wait=0, efficiency=0.8)
    four = estimate(baseline(describe(), A100, 4), run=1600, wait=0, efficiency=4000 / (4 * 1600))
    decision = choose([asked, two, four], asked, Criteria(modes=REWRITE, min_efficiency=0.7))
    assert decision.ranked[0] == four and decision.chosen == two, "the fastest is shown first, not chosen"
    assert said(decision, least=0.7)[0] == (
        "not chosen: a100 with 4 GPUs, micro-batch 64, whose scaling is predicted at 0.62 of ideal "
        "(the policy takes at least 0.70)"
    )
    assert decide([asked, two, four], asked).chosen == four, "no threshold: the fastest"
    result = recommended(
        decision.ranked, asked, decision.chosen, apply=decision.apply, reasons=said(decision, least=0.7)
    )
    console = Console(width=160, record=True)
    console.print(candidates_table(result))
    assert "a100 with 4 GPUs, micro-batch 64, scaling 0.62" in console.export_text()


def test_a_wait_no_estimator_knows_never_beats_a_known_one() -> None:
    asked = estimate(baseline(describe(), T4, 1), run=3 * 3600, wait=600)
    unknown = estimate(asked.candidate.model_copy(update={"partition": "a100"}), run=600, wait=0)
    unknown = unknown.model_copy(update={"slurm_wait_s": None, "advisor_wait_s": None})
    known = estimate(asked.candidate.model_copy(update={"partition": "v100"}), run=3600, wait=600)
    decision = decide([asked, unknown, known], asked)
    assert decision.chosen == known, "the a100's five-hour lead is worth nothing without a wait"
    assert [e.candidate.partition for e in decision.ranked] == ["v100", "t4", "a100"]
    alone = decide([asked, unknown], asked)
    assert alone.chosen == asked and not alone.apply


def test_advise_mode_low_confidence_and_small_gains_never_rewrite() -> None:
    asked = estimate(baseline(describe(), A100, 1), run=3600, wait=7200)
    better = estimate(asked.candidate.model_copy(update={"partition": "t4"}), run=3600, wait=0)
    advise = decide([asked, better], asked, modes={"t4": "advise"})
    assert advise.chosen == better and not advise.apply
    assert "mode for partition t4 is advise" in said(advise)[-1]
    unsure = better.model_copy(update={"confidence": "low"})
    low = decide([asked, unsure], asked)
    assert low.chosen == asked and not low.apply
    slight = better.model_copy(update={"run_s": 3600 + 6700})
    small = decide([asked, slight], asked, rules=RewriteRules(min_gain_fraction=0.01))
    assert (
        small.chosen == asked
        and not small.apply
        and "00:10:00" in said(small, rules=RewriteRules(min_gain_fraction=0.01))[-1]
    )


def test_an_array_is_judged_by_when_its_last_task_ends() -> None:
    """100 tasks: the a100 holds 4 side by side, 1000 s each: 25 waves, the last ends at 25,000 s; the t4
    holds 20, 2000 s each: 5 waves, 10,000 s. One task is faster on the a100; the array ends sooner on t4."""
    asked = estimate(baseline(describe(), A100, 1), run=1000, wait=0)
    t4 = estimate(asked.candidate.model_copy(update={"partition": "t4"}), run=2000, wait=0)
    assert decide([asked, t4], asked).chosen == asked, "one job: the a100"
    whole = {asked.candidate.partition: (4, 25, 25_000.0), "t4": (20, 5, 10_000.0)}

    def array(e: Estimate) -> Estimate:
        at_once, waves, last = whole[e.candidate.partition]
        figures = ArrayFigures(
            tasks=100, throttle=None, at_once=at_once, waves=waves, cost=None, last_end_s=last
        )
        return e.model_copy(update={"array": figures})

    decision = decide([array(asked), array(t4)], array(asked))
    assert decision.chosen == array(t4) and decision.apply
    assert said(decision)[0] == (
        "best: t4 with 1 GPU, micro-batch 256: the array's last task expected to end in 02:46:40 (5 waves of "
        "20, wait 00:00:00, run 00:33:20 each) against 06:56:40 as submitted (25 waves of 4, wait 00:00:00, "
        "run 00:16:40 each)"
    )


def test_a_job_that_does_not_fit_is_moved_whatever_the_gain() -> None:
    asked = estimate(baseline(describe(), T4, 1), run=3600, wait=0, fits=False)
    smaller = asked.candidate.model_copy(update={"micro_batch": 32, "accumulation": 8})
    split = estimate(smaller, run=3700, wait=0)
    decision = decide([asked, split], asked)
    assert decision.chosen == split and decision.apply and "more memory" in said(decision)[0]
    assert decision.ranked[-1] == asked, "what does not fit ranks last"


def test_the_cost_objective_prefers_the_cheaper_run() -> None:
    asked = estimate(baseline(describe(), A100, 1), run=3600, wait=0, cost=3.0)
    cheap = estimate(asked.candidate.model_copy(update={"partition": "t4"}), run=3 * 3600, wait=0, cost=1.5)
    anything = RewriteRules(min_gain_minutes=0)
    objectives: list[tuple[Objective, float | None, Estimate]] = [
        ("completion", None, asked),
        ("cost", None, cheap),
        ("weighted", 0.2, asked),
        ("weighted", 0.8, cheap),
    ]
    for objective, weight, winner in objectives:
        assert decide([asked, cheap], asked, objective, weight, anything).chosen == winner, (
            objective,
            weight,
        )


def test_stale_models_never_drive_a_rewrite() -> None:
    asked = estimate(baseline(describe(), A100, 1), run=3600, wait=7200)
    old = estimate(
        asked.candidate.model_copy(update={"partition": "t4"}), run=3600, wait=0, model_age=timedelta(days=30)
    )
    decision = decide([asked, old], asked)
    assert decision.chosen == asked and not decision.apply, "the stale candidate is not eligible"
    alone = decide([asked.model_copy(update={"model_age": timedelta(days=30)}), old], asked)
    assert not alone.apply and "younger than 14 days" in said(alone)[0]


@pytest.mark.parametrize(
    ("p90", "requested", "expected"),
    [
        (timedelta(minutes=50), None, timedelta(minutes=75)),
        (timedelta(seconds=1), timedelta(hours=1), timedelta(minutes=16)),
        (timedelta(hours=10), timedelta(hours=1), None),
        (timedelta(minutes=50), timedelta(hours=24), timedelta(hours=6)),  # the floor: a quarter of 24 h
        (timedelta(hours=5), timedelta(hours=24), timedelta(minutes=375)),  # above the floor: the rule
    ],
)
def test_the_time_limit_is_p90_times_factor_plus_margin_in_whole_minutes(
    p90: timedelta, requested: timedelta | None, expected: timedelta | None
) -> None:
    assert TimeLimitRule().limit(p90, requested) == expected


def test_ties_go_to_the_cheaper_candidate_then_to_fewer_gpus() -> None:
    asked = estimate(baseline(describe(), A100, 1), run=3600, wait=0, cost=9.15)
    cheap = estimate(asked.candidate.model_copy(update={"partition": "t4"}), run=3600.2, wait=0, cost=1.53)
    assert decide([asked, cheap], asked).ranked[0] == cheap, "the same time for a sixth of the price"
    two = estimate(cheap.candidate.model_copy(update={"gpus": 2}), run=3600, wait=0, cost=1.53)
    assert decide([two, cheap, asked], asked).ranked[:2] == [cheap, two]


def test_the_candidates_table_has_a_header_over_every_cell_and_shows_the_advice_as_options() -> None:
    asked = estimate(baseline(describe(), A100, 1), run=3600, wait=7200, wait_source="slurm")
    better = estimate(asked.candidate.model_copy(update={"partition": "t4"}), run=3600, wait=0, cost=1.5)
    advice = Advice(partition="t4", time_limit=timedelta(minutes=95))
    result = recommended([better, asked], asked, better, advice=advice, reasons=["because"])
    console = Console(record=True, width=120)
    show(result, console, added_words(["job.sh"], ["--partition=t4", "--time=01:35:00", "job.sh"], {}))
    text = console.export_text()
    assert all(len(line) <= 120 for line in text.splitlines())
    table = candidates_table(result)
    header = [str(column.header) for column in table.columns]
    assert header == list(HEADERS) and header[0] == "" and all(header[1:]), "no blank header but the first"
    cells = {
        name.replace("\n", " "): [str(cell) for cell in column.cells]
        for name, column in zip(header, table.columns, strict=True)
    }
    assert cells[""] == ["chosen", "as submitted"]
    assert cells["wait (Slurm)"][1] == "02:00:00 *" and cells["run (p50)"][1] == "01:00:00", (
        "each cell under its name"
    )
    assert "wait" in text and "(Slurm)" in text and "02:00:00 *" in text
    assert "the advisor applies: --partition=t4 --time=01:35:00" in text


P90_T4 = 12 * 3600 + 28 * 60 + 57
"""The demo's t4 p90 against its four-hour limit (issue 48)."""


@pytest.mark.parametrize("mode", ["rewrite", "advise"])
def test_a_candidate_whose_p90_outlasts_its_limit_is_ranked_never_chosen(mode: Mode) -> None:
    """The demo's cost objective moved a job to the t4 with its 4-hour limit while its p90 there was 12.5
    hours: ranked first on cost, it is passed over, and the next safe candidate wins."""
    asked = estimate(baseline(describe(), A100, 1), run=3600, wait=0, cost=3.0)
    t4 = asked.candidate.model_copy(update={"partition": "t4"})
    killed = estimate(t4, run=3755, wait=0, cost=1.0, run_p90_s=P90_T4, time_limit=timedelta(hours=4))
    modes: dict[str, Mode] = {"a100": mode, "t4": mode, "v100": mode}
    alone = decide([asked, killed], asked, "cost", modes=modes)
    assert alone.ranked[0] == killed, "shown, and ranked by the objective"
    assert alone.chosen == asked and not alone.apply
    assert said(alone, "cost")[0] == (
        "not chosen: t4 with 1 GPU, micro-batch 256, likely killed at 04:00:00: p90 run 12:28:57"
    )
    assert said(alone, "cost")[1] == "the job as submitted is already the best candidate"
    v100 = estimate(asked.candidate.model_copy(update={"partition": "v100"}), run=1800, wait=0, cost=2.0)
    decision = decide([asked, killed, v100], asked, "cost", modes=modes)
    assert decision.chosen == v100 and decision.apply == (mode == "rewrite")
    assert said(decision, "cost")[0].startswith("not chosen: t4 with 1 GPU")
    own = asked.model_copy(update={"run_p90_s": P90_T4, "time_limit": timedelta(hours=4)})
    kept = decide([own, killed], own, "cost", modes=modes)
    assert kept.chosen == own, "the job as submitted stays a candidate whatever its own limit"


def test_when_every_trusted_candidate_is_likely_killed_the_job_is_kept_and_told_why() -> None:
    asked = estimate(baseline(describe(), A100, 1), run=3600, wait=7200, confidence="low")
    t4 = asked.candidate.model_copy(update={"partition": "t4"})
    killed = estimate(t4, run=3755, wait=0, run_p90_s=P90_T4, time_limit=timedelta(hours=4))
    more = estimate(t4.model_copy(update={"micro_batch": 128, "accumulation": 2}), run=3900, wait=0)
    more = more.model_copy(update={"run_p90_s": P90_T4 + 60, "time_limit": timedelta(hours=4)})
    decision = decide([asked, killed, more], asked)
    assert decision.chosen == asked and not decision.apply
    assert said(decision) == [
        "not chosen: t4 with 1 GPU, micro-batch 256, likely killed at 04:00:00: p90 run 12:28:57",
        "kept as submitted: every trusted candidate is likely killed at the time limit it would get",
    ], "one line per partition, its best candidate"


@pytest.mark.parametrize(
    ("runs", "said"),
    [
        (
            [Run("as submitted", P90_T4, timedelta(hours=4))],
            ["as submitted, likely killed at 04:00:00: p90 run 12:28:57"],
        ),
        (
            [Run("as submitted", 92 * 86400, timedelta(days=2)), Run("as advised", 3600, timedelta(hours=2))],
            ["as submitted, likely killed at 2-00:00:00: p90 run 92d 00:00"],
        ),
        (
            [Run("as advised", 14401, timedelta(hours=4))],
            ["as advised, likely killed at 04:00:00: p90 run 04:00:01"],
        ),
        ([Run("as submitted", 14400, timedelta(hours=4)), Run("as submitted", 1e9, None)], []),
    ],
)
def test_the_kill_warning_names_the_limit_and_the_p90_run(runs: list[Run], said: list[str]) -> None:
    assert kill_warnings(runs) == said


def test_the_terminal_ends_with_the_kill_warning() -> None:
    """What advise-submit shows on a terminal and `advisor explain` shows later."""
    asked = estimate(baseline(describe(), T4, 1), run=3755, wait=0, run_p90_s=P90_T4)
    warned = "as submitted, likely killed at 04:00:00: p90 run 12:28:57"
    result = recommended([asked], asked, asked, apply=False, kill_warnings=[warned])
    console = Console(record=True, width=120)
    show(result, console)
    assert console.export_text().splitlines()[-1] == f"warning: {warned}"
    quiet = Console(record=True, width=120)
    show(recommended([asked], asked, asked, apply=False), quiet)
    assert "likely killed" not in quiet.export_text()


def test_the_policys_cost_unit_reaches_the_recommendation() -> None:
    """Whether the job gets candidates or passes through, the costs are said in the policy's unit."""
    policy = parse_policy('cost_unit = "EUR"\n[partitions.a100]\nprice_per_gpu_hour = 3.0\n', "p.toml")
    waits = WaitEstimate(slurm_wait_s=0.0, advisor_wait_s=None, preferred="slurm")
    context = Context(policy, [PARTITION], lambda queries: [waits] * len(queries))
    request = build_request("#!/bin/sh\n#SBATCH -p a100 --gres=gpu:1\ntrue\n", [], {}, "job.sh")
    ask = Ask(request, describe(), Caller("alice"), datetime(2026, 12, 4, tzinfo=UTC))
    found = recommend(context, ask, FixedSteps())
    assert found.candidates and found.cost_unit == "EUR"
    assert recommend(context, ask, None).cost_unit == "EUR", "passed through: no model read"
    assert parse_policy("", "p.toml").cost_unit == "credits"


class NoV100Steps(FixedSteps):
    """FixedSteps, twice as fast in channels-last (so the advice moves off the job as submitted), and
    nothing predicts the job on v100 (no step times measured there)."""

    def step(
        self, partition: str, gpus: int, nodes: int, micro_batch: int, amp: bool, channels_last: bool
    ) -> Prediction:
        if partition == "v100":
            raise NoModelError("no resnet18 step times on v100")
        found = super().step(partition, gpus, nodes, micro_batch, amp, channels_last)
        return found.model_copy(update={"step_s": 0.05, "step_p90_s": 0.05}) if channels_last else found


@pytest.mark.parametrize("asked", ["a100", "a100,v100"])
def test_a_partition_nothing_predicts_is_left_out_with_its_reason_and_the_others_advised(asked: str) -> None:
    v100 = PARTITION.model_copy(update={"name": "v100", "gpu_type": "v100", "is_default": False})
    policy = parse_policy("[partitions.a100]\n[partitions.v100]\n", "p.toml")
    waits = WaitEstimate(slurm_wait_s=0.0, advisor_wait_s=None, preferred="slurm")
    context = Context(policy, [PARTITION, v100], lambda queries: [waits] * len(queries))
    request = build_request(f"#!/bin/sh\n#SBATCH -p {asked} --gres=gpu:1\ntrue\n", [], {}, "job.sh")
    found = recommend(
        context,
        Ask(request, describe(steps=100_000), Caller("alice"), datetime(2026, 12, 4, tzinfo=UTC)),
        NoV100Steps(),
    )
    assert found.chosen is not None and found.chosen != found.baseline, "advised among the others"
    assert {estimate.candidate.partition for estimate in found.candidates} == {"a100"}
    assert (
        "not considered, v100: nothing predicts the job there (no resnet18 step times on v100)"
        in found.reasons
    )
