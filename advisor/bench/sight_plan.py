"""What a first sight measures, in order, so that it spends its whole budget on the batches that matter.

A job is predicted at the micro-batches its candidates use (its global batch split over a node's devices
or accumulation steps), not at the grid's: so a first sight measures the architecture's whole steps
across that range (its ends first, then the batches between them), then each distinct layer at those
batches (and at the grid's layer batches inside the range, where a kernel switches), then the whole steps
again, pass after pass, each pass in a seeded order of its own (as the nightly grid's second step pass):
every pass builds each step afresh, and in another order each batch's instance follows other steps and
meets the CPU's slow minutes at another place. The passes run in `PROCESSES` fresh processes, a share of
the budget each (the first pass and the layers in the first): instances built in one process share its
offset (two fresh processes timed one step up to 40% apart on this CPU), so one process's is one of
several, and training takes each run's level apart. The passes outnumber what the assumed device speeds say
the budget holds: those speeds are rough (on a shared CPU they overstate a small step many times), and
the run, which stops at its real budget, is what cuts the plan; each pass is one more sample of a step
whose time on a shared CPU drifts between runs. Pure: no torch, no clock.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import replace
from enum import StrEnum
from math import sqrt
from random import Random

from pydantic import BaseModel, ConfigDict, Field

from advisor.bench.night import NightItem, Priority, Tonight, architecture_layers, whole_steps
from advisor.bench.plan import DeviceProfile, Grid, PlanItem
from advisor.introspect import LayerTable

SPLIT = 8
"""The most ways a candidate splits one global batch (a node's eight GPUs, or accumulation steps): the
smallest micro-batch first sight measures is the smallest global batch over this."""
DEFAULT_RANGE = (1, 64)
"""Micro-batches measured where no job says which: the grid's coarse batches a device holds."""
OVERPLAN = 30.0
"""Passes are planned until each process's estimates reach this many times its share of the budget; the
run stops at its budget. On this shared CPU the assumed speeds overstate a first sight's items about 15
times: at 10, a dilated CNN's plan ran out after 120 s of its 180 (benchmarks/README.md)."""
_MOST_PASSES = 50
PROCESSES = 3
"""Fresh processes a first sight's passes run in, each a share of the budget (`run_plan`)."""
LEAST_SHARE_S = 30.0
"""A budget shorter than `PROCESSES` times this runs in one process: starting one (imports, the pace step,
the model's first build) took 3-5 s on this CPU."""


class SightPart(StrEnum):
    STEPS = "whole steps"
    LAYERS = "layers"
    AGAIN = "whole steps again"


class SightItem(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    part: SightPart
    item: PlanItem
    process: int = Field(default=1, ge=1)
    """The fresh process it is measured in, from 1."""


class SightRow(BaseModel):
    """One part of a first sight, as ``advisor bench plan --architecture`` shows it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    process: int
    part: SightPart
    items: int
    batches: tuple[int, ...]
    estimate_s: float


class SightPlan(BaseModel):
    """One architecture's first sight: its measurements in order, and the budget that cuts them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    reference: str
    budget_s: float = Field(gt=0)
    items: tuple[SightItem, ...]
    steps: int
    warmup: int
    repeats: int

    @property
    def estimate_s(self) -> float:
        return sum(entry.item.estimate_s for entry in self.items)

    def night(self) -> Tonight:
        """The plan as a benchmark job runs it (`advisor.bench.job --plan`)."""
        entries = tuple(
            NightItem(priority=Priority.SUBMITTED, subject=self.reference, item=entry.item)
            for entry in self.items
        )
        return Tonight(
            machine=None,
            budget_s=self.budget_s,
            entries=entries,
            grid_items=0,
            covered=0,
            steps=self.steps,
            warmup=self.warmup,
            repeats=self.repeats,
            learn_estimates=True,
            processes=self.processes,
        )

    @property
    def processes(self) -> tuple[int, ...]:
        """Where each process after the first begins, by item index."""
        pairs = zip(self.items, self.items[1:], strict=False)
        return tuple(index for index, (a, b) in enumerate(pairs, start=1) if a.process != b.process)

    def rows(self) -> list[SightRow]:
        """Each process's parts in the order they are measured, with their batches in that order (the
        passes again: in their first pass's order, each later pass in its own)."""
        parts: dict[tuple[int, SightPart], list[PlanItem]] = {}
        for entry in self.items:
            parts.setdefault((entry.process, entry.part), []).append(entry.item)
        return [
            SightRow(
                process=process,
                part=part,
                items=len(items),
                batches=tuple(dict.fromkeys(item.config.batch for item in items)),
                estimate_s=sum(item.estimate_s for item in items),
            )
            for (process, part), items in parts.items()
        ]


def candidate_range(global_batches: Sequence[int], grid: Grid) -> tuple[int, int]:
    """The micro-batches a submitted job's candidates use: its smallest global batch split ``SPLIT`` ways
    up to its largest whole, within the grid; `DEFAULT_RANGE` where none was recorded."""
    if not global_batches:
        return DEFAULT_RANGE
    high = min(max(global_batches), max(grid.batches))
    return min(max(min(global_batches) // SPLIT, 1), high), high


def range_batches(grid: Grid, low: int, high: int) -> tuple[int, ...]:
    """``low``, ``high`` and the grid's batches between them, in the order a budget should take them: the
    ends, then each gap's middle (on a log scale), so that a cut run still spans the range."""
    if not 1 <= low <= high:
        raise ValueError(f"a batch range needs 1 <= low <= high, not {low}-{high}")
    return spread(sorted({low, high, *(batch for batch in grid.batches if low < batch < high)}))


def spread(values: Sequence[int]) -> tuple[int, ...]:
    """Sorted ``values`` reordered ends first, then by halving each gap (nearest its geometric middle)."""
    if len(values) <= 2:
        return tuple(values)
    order = [values[0], values[-1]]
    gaps = deque([(0, len(values) - 1)])
    while gaps:
        first, last = gaps.popleft()
        if last - first < 2:
            continue
        middle = sqrt(values[first] * values[last])
        index = min(range(first + 1, last), key=lambda i: abs(values[i] - middle))
        order.append(values[index])
        gaps += [(first, index), (index, last)]
    return tuple(order)


def sight_plan(
    grid: Grid,
    device: DeviceProfile,
    table: LayerTable,
    budget_s: float,
    batches: Sequence[int],
    *,
    steps: bool = True,
) -> SightPlan:
    """Whole steps at ``batches`` in their order (with ``steps``, where a step can build the model), the
    distinct layers at those batches and the grid's layer batches between them, then the steps again, each
    pass in a seeded order of its own: in each of `PROCESSES` processes (the first pass and the layers in
    the first; one where the budget is short of `LEAST_SHARE_S` each) until its estimates reach `OVERPLAN`
    times its share of the budget (a layer's micro-benchmark repeats within itself)."""
    if not batches:
        raise ValueError("a first sight needs at least one batch")
    planned = _steps(grid, device, table, batches) if steps else []
    items = [SightItem(part=SightPart.STEPS, item=item) for item in planned]
    layer_batches = _layer_batches(grid, batches)
    layers = architecture_layers(replace(grid, layer_batches=layer_batches), device, table)
    items += [SightItem(part=SightPart.LAYERS, item=item) for item in layers]
    items += _passes(planned, sum(entry.item.estimate_s for entry in items), budget_s)
    return SightPlan(
        reference=table.reference,
        budget_s=budget_s,
        items=tuple(items),
        steps=grid.steps,
        warmup=grid.warmup,
        repeats=grid.repeats,
    )


def _passes(planned: Sequence[PlanItem], first_s: float, budget_s: float) -> list[SightItem]:
    """The steps again, pass after pass, each in a seeded order of its own: in each process until its
    estimates (the first's: after ``first_s``, its first pass and layers) reach `OVERPLAN` shares."""
    items: list[SightItem] = []
    if not planned:
        return items
    each, seed = sum(item.estimate_s for item in planned), 0
    processes = PROCESSES if budget_s >= PROCESSES * LEAST_SHARE_S else 1
    for process in range(1, processes + 1):
        estimate = first_s if process == 1 else 0.0
        for _pass in range(_MOST_PASSES):
            if estimate >= OVERPLAN * budget_s / processes:
                break
            seed += 1
            order = Random(seed).sample(planned, len(planned))  # noqa: S311 (an order, not a secret)
            items += [SightItem(part=SightPart.AGAIN, item=item, process=process) for item in order]
            estimate += each
    return items


def _steps(grid: Grid, device: DeviceProfile, table: LayerTable, batches: Sequence[int]) -> list[PlanItem]:
    """Whole steps in ``batches``' order (`whole_steps` sorts them, and leaves out a batch too small)."""
    found = {item.config.batch: item for item in whole_steps(grid, device, table, batches)}
    return [found[batch] for batch in dict.fromkeys(batches) if batch in found]


def _layer_batches(grid: Grid, batches: Sequence[int]) -> tuple[int, ...]:
    """``batches`` first, then the grid's layer batches inside their range: a layer's time is a polyline
    through its batches, and the grid's sit on each side of a kernel's switch."""
    low, high = min(batches), max(batches)
    switches = sorted(batch for batch in grid.layer_batches if low <= batch <= high and batch not in batches)
    return (*dict.fromkeys(batches), *switches)
