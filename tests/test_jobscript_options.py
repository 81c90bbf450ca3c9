"""getopt_long as sbatch 22.05 uses it, and the SBATCH_* table; messages are glibc's, as sbatch shows."""

from __future__ import annotations

import pytest

from advisor.jobscript.errors import ScriptError
from advisor.jobscript.option_table import BY_NAME, BY_SHORT, OPTIONS, Arg
from advisor.jobscript.options import Option, options_from_environment, parse_options


def parsed(*argv: str) -> tuple[list[tuple[str, str | None]], list[str]]:
    options, rest = parse_options(argv, "command line")
    return [(option.name, option.value) for option in options], rest


def refusal(*argv: str) -> str:
    with pytest.raises(ScriptError) as caught:
        parse_options(argv, "command line")
    assert caught.value.where == "command line"
    return caught.value.reason


def test_the_table_has_every_sbatch_22_05_option_once() -> None:
    assert len(OPTIONS) == len(BY_NAME) == 106
    assert len(BY_SHORT) == 34
    assert {name for name, spec in BY_NAME.items() if spec.arg is Arg.OPTIONAL} == {
        "exclusive",
        "get-user-env",
        "nice",
        "no-kill",
        "propagate",
    }
    assert "tres-per-task" not in BY_NAME


def test_parsing_stops_at_the_script_and_leaves_its_arguments() -> None:
    assert parsed("-J", "x", "job.sh", "-J", "y") == ([("job-name", "x")], ["job.sh", "-J", "y"])


def test_double_dash_ends_the_options() -> None:
    assert parsed("-J", "x", "--", "-t", "5") == ([("job-name", "x")], ["-t", "5"])


def test_a_lone_dash_is_not_an_option() -> None:
    assert parsed("-", "x") == ([], ["-", "x"])


@pytest.mark.parametrize("argv", [("--time=5",), ("--time", "5"), ("-t5",), ("-t", "5")])
def test_values_attach_in_every_getopt_form(argv: tuple[str, ...]) -> None:
    assert parsed(*argv)[0] == [("time", "5")]


def test_unambiguous_abbreviations_are_accepted() -> None:
    assert parsed("--job-n=a", "--part", "t4", "--tasks-per=2")[0] == [
        ("job-name", "a"),
        ("partition", "t4"),
        ("ntasks-per-node", "2"),
    ]


def test_aliases_have_one_canonical_name() -> None:
    assert parsed("--cluster=c", "--clusters=d", "-Me")[0] == [
        ("clusters", "c"),
        ("clusters", "d"),
        ("clusters", "e"),
    ]


def test_short_flags_cluster_and_the_last_may_take_the_rest() -> None:
    assert parsed("-HvJname", "-Qpt4")[0] == [
        ("hold", None),
        ("verbose", None),
        ("job-name", "name"),
        ("quiet", None),
        ("partition", "t4"),
    ]


def test_a_short_option_takes_the_next_argument_even_if_it_looks_like_an_option() -> None:
    assert parsed("-J", "-t", "x")[0] == [("job-name", "-t")]


def test_optional_arguments_only_come_attached() -> None:
    assert parsed("--nice", "5") == ([("nice", None)], ["5"])
    assert parsed("--nice=5", "-kset", "-k")[0] == [("nice", "5"), ("no-kill", "set"), ("no-kill", None)]


def test_an_empty_attached_value_is_a_value() -> None:
    assert parsed("--job-name=")[0] == [("job-name", "")]


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (("--foo",), "unrecognized option '--foo'"),
        (("--foo=bar",), "unrecognized option '--foo=bar'"),
        (("--ti=5",), "option '--ti=5' is ambiguous; possibilities: '--time' '--time-min'"),
        (
            ("--clust",),
            "option '--clust' is ambiguous; possibilities: '--cluster-constraint' '--cluster' '--clusters'",
        ),
        (("--hold=3",), "option '--hold' doesn't allow an argument"),
        (("--ho=3",), "option '--hold' doesn't allow an argument"),
        (("--comment",), "option '--comment' requires an argument"),
        (("--comm",), "option '--comment' requires an argument"),
        (("-y",), "invalid option -- 'y'"),
        (("-Hy",), "invalid option -- 'y'"),
        (("-J",), "option requires an argument -- 'J'"),
    ],
)
def test_errors_use_getopts_words(argv: tuple[str, ...], reason: str) -> None:
    assert refusal(*argv) == reason


def test_errors_name_the_place_of_the_option() -> None:
    places = ["job.sh:2", "job.sh:3", "job.sh:3"]
    with pytest.raises(ScriptError) as caught:
        parse_options(["-t", "5", "--bogus"], places.__getitem__)
    assert caught.value.where == "job.sh:3"
    options, _ = parse_options(["-J", "x", "-t", "5"], ["a:1", "a:1", "a:2", "a:2"].__getitem__)
    assert [option.where for option in options] == ["a:1", "a:2"]


def test_environment_variables_map_to_options_in_sbatchs_order() -> None:
    environ = {
        "SBATCH_TIMELIMIT": "20",
        "SBATCH_PARTITION": "t4",
        "SBATCH_MEM_PER_NODE": "1G",
        "SBATCH_DEBUG": "whatever",
        "SBATCH_HINT": "b",
        "SLURM_HINT": "a",
        "SBATCH_UNKNOWN": "x",
        "HOME": "/root",
    }
    assert options_from_environment(environ) == [
        Option("verbose", None, "SBATCH_DEBUG"),
        Option("hint", "a", "SLURM_HINT"),
        Option("hint", "b", "SBATCH_HINT"),
        Option("mem", "1G", "SBATCH_MEM_PER_NODE"),
        Option("partition", "t4", "SBATCH_PARTITION"),
        Option("time", "20", "SBATCH_TIMELIMIT"),
    ]
