"""Tonight's measurements on one machine: what fits its budget, by priority, after what earlier nights did.

Pure: the store's history and the architectures users submitted are handed in. Priorities, in order:
- the machine's rates (the sweeps of what is not compute: a minute) and the coarse grid over the zoo, while
  the machine lacks any of them (a new fingerprint starts here);
- the distinct layers (at the grid's layer batches) and a few whole steps of each architecture users
  submitted that this machine has not measured, the most requested first: the next submission of it is
  predicted from its own parts;
- the rest of the nightly grid, in the grid's order, where the last night stopped;
- the oldest measurements again (freshness), in a share of the budget kept for them once the machine has
  measured anything, so that a long grid never starves them.
Each item is planned once, in the first priority that wants it, but a new machine's optimizer updates,
which are measured at `Sweeps.update_places` places; an item that would overrun the budget is left for a
later night and smaller ones after it still go in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field

from advisor.bench.plan import (
    DeviceProfile,
    Grid,
    Phase,
    Plan,
    PlanItem,
    TableSource,
    build_plan,
    layer_estimate,
    step_estimate,
    updating,
)
from advisor.bench.plan_rows import SWEPT
from advisor.bench.sweeps import scattered
from advisor.bench.zoo import distinct_layers, smallest_batch
from advisor.introspect import LayerTable
from advisor.records import StepConfig

FRESHNESS_SHARE = 0.15
"""Of a machine's budget once it has measured anything: re-measuring its oldest results."""
_WHOLE_STEPS = 3
"""Whole steps of a submitted architecture: its own batch and the coarse batches just below it."""


_grid_plan = lru_cache(maxsize=4)(build_plan)
"""The grid's plan, built once for every partition of one kind in a night (tens of thousands of items)."""


Wanted = tuple[str, PlanItem, str]
"""A configuration a night may measure: its subject (the model it is for), the item, the item's key."""


class Priority(StrEnum):
    COARSE = "coarse grid"
    SUBMITTED = "submitted"
    GRID = "rest of the grid"
    FRESHNESS = "freshness"


@dataclass(frozen=True)
class SubmittedArchitecture:
    """An architecture users submitted for advice, as the daemon recorded it."""

    table: LayerTable
    batches: tuple[int, ...]
    """The global batches it was submitted with (none: measured by hand, never submitted)."""
    requests: int

    @property
    def model(self) -> str:
        """A torchvision name, or the ``package.module:factory`` the user's process introspected."""
        return self.table.reference

    @property
    def buildable(self) -> bool:
        """Whether a benchmark job may build it whole: a torchvision name (not the user's own factory) with
        its default arguments on a square RGB input (the job imports no user code, times square images)."""
        channels, height, width = self.table.input_shape
        named = ":" not in self.model and not self.table.model_kwargs
        return named and channels == 3 and height == width


