"""Where a model held out whole errs in its layers: its own layer geometries (those no other model of the
database has, which leave one model out drops: `advisor.predict.heldout.without_models`) priced by a layer
fit without them, against their micro-benchmarks, summed at each batch size as a step sums them.

A step model cannot price a held-out model's steps better than its layers are priced: on a CPU pass
(benchmarks/README.md, issue 51) the worst held-out models' errors lie in layers whose regime no other zoo
model reaches, which no layer feature fixes, only layers measured there do.

    python -m benchmarks.layer_heldout --db DB [--models vgg11_bn,regnet_y_400mf] [--layers 4]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from advisor.bench.architectures import measured_tables
from advisor.ops import op_of
from advisor.predict.heldout import without_models
from advisor.predict.machine import LayerSample, StepSample, fit_layers
from advisor.predict.registry import layer_samples, machines, step_samples
from advisor.records import LayerConfig
from advisor.store import NoDatabase, Store


@dataclass(frozen=True)
class PricedLayer:
    """One held-out layer measurement and the price a fit without it gives."""

    config: LayerConfig
    measured_s: float
    predicted_s: float


def by_batch(priced: Sequence[PricedLayer]) -> dict[int, float]:
    """Predicted over measured seconds at each batch size, each summed first: a step pays their sum, so a
    small layer priced twice over weighs what it costs."""
    measured: dict[int, float] = {}
    predicted: dict[int, float] = {}
    for layer in priced:
        batch = layer.config.batch
        measured[batch] = measured.get(batch, 0.0) + layer.measured_s
        predicted[batch] = predicted.get(batch, 0.0) + layer.predicted_s
    return {batch: predicted[batch] / measured[batch] for batch in sorted(measured)}


def held_out_layers(
    machine: str, steps: Sequence[StepSample], layers: Sequence[LayerSample], model: str
) -> list[PricedLayer]:
    """``model``'s own timed layers, each measurement priced by the layers fitted without them."""
    kept = without_models(steps, layers, {model})
    inside = set(map(id, kept))
    own = [s for s in layers if id(s) not in inside and op_of(s.config).timed]
    if not own:
        return []
    prices = fit_layers(machine, kept).layer_seconds([s.config for s in own])
    return [PricedLayer(s.config, s.seconds, prices[s.config]) for s in own]


def geometry(config: LayerConfig) -> str:
    """A layer as a reader names it: its op, channels, kernel, stride, groups and map."""
    channels = f"{config.op} {config.in_channels}->{config.out_channels}"
    if op_of(config).family == "matrix":
        return channels
    grouped = f" g{config.groups}" if config.groups > 1 else ""
    stride = f" s{config.stride[0]}" if config.stride != (1, 1) else ""
    kernel = "x".join(map(str, config.kernel))
    layout = " channels-last" if config.channels_last else ""
    return f"{channels} {kernel}{stride}{grouped} on {config.height}x{config.width}{layout}"


def _off(ratio: float | None) -> str:
    """How far a price lies from the measurement, signed: "-35%" priced a third under."""
    if ratio is None:
        return ""
    return "0%" if abs(ratio - 1) < 0.005 else f"{ratio - 1:+.0%}"


def report(store: Store, title: str, wanted: Sequence[str], top: int) -> Table:
    tables = measured_tables(store)
    table = Table(title=f"own layers held out, predicted against measured ({title})", title_justify="left")
    for machine in machines(store):
        steps = step_samples(store.step_rows(machine), tables)
        layers = layer_samples(store.layer_rows(machine))
        priced = {
            m: held_out_layers(machine, steps, layers, m) for m in wanted or sorted({s.model for s in steps})
        }
        batches = sorted({p.config.batch for found in priced.values() for p in found})
        if not table.columns:
            table.add_column("model, its own layers")
            for batch in batches:
                table.add_column(f"batch {batch}", justify="right")
        for model, found in priced.items():
            add_rows(table, model, found, batches, top)
    return table


def add_rows(
    table: Table, name: str, priced: Sequence[PricedLayer], batches: Sequence[int], top: int
) -> None:
    """A model's row (its layers' sum at each batch), then its ``top`` costliest geometries'."""
    shapes = by_geometry(priced)
    total = by_batch(priced)
    table.add_row(f"{name} ({len(shapes)})", *(_off(total.get(b)) for b in batches))
    costliest = sorted(shapes.items(), key=lambda item: -sum(p.measured_s for p in item[1]))
    for shape, rows in costliest[:top]:
        one = by_batch(rows)
        table.add_row(f"  {shape}", *(_off(one.get(b)) for b in batches))


def by_geometry(priced: Sequence[PricedLayer]) -> dict[str, list[PricedLayer]]:
    """The measurements of each geometry (``geometry``), at every batch size."""
    shapes: dict[str, list[PricedLayer]] = {}
    for layer in priced:
        shapes.setdefault(geometry(layer.config), []).append(layer)
    return shapes


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--db", type=Path, required=True, help="a machine's benchmark database")
    parser.add_argument("--models", default="", help="comma-separated (default: every model with steps)")
    parser.add_argument(
        "--layers", type=int, default=3, help="each model's costliest own layers shown (default 3)"
    )
    args = parser.parse_args(argv)
    try:
        store = Store.existing(args.db)
    except NoDatabase as error:
        parser.error(str(error))
    wanted = [m for m in args.models.split(",") if m]
    measured = {row.model for machine in machines(store) for row in store.step_rows(machine)}
    if unknown := sorted(set(wanted) - measured):
        parser.error(f"--models: no steps of {', '.join(unknown)} in {args.db}")
    Console(width=160).print(report(store, str(args.db), wanted, args.layers))
    print("each: its own layers' predicted seconds against their measured seconds, summed at each batch")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
