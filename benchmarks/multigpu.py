"""The product's sync model on Sia's measured multi-GPU placements, one application left out at a time.

    python -m benchmarks.multigpu [STEP_TIMES_CSV] [--json]

For each GPU type (Sia's ``cluster``) and each application, the communication is fitted with
`advisor.comm.sync.communication` on every other application: their ``sync_time`` rows are its all-reduce
samples (the gradients' bytes over the placement's devices and nodes), their whole steps fit the overlap.
The held-out application's k-GPU steps are then predicted from its one-GPU step at the same local batch
and its gradient bytes alone. Printed: mean absolute percentage error per application, within a node and
across nodes, next to the naive prediction (the one-GPU step), the constant model the recommender used
before (a ring all-reduce at 12 GB/s added to the step), and the same model fitted on every application,
the held-out one included (about the best its form allows).
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from advisor.comm.sync import AllReduceSample, Communication, Spread, WholeStep, communication, ring_bytes

DEFAULT_CSV = Path(__file__).resolve().parents[2] / "shared" / "data" / "sia" / "step_times.csv"

PARAMETERS = {
    "bert": 108_893_186,
    "cifar10": 11_173_962,
    "deepspeech2": 41_187_968,
    "imagenet": 25_557_032,
    "ncf": 1_602_657,
    "yolov3": 61_626_049,
}
"""Trainable parameters of each application as AdaptDL's ``benchmark/models`` (osdi21-artifact branch, the
code Sia's artifact copies) configures it, counted on the meta device: BERT-base for SQuAD, kuangliu's
CIFAR ResNet-18, DeepSpeech2 (5 bidirectional GRUs of 800), torchvision's ResNet-50, NeuMF on ml-1m
(factors 32, 3 layers), YOLOv3 on VOC. Gradients are fp32 in all six. ``gpt_pmp`` is pipeline-parallel,
not data-parallel, and has no one-GPU rows: left out."""

CONSTANT_BYTES_S = 12e9
"""The recommender's former all-reduce bandwidth, the same on every partition."""


@dataclass(frozen=True)
class Placement:
    application: str
    gpu_type: str
    spread: Spread
    one_gpu_s: float
    step_s: float
    sync_s: float

    @property
    def gradient_bytes(self) -> int:
        return PARAMETERS[self.application] * 4


def read_placements(path: Path) -> list[Placement]:
    """Every multi-GPU row with a one-GPU row of the same application, GPU type and local batch."""
    with path.open(newline="", encoding="utf-8") as handle:
        rows = [row for row in csv.DictReader(handle) if row["application"] in PARAMETERS]
    one_gpu = {
        (row["application"], row["cluster"], row["local_bsz"]): float(row["step_time"])
        for row in rows
        if row["num_gpus"] == "1"
    }
    found = []
    for row in rows:
        single = one_gpu.get((row["application"], row["cluster"], row["local_bsz"]))
        if row["num_gpus"] == "1" or single is None:
            continue
        spread = Spread(devices=int(row["num_gpus"]), nodes=int(row["num_nodes"]))
        step, sync = float(row["step_time"]), float(row["sync_time"])
        found.append(Placement(row["application"], row["cluster"], spread, single, step, sync))
    return found


def fitted(training: Sequence[Placement]) -> Communication:
    """What a partition would learn from these applications' all-reduces and whole steps."""
    samples = [
        AllReduceSample(spread=p.spread, bytes=p.gradient_bytes, seconds=p.sync_s)
        for p in training
        if p.sync_s > 0
    ]
    steps = [
        WholeStep(spread=p.spread, gradient_bytes=p.gradient_bytes, compute_s=p.one_gpu_s, step_s=p.step_s)
        for p in training
    ]
    return communication(samples, steps)


Predictor = Callable[[Placement], float]


def leave_one_out(placements: Sequence[Placement]) -> Predictor:
    models: dict[tuple[str, str], Communication] = {}
    for gpu_type in {p.gpu_type for p in placements}:
        here = [p for p in placements if p.gpu_type == gpu_type]
        for application in {p.application for p in here}:
            models[(gpu_type, application)] = fitted([p for p in here if p.application != application])
    return lambda p: _step(models[(p.gpu_type, p.application)], p)


def all_applications(placements: Sequence[Placement]) -> Predictor:
    """The same model fitted the same way on every application, the predicted one included: about the
    best its form allows, however the applications were chosen."""
    models = {t: fitted([p for p in placements if p.gpu_type == t]) for t in {p.gpu_type for p in placements}}
    return lambda p: _step(models[p.gpu_type], p)


def _step(model: Communication, p: Placement) -> float:
    return model.step_s(p.one_gpu_s, model.sync_s(p.gradient_bytes, p.spread))


def naive(p: Placement) -> float:
    return p.one_gpu_s


def constant(p: Placement) -> float:
    return p.one_gpu_s + ring_bytes(p.gradient_bytes, p.spread.devices) / CONSTANT_BYTES_S


def mape(placements: Sequence[Placement], predictor: Predictor) -> dict[str, float]:
    """Mean |predicted - measured| / measured, in percent, overall and per application and level."""
    errors: dict[str, list[float]] = defaultdict(list)
    for p in placements:
        error = abs(predictor(p) - p.step_s) / p.step_s * 100
        for key in ("all", p.application, f"{p.application} {p.spread.level}", p.spread.level):
            errors[key].append(error)
    return {key: statistics.fmean(values) for key, values in errors.items()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.multigpu", description=__doc__.split("\n")[0])
    parser.add_argument("csv", nargs="?", type=Path, default=DEFAULT_CSV, help="Sia's step_times.csv")
    parser.add_argument("--json", action="store_true", help="the figures as JSON")
    args = parser.parse_args(argv)
    placements = read_placements(args.csv)
    arms = {
        "naive": naive,
        "constant 12 GB/s": constant,
        "advisor (LOO)": leave_one_out(placements),
        "advisor (all apps)": all_applications(placements),
    }
    figures = {name: mape(placements, predictor) for name, predictor in arms.items()}
    if args.json:
        print(json.dumps(figures, indent=2, sort_keys=True))
        return 0
    keys = ["all", "node", "network"]
    for application in sorted(PARAMETERS):
        keys += [application, f"{application} node", f"{application} network"]
    rows = [k for k in keys if k in figures["naive"]]
    counts = defaultdict(int)
    for p in placements:
        for key in ("all", p.application, f"{p.application} {p.spread.level}", p.spread.level):
            counts[key] += 1
    width = max(len(name) for name in arms)
    print(f"{'MAPE %':22s} {'rows':>6s} " + " ".join(f"{name:>{width}s}" for name in arms))
    for key in rows:
        print(f"{key:22s} {counts[key]:6d} " + " ".join(f"{figures[name][key]:{width}.1f}" for name in arms))
    return 0


if __name__ == "__main__":
    sys.exit(main())
