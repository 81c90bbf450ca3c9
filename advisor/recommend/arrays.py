"""A job array (``sbatch --array=0-99%10``) as a whole: each task is one job as the estimator predicts it,
and the array costs all its tasks and ends when its last task does. Pure.

The tasks run in waves: at most ``%N`` at once (the throttle), and no more than the partition holds side by
side. The whole array's end is the first task's wait plus one run per wave: it assumes the partition keeps
room for the array once its first task starts, so a busy queue makes it later, never earlier.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable

from pydantic import Field

from advisor.frozen import Frozen
from advisor.slurm.models import Node

MAX_TASKS = 4_000_001
"""Slurm's own ceiling on MaxArraySize: a spec with more indexes is not an array sbatch takes."""
_COUNTED = 100_000
_RANGE = re.compile(r"^(\d+)(?:-(\d+)(?::(\d+))?)?$")


class ArraySpecError(ValueError):
    """An ``--array`` value sbatch would refuse; the message quotes it."""


class ArrayShape(Frozen):
    """What an ``--array`` value asks for: how many tasks, and how many may run at once."""

    tasks: int = Field(ge=1)
    throttle: int | None = Field(default=None, ge=1)
    """``%N``: at most N tasks running at once; None: no limit of the user's."""


class ArrayFigures(Frozen):
    """One candidate's figures for the whole array, beside its per-task run, wait and cost."""

    tasks: int = Field(ge=1)
    throttle: int | None
    at_once: int = Field(ge=1)
    """Tasks running side by side: the throttle, the tasks, and what the partition holds of them."""
    waves: int = Field(ge=1)
    cost: float | None
    """All tasks' cost; None where the policy names no price."""
    last_end_s: float = Field(ge=0)
    """From now until the last task ends: the first task's wait, then one run per wave."""

    def describe(self, duration: Callable[[float], str], money: Callable[[float], str]) -> str:
        """One line for people: the caller formats durations and costs (with the policy's unit)."""
        limit = f", at most {self.throttle} at once (%{self.throttle})" if self.throttle else ""
        cost = "" if self.cost is None else f"cost {money(self.cost)}, "
        waves = "1 wave" if self.waves == 1 else f"{self.waves} waves"
        return (
            f"all {self.tasks} array tasks{limit}: {cost}the last ends in about {duration(self.last_end_s)} "
            f"({waves} of {self.at_once} side by side)"
        )


def parse_array(text: str) -> ArrayShape:
    """``0-99%10``, ``1,3,5-7``, ``0-15:4``: indexes (ranges with an optional step), then ``%N``."""
    indexes, _, throttle = text.strip().partition("%")
    if throttle and (not throttle.isdigit() or int(throttle) < 1):
        raise ArraySpecError(f"--array={text}: the throttle after % is not a whole number of tasks")
    ranges = [_range(part, text) for part in indexes.split(",")]
    listed = sum(len(span) for span in ranges)
    if listed > MAX_TASKS:
        raise ArraySpecError(f"--array={text}: more than {MAX_TASKS} tasks")
    # An index named twice is one task; past _COUNTED the indexes are not listed out to find one.
    tasks = len(set[int]().union(*ranges)) if len(ranges) > 1 and listed <= _COUNTED else listed
    return ArrayShape(tasks=tasks, throttle=int(throttle) if throttle else None)


def _range(part: str, text: str) -> range:
    match = _RANGE.match(part.strip())
    if match is None:
        raise ArraySpecError(f"--array={text}: {part!r} is not an index, a range A-B or a range A-B:STEP")
    first = int(match[1])
    last = int(match[2]) if match[2] is not None else first
    step = int(match[3]) if match[3] is not None else 1
    if last < first or step < 1:
        raise ArraySpecError(f"--array={text}: {part!r} runs backwards or has no step")
    return range(first, last + 1, step)


def side_by_side(nodes: Iterable[Node], gpus: int, task_nodes: int, cpus: int) -> int:
    """How many tasks of ``gpus`` GPUs and ``cpus`` CPUs on each of ``task_nodes`` nodes the partition's
    serving nodes hold at once, empty (at least one: a task that fits nowhere is the estimator's concern)."""
    per_node = [
        min(node.cpus // max(cpus, 1), (node.gpus.count if node.gpus else 0) // gpus if gpus else node.cpus)
        for node in nodes
        if node.serves_jobs
    ]
    if task_nodes > 1:
        return max(sum(1 for held in per_node if held >= 1) // task_nodes, 1)
    return max(sum(per_node), 1)


def array_figures(
    shape: ArrayShape, run_s: float, wait_s: float, task_cost: float | None, fits: int
) -> ArrayFigures:
    """``fits``: tasks the partition holds side by side (`side_by_side`)."""
    at_once = min(shape.tasks, shape.throttle or shape.tasks, fits)
    waves = math.ceil(shape.tasks / at_once)
    return ArrayFigures(
        tasks=shape.tasks,
        throttle=shape.throttle,
        at_once=at_once,
        waves=waves,
        cost=None if task_cost is None else task_cost * shape.tasks,
        last_end_s=wait_s + waves * run_s,
    )
