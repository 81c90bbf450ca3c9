"""Builds the CPU benchmark database the predictors are evaluated on: the CNN zoo at 32x32, batches 1-128.

Run in the background (``nice -n 10``), one pass after the other: it measures with the bench engine's own
plan and runner, writes JSON lines as it goes and ingests them at the end, so a cut run still leaves a
usable database. Each ``--steps-only`` pass gives each step one more measurement; ``--steps-only
--passes 5`` gives five, each in its own random order (in the plan's order every model's batch 2 ran
back to back, so one slow minute shifted a whole batch size). ``--layers-only`` does the same for the
layer micro-benchmarks (a layer's batch sizes measured hours apart were 15% out of step with each other
against the pace); ``--layer-batches 2,15`` adds batch sizes to layers measured on an older grid. Every
step and layer is paced (``advisor.bench.training.PACE``): training takes out each run's level against
the pace step, then averages the middle half of its ratios (the interquartile mean). What is left of the
noise lies between measurements, not between the steps of one (a step timed 15 times instead of 5 spread
as widely over six repeats), so only more passes narrow it.
Then ``advisor models train --db DB`` and ``advisor models evaluate --db DB --json --plot FILE.png``.

``--spread`` prints how far repeated measurements of the same step lie apart (paced ones by their ratio),
per batch size: the noise no predictor's held-out MAPE can get under, to read next to the evaluation.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Iterable, Sequence
from math import log
from pathlib import Path
from statistics import mean
from typing import Any

import torch

from advisor.bench.measure import zoo_table
from advisor.bench.plan import DeviceProfile, Grid, Phase, Plan, PlanItem, build_plan, geometric
from advisor.bench.records import LayerConfig
from advisor.bench.results import jsonl_sink, read_jsonl
from advisor.bench.run import run_plan, terminal_reporter
from advisor.bench.zoo import SMALL
from advisor.store import Store

MODELS = (
    "squeezenet1_1",
    "shufflenet_v2_x0_5",
    "mobilenet_v3_small",
    "mnasnet0_5",
    "resnet18",
    "squeezenet1_0",
    "shufflenet_v2_x1_0",
    "mobilenet_v2",
    "mobilenet_v3_large",
    "mnasnet1_0",
    "regnet_y_400mf",
    "efficientnet_b0",
    "resnet34",
    "googlenet",
    "regnet_x_1_6gf",
    "regnet_y_1_6gf",
    "resnet50",
    "densenet121",
    "resnext50_32x4d",
    "vgg11_bn",
)
"""The twenty zoo CNNs that train at 32x32 on two CPU cores in minutes, cheapest first."""

LAYER_BATCHES = (1, 2, 8, 15, 16, 128)
"""On each side of PyTorch's CPU convolution kernel switches (one thread, float32, checked with
``torch.profiler`` on 2.14.1): a 3x3 or 1x1 convolution of a small input runs ``_slow_conv2d`` at batch 1
and oneDNN from 2; a stride-1 1x1 convolution runs ``_slow_conv2d`` below 16 and oneDNN from 16. A layer's
time is a polyline through these points, so no segment crosses a switch."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, help="JSON lines to write as it measures (required to measure)")
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--budget-minutes", type=float, default=22.0)
    parser.add_argument("--threads", type=int, default=1, help="1 on a shared machine: fewer stalls")
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--steps-only", action="store_true", help="a pass over the step grid, 5 steps each")
    only.add_argument("--layers-only", action="store_true", help="a pass over the layer grid")
    parser.add_argument(
        "--passes", type=int, default=1, help="run the plan this many times, one after the other"
    )
    parser.add_argument(
        "--seed", type=int, help="of the order of an --*-only pass (default: a new order every run)"
    )
    parser.add_argument(
        "--batches",
        type=_batches,
        default=geometric(128),
        help="step batch sizes, comma-separated (default 1,2,4,...,128); say 12,24,48,96 for steps off "
        "both grids, which the unseen-batch evaluation then holds out like any other",
    )
    parser.add_argument(
        "--layer-batches",
        type=_batches,
        default=LAYER_BATCHES,
        help="layer micro-benchmark batch sizes, comma-separated (default "
        f"{','.join(map(str, LAYER_BATCHES))})",
    )
    parser.add_argument("--estimate", action="store_true", help="print the plan's estimate and stop")
    parser.add_argument("--spread", action="store_true", help="print the repeat spread of --db's steps")
    args = parser.parse_args(argv)
    if args.passes < 1:
        parser.error(f"--passes must be at least 1, not {args.passes}")
    if args.spread:
        print(json.dumps(repeat_spread(Store.open(args.db).step_rows()), indent=2))
        return 0
    torch.set_num_threads(args.threads)
    batches = args.batches
    grid = Grid(
        models=() if args.layers_only else MODELS,
        sizes=(SMALL,),
        batches=batches,
        coarse=batches[::2],
        settings=(),
        setting_batches=(),
        workers=0,
        layer_models=() if args.steps_only else MODELS,
        layer_batches=args.layer_batches,
        steps=5 if args.steps_only else 3,
        warmup=2 if args.steps_only else 1,
        repeats=3,
    )
    plan = _reorder(build_plan(grid, DeviceProfile.assumed("cpu"), zoo_table))
    print(
        f"{args.passes} x {len(plan.items)} items, estimated {plan.estimate_s / 60:.1f} min a pass",
        file=sys.stderr,
    )
    if args.estimate:
        return 0
    if args.out is None:
        parser.error("--out is required to measure")
    order = random.Random(args.seed)  # noqa: S311 (an order, not a secret)
    for _ in range(args.passes):
        if args.steps_only or args.layers_only:
            plan = plan.model_copy(update={"items": tuple(order.sample(plan.items, len(plan.items)))})
        with terminal_reporter(len(plan.items), sys.stderr) as progress:
            summary = run_plan(
                plan,
                device=torch.device("cpu"),
                partition="cpu",
                budget_s=args.budget_minutes * 60,
                sink=jsonl_sink(args.out),
                progress=progress,
            )
        stored = Store.open(args.db).ingest(read_jsonl(args.out))
        print(summary.model_dump_json())
        print(f"{stored} new rows in {args.db}", file=sys.stderr)
    return 0


