"""The predictor's parts against GPU measurements by others (`../shared/data`): what a deployment can trust.

Three sections (``--section``, default all), each calling the product's own code:

**Layer times** (`advisor.predict.machine.fit_layers`, the part of a machine's model that prices a convolution
the nightly benchmark never measured): on DeepBench's forward + backward (input and weight gradient)
times of 55 convolution geometries at batch 4-32 on 11 devices, five folds by geometry per device: trained on
the others' rows, each held-out geometry priced at its batch sizes, against a constant FLOP rate (the
device's median seconds per FLOP over the training rows).

**Batch interpolation** of a model measured whole (the measured-curve path of
`advisor.predict.machine.MachineModel.predict`: the log ratio of the step time to its base, interpolated in
log batch with `advisor.predict.curves.interpolate`; here the base is the per-sample cost, since public data
has no layer tables): each interior batch size of a single-GPU curve held out and predicted from the others,
on Sia (T4, V100, A100, RTX) and Gavel (K80, P100, V100; both of its campaigns, whose disagreement on the same
jobs is the noise floor), against linear interpolation of the step time.

**The roofline fallback** (`advisor.predict.scaling`), which estimates a GPU type
nobody benchmarked from one that was, by the ratio of ``max(FLOPs / peak, bytes / bandwidth)`` on the two
devices. On Sia's single-GPU step times (T4 = ``aws``, V100 = ``azure``, A100-40GB = ``dgx``), for every
ordered pair of GPU types, application and batch size measured on both: the measured step-time ratio
against

- the roofline ratio, from the product's own layer table of the application's model (ResNet-18 at 32x32 for
  ``cifar10``, ResNet-50 at 224x224 for ``imagenet``; Sia's other applications are no torchvision
  classifier, so they have no table) and the product's GPU specifications;
- a constant: the median measured ratio of the same GPU pair on Sia's *other* applications (all seven),
  which any admin could compute from one benchmark night.

Prints the error of each (mean absolute percentage, ``|predicted / measured - 1|``), per group and overall;
``--json`` for the rows. Run from the repository root:
``python -m benchmarks.public_gpu [--data ../shared/data] [--section layers|batches|roofline] [--json]``.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import statistics
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from itertools import permutations
from pathlib import Path
from typing import Any

import numpy as np

from advisor.introspect.run import introspect
from advisor.predict.curves import interpolate
from advisor.predict.features import layer_flops
from advisor.predict.machine import LayerSample, fit_layers
from advisor.predict.scaling import match_spec, roofline_ratio
from advisor.predict.service import load_specs
from advisor.records import LayerConfig
from advisor.settings import load_settings
from benchmarks.harness.truth import StepTable

ROOT = Path(__file__).resolve().parent.parent

GPU = {"aws": "T4", "azure": "V100", "dgx": "A100-SXM4-40GB"}
"""Sia's clusters for the roofline pairs (the product's specifications name these GPUs)."""
TABLES = {
    "cifar10": ("resnet18", (3, 32, 32), {"num_classes": 10}),
    "imagenet": ("resnet50", (3, 224, 224), {}),
}


@dataclass(frozen=True)
class Pair:
    base: str
    target: str
    application: str
    batch: int
    measured: float
    """Target step time over base step time."""
    roofline: float | None
    constant: float | None


SECTIONS = ("layers", "batches", "roofline")
FOLDS = 5


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--section", choices=SECTIONS, action="append", help="default: every section")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    chosen = args.section or list(SECTIONS)
    rows: dict[str, list[Any]] = {}
    if "layers" in chosen:
        rows["layers"] = _layer_rows(_deepbench(args.data / "deepbench" / "train_conv_fp32.csv"))
    if "batches" in chosen:
        curves = {
            **_sia_curves(args.data / "sia" / "step_times.csv"),
            **_gavel_curves(args.data / "gavel"),
        }
        rows["batches"] = _interpolation_rows(curves)
    if "roofline" in chosen:
        rows["roofline"] = _pairs(_single_gpu_steps(args.data / "sia" / "step_times.csv"))
    if args.json:
        print(json.dumps({name: [asdict(row) for row in found] for name, found in rows.items()}, indent=2))
        return 0
    if "layers" in rows:
        _print_layers(rows["layers"])
    if "batches" in rows:
        _print_batches(rows["batches"], _gavel_noise(args.data / "gavel"))
    if "roofline" in rows:
        _print_roofline(rows["roofline"])
    return 0


def _print_roofline(pairs: list[Pair]) -> None:
    print("roofline fallback on Sia (single GPU): |predicted / measured - 1|, mean over batch sizes")
    print(f"{'base -> target':<28} {'application':<12} {'rows':>4} {'roofline':>9} {'constant':>9}")
    for (base, target, application), group in _groups(pairs).items():
        roof = _error(group, "roofline", "measured", 0)
        const = _error(group, "constant", "measured", 0)
        print(f"{base + ' -> ' + target:<28} {application:<12} {len(group):>4} {roof:>9} {const:>9}")
    with_tables = [p for p in pairs if p.roofline is not None]
    roof, const = (
        _error(with_tables, "roofline", "measured", 0),
        _error(with_tables, "constant", "measured", 0),
    )
    print(f"overall, where a table exists ({len(with_tables)} rows): roofline {roof}, constant {const}")
    print(f"the constant on all {len(pairs)} rows: {_error(pairs, 'constant', 'measured', 0)}")


@dataclass(frozen=True)
class LayerRow:
    device: str
    geometry: str
    batch: int
    measured_s: float
    product_s: float
    """`fit_layers` trained without this geometry: the booster's times at the trained batch sizes, and the
    polyline through them."""
    flop_rate_s: float


def _deepbench(path: Path) -> dict[str, list[LayerSample]]:
    """Per device, DeepBench's convolutions as the product's layer micro-benchmarks: fwd + both gradients."""
    samples: dict[str, list[LayerSample]] = defaultdict(list)
    with path.open(newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            number = {key: int(row[key]) for key in row if key not in ("gpu", "source") and "ms" not in key}
            config = LayerConfig(
                op="conv2d",
                in_channels=number["C"],
                out_channels=number["K"],
                kernel=(number["filter_h"], number["filter_w"]),
                stride=(number["stride_h"], number["stride_w"]),
                padding=(number["pad_h"], number["pad_w"]),
                dilation=(1, 1),
                groups=1,
                height=number["H"],
                width=number["W"],
                batch=number["N"],
                amp=False,
                cudnn_benchmark=True,
            )
            samples[row["gpu"]].append(LayerSample(config, float(row["total_ms"]) / 1000))
    return dict(samples)


def _geometry(config: LayerConfig) -> str:
    c = config
    return (
        f"{c.in_channels}->{c.out_channels} {c.kernel[0]}x{c.kernel[1]}/{c.stride[0]} "
        f"{c.height}x{c.width} pad {c.padding[0]},{c.padding[1]}"
    )


def _layer_rows(devices: dict[str, list[LayerSample]]) -> list[LayerRow]:
    rows = []
    for device, samples in sorted(devices.items()):
        geometries = sorted({_geometry(s.config) for s in samples})
        order = np.random.default_rng(0).permutation(len(geometries))
        fold_of = {geometry: int(order[i]) % FOLDS for i, geometry in enumerate(geometries)}
        for fold in range(FOLDS):
            training = [s for s in samples if fold_of[_geometry(s.config)] != fold]
            held_out = [s for s in samples if fold_of[_geometry(s.config)] == fold]
            model = fit_layers(device, training)
            rate = statistics.median(s.seconds / layer_flops(s.config) for s in training)
            priced = model.layer_seconds([s.config for s in held_out])
            rows += [
                LayerRow(
                    device,
                    _geometry(s.config),
                    s.config.batch,
                    s.seconds,
                    priced[s.config],
                    rate * layer_flops(s.config),
                )
                for s in held_out
            ]
    return rows


def _print_layers(rows: list[LayerRow]) -> None:
    print(f"layer times on DeepBench's convolutions, {FOLDS} folds by geometry: |predicted / measured - 1|")
    print(f"{'device':<18} {'rows':>4} {'product':>8} {'FLOP rate':>9}")
    by_device: dict[str, list[LayerRow]] = defaultdict(list)
    for row in rows:
        by_device[row.device].append(row)
    for device, group in by_device.items():
        print(
            f"{device:<18} {len(group):>4} {_error(group, 'product_s'):>8} {_error(group, 'flop_rate_s'):>9}"
        )
    print(f"{'all':<18} {len(rows):>4} {_error(rows, 'product_s'):>8} {_error(rows, 'flop_rate_s'):>9}")
    print()


def _error(
    rows: Sequence[LayerRow | BatchRow | Pair], predicted: str, measured: str = "measured_s", digits: int = 1
) -> str:
    """Mean ``|predicted / measured - 1|`` over the rows that have a prediction, as a percentage."""
    errors = [
        abs(value / getattr(row, measured) - 1)
        for row in rows
        if (value := getattr(row, predicted)) is not None
    ]
    return f"{100 * statistics.fmean(errors):.{digits}f}%" if errors else "-"


@dataclass(frozen=True)
class BatchRow:
    source: str
    application: str
    gpu: str
    batch: int
    measured_s: float
    product_s: float
    """The measured curve's rule: log(step / batch) interpolated in log batch between the neighbours."""
    linear_s: float


