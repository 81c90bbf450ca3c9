"""Each part's share of a real training step (`advisor profile`'s parts: convolutions and linears, per-op
dispatch, the optimizer, memory-bound ops), profiled on this machine, beside each step model's predicted
share, all fitted on one database in one run: issue 51's check that a model puts each op class's time where
the step spends it (each predicted share within 25% of the profiled one).

``python -m benchmarks.profile_shares --db DB [--opsum-before WORKTREE/advisor/predict/opsum.py]``: the
profiles are taken ``--repeats`` times, interleaved over the models and batches so a slow spell of a shared
CPU touches every configuration, one thread, and each part's median is kept; pin it (``taskset -c N``).
The database is the machine's nightly pass (`advisor bench run`); its models are fitted once. Under the
table, the check's own floor: the count exact predictions would score against a second set of profiles
(`self_agreement`).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Protocol

import torch
from rich.console import Console
from rich.table import Table

from advisor.bench.architectures import measured_tables
from advisor.bench.profile import profile_step
from advisor.bench.tables import zoo_table
from advisor.introspect import LayerTable
from advisor.predict.machine import fit_machine
from advisor.predict.opsum import fit_opsum
from advisor.predict.registry import layer_samples, machines, step_samples
from advisor.readable import percent
from advisor.records import StepConfig, StepPart
from advisor.store import Store
from benchmarks.predict_zoo import fit_from

_PLAIN = {"input_size": 32, "amp": False, "channels_last": False, "pinned": False, "workers": 0}
"""How the nightly grid's CNN steps run: 32x32, fp32, no loader workers."""
WITHIN = 0.25
"""Issue 51's bound: a predicted share within 25% of the profiled share."""


