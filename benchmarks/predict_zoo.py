"""Builds the CPU benchmark database the predictors are evaluated on: the nightly plan's CPU grid
(``advisor.bench.plan.nightly_grid("cpu")``: 20 CNNs at 32x32, batches 1-128), in repeated passes.

Run in the background (``nice -n 10``), one pass after the other: it measures with the bench engine's own
plan and runner, on the grid the nightly ``advisor bench run`` measures on a CPU partition, writes JSON
lines as it goes and ingests them at the end, so a cut run still leaves a usable database. Each
``--steps-only`` pass gives each step one more measurement; ``--steps-only
--passes 5`` gives five, each in its own random order (in the plan's order every model's batch 2 ran
back to back, so one slow minute shifted a whole batch size). ``--layers-only`` does the same for the
layer micro-benchmarks (a layer's batch sizes measured hours apart were 15% out of step with each other
against the pace); ``--layer-batches 2,15`` adds batch sizes to layers measured on an older grid. Every
step and layer is paced (``advisor.bench.training.PACE``): training takes out each run's level against
the pace step, then averages the middle half of its ratios (the interquartile mean). What is left of the
noise lies between measurements, not between the steps of one (a step timed 15 times instead of 5 spread
as widely over six repeats), so only more passes narrow it.
Then ``advisor models train --db DB`` and ``advisor models evaluate --db DB --json --plot FILE.png``.

``--compare`` trains today's step model alone, the op sum alone (`advisor.predict.opsum`) and the
product's as served (their weighted blend, its weight fitted in the bands' folds: `advisor.predict.heldout.
fit_served`, what `advisor models train` fits) on ``--db`` and prints their held-out figures side by side,
in one run: leave one model out, unseen batch sizes (each) and peak memory; beside them two blends of the
first two models' predictions of each held-out step, fitted on nothing more: their geometric mean, and a
weighted one whose weight is fitted on the other models' (batch sizes') held-out steps; and today's model
with its layer booster correcting each layer's roof (its FLOPs at its family's rate or its bytes at the
bandwidth, whichever is longer) in place of a line fitted through the layers, a candidate for the layers no
zoo model has (issue 51). The served column is the slow one: each of its fits fits both models six times.

``--spread`` prints how far repeated measurements of the same step lie apart, each as training reads it,
per batch size: the noise no predictor's held-out MAPE can get under, to read next to the evaluation;
beside it the floor ``--compare`` prints too, without training anything: each interior step against the
line through its model's measured neighbours.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from math import exp, log
from pathlib import Path
from statistics import mean

import torch
from rich.console import Console
from rich.table import Table

from advisor.bench.architectures import measured_tables
from advisor.bench.plan import DeviceProfile, build_plan, nightly_grid
from advisor.bench.reporting import terminal_reporter
from advisor.bench.results import jsonl_sink, read_jsonl
from advisor.bench.run import RunOn, run_plan
from advisor.bench.sweeps import NO_SWEEPS
from advisor.bench.tables import zoo_table
from advisor.predict.blend import PairedStep, best_weight, weighted
from advisor.predict.evaluate import (
    Fit,
    Point,
    leave_one_model_out,
    memory_error,
    unseen_batches,
)
from advisor.predict.heldout import fit_served
from advisor.predict.machine import LayerSample, StepSample, fit_machine
from advisor.predict.opsum import fit_opsum
from advisor.predict.registry import HELDOUT_FOLDS, layer_samples, machines, step_samples
from advisor.readable import percent
from advisor.store import Store

NIGHTLY = nightly_grid("cpu")


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
        default=NIGHTLY.batches,
        help="step batch sizes, comma-separated (default: the nightly grid's, 1,2,4,...,128); say "
        "12,24,48,96 for steps off both grids, which the unseen-batch evaluation holds out like any other",
    )
    parser.add_argument(
        "--layer-batches",
        type=_batches,
        default=NIGHTLY.layer_batches,
        help="layer micro-benchmark batch sizes, comma-separated (default: the nightly grid's, "
        f"{','.join(map(str, NIGHTLY.layer_batches))})",
    )
    parser.add_argument("--estimate", action="store_true", help="print the plan's estimate and stop")
    parser.add_argument("--spread", action="store_true", help="print the repeat spread of --db's steps")
    parser.add_argument(
        "--compare", action="store_true", help="today's step model and the op-sum one on --db, side by side"
    )
    parser.add_argument(
        "--opsum-before",
        type=Path,
        help="with --compare: another tree's advisor/predict/opsum.py (a worktree of the commit before), "
        "held out as a third column in the same run",
    )
    step_model_option(
        parser,
        "with --compare: step models held out as further columns in the same run, each fitted as one (blend: "
        "the product's, as served; slow)",
    )
    args = parser.parse_args(argv)
    if args.passes < 1:
        parser.error(f"--passes must be at least 1, not {args.passes}")
    if args.compare:
        before = () if args.opsum_before is None else (("op sum before", fit_from(args.opsum_before)),)
        named = tuple((f"{name}, as a step model", STEP_MODELS[name]) for name in args.step_model)
        compare(Store.existing(args.db), (*MODELS, *before, *named))
        return 0
    if args.spread:
        print(json.dumps(spread_and_floor(Store.existing(args.db)), indent=2))
        return 0
    torch.set_num_threads(args.threads)
    batches = args.batches
    grid = replace(
        NIGHTLY,
        models=() if args.layers_only else NIGHTLY.models,
        batches=batches,
        coarse=batches[::2],
        layer_models=() if args.steps_only else NIGHTLY.layer_models,
        layer_batches=args.layer_batches,
        steps=5 if args.steps_only else NIGHTLY.steps,
        warmup=2 if args.steps_only else NIGHTLY.warmup,
        # A pass of one kind is what --passes repeats; the sweeps are micro-benchmarks, not steps.
        step_passes=1 if args.steps_only or args.layers_only else NIGHTLY.step_passes,
        sweeps=NO_SWEEPS if args.steps_only else NIGHTLY.sweeps,
    )
    plan = build_plan(grid, DeviceProfile.assumed("cpu"), zoo_table)
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
                RunOn(torch.device("cpu"), "cpu"),
                budget_s=args.budget_minutes * 60,
                sink=jsonl_sink(args.out),
                progress=progress,
            )
        stored = Store.open(args.db).ingest(read_jsonl(args.out))
        print(summary.model_dump_json())
        print(f"{stored} new rows in {args.db}", file=sys.stderr)
    return 0


SERVED: Fit = partial(fit_served, folds=HELDOUT_FOLDS)
"""The product's step model as `advisor models train` fits it (the blend, `advisor.predict.blend`), less
its bands: its point predictions."""
MODELS: tuple[tuple[str, Fit], ...] = (
    ("today's", fit_machine),
    ("op sum", fit_opsum),
    ("today's, layer roof", partial(fit_machine, layer_roof=True)),
    ("served", SERVED),
)
"""Today's step model alone, the op sum alone, today's with its layer booster correcting the layers' roof
instead of a line (`advisor.predict.machine.fit_layers`), and the product's as served (the blend of the
first two with its weight fitted in folds: `advisor.predict.heldout.fit_served`); the blends mix the
first two."""


def fit_from(path: Path) -> Fit:
    """``fit_opsum`` of an op-sum module file from another tree, run against this tree's package."""
    spec = importlib.util.spec_from_file_location("opsum_before", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"predict_zoo: --opsum-before {path}: not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    fit: Fit = module.fit_opsum
    return fit


HeldOut = tuple[list[Point], list[Point]]
"""One step model's held-out steps: leave one model out's, the unseen batch sizes'."""


def compare(store: Store, models: Sequence[tuple[str, Fit]] = MODELS) -> None:
    """Each machine's held-out figures, one column per step model, fitted on the same samples; then the
    first two's predictions of each held-out step blended (`blends`, no fit of their own): what a blend
    of today's model and the op sum would score."""
    tables = measured_tables(store)
    for machine in machines(store):
        steps = step_samples(store.step_rows(machine), tables)
        layers = layer_samples(store.layer_rows(machine))
        held = [_held_out_points(machine, steps, layers, fit) for _name, fit in models]
        names = [name for name, _fit in models]
        if len(held) >= 2:
            names += ["blend", "weighted blend"]
            held += blends(held[0], held[1])
        columns = [_column(lomo, batches) for lomo, batches in held]
        table = Table(
            title=f"machine {machine}: {len(steps)} steps, {len(layers)} layers, held-out MAPE",
            title_justify="left",
        )
        table.add_column("held out")
        for name in names:
            table.add_column(name, justify="right")
        for row in columns[0]:
            table.add_row(row, *(percent(column.get(row)) for column in columns))
        table.add_row("peak memory", *[percent(memory_error(steps))] * len(columns))
        Console(width=160).print(table)
        if len(models) >= 2:
            print(
                f"blend: the geometric mean of two columns' predictions of each held-out step ({names[0]}, "
                f"{names[1]}); "
                "weighted blend: its weight fitted on the other models' (batch sizes') held-out steps"
            )
        errors = neighbour_errors(steps)
        by_batch = ", ".join(f"{b}: {percent(mean(e))}" for b, e in sorted(errors.items()))
        every = [e for batch_errors in errors.values() for e in batch_errors]
        print(
            f"no model, each unseen batch size's step from its model's two measured neighbours (log-log): "
            f"{percent(mean(every) if every else None)} ({by_batch})"
        )


def _held_out_points(
    machine: str, steps: Sequence[StepSample], layers: Sequence[LayerSample], fit: Fit
) -> HeldOut:
    """One step model's held-out predictions: leave one model out, then each unseen batch size."""
    lomo = leave_one_model_out(machine, steps, layers, fit)
    batches, _interior = unseen_batches(machine, steps, layers, fit)
    return lomo, batches


STEP_MODELS: dict[str, Fit] = {"today": fit_machine, "opsum": fit_opsum, "blend": SERVED}
"""What a kept-back set's script asks by name (``--step-model``), each fitted on the same samples: today's
step model alone, the op sum alone, their weighted blend as the product serves it."""


def step_model_option(parser: argparse.ArgumentParser, what: str, default: Sequence[str] = ()) -> None:
    """``--step-model NAME ...``: which of `STEP_MODELS` a script asks, side by side in one run."""
    parser.add_argument(
        "--step-model", nargs="*", choices=sorted(STEP_MODELS), default=list(default), help=what
    )


def mix(first: Point, second: Point, weight: float) -> Point:
    """One held-out step's blend of two models' predictions of it (`advisor.predict.blend.weighted`)."""
    if (first.model, first.batch, first.measured_s) != (second.model, second.batch, second.measured_s):
        raise ValueError(
            f"predict_zoo: mix pairs {first.model} at batch {first.batch} with {second.model} at batch "
            f"{second.batch}"
        )
    return first.model_copy(update={"predicted_s": weighted(first.predicted_s, second.predicted_s, weight)})


def paired(pairs: Sequence[tuple[Point, Point]]) -> list[PairedStep]:
    """Two models' held-out points of the same steps, as the product's weight is fitted on them."""
    return [PairedStep(a.measured_s, a.predicted_s, b.predicted_s) for a, b in pairs]


def fitted_blend(
    first: Sequence[Point], second: Sequence[Point], key: Callable[[Point], int | str]
) -> list[Point]:
    """Each group's (``key``: its model, or its batch size) steps mixed with the weight (in twentieths)
    that fits the other groups' held-out steps best: the group held out is not among them, though the
    other groups' predictions came from fits that saw it."""
    pairs = list(zip(first, second, strict=True))
    mixed = []
    for group in sorted({key(a) for a in first}, key=str):
        weight = best_weight(paired([(a, b) for a, b in pairs if key(a) != group]))
        mixed += [mix(a, b, weight) for a, b in pairs if key(a) == group]
    return mixed


def blends(first: HeldOut, second: HeldOut) -> list[HeldOut]:
    """Two models' held-out steps mixed: half and half (their geometric mean), and with a fitted weight."""
    (first_lomo, first_batches), (second_lomo, second_batches) = first, second
    half = (
        [mix(a, b, 0.5) for a, b in zip(first_lomo, second_lomo, strict=True)],
        [mix(a, b, 0.5) for a, b in zip(first_batches, second_batches, strict=True)],
    )
    fitted = (
        fitted_blend(first_lomo, second_lomo, lambda p: p.model),
        fitted_blend(first_batches, second_batches, lambda p: p.batch),
    )
    return [half, fitted]


def _column(lomo: Sequence[Point], batches: Sequence[Point]) -> dict[str, float | None]:
    """A model's held-out MAPEs by row of the side-by-side table."""

    def mape(points: Sequence[Point]) -> float | None:
        return mean(p.error for p in points) if points else None

    rows = {"leave one model out": mape(lomo)}
    for model in sorted({p.model for p in lomo}):
        rows[f"  {model}"] = mape([p for p in lomo if p.model == model])
    rows["unseen batch sizes"] = mape(batches)
    for batch in sorted({p.batch for p in batches}):
        rows[f"  batch {batch}"] = mape([p for p in batches if p.batch == batch])
    return rows


def spread_and_floor(store: Store) -> dict[str, dict[str, float]]:
    """Each machine's steps as training reads them (`step_samples`): how far a step's repeats lie apart
    (`repeat_spread`), and each interior one against the line through its model's measured neighbours
    (`neighbour_errors`), overall and per batch size. The floor counts noise and real kinks alike (a CPU's
    convolution kernels switch between batches 8 and 16: benchmarks/README.md)."""
    tables = measured_tables(store)
    steps: list[StepSample] = []
    errors: dict[int, list[float]] = {}
    for machine in machines(store):
        samples = step_samples(store.step_rows(machine), tables)
        steps += samples
        for batch, batch_errors in neighbour_errors(samples).items():
            errors.setdefault(batch, []).extend(batch_errors)
    every = [error for found in errors.values() for error in found]
    floor = {f"batch {batch}": mean(found) for batch, found in sorted(errors.items())}
    return {
        "repeat spread": repeat_spread(steps),
        "floor": {"interior steps": len(every), "all": mean(every) if every else 0.0, **floor},
    }


def neighbour_errors(steps: Sequence[StepSample]) -> dict[int, list[float]]:
    """Each interior step's relative error when read off the line, in log batch and log seconds, through
    its model's measured neighbours: how far the measurements themselves stray between batch sizes."""
    series: dict[tuple[str, str, bool, bool], dict[int, float]] = {}
    for sample in steps:
        # A transformer of the family is measured at three sequence lengths: each its own series.
        size = f"{sample.table.input_shape} {sample.table.sequence_length}"
        key = (sample.model, size, sample.amp, sample.channels_last)
        series.setdefault(key, {})[sample.batch] = sample.seconds
    errors: dict[int, list[float]] = {}
    for times in series.values():
        sizes = sorted(times)
        for low, batch, high in zip(sizes, sizes[1:], sizes[2:], strict=False):
            share = (log(batch) - log(low)) / (log(high) - log(low))
            read = exp(log(times[low]) + share * (log(times[high]) - log(times[low])))
            errors.setdefault(batch, []).append(abs(read - times[batch]) / times[batch])
    return errors


def repeat_spread(steps: Sequence[StepSample]) -> dict[str, float]:
    """Mean log(slowest / fastest) over the steps measured more than once, each measurement as training
    reads it (`step_samples`: at the machine's pace, its run's level out), overall and per batch size."""
    spreads = [(s.batch, log(max(s.runs) / min(s.runs))) for s in steps if len(s.runs) > 1]
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


if __name__ == "__main__":
    sys.exit(main())
