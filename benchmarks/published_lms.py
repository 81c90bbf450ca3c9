"""Language models at their published sizes, which no CPU grid measures, predicted from a CPU database.

GPT-2, BERT-base and T5-small at 128 tokens (the GPU grid's `REAL_SEQUENCE_ZOO`, built by transformers as a
job naming ``gpt2`` is introspected: no model of the CPU grid is 768 wide or has a head of tens of thousands
of outputs) are measured whole on this CPU, each batch twice in a seeded random order among reference steps of
the CPU grid (the small transformer family and four CNNs), then predicted by each step model fitted on the
database alone::

    python -m benchmarks.published_lms plan --out plan.json
    taskset -c 1 python -m advisor.bench.job --plan plan.json --out run.jsonl --device cpu --partition cpu
    python -m benchmarks.published_lms judge --zoo ZOO.db run.jsonl [--step-model today opsum blend]

Truth is in the database's unit: a step's wall seconds times the median, over the reference steps, of the
database's seconds for that step over this run's. A pace step strays with its process (benchmarks/README.md);
a dozen of the grid's own steps do not together. The pace step's reading is printed beside it. Under it, the
served model's band (p10-p90, fitted with its bands as `advisor models train` fits them) and confidence
beside each truth: the band a user is shown for a model the database never measured, and how many it holds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from random import Random

from rich.console import Console
from rich.table import Table

from advisor.bench.architectures import measured_tables
from advisor.bench.night import NightItem, Priority, Tonight
from advisor.bench.plan import Phase, PlanItem, nightly_grid
from advisor.bench.results import read_jsonl
from advisor.bench.sequence import family_table
from advisor.introspect import LayerTable
from advisor.predict.heldout import fit_with_bands
from advisor.predict.machine import MachineModel
from advisor.predict.registry import HELDOUT_FOLDS, layer_samples, machines, step_samples
from advisor.records import StepConfig, StepMeasurement
from advisor.store import Store
from benchmarks.architecture_transfer import zoo_pace
from benchmarks.predict_zoo import STEP_MODELS, step_model_option

TOKENS = 128
PUBLISHED = {"gpt2": (1, 2, 4), "bert-base-uncased": (1, 2, 4), "t5-small": (1, 2, 4, 8)}
"""Batches a CPU takes 1-7 s a step at: the whole run is about seven minutes on one core."""
REFERENCES = (
    *((name, TOKENS, batch) for name in ("tiny_gpt2", "tiny_bert", "tiny_llama") for batch in (8, 32)),
    ("tiny_t5", TOKENS, 8),
    *((name, 32, batch) for name in ("resnet18", "mobilenet_v2") for batch in (8, 32)),
    ("vgg11_bn", 32, 8),
    ("resnet50", 32, 8),
)
SEED = 11
Key = tuple[str, int, int]


def night(seed: int = SEED) -> Tonight:
    """The published models' steps and the references, each twice, in a seeded random order."""
    published = [(name, TOKENS, batch) for name, batches in PUBLISHED.items() for batch in batches]
    keys = [*published, *REFERENCES] * 2
    Random(seed).shuffle(keys)  # noqa: S311 (an order, not a secret)
    grid = nightly_grid("cpu")
    entries = tuple(_step(*key) for key in keys)
    return Tonight(
        machine=None,
        budget_s=1800.0,
        entries=entries,
        grid_items=0,
        covered=0,
        steps=grid.steps,
        warmup=grid.warmup,
        repeats=grid.repeats,
    )


def _step(model: str, size: int, batch: int) -> NightItem:
    config = StepConfig(
        model=model, input_size=size, batch=batch, amp=False, channels_last=False, pinned=False, workers=0
    )
    item = PlanItem(phase=Phase.BATCHES, config=config, estimate_s=5.0)
    return NightItem(priority=Priority.SUBMITTED, subject=model, item=item)


def measured(paths: Sequence[Path]) -> dict[Key, list[tuple[float, float | None]]]:
    """Each step's (wall seconds, ratio to its pace step) from the benchmark job's JSON lines."""
    found: dict[Key, list[tuple[float, float | None]]] = {}
    for path in paths:
        for line in read_jsonl(path):
            step = line.measurement
            if isinstance(step, StepMeasurement) and step.fits and step.median_s:
                c = step.config
                found.setdefault((c.model, c.input_size, c.batch), []).append(
                    (step.median_s, step.pace_ratio)
                )
    return found