class NightItem(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    priority: Priority
    subject: str
    """The model the item measures (a step of it, or one of its layers)."""
    item: PlanItem


class Tonight(BaseModel):
    """One machine's night: what the benchmark job measures, in order, and why."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    machine: str | None
    """The machine it was planned for; None for a partition never measured. A job that finds another
    machine (new hardware, driver, CUDA or torch) runs that machine's first night instead."""
    budget_s: float = Field(gt=0)
    entries: tuple[NightItem, ...]
    grid_items: int
    """The nightly grid's size on this machine's device kind."""
    covered: int
    """How many of them this machine has measured on earlier nights."""
    steps: int
    warmup: int
    repeats: int
    learn_estimates: bool = False
    """A first sight's: its budget is minutes and the assumed speeds overstate its steps many times, so the
    run judges what is left by how long its items took (`run_plan`); a night keeps to the estimates."""
    processes: tuple[int, ...] = ()
    """Where each fresh process after the first begins, by entry index: a first sight's passes in
    processes of their own, so that one process's offset is one of several (`run_plan`); a night runs in
    one."""

    @property
    def estimate_s(self) -> float:
        return sum(entry.item.estimate_s for entry in self.entries)

    def plan(self) -> Plan:
        items = tuple(entry.item for entry in self.entries)
        return Plan(
            items=items,
            steps=self.steps,
            warmup=self.warmup,
            repeats=self.repeats,
            learn_estimates=self.learn_estimates,
            processes=self.processes,
        )


@dataclass(frozen=True)
class MeasuredOn:
    """One machine (None: not fingerprinted yet) and when it last measured each configuration, by its key."""

    machine: str | None
    measured: Mapping[str, datetime]


def tonight(
    grid: Grid,
    device: DeviceProfile,
    tables: TableSource,
    history: MeasuredOn,
    submitted: Sequence[SubmittedArchitecture],
    budget_s: float,
) -> Tonight:
    """The night of ``history``'s machine: what it has not measured first, then the oldest it has."""
    machine, measured = history.machine, history.measured
    full = _grid_plan(grid, device, tables)
    # A night's repeats are its freshness share: the grid's own later passes would repeat tonight's items.
    grid_items = [item for item in full.items if item.phase is not Phase.REPEATS]
    keys = [item.config.key() for item in grid_items]
    missing = [(item, key) for item, key in zip(grid_items, keys, strict=True) if key not in measured]
    # The machine's rates (a minute) ahead of the coarse grid: every prediction uses them.
    first = [item for item in missing if item[0].phase in SWEPT] + [
        item for item in missing if item[0].phase is Phase.COARSE
    ]
    coarse = [(_subject(item), item, key) for item, key in first]
    rest = [(_subject(item), item, key) for item, key in missing if item.phase not in (*SWEPT, Phase.COARSE)]
    oldest = sorted(
        (measured[key], key, item) for item, key in zip(grid_items, keys, strict=True) if key in measured
    )
    fresh_budget = FRESHNESS_SHARE * budget_s if measured else 0.0
    wanted = [
        (Priority.COARSE, coarse),
        (Priority.SUBMITTED, list(_submitted_items(grid, device, measured, submitted))),
        (Priority.GRID, rest),
    ]
    chosen: list[NightItem] = []
    seen: set[str] = set()
    spent = _fill(chosen, seen, wanted[:1], budget_s - fresh_budget, 0.0)
    places, copies_s = _update_places(chosen, grid.sweeps.update_places, budget_s - fresh_budget - spent)
    spent = _fill(chosen, seen, wanted[1:], budget_s - fresh_budget, spent + copies_s)
    freshness = [(_subject(item), item, key) for _, key, item in oldest]
    _fill(chosen, seen, [(Priority.FRESHNESS, freshness)], budget_s, spent)
    return Tonight(
        machine=machine,
        budget_s=budget_s,
        entries=tuple(scattered(chosen, _first_update, places)),
        grid_items=len(grid_items),
        covered=sum(key in measured for key in set(keys)),
        steps=full.steps,
        warmup=full.warmup,
        repeats=full.repeats,
    )


def _first_update(entry: NightItem) -> bool:
    return entry.priority is Priority.COARSE and updating(entry.item)


def _update_places(first: Sequence[NightItem], places: int, left_s: float) -> tuple[int, float]:
    """A new machine's update configurations are measured at ``places`` places (`Sweeps.update_places`)
    where their copies fit in what the first priority left of the budget, else once; and the copies'
    seconds, paid before anything else is planned."""
    copies_s = (places - 1) * sum(entry.item.estimate_s for entry in first if _first_update(entry))
    return (places, copies_s) if copies_s <= left_s else (1, 0.0)


def _fill(
    chosen: list[NightItem],
    seen: set[str],
    wanted: Iterable[tuple[Priority, Sequence[Wanted]]],
    limit_s: float,
    spent: float,
) -> float:
    for priority, items in wanted:
        for subject, item, key in items:
            if key in seen or spent + item.estimate_s > limit_s:
                continue
            seen.add(key)
            spent += item.estimate_s
            chosen.append(NightItem(priority=priority, subject=subject, item=item))
    return spent


def _submitted_items(
    grid: Grid,
    device: DeviceProfile,
    measured: Mapping[str, datetime],
    submitted: Sequence[SubmittedArchitecture],
) -> Iterable[Wanted]:
    """Each architecture's unmeasured layers, then its unmeasured whole steps; the most requested first."""
    for architecture in sorted(submitted, key=lambda a: (-a.requests, a.model)):
        for item in (
            *architecture_layers(grid, device, architecture.table),
            *_whole_steps(grid, device, architecture),
        ):
            key = item.config.key()
            if key not in measured:
                yield architecture.model, item, key


def architecture_layers(grid: Grid, device: DeviceProfile, table: LayerTable) -> list[PlanItem]:
    """An architecture's distinct layers at the grid's layer batches, batch-major in the grid's order (as
    the zoo's are): a budget that runs out has still measured every layer at the first batches."""
    items = []
    for batch in grid.layer_batches:
        for config, layer in distinct_layers(table):
            at = config.model_copy(update={"batch": batch})
            items.append(
                PlanItem(phase=Phase.LAYERS, config=at, estimate_s=layer_estimate(grid, device, layer, at))
            )
    return items


def whole_steps(
    grid: Grid, device: DeviceProfile, table: LayerTable, batches: Iterable[int]
) -> list[PlanItem]:
    """Whole training steps of ``table``'s model at ``batches`` (default settings), as the grid measures
    the zoo's; none for a model a benchmark step cannot build (`step_measurable`)."""
    size = table.input_shape[1]
    items = []
    for batch in sorted(set(batches)) if step_measurable(table) else ():
        if batch < smallest_batch(table):
            continue
        config = StepConfig(
            model=table.reference,
            input_size=size,
            batch=batch,
            amp=False,
            channels_last=False,
            pinned=False,
            workers=grid.workers,
        )
        items.append(
            PlanItem(
                phase=Phase.BATCHES, config=config, estimate_s=step_estimate(grid, device, table, config)
            )
        )
    return items


def step_measurable(table: LayerTable) -> bool:
    """Whether a benchmark step can build and feed the model: not a token model, nor one transformers or
    timm builds (``hf:``/``timm:``; the step's measurement builds torchvision names on images only). Their
    layers are measured all the same."""
    return table.sequence_length is None and not table.reference.startswith(("hf:", "timm:"))


def step_batches(grid: Grid, architecture: SubmittedArchitecture) -> tuple[int, ...]:
    """The batches a submitted architecture's whole steps are measured at: its own largest (within the
    grid) and the coarse batches just below it; none where a job may not build it."""
    if not architecture.buildable or not architecture.batches:
        return ()
    top = min(max(architecture.batches), max(grid.batches))
    below = [batch for batch in grid.coarse if batch < top][-(_WHOLE_STEPS - 1) :]
    return (*below, top)


def _whole_steps(grid: Grid, device: DeviceProfile, architecture: SubmittedArchitecture) -> list[PlanItem]:
    batches = step_batches(grid, architecture)
    return whole_steps(grid, device, architecture.table, batches)


def _subject(item: PlanItem) -> str:
    config = item.config
    if isinstance(config, StepConfig):
        return config.model
    return f"{item.phase} sweep" if item.phase in SWEPT else "zoo layers"


class NightRow(BaseModel):
    """One priority's items of one kind, as ``advisor bench plan`` shows them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    priority: Priority
    kind: str
    items: int
    subjects: tuple[str, ...]
    batches: tuple[int, ...]
    estimate_s: float


def describe_night(night: Tonight) -> list[NightRow]:
    groups: dict[tuple[Priority, str], list[NightItem]] = {}
    for entry in night.entries:
        kind = "step" if isinstance(entry.item.config, StepConfig) else "layer"
        groups.setdefault((entry.priority, kind), []).append(entry)
    return [
        NightRow(
            priority=priority,
            kind=kind,
            items=len(entries),
            subjects=tuple(dict.fromkeys(entry.subject for entry in entries)),
            batches=tuple(sorted({entry.item.config.batch for entry in entries})),
            estimate_s=sum(entry.item.estimate_s for entry in entries),
        )
        for (priority, kind), entries in sorted(
            groups.items(), key=lambda group: (list(Priority).index(group[0][0]), group[0][1])
        )
    ]
