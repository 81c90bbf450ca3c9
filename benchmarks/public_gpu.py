"""The predictor's parts against GPU measurements by others (`../shared/data`): what a deployment can trust.

Section implemented so far: **the roofline fallback** (`advisor.predict.scaling`), which estimates a GPU type
nobody benchmarked from one that was, by the ratio of ``max(FLOPs / peak, bytes / bandwidth)`` on the two
devices. On Sia's single-GPU step times (T4 = ``aws``, V100 = ``azure``, A100-40GB = ``dgx``), for every
ordered pair of GPU types, application and batch size measured on both: the measured step-time ratio
against

- the roofline ratio, from the product's own layer table of the application's model (ResNet-18 at 32x32 for
  ``cifar10``, ResNet-50 at 224x224 for ``imagenet``; Sia's other applications are no torchvision
  classifier, so they have no table) and the product's GPU specifications;
- a constant: the median measured ratio of the same GPU pair on Sia's *other* applications (all seven),
  which any admin could compute from one benchmark night.

Prints the error of each (mean absolute percentage), per pair and overall; ``--json`` for the rows. Run from
the repository root: ``python benchmarks/public_gpu.py [--data ../shared/data] [--json]``.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from dataclasses import asdict, dataclass
from itertools import permutations
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from advisor import paths  # noqa: E402 (after the path set-up)
from advisor.introspect.run import introspect  # noqa: E402
from advisor.predict.scaling import match_spec, roofline_ratio  # noqa: E402
from advisor.predict.service import load_specs  # noqa: E402

GPU = {"aws": "T4", "azure": "V100", "dgx": "A100-SXM4-40GB"}
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


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    steps = _single_gpu_steps(args.data / "sia" / "step_times.csv")
    pairs = _pairs(steps)
    if args.json:
        print(json.dumps([asdict(pair) for pair in pairs], indent=2))
        return 0
    print("roofline fallback on Sia (single GPU): |predicted / measured - 1|, mean over batch sizes")
    print(f"{'base -> target':<28} {'application':<12} {'rows':>4} {'roofline':>9} {'constant':>9}")
    for (base, target, application), group in _groups(pairs).items():
        roof = _mape([p for p in group if p.roofline is not None], "roofline")
        const = _mape(group, "constant")
        print(f"{base + ' -> ' + target:<28} {application:<12} {len(group):>4} {roof:>9} {const:>9}")
    with_tables = [p for p in pairs if p.roofline is not None]
    roof, const = _mape(with_tables, "roofline"), _mape(with_tables, "constant")
    print(f"overall, where a table exists ({len(with_tables)} rows): roofline {roof}, constant {const}")
    print(f"the constant on all {len(pairs)} rows: {_mape(pairs, 'constant')}")
    return 0


def _single_gpu_steps(path: Path) -> dict[tuple[str, str, int], float]:
    """(application, GPU, local batch) -> step seconds, one GPU on one node."""
    with path.open(newline="", encoding="utf-8") as handle:
        return {
            (row["application"], GPU[row["cluster"]], int(row["local_bsz"])): float(row["step_time"])
            for row in csv.DictReader(handle)
            if row["cluster"] in GPU and row["num_gpus"] == "1" and row["num_nodes"] == "1"
        }


def _pairs(steps: dict[tuple[str, str, int], float]) -> list[Pair]:
    specs = load_specs(paths.gpu_specs())
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


def _mape(pairs: list[Pair], estimate: str) -> str:
    errors = [
        abs(getattr(pair, estimate) / pair.measured - 1)
        for pair in pairs
        if getattr(pair, estimate) is not None
    ]
    return f"{100 * statistics.fmean(errors):.0f}%" if errors else "-"


if __name__ == "__main__":
    sys.exit(main())
