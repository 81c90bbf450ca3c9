"""Job arrays as wholes: the ``--array`` value read as sbatch reads it, the tasks a partition holds side by
side, and the whole array's cost and end, each counted by hand for a small case."""

from __future__ import annotations

import pytest

from advisor.recommend.arrays import (
    ArrayShape,
    ArraySpecError,
    array_figures,
    parse_array,
    side_by_side,
)
from advisor.slurm.models import Gpus, Node


@pytest.mark.parametrize(
    ("text", "tasks", "throttle"),
    [
        ("0-99%10", 100, 10),
        ("1,3,5-7", 5, None),
        ("0-15:4", 4, None),  # 0, 4, 8, 12
        ("0-9,5", 10, None),  # an index named twice is one task
        ("7", 1, None),
        (" 0-3%1 ", 4, 1),
    ],
)
def test_an_array_value_is_read_as_its_tasks_and_throttle(
    text: str, tasks: int, throttle: int | None
) -> None:
    assert parse_array(text) == ArrayShape(tasks=tasks, throttle=throttle)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("a-b", "'a-b' is not an index"),
        ("5-1", "'5-1' runs backwards"),
        ("0-9%0", "throttle after %"),
        ("0-9%x", "throttle after %"),
        ("0-9999999", "more than 4000001 tasks"),
    ],
)
def test_an_array_value_sbatch_refuses_says_why(text: str, says: str) -> None:
    with pytest.raises(ArraySpecError, match=f"--array={text}: .*{says}"):
        parse_array(text)


def node(name: str, gpus: int, cpus: int = 32, state: str = "IDLE") -> Node:
    return Node(
        name=name,
        state=state,
        flags=[],
        partitions=["p"],
        cpus=cpus,
        alloc_cpus=0,
        memory_mb=1000,
        alloc_memory_mb=0,
        gpus=Gpus(type="a100", count=gpus) if gpus else None,
        gpus_used=0,
    )


def test_a_partition_holds_as_many_tasks_as_its_serving_nodes_fit() -> None:
    nodes = [node("a-1", 4), node("a-2", 4), node("a-3", 4, state="DOWN")]
    assert side_by_side(nodes, gpus=1, task_nodes=1, cpus=8) == 8, "4 GPUs and 32/8 CPUs on each of 2"
    assert side_by_side(nodes, gpus=2, task_nodes=1, cpus=1) == 4
    assert side_by_side(nodes, gpus=1, task_nodes=1, cpus=16) == 4, "the CPUs run out first"
    assert side_by_side(nodes, gpus=4, task_nodes=2, cpus=1) == 1, "two nodes a task"
    assert side_by_side([node("c-1", 0, cpus=8)], gpus=0, task_nodes=1, cpus=2) == 4


def test_the_whole_array_costs_every_task_and_ends_after_its_waves() -> None:
    shape = parse_array("0-99%10")
    held = array_figures(shape, run_s=3600, wait_s=300, task_cost=2.0, fits=8)
    assert (held.at_once, held.waves) == (8, 13), "the partition holds 8: ceil(100 / 8) waves"
    assert held.last_end_s == 300 + 13 * 3600
    assert held.cost == 200.0
    throttled = array_figures(shape, run_s=3600, wait_s=300, task_cost=None, fits=40)
    assert (throttled.at_once, throttled.waves, throttled.last_end_s) == (10, 10, 300 + 10 * 3600)
    assert throttled.cost is None
    few = array_figures(parse_array("0-2"), run_s=60, wait_s=0, task_cost=1.0, fits=40)
    assert (few.at_once, few.waves, few.last_end_s) == (3, 1, 60)


def test_the_array_line_says_what_each_figure_is() -> None:
    figures = array_figures(parse_array("0-99%10"), run_s=3600, wait_s=300, task_cost=2.0, fits=40)
    line = figures.describe(lambda s: f"{s / 3600:.1f} h", lambda cost: f"{cost:.2f} EUR")
    assert line == (
        "all 100 array tasks, at most 10 at once (%10): cost 200.00 EUR, the last ends in about 10.1 h "
        "(10 waves of 10 side by side)"
    )
