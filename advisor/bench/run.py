"""Running a plan within a time budget, each result handed to the sink once the measurements around it
have judged its pace step (`advisor.bench.neighbours`); a first sight's plan in fresh processes, one after
another."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
import uuid
from collections import deque
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path

import torch
from pydantic import BaseModel, ConfigDict

from advisor.bench.apart import StepsApart, steps_apart
from advisor.bench.fingerprint import fingerprint
from advisor.bench.measure import measure_layer, measure_step
from advisor.bench.neighbours import Neighbours
from advisor.bench.night import NightItem, Priority, Tonight
from advisor.bench.plan import Plan, PlanItem
from advisor.bench.reporting import Event, Reporter, Status, describe_item
from advisor.bench.results import Sink, complete_lines, parse_results
from advisor.records import (
    LayerConfig,
    LayerMeasurement,
    ResultLine,
    StepConfig,
    StepMeasurement,
)


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
    cost a night. On a CPU each step is measured in a process of its own, as a user's job runs it
    (`advisor.bench.apart`). A plan in processes (`Plan.processes`) runs each process's plan in a fresh one
    (`_in_processes`).
    """
    report = progress or (lambda _event: None)
    if plan.processes:
        return _in_processes(plan, on, budget_s, sink, report, clocks.budget)
    with _steps_for(plan, on) as apart:
        return _run_items(plan, _Measurer(plan, on, apart), budget_s, sink, report, clocks)


def _run_items(
    plan: Plan, measurer: _Measurer, budget_s: float, sink: Sink, report: Reporter, clocks: Clocks
) -> RunSummary:
    """`run_plan`'s items in this process, in order."""
    clock, now = clocks.budget, clocks.dates
    machine, run_id, start = fingerprint(measurer.on.partition), uuid.uuid4().hex, clock()
    failing: dict[StepConfig | LayerConfig, int] = {}
    counts = dict.fromkeys(_COUNTED, 0)
    taken, held = _Taken(plan.learn_estimates), Neighbours(sink)
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
                measurement = measurer.measure(item)
            except Exception as failure:
                status, error = "failed", f"{type(failure).__name__}: {failure}"
            else:
                held.add(
                    ResultLine(run_id=run_id, fingerprint=machine, measured_at=now(), measurement=measurement)
                )
                status, error = (
                    ("measured", None) if measurement.fits else ("does not fit", measurement.error)
                )
                if not measurement.fits:
                    failing[series] = min(item.config.batch, failing.get(series, sys.maxsize))
        counts[_counted(status)] += 1
        if not status.startswith("skipped"):
            taken.took(item, clock() - began)
        report(Event(index, len(plan.items), status, describe_item(item), clock() - began, error))
    held.write(ended=True)
    return _summary(run_id, len(plan.items), counts, clock() - start)


_COUNTED = ("measured", "does not fit", "skipped: budget", "skipped: series", "failed")


def _counted(status: str) -> str:
    """The summary's count a status adds to."""
    return "skipped: series" if status.startswith("skipped: a") else status


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


def process_plans(plan: Plan) -> list[Plan]:
    """A plan in processes (`Plan.processes`) as the plan each of them runs."""
    bounds = [0, *plan.processes, len(plan.items)]
    return [plan.model_copy(update={"items": plan.items[a:b], "processes": ()}) for a, b in pairwise(bounds)]


def _in_processes(
    plan: Plan, on: RunOn, budget_s: float, sink: Sink, report: Reporter, clock: Callable[[], float]
) -> RunSummary:
    """Each process's plan in a fresh process (``python -m advisor.bench.job``, as this one was started),
    one after another, each the budget left over the processes left, less what starting the last one took.
    Steps built in one process share its offset (two fresh processes timed one step up to 40% apart on
    this CPU, one process's instances mostly agree: benchmarks/README.md), so each process is a run of its
    own and training takes the runs' levels apart. What they measure is relayed as if measured here."""
    parts, start, startup = process_plans(plan), clock(), 0.0
    relay = _Relay(sink, report, _Taken(plan.learn_estimates), len(plan.items), parts[0])
    with tempfile.TemporaryDirectory(prefix="advisor-bench-") as folder:
        for number, part in enumerate(parts):
            share = (budget_s - (clock() - start)) / (len(parts) - number) - startup
            relay.begin(part)
            began = clock()
            if share > 0:
                night = _as_night(part, share, relay.taken)
                elapsed = _run_child(relay, on, night, Path(folder) / f"part-{number + 1}")
                startup = max(startup, clock() - began - elapsed)
            relay.end()
    return _summary(",".join(relay.runs), len(plan.items), relay.counts, clock() - start)


