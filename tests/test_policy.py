"""Admin policy files: the shipped examples load, every problem names its line, the last good policy
survives a broken edit, and `advisor policy check` reports both."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest
from rich.console import Console

from advisor.policy import Policy, PolicyError, PolicyHolder, load_policy, parse_policy, resolve
from advisor.policy import cli as policy_cli
from advisor.sandbox.spec import load_spec
from advisor.settings import load_settings
from advisor.settings.validated import Settings

from .conftest import REPO, SANDBOX_CONFIG

POLICIES = REPO / "policies"
SANDBOX_PARTITIONS = [partition.name for partition in load_spec(SANDBOX_CONFIG).partition]


@pytest.mark.parametrize("path", sorted(POLICIES.glob("*.toml")), ids=lambda path: path.name)
def test_every_shipped_policy_loads(path: Path) -> None:
    assert isinstance(load_policy(path), Policy)


def test_the_default_file_is_the_built_in_policy() -> None:
    assert load_policy(POLICIES / "default.toml") == Policy()


def test_the_sandbox_policy_keeps_students_off_the_a100s_and_leaves_the_guest_alone() -> None:
    policy = load_policy(POLICIES / "sandbox.toml")
    assert set(policy.partitions) == set(SANDBOX_PARTITIONS)  # every sandbox partition has a price
    students = resolve(policy, "bob", "students", SANDBOX_PARTITIONS)
    assert list(students.partitions) == ["v100", "t4", "cpu"]
    assert (students.partitions["t4"].mode, students.partitions["cpu"].mode) == ("rewrite", "advise")
    assert resolve(policy, "guest", "students", SANDBOX_PARTITIONS).partitions == {}
    assert resolve(policy, "carol", "vision", SANDBOX_PARTITIONS).partitions["a100"].mode == "advise"


def problems(text: str) -> list[tuple[int | None, str, str]]:
    with pytest.raises(PolicyError) as caught:
        parse_policy(text, "site.toml")
    return [(problem.line, problem.key, problem.message) for problem in caught.value.problems]


def only_problem(text: str) -> tuple[int | None, str, str]:
    (problem,) = problems(text)
    return problem


@pytest.mark.parametrize(
    ("text", "line", "key", "says"),
    [
        pytest.param(
            'mode = "advise"\n\n[rewrite\nmin_gain_minutes = 5\n', 3, "", "Expected ']'", id="syntax"
        ),
        pytest.param('mode = "advise"\nmode = "off"\n', 2, "", "Cannot overwrite", id="duplicate key"),
        pytest.param("[tuning]\nbatch = [\n", 2, "", "at the end of the file", id="unterminated"),
        pytest.param(
            'mode = "advise"\nmodes = "off"\n', 2, "modes", "unknown key; did you mean 'mode'?", id="unknown"
        ),
        pytest.param(
            "[rewrite]\n# how much\nmin_gain_minute = 5\n",
            3,
            "rewrite.min_gain_minute",
            "did you mean 'min_gain_minutes'",
            id="unknown in a table",
        ),
        pytest.param(
            "[tuning]\nfactor = 2\n", 2, "tuning.factor", "this table takes: batch, amp", id="misplaced key"
        ),
        pytest.param(
            '\n[rewrite]\nmin_gain_minutes = "10"\n',
            3,
            "rewrite.min_gain_minutes",
            "valid number, not '10'",
            id="wrong type",
        ),
        pytest.param("[tuning]\namp = 1\n", 2, "tuning.amp", "valid boolean, not 1", id="no coercion"),
        pytest.param(
            'objective = "cost"\n\nmode = "rewite"\n',
            3,
            "mode",
            "'off', 'advise' or 'rewrite', not 'rewite'",
            id="enum",
        ),
        pytest.param(
            "[time_limit]\nfactor = 0.5\n", 2, "time_limit.factor", "greater than or equal to 1", id="range"
        ),
        pytest.param(
            'mode = "advise"\npartitions.a100.price_per_gpu_hour = -1\n',
            2,
            "partitions.a100.price_per_gpu_hour",
            "greater than or equal to 0",
            id="dotted key",
        ),
        pytest.param(
            '[accounts."Vision"]\nmode = "off"\n',
            1,
            "accounts.Vision",
            "not an account name",
            id="quoted table name",
        ),
        pytest.param(
            'mode = "advise"\nusers = { alice = { mode = "offf" } }\n',
            2,
            "users.alice.mode",
            "not 'offf'",
            id="inline table",
        ),
        pytest.param(
            '[accounts.vision]\npartitions = [\n  "a100",\n  "v 100",\n]\n',
            2,
            "accounts.vision.partitions.1",
            "'v 100' is not a partition name",
            id="array element",
        ),
        pytest.param(
            'mode = "advise"\n\n[partitions.t4]\nprice_per_gpu_hour = 0.5\nprice = 1\n',
            5,
            "partitions.t4.price",
            "unknown key",
            id="unknown in a named table",
        ),
    ],
)
def test_each_kind_of_problem_names_the_line_of_its_key(text: str, line: int, key: str, says: str) -> None:
    found_line, found_key, message = only_problem(text)
    assert (found_line, found_key) == (line, key)
    assert says in message


def test_lines_inside_a_multi_line_string_are_not_mistaken_for_keys() -> None:
    text = "[users.alice]\nmode = '''\nzz = 0\n'''\nzz = 1\n"
    assert [(line, key) for line, key, _ in problems(text)] == [
        (2, "users.alice.mode"),
        (5, "users.alice.zz"),
    ]


def test_a_syntax_error_also_names_its_column() -> None:
    with pytest.raises(PolicyError) as caught:
        parse_policy('mode = "advise"\nobjective = cost\n', "site.toml")
    (problem,) = caught.value.problems
    assert (problem.line, problem.column) == (2, 13)
    assert str(caught.value) == "site.toml:2:13: Invalid value"


def test_a_weighted_objective_and_its_cost_weight_go_together() -> None:
    assert only_problem('\nobjective = "weighted"\n') == (
        2,
        "objective",
        '"weighted" needs cost_weight (0 = completion only, 1 = cost only)',
    )
    assert only_problem("mode = 'advise'\ncost_weight = 0.5\n") == (
        2,
        "cost_weight",
        'cost_weight applies only to objective = "weighted", not "completion"',
    )
    assert parse_policy('objective = "weighted"\ncost_weight = 0.25\n', "x").cost_weight == 0.25


def test_every_problem_is_reported_in_line_order() -> None:
    text = '[tuning]\nbatch = "sometimes"\n\n[rewrite]\nmin_confidence = "certain"\n\n[users.x]\nmode = 1\n'
    with pytest.raises(PolicyError) as caught:
        parse_policy(text, "site.toml")
    assert str(caught.value).splitlines() == [
        "site.toml:2: tuning.batch: Input should be 'never', 'keep-global-batch' or 'within-declared-range', "
        "not 'sometimes'",
        "site.toml:5: rewrite.min_confidence: Input should be 'high', 'medium' or 'low', not 'certain'",
        "site.toml:8: users.x.mode: Input should be 'off', 'advise' or 'rewrite', not 1",
    ]


def test_an_unreadable_or_undecodable_file_is_a_policy_error(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match=r"absent\.toml: cannot read: No such file"):
        load_policy(tmp_path / "absent.toml")
    latin = tmp_path / "latin.toml"
    latin.write_bytes(b'mode = "advise"\n# caf\xe9\n')
    with pytest.raises(PolicyError, match=r"latin\.toml:2: not UTF-8 text"):
        load_policy(latin)


def test_without_a_file_the_service_runs_on_the_built_in_policy(tmp_path: Path) -> None:
    holder = PolicyHolder(tmp_path / "policy.toml")
    assert holder.current == Policy()
    assert holder.current.mode == "advise"
    assert holder.last_error is None


def test_a_malformed_policy_is_rejected_with_its_line_while_the_previous_one_keeps_working(
    tmp_path: Path,
) -> None:
    path = tmp_path / "policy.toml"
    path.write_text('mode = "rewrite"\n\n[accounts.students]\npartitions = ["t4"]\n')
    holder = PolicyHolder(path)
    good = holder.current
    assert good.mode == "rewrite" and holder.last_error is None

    path.write_text('mode = "rewrite"\n\n[accounts.students]\npartitions = "t4"\n')
    error = holder.reload()
    assert error is not None and holder.last_error is error
    assert str(error) == f"{path}:4: accounts.students.partitions: Input should be a valid list, not 't4'"
    assert holder.current is good
    assert list(resolve(holder.current, "bob", "students", SANDBOX_PARTITIONS).partitions) == ["t4"]

    path.write_text('mode = "rewrite"\n\n[accounts.students]\npartitions = ["t4", "v100"]\n')
    assert holder.reload() is None
    assert holder.last_error is None
    assert list(resolve(holder.current, "bob", "students", SANDBOX_PARTITIONS).partitions) == ["v100", "t4"]


def test_a_broken_file_at_start_leaves_the_built_in_policy_and_reports_why(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text('mode = "rewrite"\nobjective = "fastest"\n')
    holder = PolicyHolder(path)
    assert holder.current == Policy()
    assert holder.last_error is not None and holder.last_error.problems[0].line == 2


def test_a_file_that_disappears_keeps_the_last_good_policy(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text('mode = "off"\n')
    holder = PolicyHolder(path)
    path.unlink()
    assert holder.reload() is not None
    assert holder.current.mode == "off"


def run_check(*words: str, settings: Settings | None = None) -> int:
    """Without ``settings``, Slurm is not asked (`test_policy_partitions` asks it)."""
    parser = argparse.ArgumentParser(prog="advisor")
    policy_cli.add_commands(parser.add_subparsers(required=True), settings or load_settings(os.environ))
    options = [] if settings else ["--no-slurm"]
    args = parser.parse_args(["policy", "check", *words, *options])
    return int(args.handler(args, Console(width=200)))


def test_check_summarises_a_valid_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_check(str(POLICIES / "sandbox.toml")) == 0
    out = capsys.readouterr().out
    assert "sandbox.toml: valid" in out
    assert "mode rewrite, objective completion" in out
    assert "students" in out and "v100, t4, cpu" in out


def test_check_reports_each_problem_with_its_line_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('mode = "advise"\n[tuning]\nbatch = "always"\n')
    assert run_check(str(path)) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"{path}:3: tuning.batch: Input should be")


def test_check_json_gives_the_policy_or_its_problems(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_check(str(POLICIES / "cost.toml"), "--json") == 0
    valid = json.loads(capsys.readouterr().out)
    assert valid["valid"] is True
    assert valid["policy"]["cost_weight"] == 0.3
    assert valid["policy"]["partitions"]["cpu"]["mode"] == "off"

    path = tmp_path / "bad.toml"
    path.write_text('[rewrite]\nmin_confidence = "sure"\n')
    assert run_check(str(path), "--json") == 2
    invalid = json.loads(capsys.readouterr().out)
    assert invalid["valid"] is False
    assert invalid["problems"][0]["line"] == 2
    assert invalid["problems"][0]["key"] == "rewrite.min_confidence"


@pytest.mark.parametrize(
    ("text", "line", "says"),
    [
        ('mode = "advise"\nx = ' + "[" * 5000 + "]" * 5000 + "\n", 2, "nested more than 100 deep"),
        ('mode = "advise"\ny = ' + "{a = " * 3000 + "1" + "}" * 3000 + "\n", 2, "nested more than 100 deep"),
        ('mode = "advise"\n\nz = ' + "9" * 5000 + "\n", 3, "a number too long to read"),
    ],
)
def test_a_hostile_file_is_a_policy_error_with_its_line_never_a_crash(
    tmp_path: Path, text: str, line: int, says: str
) -> None:
    path = tmp_path / "policy.toml"
    path.write_text('mode = "rewrite"\n', encoding="utf-8")
    holder = PolicyHolder(path)
    path.write_text(text, encoding="utf-8")
    error = holder.reload()
    assert error is not None and error.problems[0].line == line and says in str(error)
    assert holder.current.mode == "rewrite" and holder.source == str(path), "the last good one stays"
    assert run_check(str(path)) == 2


def test_a_byte_order_mark_is_read_as_utf_8(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_bytes(b'\xef\xbb\xbfmode = "rewrite"\n')
    assert load_policy(path).mode == "rewrite"
    assert parse_policy('\ufeffmode = "off"\n', "<stdin>").mode == "off"


def test_the_holder_says_which_policy_is_in_force(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text("mode = 'sometimes'\n", encoding="utf-8")
    broken = PolicyHolder(path)
    assert broken.source is None and broken.last_error is not None, "the built-in default, not a file"
    path.write_text("mode = 'off'\n", encoding="utf-8")
    assert broken.reload() is None and broken.source == str(path)
