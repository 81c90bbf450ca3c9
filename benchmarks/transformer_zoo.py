"""The transformer family of the zoo on this CPU (`advisor.bench.zoo.SEQUENCE_ZOO`: GPT-2, BERT, T5, a
Llama block with RMSNorm/SwiGLU/GQA, ViT, two blocks 128 wide, AdamW): measured into a copy of a nightly
CPU database, then each family member predicted with the step and memory models fitted without it.

Measure (one pass in a random order, every step and layer paced as the nightly plan's are; pin it with
``taskset -c 1``): ``python -m benchmarks.transformer_zoo --db DB --out RUN.jsonl``. Evaluate:
``python -m benchmarks.transformer_zoo --db DB --evaluate [--step-model today opsum blend]`` (each step
model's figures side by side, keyed by its name). Two predictors per member, side by side:
*before*, the models fitted on the database's other models only (what a machine trained on the CNN zoo
predicts for a transformer it never measured), and *leave one model out*, fitted on every other model
including the rest of the family, with the member's own layer geometries dropped.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from statistics import mean

import torch

from advisor.bench.plan import DeviceProfile, Phase, build_plan, nightly_grid
from advisor.bench.reporting import terminal_reporter
from advisor.bench.results import jsonl_sink, read_jsonl
from advisor.bench.run import RunOn, run_plan
from advisor.bench.tables import zoo_table
from advisor.bench.zoo import CPU_SEQUENCE_MODELS, CPU_SIZES
from advisor.predict.evaluate import Fit
from advisor.predict.heldout import without_models
from advisor.predict.machine import StepSample, fit_memory
from advisor.predict.registry import layer_samples, machines, step_samples
from advisor.store import Store
from benchmarks.predict_zoo import STEP_MODELS, step_model_option

_BATCHES = (1, 2, 4, 8, 16, 32)
_LAYER_BATCHES = (16, 1, 2, 8, 32)
_FAMILY_PHASES = frozenset({Phase.COARSE, Phase.LAYERS, Phase.BATCHES, Phase.LAYER_GRID})


def measure(db: Path, out: Path, budget_minutes: float, seed: int | None, models: tuple[str, ...]) -> None:
    """One pass over ``models``' steps and layers (none: their steps only) in a random order."""
    grid = replace(
        nightly_grid("cpu"),
        models=models or CPU_SEQUENCE_MODELS,
        sizes=CPU_SIZES,
        batches=_BATCHES,
        coarse=_BATCHES[::2],
        layer_models=() if models else CPU_SEQUENCE_MODELS,
        layer_batches=_LAYER_BATCHES,
    )
    plan = build_plan(grid, DeviceProfile.assumed("cpu"), zoo_table)
    # The sweeps (bandwidth, launches, optimizer updates) depend on no model: the database has them.
    family = [item for item in plan.items if item.phase in _FAMILY_PHASES]
    plan = plan.model_copy(update={"items": tuple(family)})
    order = random.Random(seed)  # noqa: S311 (an order, not a secret)
    plan = plan.model_copy(update={"items": tuple(order.sample(plan.items, len(plan.items)))})
    print(f"{len(plan.items)} items, estimated {plan.estimate_s / 60:.1f} min", file=sys.stderr)
    with terminal_reporter(len(plan.items), sys.stderr) as progress:
        summary = run_plan(
            plan,
            RunOn(torch.device("cpu"), "cpu"),
            budget_s=budget_minutes * 60,
            sink=jsonl_sink(out),
            progress=progress,
        )
    stored = Store.open(db).ingest(read_jsonl(out))
    print(summary.model_dump_json())
    print(f"{stored} new rows in {db}", file=sys.stderr)


Errors = dict[str, dict[str, list[float]]]
"""Per held-out model: its steps' relative errors in ``time`` and in peak ``memory``."""


def _errors(machine: str, steps: list[StepSample], held: set[str], store: Store, fit: Fit) -> Errors:
    """The held-out models' errors, the step and memory models fitted on the other models' steps and on
    the layers but for geometries only the held-out models have."""
    layers = layer_samples(store.layer_rows(machine))
    train = [s for s in steps if s.model not in held]
    fitted = fit(machine, train, without_models(steps, layers, held))
    memory = fit_memory(train)
    errors: Errors = {model: {"time": [], "memory": []} for model in held}
    for sample in (s for s in steps if s.model in held):
        predicted = fitted.step_seconds(sample.table, sample.batch, sample.amp, sample.channels_last)
        errors[sample.model]["time"].append(abs(predicted - sample.seconds) / sample.seconds)
        if sample.peak_memory_bytes:
            peak = memory.predict(sample.table, sample.batch, sample.amp)
            errors[sample.model]["memory"].append(
                abs(peak - sample.peak_memory_bytes) / sample.peak_memory_bytes
            )
    return errors


def evaluate(db: Path, fit: Fit) -> dict[str, object]:
    """Before (the family never measured) and leave one model out, per member and over the family."""
    store = Store.open(db)
    (machine,) = machines(store)
    steps = step_samples(store.step_rows(machine), zoo_table)
    family = sorted({s.model for s in steps} & set(CPU_SEQUENCE_MODELS))
    before = _errors(machine, steps, set(family), store, fit)
    lomo: Errors = {}
    for model in family:
        lomo |= _errors(machine, steps, {model}, store, fit)
    rows = {
        model: {
            "steps": len(lomo[model]["time"]),
            **{
                f"{arm}_{what}": _mape(errors[model][what])
                for arm, errors in (("before", before), ("lomo", lomo))
                for what in ("time", "memory")
            },
        }
        for model in family
    }
    overall = {
        f"{arm}_{what}": _mape([e for model in family for e in errors[model][what]])
        for arm, errors in (("before", before), ("lomo", lomo))
        for what in ("time", "memory")
    }
    return {"machine": machine, "steps": len(steps), "family": rows, "overall": overall}


def _mape(errors: Sequence[float]) -> float | None:
    return round(mean(errors), 4) if errors else None


def _models(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    unknown = sorted(set(names) - set(CPU_SEQUENCE_MODELS))
    if unknown:
        raise argparse.ArgumentTypeError(f"not in the family: {', '.join(unknown)}")
    return names


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--db", type=Path, required=True, help="a copy of a nightly CPU database")
    parser.add_argument("--out", type=Path, help="JSON lines to write as it measures")
    parser.add_argument("--budget-minutes", type=float, default=8.0)
    parser.add_argument("--seed", type=int, help="of the measuring order (default: a new one each run)")
    parser.add_argument("--evaluate", action="store_true", help="evaluate --db instead of measuring")
    step_model_option(
        parser, "the step models evaluated, side by side in one run (default: today)", default=["today"]
    )
    parser.add_argument(
        "--steps-of", type=_models, default=(), help="measure only these members' steps (comma-separated)"
    )
    args = parser.parse_args(argv)
    if args.evaluate:
        found = {name: evaluate(args.db, STEP_MODELS[name]) for name in args.step_model}
        print(json.dumps(found, indent=2))
        return 0
    if args.out is None:
        parser.error("--out is required to measure")
    torch.set_num_threads(1)
    measure(args.db, args.out, args.budget_minutes, args.seed, args.steps_of)
    return 0


if __name__ == "__main__":
    sys.exit(main())