class Splits(Protocol):
    def parts(
        self, table: LayerTable, batch: int, amp: bool, channels_last: bool
    ) -> dict[StepPart, float]: ...


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--models", default="resnet18,mobilenet_v2")
    parser.add_argument("--batches", default="2,32")
    parser.add_argument("--repeats", type=int, default=5, help="profiles of each configuration (default 5)")
    parser.add_argument("--opsum-before", type=Path, help="another tree's op-sum module, as a third model")
    parser.add_argument(
        "--keep", type=Path, help="a JSON file: its profiles if it exists, else write them there"
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    configs = [(m, int(b)) for m in args.models.split(",") for b in args.batches.split(",")]
    store = Store.existing(args.db)
    (machine, *_) = machines(store)
    steps = step_samples(store.step_rows(machine), measured_tables(store))
    layers = layer_samples(store.layer_rows(machine))
    fitted: list[tuple[str, Splits]] = [
        ("today's", fit_machine(machine, steps, layers)),
        ("op sum", fit_opsum(machine, steps, layers)),
    ]
    if args.opsum_before is not None:
        before: Splits = fit_from(args.opsum_before)(machine, steps, layers)  # type: ignore[assignment]
        fitted.append(("op sum before", before))
    profiled = kept(args.keep) if args.keep and args.keep.exists() else profiles(configs, args.repeats)
    if args.keep and not args.keep.exists():
        write_kept(args.keep, profiled)
    console = Console()
    console.print(share_table(configs, profiled, fitted))
    console.print(agreement_line(self_agreement(configs, profiled)))
    return 0


Profiles = dict[tuple[str, int], list[dict[StepPart, float]]]


def profiles(configs: Sequence[tuple[str, int]], repeats: int) -> Profiles:
    """Each configuration's seconds per part, ``repeats`` profiles interleaved over the configurations."""
    runs: Profiles = {c: [] for c in configs}
    for _ in range(repeats):
        for model, batch in configs:
            config = StepConfig.model_validate({"model": model, "batch": batch, **_PLAIN})
            runs[(model, batch)].append(profile_step(config, torch.device("cpu")))
    return runs


def kept(path: Path) -> Profiles:
    """Profiles ``--keep`` wrote: each configuration's runs, part by part."""
    rows = json.loads(path.read_text())
    return {(m, b): [{StepPart(p): s for p, s in run.items()} for run in runs] for m, b, runs in rows}


def write_kept(path: Path, profiled: Profiles) -> None:
    rows = [
        [m, b, [{str(p): s for p, s in run.items()} for run in runs]] for (m, b), runs in profiled.items()
    ]
    path.write_text(json.dumps(rows))


def shares(seconds: Mapping[StepPart, float]) -> dict[StepPart, float]:
    total = sum(seconds.values())
    return {p: s / total if total > 0 else 0.0 for p, s in seconds.items()}


def share_table(
    configs: Sequence[tuple[str, int]], profiled: Profiles, fitted: Sequence[tuple[str, Splits]]
) -> Table:
    """A row per configuration and part: the profiled share (the median of the profiles' shares, and their
    range), each model's, and whether it is within 25% of the median."""
    table = Table(title="share of the step, profiled and predicted", title_justify="left")
    for column in ("model, batch", "part", "profiled", "profiles' range", *(name for name, _ in fitted)):
        table.add_column(column, justify="left" if column in ("model, batch", "part") else "right")
    inside = [0] * len(fitted)
    for model, batch in configs:
        runs = [shares(run) for run in profiled[(model, batch)]]
        tables = zoo_table(model, 32)
        predicted = [shares(m.parts(tables, batch, False, False)) for _, m in fitted]
        for part in StepPart:
            measured = median(run[part] for run in runs)
            spread = f"{percent(min(r[part] for r in runs))}-{percent(max(r[part] for r in runs))}"
            cells = []
            for i, share in enumerate(p[part] for p in predicted):
                ok = within(share, measured)
                inside[i] += ok
                cells.append(f"{percent(share)} {'ok' if ok else 'off'}")
            table.add_row(f"{model}, {batch}", str(part), percent(measured), spread, *cells)
    count = len(configs) * len(StepPart)
    table.add_row("within 25%", "", "", "", *(f"{w} of {count}" for w in inside))
    return table


DRAWS = 2000
"""Bootstrap draws of `self_agreement`: its counts' percentiles move by under a cell between seeds."""


@dataclass(frozen=True)
class Agreement:
    """The profiles against themselves: per draw, the cells a second set put within 25% of the first."""

    counts: list[int]
    cells: int
    by_cell: dict[tuple[str, int, StepPart], float]
    """Each cell's share of draws within."""


def self_agreement(
    configs: Sequence[tuple[str, int]], profiled: Profiles, draws: int = DRAWS, seed: int = 0
) -> Agreement:
    """How many cells a second set of as many profiles would put within `WITHIN` of the first's median:
    two sets drawn from the profiles taken (with replacement), ``draws`` times. It is the count a model
    that predicted each share exactly would score against a profile, i.e. the check's own floor: a part
    whose profiles spread widely (per-op dispatch: the step less its kernels) fails it however it is
    predicted."""
    rng = random.Random(seed)  # noqa: S311 (a bootstrap, not a secret)
    counts = [0] * draws
    by_cell: dict[tuple[str, int, StepPart], float] = {}
    for model, batch in configs:
        runs = [shares(run) for run in profiled[(model, batch)]]
        for part in StepPart:
            values = [run[part] for run in runs]
            hits = [
                _agrees(rng.choices(values, k=len(values)), rng.choices(values, k=len(values)))
                for _ in counts
            ]
            counts = [c + hit for c, hit in zip(counts, hits, strict=True)]
            by_cell[(model, batch, part)] = sum(hits) / draws
    return Agreement(counts, len(configs) * len(StepPart), by_cell)


def _agrees(first: Sequence[float], second: Sequence[float]) -> bool:
    return within(median(second), median(first))


def within(share: float, measured: float) -> bool:
    """Issue 51's check of one cell."""
    return abs(share - measured) <= WITHIN * measured


def agreement_line(agreement: Agreement) -> str:
    ordered = sorted(agreement.counts)
    every = ordered.count(agreement.cells) / len(ordered)
    low, high = ordered[len(ordered) // 10], ordered[len(ordered) * 9 // 10]
    weak = ", ".join(
        f"{model} at {batch} {part} {percent(share)}"
        for (model, batch, part), share in agreement.by_cell.items()
        if share < 0.9
    )
    return (
        f"the profiles against themselves: a second set as large would put {median(ordered):.0f} of "
        f"{agreement.cells} cells within 25% of these (10th-90th percentile {low}-{high}; {len(ordered):,} "
        f"bootstrap draws; all {agreement.cells} in {percent(every)} of them)"
        + (f"; cells within in under 90% of draws: {weak}" if weak else "")
    )


if __name__ == "__main__":
    sys.exit(main())