Curves = dict[tuple[str, str, str], list[tuple[int, float]]]
"""(source, application, GPU) -> (batch, step seconds), one GPU."""


def _sia_curves(path: Path) -> Curves:
    """Every GPU type of Sia's table (the replay's reading: T4, V100, A100, RTX 2080Ti), one GPU."""
    curves: Curves = defaultdict(list)
    for row in StepTable.load(path).rows:
        if row.gpus == 1 and row.nodes == 1:
            curves[("sia", row.application, row.gpu_type)].append((row.local_batch, row.step_s))
    return dict(curves)


GAVEL_GPUS = ("k80", "p100", "v100")
GAVEL_CAMPAIGNS = {"physical": "physical_cluster", "simulation": "simulation"}


def _gavel_steps(folder: Path, campaign: str) -> dict[tuple[str, str, int], float]:
    """(model, GPU, batch) -> seconds per step on one GPU (Gavel gives steps per second)."""
    path = folder / f"{GAVEL_CAMPAIGNS[campaign]}_throughputs_isolated_tidy.csv"
    with path.open(encoding="utf-8") as handle:
        return {
            (row["model"], row["gpu_type"], int(row["batch_size"])): 1 / throughput
            for row in csv.DictReader(handle)
            if row["scale_factor"] == "1"
            and row["gpu_type"] in GAVEL_GPUS
            and row["batch_size"]  # A3C and CycleGAN name none: no curve
            and (throughput := float(row["isolated_throughput_steps_per_s"])) > 0  # 0: it did not run
        }


