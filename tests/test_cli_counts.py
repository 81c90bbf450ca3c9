"""Counts of GPUs, nodes, ranks and micro-batches start at 1: a 0 is refused as it is read, by the option's
name, by every command that takes one (not later, as GPUs that do not lie evenly on the nodes)."""

from __future__ import annotations

import pytest

from advisor.cli import main as cli

PREDICT = ["predict", "--model", "resnet18", "--batch-size", "8", "--partition", "a100"]


@pytest.mark.parametrize(
    ("words", "said"),
    [
        ([*PREDICT, "--gpus", "0"], "advisor predict: error: argument --gpus: counts from 1, not 0"),
        ([*PREDICT, "--nodes", "0"], "advisor predict: error: argument --nodes: counts from 1, not 0"),
        ([*PREDICT, "--gpus", "-4"], "advisor predict: error: argument --gpus: counts from 1, not -4"),
        (
            [*PREDICT, "--batch-size", "0"],
            "advisor predict: error: argument --batch-size: counts from 1, not 0",
        ),
        (
            [*PREDICT, "--gpus", "two"],
            "advisor predict: error: argument --gpus: expected a whole number such as 2, not 'two'",
        ),
        (
            ["comm", "measure", "--nodes", "0"],
            "advisor comm measure: error: argument --nodes: counts from 1, not 0",
        ),
        (
            ["comm", "measure", "--tasks-per-node", "0"],
            "advisor comm measure: error: argument --tasks-per-node: counts from 1, not 0",
        ),
    ],
)
def test_a_count_below_one_is_refused_by_its_option(
    words: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as refused:
        cli(words)
    assert refused.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == said


def test_gpus_that_do_not_lie_evenly_on_the_nodes_are_still_told_so(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each count alone is fine, together they are not: said before any model is built or database read."""
    assert cli([*PREDICT, "--gpus", "6", "--nodes", "4"]) == 2
    assert capsys.readouterr().out.strip() == "advisor: error: --gpus 6 do not lie evenly on --nodes 4"
    assert cli([*PREDICT, "--hybrid-shard"]) == 2
    assert capsys.readouterr().out.strip() == "advisor: error: --hybrid-shard goes with --zero 2 or 3"