def _run_child(relay: _Relay, on: RunOn, night: Tonight, folder: Path) -> float:
    """One process's plan (``night``) in a child process, relayed; the seconds it measured for."""
    folder.mkdir()
    plan_file, out = folder / "plan.json", folder / "results.jsonl"
    plan_file.write_text(night.model_dump_json(), encoding="utf-8")
    argv = [sys.executable, "-m", "advisor.bench.job", "--plan", str(plan_file), "--out", str(out)]
    argv += ["--device", on.device.type, "--budget-minutes", repr(night.budget_s / 60)]
    argv += ["--partition", on.partition] if on.partition else []
    argv += ["--memory-limit-mb", str(on.memory_limit_bytes // 2**20)] if on.memory_limit_bytes else []
    argv += ["--allow-factories"] if on.allow_factories else []
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as child:
        for text in child.stderr or ():
            relay.heard(text, out)
        said = (child.stdout.read() if child.stdout else "").splitlines()
    relay.copy(out)
    if child.returncode != 0 or not said:
        relay.failed(f"its process exited with {child.returncode}: {relay.last_words()}")
        return 0.0
    return RunSummary.model_validate_json(said[-1]).elapsed_s


def _as_night(part: Plan, budget_s: float, taken: _Taken) -> Tonight:
    """A process's plan as the file a benchmark job reads (``--plan``), each item estimated by what the
    processes before it took (`_Taken`): a fresh process would judge by the assumed speeds again."""
    learned = [item.model_copy(update={"estimate_s": taken.expected_s(item)}) for item in part.items]
    return Tonight(
        machine=None,
        budget_s=budget_s,
        entries=tuple(
            NightItem(priority=Priority.SUBMITTED, subject=describe_item(item), item=item) for item in learned
        ),
        grid_items=0,
        covered=0,
        steps=part.steps,
        warmup=part.warmup,
        repeats=part.repeats,
        learn_estimates=part.learn_estimates,
    )


@dataclass
class _Relay:
    """What child processes measure, passed on as if measured here: their results to the sink, their events
    to the reporter (numbered in the whole plan) and the counts, and how long their items took to what the
    run has learned of them (`_Taken`), which the next process's estimates start from."""

    sink: Sink
    report: Reporter
    taken: _Taken
    total: int
    part: Plan
    """The plan its child process runs now."""
    offset: int = 0
    heard_events: int = 0
    copied: int = 0
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_COUNTED, 0))
    runs: dict[str, None] = field(default_factory=dict)
    words: deque[str] = field(default_factory=lambda: deque(maxlen=5))

    def begin(self, part: Plan) -> None:
        self.part, self.heard_events, self.copied = part, 0, 0

    def heard(self, text: str, out: Path) -> None:
        """A line the child wrote on stderr: an event (`json_reporter`), or words passed on as they are."""
        try:
            fields = json.loads(text)
        except ValueError:
            fields = None
        if not isinstance(fields, dict) or fields.pop("event", None) != "benchmark":
            self.words.append(text.strip())
            sys.stderr.write(text)
            return
        event = Event(**fields)
        self.heard_events += 1
        self.counts[_counted(event.status)] += 1
        if not event.status.startswith("skipped"):
            self.taken.took(self.part.items[event.index - 1], event.seconds)
        self.copy(out)
        self.report(replace(event, index=event.index + self.offset, total=self.total))

    def copy(self, out: Path) -> None:
        """The child's results written since the last look, to the sink."""
        texts = complete_lines(out) if out.exists() else []
        for line in parse_results(out, texts, self.copied):
            self.runs[line.run_id] = None
            self.sink(line)
        self.copied = len(texts)

    def failed(self, error: str) -> None:
        """A child that died: what it had not reported counts as failed, said once."""
        left = len(self.part.items) - self.heard_events
        self.counts["failed"] += left
        self.heard_events += left
        if left:
            self.report(Event(self.offset + self.heard_events, self.total, "failed", "a process", 0.0, error))

    def end(self) -> None:
        """The process is over: what it left unmeasured (its child never started: no budget left) counts as
        skipped for the budget."""
        self.counts["skipped: budget"] += len(self.part.items) - self.heard_events
        self.offset += len(self.part.items)

    def last_words(self) -> str:
        return " / ".join(self.words) or "nothing said"


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


@dataclass(frozen=True)
class _Measurer:
    """Measures a plan's items where `RunOn` says; on a CPU each step in a process of its own
    (`advisor.bench.apart`), where ``apart`` is given."""

    plan: Plan
    on: RunOn
    apart: StepsApart | None

    def measure(self, item: PlanItem) -> StepMeasurement | LayerMeasurement:
        config, plan, on = item.config, self.plan, self.on
        if isinstance(config, LayerConfig):
            return measure_layer(config, on.device, plan.repeats, plan.warmup)
        step = measure_step if self.apart is None else self.apart.measure
        limit, factories = on.memory_limit_bytes, on.allow_factories
        return step(config, on.device, plan.steps, plan.warmup, limit, allow_factories=factories)


def _steps_for(plan: Plan, on: RunOn) -> AbstractContextManager[StepsApart | None]:
    """Steps apart for a plan with steps on a CPU; none on a GPU, whose allocator keeps its blocks."""
    has_steps = any(isinstance(item.config, StepConfig) for item in plan.items)
    return steps_apart() if has_steps and on.device.type == "cpu" else nullcontext()