def _gavel_curves(folder: Path) -> Curves:
    curves: Curves = defaultdict(list)
    for campaign in GAVEL_CAMPAIGNS:
        for (model, gpu, batch), seconds in _gavel_steps(folder, campaign).items():
            curves[(f"gavel-{campaign}", model, gpu)].append((batch, seconds))
    return dict(curves)


def _gavel_noise(folder: Path) -> str:
    """How far Gavel's two campaigns lie apart on the same model, GPU and batch."""
    first, second = (_gavel_steps(folder, campaign) for campaign in GAVEL_CAMPAIGNS)
    errors = [abs(second[key] / seconds - 1) for key, seconds in first.items() if key in second]
    worst = max((abs(second[key] / seconds - 1), key[0]) for key, seconds in first.items() if key in second)
    return (
        f"a median {100 * statistics.median(errors):.1f}% and a mean {100 * statistics.fmean(errors):.1f}% "
        f"over {len(errors)} pairs (the worst: {worst[0] + 1:.0f}x, {worst[1]})"
    )


def _interpolation_rows(curves: Curves) -> list[BatchRow]:
    rows = []
    for (source, application, gpu), points in sorted(curves.items()):
        points = sorted(points)
        for index in range(1, len(points) - 1):
            batch, seconds = points[index]
            others = points[:index] + points[index + 1 :]
            ratios = [(math.log(b), math.log(t / b)) for b, t in others]
            product = batch * math.exp(interpolate(ratios, math.log(batch)))
            (b0, t0), (b1, t1) = others[index - 1], others[index]
            linear = t0 + (t1 - t0) * (batch - b0) / (b1 - b0)
            rows.append(BatchRow(source, application, gpu, batch, seconds, product, linear))
    return rows


