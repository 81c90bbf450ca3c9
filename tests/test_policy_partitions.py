"""`advisor policy check` compares the policy's partition names with Slurm's: a name the cluster lacks is
valid TOML and a valid name, and still leaves a partition unpriced or a lab with nowhere to go."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.policy import parse_policy
from advisor.policy.partitions import partition_warnings
from advisor.sandbox.cluster import Sandbox
from advisor.settings import load_settings

from .test_policy import POLICIES, SANDBOX_PARTITIONS, run_check

MISSPELT = """\
mode = "advise"
objective = "cost"

[partitions.A100]
price_per_gpu_hour = 3.0

[partitions.v100]
price_per_gpu_hour = 1.5

[accounts.students]
partitions = [
  "t4",
  "v10",
]
"""


def warnings_of(text: str, cluster: list[str]) -> list[str]:
    return [
        problem.describe("site.toml")
        for problem in partition_warnings(parse_policy(text, "x"), text, cluster)
    ]


def test_names_the_cluster_lacks_are_warned_at_their_line_with_the_likely_name() -> None:
    assert warnings_of(MISSPELT, ["a100", "v100", "t4"]) == [
        "site.toml:4: partitions.A100: 'A100' is not a partition of the cluster; did you mean 'a100'?",
        "site.toml:11: accounts.students.partitions.1: 'v10' is not a partition of the cluster; "
        "did you mean 'v100'?",
        "site.toml:4: partitions: the cluster's partition 'a100' has no price: its jobs cost nothing "
        "(add [partitions.a100], with price 0 if it is free)",
        "site.toml:4: partitions: the cluster's partition 't4' has no price: its jobs cost nothing "
        "(add [partitions.t4], with price 0 if it is free)",
    ]


def test_a_policy_without_prices_is_not_asked_to_price_and_a_far_name_lists_the_cluster() -> None:
    text = '[users.alice]\npartitions = ["big"]\n'
    assert warnings_of(text, ["a100", "cpu"]) == [
        "site.toml:2: users.alice.partitions.0: 'big' is not a partition of the cluster (it has a100, cpu)"
    ]


@pytest.mark.parametrize("path", sorted(POLICIES.glob("*.toml")), ids=lambda path: path.name)
def test_the_shipped_policies_fit_the_sandbox(path: Path) -> None:
    assert warnings_of(path.read_text(encoding="utf-8"), SANDBOX_PARTITIONS) == []


def test_without_slurm_the_check_says_it_could_not_compare(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "slurm.conf").write_text("")  # refused at once, where a missing one is retried for a minute
    settings = load_settings({"HOME": str(tmp_path), "SLURM_CONF": str(tmp_path / "slurm.conf")})
    path = tmp_path / "policy.toml"
    path.write_text(MISSPELT)
    assert run_check(str(path), settings=settings) == 0
    (note,) = capsys.readouterr().err.splitlines()
    assert note.startswith("note: partition names not checked against Slurm: scontrol show -o partition: ")
    assert run_check(str(path), "--json", settings=settings) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["slurm_partitions"] is None and document["warnings"] == []
    assert document["not_checked_because"].startswith("scontrol show -o partition")


@pytest.mark.slurm
def test_check_warns_on_the_partitions_the_sandbox_lacks(
    sandbox: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = load_settings({"HOME": str(tmp_path), **sandbox.client_env()})
    path = tmp_path / "policy.toml"
    path.write_text(MISSPELT)
    assert run_check(str(path), settings=settings) == 0
    assert [line for line in capsys.readouterr().err.splitlines() if "is not a partition" in line] == [
        f"warning: {path}:4: partitions.A100: 'A100' is not a partition of the cluster; did you mean 'a100'?",
        f"warning: {path}:11: accounts.students.partitions.1: 'v10' is not a partition of the cluster; "
        "did you mean 'v100'?",
    ]
    assert run_check(str(POLICIES / "sandbox.toml"), "--json", settings=settings) == 0
    document = json.loads(capsys.readouterr().out)
    assert (document["slurm_partitions"], document["warnings"]) == (SANDBOX_PARTITIONS, [])
