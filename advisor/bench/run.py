"""Running a plan within a time budget, each result handed to the sink the moment it is measured."""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Literal, TextIO

import torch
from pydantic import BaseModel, ConfigDict
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from advisor.bench.fingerprint import fingerprint
from advisor.bench.measure import measure_layer, measure_step
from advisor.bench.plan import Plan, PlanItem
from advisor.bench.results import Sink
from advisor.bench.zoo import zoo_model
from advisor.ops import op_of
from advisor.records import (
    LayerConfig,
    LayerMeasurement,
    ResultLine,
    StepConfig,
    StepMeasurement,
)

Status = Literal[
    "measured", "does not fit", "skipped: budget", "skipped: a smaller batch did not fit", "failed"
]


@dataclass(frozen=True)
class Event:
    index: int
    total: int
    status: Status
    item: str
    seconds: float
    error: str | None = None


Reporter = Callable[[Event], None]


class RunSummary(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    planned: int
    measured: int
    did_not_fit: int
    skipped_budget: int
    skipped_series: int
    failed: int
    elapsed_s: float


@dataclass(frozen=True)
class RunOn:
    """Where a plan's items are measured: the device, the partition its fingerprint records, a memory cap
    (CPUs have none of their own), and whether a factory's model may be imported (only in a job the user's
    own process started)."""

    device: torch.device
    partition: str | None
    memory_limit_bytes: int | None = None
    allow_factories: bool = False


@dataclass(frozen=True)
class Clocks:
    """``budget`` times the budget, ``dates`` dates each result: apart, so that a test sets either."""

    budget: Callable[[], float] = time.monotonic
    dates: Callable[[], datetime] = lambda: datetime.now(UTC)


def run_plan(
    plan: Plan,
    on: RunOn,
    *,
    budget_s: float,
    sink: Sink,
    progress: Reporter | None = None,
    clocks: Clocks = Clocks(),
) -> RunSummary:
    """Measures the plan's items in order while the budget lasts.

    An item whose estimate exceeds what is left is skipped (a later, cheaper one may still fit). Once a
    batch of a series (a configuration but for its batch) does not fit, larger batches of it are skipped.
    Errors other than running out of memory are reported and the run goes on: one broken model must not
    cost a night.
    """
    clock, now = clocks.budget, clocks.dates
    machine = fingerprint(on.partition)
    run_id = uuid.uuid4().hex
    report = progress or (lambda _event: None)
    start = clock()
    failing: dict[StepConfig | LayerConfig, int] = {}
    counts = dict.fromkeys(("measured", "does not fit", "skipped: budget", "skipped: series", "failed"), 0)
    taken = _Taken(plan.learn_estimates)
    for index, item in enumerate(plan.items, start=1):
        began = clock()
        series = item.config.model_copy(update={"batch": 1})
        status: Status
        error = None
        if taken.expected_s(item) > budget_s - (began - start):
            status = "skipped: budget"
        elif item.config.batch >= failing.get(series, sys.maxsize):
            status = "skipped: a smaller batch did not fit"
        else:
            try:
                measurement = _measure(item, plan, on)
            except Exception as failure:
                status, error = "failed", f"{type(failure).__name__}: {failure}"
            else:
                sink(
                    ResultLine(run_id=run_id, fingerprint=machine, measured_at=now(), measurement=measurement)
                )
                status, error = (
                    ("measured", None) if measurement.fits else ("does not fit", measurement.error)
                )
                if not measurement.fits:
                    failing[series] = min(item.config.batch, failing.get(series, sys.maxsize))
        counts["skipped: series" if status.startswith("skipped: a") else status] += 1
        if not status.startswith("skipped"):
            taken.took(item, clock() - began)
        report(Event(index, len(plan.items), status, describe_item(item), clock() - began, error))
    return _summary(run_id, len(plan.items), counts, clock() - start)


@dataclass
class _Taken:
    """How long a run's items took against their estimates, where the plan learns from them
    (`Plan.learn_estimates`): the assumed speeds overstate a shared CPU's first-sight steps about 15 times,
    and judged by them a 3-minute first sight of a dilated CNN skipped its batch 32 (estimated 75 s) in the
    last 75 s of its budget, its 16 in the last 38 s (benchmarks/README.md)."""

    learning: bool
    longest_s: dict[StepConfig | LayerConfig, float] = field(default_factory=dict)
    """Each configuration measured so far: the longest it took."""
    share: dict[type, float] = field(default_factory=dict)
    """Each kind (steps, layers): the largest share of its estimate an item of it took."""

    def expected_s(self, item: PlanItem) -> float:
        """Never beyond the estimate: a configuration measured before, the longest it took; another, its
        estimate scaled by its kind's largest share."""
        if item.config in self.longest_s:
            return min(self.longest_s[item.config], item.estimate_s)
        return item.estimate_s * min(self.share.get(type(item.config), 1.0), 1.0)

    def took(self, item: PlanItem, seconds: float) -> None:
        if not self.learning or item.estimate_s <= 0:
            return
        kind, config = type(item.config), item.config
        self.longest_s[config] = max(self.longest_s.get(config, 0.0), seconds)
        self.share[kind] = max(self.share.get(kind, 0.0), seconds / item.estimate_s)


def _summary(run_id: str, planned: int, counts: dict[str, int], elapsed_s: float) -> RunSummary:
    return RunSummary(
        run_id=run_id,
        planned=planned,
        measured=counts["measured"],
        did_not_fit=counts["does not fit"],
        skipped_budget=counts["skipped: budget"],
        skipped_series=counts["skipped: series"],
        failed=counts["failed"],
        elapsed_s=elapsed_s,
    )


def _measure(item: PlanItem, plan: Plan, on: RunOn) -> StepMeasurement | LayerMeasurement:
    config = item.config
    if isinstance(config, StepConfig):
        return measure_step(
            config,
            on.device,
            plan.steps,
            plan.warmup,
            on.memory_limit_bytes,
            allow_factories=on.allow_factories,
        )
    return measure_layer(config, on.device, plan.repeats, plan.warmup)


def describe_item(item: PlanItem) -> str:
    config = item.config
    if isinstance(config, StepConfig):
        flags = [name for name in ("amp", "channels_last", "pinned") if getattr(config, name)]
        return " ".join([config.model, _input_size(config), f"batch {config.batch}", *flags])
    c = config
    family = op_of(c).family
    if family == "update":
        return f"{c.op} {c.height * c.width:,} parameters in {c.width} tensors"
    if family == "launch":
        return f"{c.op} {c.height} ops of {c.width} values"
    if family == "vector":
        return f"{c.op} {c.in_channels * c.height * c.width:,} values batch {c.batch}"
    geometry = f"{c.in_channels}->{c.out_channels} k{c.kernel[0]}x{c.kernel[1]} s{c.stride[0]} g{c.groups}"
    flags = [name for name in ("amp", "cudnn_benchmark") if getattr(config, name)]
    return " ".join([c.op, geometry, f"{c.height}x{c.width}", f"batch {c.batch}", *flags])


def _input_size(config: StepConfig) -> str:
    """A zoo transformer's size is its sequence length (``128 tokens``); an image's is its side (``32px``)."""
    try:
        tokens = zoo_model(config.model).tokens
    except ValueError:  # an architecture measured at first sight
        tokens = False
    return f"{config.input_size} tokens" if tokens else f"{config.input_size}px"


def json_reporter(stream: TextIO) -> Reporter:
    """One JSON object per line, for logs that a batch system keeps."""

    def report(event: Event) -> None:
        stream.write(json.dumps({"event": "benchmark", **asdict(event)}) + "\n")
        stream.flush()

    return report


@contextmanager
def terminal_reporter(total: int, stream: TextIO) -> Iterator[Reporter]:
    """A progress bar for a person watching; JSON lines when nobody is (``stream`` is not a terminal)."""
    if not stream.isatty():
        yield json_reporter(stream)
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(file=stream)) as bar:
        task = bar.add_task("benchmarks", total=total)

        def report(event: Event) -> None:
            bar.update(task, advance=1, description=f"{event.status}: {event.item}")

        yield report