def _print_batches(rows: list[BatchRow], noise: str) -> None:
    print("batch interpolation, each interior batch of a one-GPU curve held out: |predicted / measured - 1|")
    print(f"{'source':<18} {'GPU':<15} {'rows':>4} {'product':>8} {'linear':>8}")
    groups: dict[tuple[str, str], list[BatchRow]] = defaultdict(list)
    for row in rows:
        groups[(row.source, row.gpu)].append(row)
    for (source, gpu), group in sorted(groups.items()):
        product, linear = _error(group, "product_s"), _error(group, "linear_s")
        print(f"{source:<18} {gpu:<15} {len(group):>4} {product:>8} {linear:>8}")
    print(f"{'all':<34} {len(rows):>4} {_error(rows, 'product_s'):>8} {_error(rows, 'linear_s'):>8}")
    print(f"Gavel's two campaigns on the same jobs differ by {noise}")
    print()


def _single_gpu_steps(path: Path) -> dict[tuple[str, str, int], float]:
    """(application, GPU, local batch) -> step seconds, one GPU on one node."""
    with path.open(newline="", encoding="utf-8") as handle:
        return {
            (row["application"], GPU[row["cluster"]], int(row["local_bsz"])): float(row["step_time"])
            for row in csv.DictReader(handle)
            if row["cluster"] in GPU and row["num_gpus"] == "1" and row["num_nodes"] == "1"
        }


def _pairs(steps: dict[tuple[str, str, int], float]) -> list[Pair]:
    specs = load_specs(load_settings(os.environ).gpu_specs)
    devices = {name: match_spec(name, specs) for name in GPU.values()}
    measured = [
        (base, target, app, batch, steps[(app, target, batch)] / seconds)
        for (app, base, batch), seconds in steps.items()
        for target in GPU.values()
        if target != base and (app, target, batch) in steps
    ]
    pairs = []
    for base, target, app, batch, ratio in measured:
        others = [r for b, t, a, _, r in measured if (b, t) == (base, target) and a != app]
        roofline = None
        base_spec, target_spec = devices[base], devices[target]
        if app in TABLES and base_spec is not None and target_spec is not None:
            model, shape, kwargs = TABLES[app]
            costs = introspect(model, shape, kwargs, allow_factories=False).at_batch(batch).total
            bytes_moved = costs.bytes_read + costs.bytes_written
            roofline = roofline_ratio(costs.train_flops, bytes_moved, base_spec, target_spec)
        constant = statistics.median(others) if others else None
        pairs.append(Pair(base, target, app, batch, ratio, roofline, constant))
    return pairs


def _groups(pairs: list[Pair]) -> dict[tuple[str, str, str], list[Pair]]:
    groups: dict[tuple[str, str, str], list[Pair]] = {}
    for base, target in permutations(GPU.values(), 2):
        for pair in pairs:
            if (pair.base, pair.target) == (base, target):
                groups.setdefault((base, target, pair.application), []).append(pair)
    return groups


if __name__ == "__main__":
    sys.exit(main())
