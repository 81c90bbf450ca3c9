"""Job arrays as wholes: the ``--array`` value read as sbatch reads it, the tasks a partition holds side by
side, and the whole array's cost and end, each counted by hand for a small case."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from advisor.comm.sync import Spread
from advisor.jobscript.advisor_lines import JobDescription
from advisor.jobscript.request import build_request
from advisor.policy.resolve import resolve
from advisor.policy.schema import PartitionRules, Policy
from advisor.predict.types import Prediction
from advisor.recommend.arrays import (
    ArrayShape,
    ArraySpecError,
    array_figures,
    parse_array,
    side_by_side,
)
from advisor.recommend.ask import Ask, Caller
from advisor.recommend.candidates import Offer, baseline
from advisor.recommend.choose import Estimate
from advisor.recommend.estimator import Context, Estimator, Sync
from advisor.slurm.models import Gpus, Node, Partition
from advisor.wait.accuracy import WaitEstimate


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


class FixedSteps:
    """A tenth of a second a step on every partition: the figures below follow from it by hand."""

    def step(
        self, partition: str, gpus: int, nodes: int, micro_batch: int, amp: bool, channels_last: bool
    ) -> Prediction:
        return Prediction(
            partition=partition,
            machine="m-a100",
            model_version=1,
            batch_size=micro_batch,
            amp=amp,
            channels_last=channels_last,
            step_s=0.1,
            step_p90_s=0.1,
            peak_memory_bytes=1,
            memory_bytes=None,
            fits=True,
            largest_batch=1024,
            confidence="high",
        )

    def sync(self, partition: str, spread: Spread, micro_step_s: float) -> Sync:
        return Sync(added_s=0.0, measured=True)

    def trained_at(self, machine: str, version: int) -> datetime | None:
        return None


A100 = Partition(
    name="a100",
    state="UP",
    is_default=True,
    node_names=["a100-1", "a100-2"],
    total_cpus=64,
    max_time=timedelta(days=2),
    default_time=None,
    gpu_type="a100",
    gpus_per_node=4,
    cpus_per_node=32,
    memory_per_node_mb=256_000,
    nodes=[node("a100-1", 4), node("a100-2", 4)],
)


def estimated(array: str | None) -> Estimate:
    """The job as submitted, one A100 and 8 CPUs a task, 1000 steps, priced 3 a GPU-hour, waiting 10 min."""
    lines = ["#!/bin/sh", "#SBATCH -p a100 --gres=gpu:1 --cpus-per-task=8 -t 2:00:00"]
    lines += [f"#SBATCH --array={array}"] if array else []
    request = build_request("\n".join([*lines, "python train.py"]) + "\n", [], {}, "job.sh")
    description = JobDescription(model="resnet18", global_batch=64, steps=1000)
    policy = Policy(partitions={"a100": PartitionRules(price_per_gpu_hour=3.0)})
    context = Context(
        policy,
        [A100],
        lambda queries: (
            [WaitEstimate(slurm_wait_s=600.0, advisor_wait_s=None, preferred="slurm")] * len(queries)
        ),
    )
    now = datetime(2026, 12, 4, tzinfo=UTC)
    ask = Ask(request=request, description=description, caller=Caller("alice"), now=now)
    effective = resolve(policy, "alice", None, ["a100"])
    estimator = Estimator(context, effective, ask, description, FixedSteps())
    (estimate,) = estimator.estimate([baseline(description, offer(A100), 1)])
    return estimate


def offer(partition: Partition) -> Offer:
    return Offer(
        name=partition.name,
        gpu_type=partition.gpu_type,
        gpus_per_node=4,
        max_time=partition.max_time,
        nodes=2,
    )


def test_each_candidate_of_an_array_carries_the_whole_arrays_cost_and_end() -> None:
    single = estimated(None)
    assert single.array is None
    task = estimated("0-99%10")
    assert (task.run_s, task.cost, task.wait_s) == (single.run_s, single.cost, 600.0), "a task is the job"
    assert task.array is not None and task.cost is not None
    assert (task.array.tasks, task.array.throttle, task.array.at_once, task.array.waves) == (100, 10, 8, 13)
    assert task.array.last_end_s == pytest.approx(600 + 13 * task.run_s), "two nodes of 4 A100s: 8 at once"
    assert task.array.cost == pytest.approx(100 * task.cost)
    assert task.cost == pytest.approx(3.0 * task.run_s / 3600)
    assert estimated("0-9999999") == single, "an array sbatch refuses: no figures, sbatch says why"