def judge(zoo: Path, runs: Sequence[Path], step_models: Sequence[str]) -> tuple[Table, Table]:
    """Each step model's point predictions against the run's truth, then the served model's band."""
    store = Store.existing(zoo)
    every = machines(store)
    if not every:
        raise SystemExit(f"{zoo}: no steps measured, so no machine to judge")
    machine = every[0]
    samples = step_samples(store.step_rows(machine), measured_tables(store))
    known = {
        (s.model, s.table.sequence_length or s.table.input_shape[1], s.batch): s.seconds
        for s in samples
        if not s.amp and not s.channels_last
    }
    steps = measured(runs)
    shared = [key for key in REFERENCES if key in steps and key in known]
    ratios = [known[key] / statistics.median(s for s, _ in steps[key]) for key in shared]
    if not ratios:
        raise SystemExit(
            f"{', '.join(map(str, runs))} and {zoo}: no reference step measured in both: no unit to judge in"
        )
    unit, pace = statistics.median(ratios), zoo_pace(store)
    layers = layer_samples(store.layer_rows(machine))
    fits = {name: STEP_MODELS[name](machine, samples, layers) for name in step_models}
    table = Table(
        title=f"step time at {TOKENS} tokens, {len(ratios)} reference steps: x{unit:.3f} "
        f"({min(ratios):.3f}-{max(ratios):.3f}) into {zoo.name}'s unit",
        title_justify="left",
    )
    for column in (
        "model",
        "batch",
        "measured ms",
        "by the pace step ms",
        *(f"{n} ms (error)" for n in fits),
    ):
        table.add_column(column, justify="left" if column == "model" else "right")
    errors: dict[str, list[float]] = {name: [] for name in fits}
    truths = {
        key: unit * statistics.median(s for s, _ in steps[key])
        for key in sorted(steps)
        if key[0] in PUBLISHED
    }
    tables = {(model, size): family_table(model, size) for model, size, _ in truths}
    for (model, size, batch), truth in truths.items():
        paced = [r for _, r in steps[model, size, batch] if r]
        by_pace = f"{pace * statistics.median(paced) * 1000:.0f}" if pace and paced else "-"
        cells = []
        for name, fit in fits.items():
            predicted = fit.step_seconds(tables[model, size], batch, False, False)
            errors[name].append(predicted / truth - 1)
            cells.append(f"{predicted * 1000:.0f} ({predicted / truth - 1:+.0%})")
        table.add_row(model, str(batch), f"{truth * 1000:.0f}", by_pace, *cells)
    mape = [f"{statistics.mean(abs(e) for e in found):.1%}" for found in errors.values()]
    table.add_row("MAPE", "", "", "", *mape, end_section=True)
    served = fit_with_bands(machine, samples, layers, folds=HELDOUT_FOLDS)
    return table, band_table(served, truths, tables)


def band_table(
    served: MachineModel, truths: Mapping[Key, float], tables: Mapping[tuple[str, int], LayerTable]
) -> Table:
    """The served prediction's p10-p90 band and confidence beside each truth (``tables``: each model's at
    its size), and how many it holds: the band a user is shown, judged on models no database measured."""
    table = Table(title="the served prediction's band", title_justify="left")
    for column in (
        "model",
        "batch",
        "measured ms",
        "p10 ms",
        "p50 ms",
        "p90 ms",
        "evidence",
        "confidence",
        "held",
    ):
        table.add_column(column, justify="left" if column in ("model", "evidence", "confidence") else "right")
    inside = under = 0
    for (model, size, batch), truth in truths.items():
        found = served.predict(tables[model, size], batch, False, False)
        held = (
            "yes"
            if found.step_p10_s <= truth <= found.step_p90_s
            else ("under p10" if truth < found.step_p10_s else "over p90")
        )
        inside += held == "yes"
        under += truth <= found.step_p90_s
        times = (f"{s * 1000:.0f}" for s in (truth, found.step_p10_s, found.step_s, found.step_p90_s))
        table.add_row(model, str(batch), *times, found.band.evidence, found.band.confidence, held)
    table.caption = f"{inside} of {len(truths)} inside p10-p90, {under} at or under p90"
    return table


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "plan":
        tonight = night(args.seed)
        args.out.write_text(tonight.model_dump_json(), encoding="utf-8")
        print(f"{len(tonight.entries)} steps")
        return 0
    console = Console(width=140)
    for table in judge(args.zoo, args.runs, args.step_model):
        console.print(table)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    plan = commands.add_parser("plan", help="the published models' and the references' steps, as a night")
    plan.add_argument("--out", type=Path, required=True)
    plan.add_argument("--seed", type=int, default=SEED)
    judged = commands.add_parser("judge", help="each step model, fitted on --zoo, against the run's steps")
    judged.add_argument("--zoo", type=Path, required=True, help="a nightly CPU database of this machine")
    judged.add_argument("runs", type=Path, nargs="+", help="the benchmark job's JSON lines")
    step_model_option(
        judged, "step models fitted on --zoo, a column each", default=("today", "opsum", "blend")
    )
    return parser


if __name__ == "__main__":
    sys.exit(main())
