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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path
from typing import Literal, TextIO

import torch
from pydantic import BaseModel, ConfigDict
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from advisor.bench.fingerprint import fingerprint
from advisor.bench.measure import measure_layer, measure_step
from advisor.bench.neighbours import Neighbours
from advisor.bench.night import NightItem, Priority, Tonight
from advisor.bench.plan import Plan, PlanItem
from advisor.bench.results import Sink, complete_lines, parse_results
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
    cost a night. A plan in processes (`Plan.processes`) runs each process's plan in a fresh one
    (`_in_processes`).
    """
    clock, now = clocks.budget, clocks.dates
    report = progress or (lambda _event: None)
    if plan.processes:
        return _in_processes(plan, on, budget_s, sink, report, clock)
    machine, run_id, start = fingerprint(on.partition), uuid.uuid4().hex, clock()
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
                measurement = _measure(item, plan, on)
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
        return f"{c.op} {c.height * c.width:,} parameters in {c.width} tensor{'s' if c.width > 1 else ''}"
    if family == "launch":
        return f"{c.op} {c.height} ops of {c.width} values"
    if family == "vector":
        return f"{c.op} {c.in_channels * c.height * c.width:,} values batch {c.batch}"
    geometry = f"{c.in_channels}->{c.out_channels} k{c.kernel[0]}x{c.kernel[1]} s{c.stride[0]} g{c.groups}"
    flags = [name for name in ("amp", "cudnn_benchmark", "channels_last") if getattr(config, name)]
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
