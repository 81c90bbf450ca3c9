"""What a plan run tells whoever watches it: each item's event, described as people read it, as a
progress bar on a terminal or JSON lines in a batch system's log."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Literal, TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from advisor.bench.plan import PlanItem
from advisor.bench.zoo import zoo_model
from advisor.ops import op_of
from advisor.records import StepConfig

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
