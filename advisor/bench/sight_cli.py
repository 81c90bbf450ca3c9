"""`advisor bench plan|run --architecture`: one architecture's first sight from the command line, planned
as the daemon plans one (`advisor.bench.sight_plan`) over the micro-batches its jobs use."""

from __future__ import annotations

import argparse
import json
import sys

from rich.console import Console
from rich.table import Table

from advisor import readable, terminal
from advisor.argtypes import input_shape
from advisor.bench.plan import DeviceKind, DeviceProfile, nightly_grid
from advisor.bench.sight_plan import (
    DEFAULT_RANGE,
    SightPart,
    SightPlan,
    range_batches,
    sight_plan,
    spread,
)
from advisor.introspect import LayerTable


def add_architecture_options(command: argparse.ArgumentParser, *, verb: str) -> None:
    """``--architecture`` and what shapes its first sight, the one spelling for `plan` and `run`."""
    command.add_argument(
        "--architecture",
        metavar="REF",
        help=f"{verb} this model's whole steps across its micro-batches and its distinct layers at them, "
        "until the budget is spent, instead of a plan: a torchvision name or package.module:factory "
        "(imported here, in your own process)",
    )
    command.add_argument(
        "--input-shape",
        type=input_shape,
        default=(3, 224, 224),
        metavar="C,H,W",
        help="with --architecture (default 3,224,224); whole steps need a square RGB input",
    )
    command.add_argument(
        "--layers-only", action="store_true", help="with --architecture: no whole steps, only its layers"
    )
    batches = command.add_mutually_exclusive_group()
    low, high = DEFAULT_RANGE
    batches.add_argument(
        "--micro-batches",
        type=batch_range,
        default=DEFAULT_RANGE,
        metavar="LOW-HIGH",
        help="with --architecture: the micro-batches its jobs' candidates use, measured at both ends and "
        f"the grid's batches between (default {low}-{high})",
    )
    batches.add_argument(
        "--batch-sizes",
        type=batch_sizes,
        metavar="B,B,...",
        help="with --architecture: exactly these batches instead of a range",
    )


def batch_range(text: str) -> tuple[int, int]:
    low, _, high = text.partition("-")
    if not (low.isdigit() and (high or low).isdigit()):
        raise argparse.ArgumentTypeError(f"expected micro-batches LOW-HIGH such as 2-32, not {text!r}")
    ends = int(low), int(high or low)
    if not 1 <= ends[0] <= ends[1]:
        raise argparse.ArgumentTypeError(f"micro-batches go from 1 up, low to high, not {text!r}")
    return ends


def batch_sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(word) for word in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected batch sizes such as 2,8,32, not {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"batch sizes are positive, not {text!r}")
    return sizes


def architecture_table(args: argparse.Namespace) -> LayerTable | None:
    """The architecture's layer table, built here (a factory in the caller's own process); None where it
    cannot be, said on stderr."""
    from advisor.introspect import IntrospectionError
    from advisor.introspect.run import introspect

    try:
        return introspect(args.architecture, args.input_shape, {}, allow_factories=True)
    except IntrospectionError as error:
        print(f"advisor: error: --architecture {args.architecture}: {error}", file=sys.stderr)
        return None


def planned_sight(
    args: argparse.Namespace, table: LayerTable, kind: DeviceKind, budget_s: float
) -> SightPlan:
    """The first sight the options ask for on a device of ``kind``."""
    grid = nightly_grid(kind)
    given = args.batch_sizes
    batches = spread(sorted(set(given))) if given else range_batches(grid, *args.micro_batches)
    steps = not args.layers_only and whole_steps_possible(table)
    return sight_plan(grid, DeviceProfile.assumed(kind), table, budget_s, batches, steps=steps)


def whole_steps_possible(table: LayerTable) -> bool:
    """The benchmark step feeds square RGB images."""
    channels, height, width = table.input_shape
    return channels == 3 and height == width


def plan_architecture(args: argparse.Namespace, console: Console) -> int:
    """`advisor bench plan --architecture`: what `advisor bench run --architecture` would measure."""
    table = architecture_table(args)
    if table is None:
        return 1
    plan = planned_sight(args, table, args.device, args.budget_minutes * 60)
    if args.json:
        print(sight_json(plan))
        return 0
    if not args.layers_only and not whole_steps_possible(table):
        console.print(f"{table.reference}: whole steps need a square RGB input: layers only")
    show_sight(console, plan)
    return 0


def sight_json(plan: SightPlan) -> str:
    return json.dumps(
        {
            "architecture": plan.reference,
            "rows": [row.model_dump(mode="json") for row in plan.rows()],
            "measurements": len(plan.items),
            "estimate_s": plan.estimate_s,
            "budget_s": plan.budget_s,
        },
        indent=2,
    )


def show_sight(console: Console, plan: SightPlan) -> None:
    table = Table(title=f"first sight of {plan.reference}", title_justify="left")
    for column in ("process", "part", "items", "batches, in order", "estimate"):
        table.add_column(column)
    for row in plan.rows():
        batches = ", ".join(map(str, row.batches))
        table.add_row(str(row.process), row.part, str(row.items), batches, readable.duration(row.estimate_s))
    terminal.show(table, console)
    console.print(said_sight(plan), highlight=False)


def said_sight(plan: SightPlan) -> str:
    """How a first sight's plan and its budget meet: the run, not the estimate, decides where it stops."""
    again = any(entry.part is SightPart.AGAIN for entry in plan.items)
    passes = " (the steps again: each pass in an order of its own)" if again else ""
    processes = len(plan.processes) + 1
    within = (
        f"in {processes} fresh processes, one after another, each the budget left over the processes left, "
        if processes > 1
        else ""
    )
    return (
        f"{len(plan.items)} measurements, estimated {readable.duration(plan.estimate_s)} in all by assumed "
        f"speeds; measured in this order{passes} {within}until the {readable.duration(plan.budget_s)} budget "
        "is spent"
    )
