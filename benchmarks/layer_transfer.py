"""How a zoo database's layer fit prices the layers of architectures no zoo has: each architecture's distinct
timed layers measured by the product (``advisor bench run --architecture REF --layers-only --batch-sizes``)
into a scratch database, at the zoo database's pace, against their prices from the layer fit on the zoo
database alone, summed at each batch size with each layer counted as often as the model runs it.

A step cannot be priced better than its layers: where `benchmarks/architecture_transfer.py` finds an
architecture's steps off, this says which of its layers are (issue 51: a convolution's slow path on a tiny
map priced ConvNeXt's linears over four tokens at almost six times their time, until each family had its
booster).

    python -m benchmarks.layer_transfer --zoo DB --work DIR [--architectures REF ...] [--batches 2 8 32]
"""

from __future__ import annotations

import argparse
import statistics
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table

from advisor.argtypes import input_shape
from advisor.introspect.run import introspect
from advisor.predict.features import timed_layers
from advisor.predict.machine import fit_layers
from advisor.predict.registry import layer_samples, machines
from advisor.records import LayerConfig
from advisor.store import NoDatabase, Store
from benchmarks.architecture_transfer import DEFAULT, bench_words, run_advisor, slug, zoo_pace
from benchmarks.layer_heldout import PricedLayer, add_rows


def paced_layers(store: Store, pace_s: float | None) -> dict[LayerConfig, float]:
    """Each layer's median measurement as a ratio to the pace step, at ``pace_s``: the unit the zoo's
    layer fit is trained in, whatever the CPU's speed when the architecture was measured; in seconds for a
    zoo measured without a pace step (None)."""
    found: dict[LayerConfig, list[float]] = {}
    for row in store.layer_rows():
        value = row.median_s if pace_s is None else row.pace_ratio and pace_s * row.pace_ratio
        if row.fits and value:
            found.setdefault(row.config(), []).append(value)
    return {config: statistics.median(values) for config, values in found.items()}


def priced_layers(
    wanted: Counter[LayerConfig], measured: dict[LayerConfig, float], prices: dict[LayerConfig, float]
) -> list[PricedLayer]:
    """Each measured layer's seconds and price, both times its count in the step."""
    return [
        PricedLayer(config, count * measured[config], count * prices[config])
        for config, count in wanted.items()
        if config in measured
    ]


def _measured(args: argparse.Namespace, reference: str, pace_s: float | None) -> dict[LayerConfig, float]:
    """``reference``'s layers at ``--batches``, measured now or read from ``--work``'s earlier run."""
    db = args.work / f"{slug(reference)}-layers.db"
    if not (args.reuse and db.is_file()):
        db.unlink(missing_ok=True)
        shape = ",".join(map(str, args.input_shape))
        batches = ",".join(map(str, args.batches))
        run_advisor(*bench_words(args, reference, shape, db), "--layers-only", "--batch-sizes", batches)
    return paced_layers(Store.open(db), pace_s)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        zoo = Store.existing(args.zoo)
    except NoDatabase as error:
        parser.error(str(error))
    args.work.mkdir(parents=True, exist_ok=True)
    pace_s = None if args.seconds else zoo_pace(zoo)
    (machine, *_) = machines(zoo)
    fit = fit_layers(machine, layer_samples(zoo.layer_rows(machine)))
    table = Table(
        title="layers of architectures no zoo has, predicted against measured", title_justify="left"
    )
    table.add_column("architecture, its layers")
    for batch in args.batches:
        table.add_column(f"batch {batch}", justify="right")
    for reference in args.architectures:
        layer_table = introspect(reference, args.input_shape, {}, allow_factories=True)
        wanted = Counter(c for b in args.batches for c in timed_layers(layer_table, b, False))
        measured = _measured(args, reference, pace_s)
        priced = priced_layers(wanted, measured, fit.layer_seconds(list(wanted)))
        add_rows(table, reference.rpartition(":")[2], priced, args.batches, args.layers)
    Console(width=140).print(table)
    print(
        f"each: the layers' seconds as {args.zoo}'s layer fit predicts them against their measured seconds,"
    )
    print("summed at each batch, each layer as often as a step runs it")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--zoo", type=Path, required=True, help="the zoo's measurements on this machine")
    parser.add_argument("--work", type=Path, required=True, help="a folder for the layers' databases")
    parser.add_argument("--architectures", nargs="+", default=list(DEFAULT))
    parser.add_argument("--input-shape", type=input_shape, default=(3, 32, 32), metavar="C,H,W")
    parser.add_argument("--batches", type=int, nargs="+", default=[2, 8, 32])
    parser.add_argument("--partition", default="cpu", help="the partition the zoo was measured as")
    parser.add_argument("--budget-minutes", type=float, default=10.0)
    parser.add_argument("--layers", type=int, default=3, help="each one's costliest layers shown")
    parser.add_argument(
        "--reuse", action="store_true", help="read each architecture's layers from --work's earlier run"
    )
    parser.add_argument(
        "--seconds",
        action="store_true",
        help="judge in the seconds measured, not at the zoo's pace: a run of a few seconds an architecture "
        "timed the pace step 52-75 ms where the nightly pass timed it 42-51 (benchmarks/README.md)",
    )
    return parser


if __name__ == "__main__":
    raise SystemExit(main())
