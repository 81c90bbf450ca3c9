"""What a policy means for one caller (precedence of modes, allowed partitions, prices), and the rules the
recommender asks the policy about: gain thresholds, trust in a prediction, the rewritten time limit."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from advisor.policy import Policy, parse_policy, resolve
from advisor.policy.schema import (
    MODE_RANK,
    AccountRules,
    Mode,
    PartitionRules,
    RewriteRules,
    TimeLimitRule,
    UserRules,
)

CLUSTER = ["a100", "v100", "t4", "cpu"]

LAYERED = parse_policy(
    """
mode = "advise"

[partitions.a100]
price_per_gpu_hour = 3.0
[partitions.cpu]
price_per_cpu_hour = 0.05
mode = "advise"
[partitions.t4]
mode = "off"

[accounts.vision]
mode = "rewrite"
partitions = ["a100", "v100", "t4", "cpu"]
[accounts.students]
partitions = ["v100", "t4", "cpu"]

[users.alice]
mode = "off"
[users.bob]
mode = "rewrite"
partitions = ["a100", "v100"]
""",
    "layered.toml",
)


def modes(user: str, account: str | None) -> dict[str, str]:
    return {name: terms.mode for name, terms in resolve(LAYERED, user, account, CLUSTER).partitions.items()}


def test_the_global_mode_applies_to_callers_the_policy_does_not_name() -> None:
    effective = resolve(LAYERED, "zoe", None, CLUSTER)
    assert effective.mode == "advise"
    assert modes("zoe", None) == {"a100": "advise", "v100": "advise", "cpu": "advise"}


def test_the_account_mode_overrides_the_global_one_and_partition_modes_cap_it() -> None:
    assert modes("zoe", "vision") == {"a100": "rewrite", "v100": "rewrite", "cpu": "advise"}


def test_the_user_mode_overrides_the_account_in_either_direction() -> None:
    alice = resolve(LAYERED, "alice", "vision", CLUSTER)
    assert alice.mode == "off"
    assert alice.partitions == {}
    assert modes("bob", "students") == {"v100": "rewrite"}


def test_a_partition_turned_off_is_offered_to_nobody() -> None:
    for user, account in [("zoe", None), ("zoe", "vision"), ("bob", "vision"), ("zoe", "students")]:
        effective = resolve(LAYERED, user, account, CLUSTER)
        assert "t4" not in effective.partitions


def test_user_and_account_lists_both_narrow_and_neither_widens() -> None:
    assert list(modes("zoe", "students")) == ["v100", "cpu"]
    assert list(modes("bob", None)) == ["a100", "v100"]
    assert list(modes("bob", "students")) == ["v100"]  # bob's a100 is not the students' to give


def test_account_names_match_as_slurm_stores_them() -> None:
    assert modes("zoe", "Students") == modes("zoe", "students")


def test_the_cluster_decides_which_partitions_exist_and_their_order() -> None:
    effective = resolve(LAYERED, "zoe", None, ["cpu", "v100", "h100"])
    assert list(effective.partitions) == ["cpu", "v100", "h100"]
    assert "a100" not in effective.partitions
    assert list(resolve(LAYERED, "zoe", "vision", ["h100", "v100"]).partitions) == ["v100"]


def test_prices_reach_the_caller_and_unpriced_partitions_are_free() -> None:
    effective = resolve(LAYERED, "zoe", "vision", CLUSTER)
    assert effective.partitions["a100"].cost(gpus=4, cpus=32, seconds=1800) == pytest.approx(6.0)
    assert effective.partitions["cpu"].cost(gpus=0, cpus=8, seconds=7200) == pytest.approx(0.8)
    assert effective.partitions["v100"].cost(gpus=4, cpus=16, seconds=3600) == 0.0


def test_site_wide_settings_pass_through_unchanged() -> None:
    policy = parse_policy('objective = "weighted"\ncost_weight = 0.3\n[tuning]\nmax_gpus = 2\n', "x")
    effective = resolve(policy, "zoe", None, CLUSTER)
    assert (effective.objective, effective.cost_weight) == ("weighted", 0.3)
    assert effective.tuning.max_gpus == 2
    assert effective.rewrite == policy.rewrite and effective.time_limit == policy.time_limit


def test_an_account_or_user_may_choose_its_own_objective_and_the_most_specific_wins() -> None:
    text = 'objective = "weighted"\ncost_weight = 0.3\n[accounts.lab]\nobjective = "cost"\n'
    policy = parse_policy(text + '[users.ann]\nobjective = "completion"\n', "x")
    assert (
        resolve(policy, "zoe", "lab", CLUSTER).objective,
        resolve(policy, "zoe", "lab", CLUSTER).cost_weight,
    ) == (
        "cost",
        None,
    )
    assert resolve(policy, "ann", "lab", CLUSTER).objective == "completion"
    assert (
        resolve(policy, "zoe", "other", CLUSTER).objective,
        resolve(policy, "zoe", None, CLUSTER).cost_weight,
    ) == (
        "weighted",
        0.3,
    )
    with pytest.raises(Exception, match="objective"):
        parse_policy('[accounts.lab]\nobjective = "weighted"\n', "x")


modes_st = st.sampled_from(list(MODE_RANK))
optional_modes = st.none() | modes_st
partition_lists = st.none() | st.lists(st.sampled_from(CLUSTER), unique=True)


@given(
    global_mode=modes_st,
    partition_modes=st.dictionaries(st.sampled_from(CLUSTER), optional_modes),
    account=st.builds(AccountRules, partitions=partition_lists, mode=optional_modes),
    user=st.builds(UserRules, partitions=partition_lists, mode=optional_modes),
)
def test_a_partition_the_policy_forbids_is_never_offered(
    global_mode: Mode,
    partition_modes: dict[str, Mode | None],
    account: AccountRules,
    user: UserRules,
) -> None:
    policy = Policy.model_validate(
        {
            "mode": global_mode,
            "partitions": {
                name: PartitionRules.model_validate({"mode": m}) for name, m in partition_modes.items()
            },
            "accounts": {"acct": account},
            "users": {"u": user},
        }
    )
    effective = resolve(policy, "u", "acct", CLUSTER)
    caller_mode = user.mode or account.mode or global_mode
    assert effective.mode == caller_mode
    for name, terms in effective.partitions.items():
        assert account.partitions is None or name in account.partitions
        assert user.partitions is None or name in user.partitions
        assert partition_modes.get(name) != "off"
        assert MODE_RANK[terms.mode] <= MODE_RANK[effective.mode]
        if (ceiling := partition_modes.get(name)) is not None:
            assert MODE_RANK[terms.mode] <= MODE_RANK[ceiling]


def test_a_rewrite_needs_both_the_relative_and_the_absolute_gain() -> None:
    rules = RewriteRules(min_gain_fraction=0.1, min_gain_minutes=10)
    hour = 3600.0
    assert rules.gain_is_enough(current_s=10 * hour, proposed_s=9 * hour)
    assert not rules.gain_is_enough(current_s=10 * hour, proposed_s=9.5 * hour)  # 30 min but only 5 %
    assert not rules.gain_is_enough(current_s=1199, proposed_s=600)  # 50 % but under 10 min
    assert rules.gain_is_enough(current_s=1200, proposed_s=600)  # the thresholds themselves are enough
    assert not rules.gain_is_enough(current_s=hour, proposed_s=2 * hour)


def test_only_fresh_confident_predictions_are_acted_upon() -> None:
    rules = RewriteRules(max_model_age_days=7, min_confidence="medium")
    assert rules.trusts("high", timedelta(days=1))
    assert rules.trusts("medium", timedelta(days=7))
    assert not rules.trusts("low", timedelta(days=1))
    assert not rules.trusts("high", timedelta(days=7, seconds=1))


def test_the_time_limit_is_p90_times_factor_plus_margin_in_whole_minutes() -> None:
    rule = TimeLimitRule(factor=1.5, margin_minutes=10, max_factor_of_request=2.0)
    assert rule.limit(timedelta(minutes=60), None) == timedelta(minutes=100)
    assert rule.limit(timedelta(minutes=60, seconds=1), None) == timedelta(minutes=101)
    assert rule.limit(timedelta(minutes=60), timedelta(minutes=50)) == timedelta(minutes=100)
    assert rule.limit(timedelta(minutes=60), timedelta(minutes=49)) is None  # over twice the request
    uncapped = TimeLimitRule(factor=1.5, margin_minutes=10, max_factor_of_request=None)
    assert uncapped.limit(timedelta(hours=10), timedelta(minutes=1)) == timedelta(minutes=910)