def repeat_spread(rows: Iterable[dict[str, Any]]) -> dict[str, float]:
    """Mean log(slowest / fastest) over steps measured more than once, overall and per batch size; paced
    and unpaced measurements of a step are two series."""
    times: dict[tuple[Any, ...], list[float]] = {}
    for row in rows:
        if row["fits"] and row["median_s"]:
            key = (
                row["machine"],
                row["model"],
                row["input_size"],
                row["batch"],
                row["amp"],
                row["channels_last"],
                row["pace_ratio"] is not None,
            )
            times.setdefault(key, []).append(float(row["pace_ratio"] or row["median_s"]))
    spreads = [(key[3], log(max(t) / min(t))) for key, t in times.items() if len(t) > 1]
    by_batch = {
        f"batch {b}": mean(s for batch, s in spreads if batch == b) for b in sorted({b for b, _ in spreads})
    }
    return {
        "configurations": len(spreads),
        "all": mean(s for _, s in spreads) if spreads else 0.0,
        **by_batch,
    }


def _batches(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(sorted({int(part) for part in text.split(",")}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of batch sizes: {text!r}") from None
    if sizes[0] < 1:
        raise argparse.ArgumentTypeError(f"batch sizes start at 1, not {sizes[0]}")
    return sizes


def _reorder(plan: Plan) -> Plan:
    """Every model and layer at a few batches before any large batch, so a cut run still spans the zoo."""

    def rank(item: PlanItem) -> tuple[int, int]:
        config = item.config
        if isinstance(config, LayerConfig):
            return (1 if config.batch == 16 else 2 if config.batch == 1 else 4, 0)
        return (0 if item.phase is Phase.COARSE else 3, config.batch)

    return plan.model_copy(update={"items": tuple(sorted(plan.items, key=rank))})


if __name__ == "__main__":
    sys.exit(main())
