"""`advisor profile MODEL --batch-size B --partition P`: real training steps of a model, profiled on this
machine, beside the active predictor's split of its prediction for the partition, part by part (`StepPart`):
which part a poor prediction misses. Its own part of the package: it joins the benchmark engine (torch
timing) and the predictors, which the service keeps apart."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.table import Table

from advisor import argtypes
from advisor.settings.validated import Settings
from advisor.store import Store


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser], settings: Settings) -> None:
    profile = commands.add_parser(
        "profile",
        help="a model's training step profiled here, beside its prediction, part by part",
        description="Runs real training steps of MODEL on this machine under torch.profiler and sets where "
        "their time goes (convolutions and linears, memory-bound ops, the optimizer, per-op dispatch) beside "
        "the active predictor's split of its prediction for PARTITION. Run it on a node of that partition: "
        "the profile is this machine's.",
    )
    profile.add_argument("model", help="a torchvision model name or package.module:factory")
    profile.add_argument("--input-shape", type=argtypes.input_shape, default=(3, 32, 32), help="3,H,H")
    profile.add_argument("--batch-size", type=int, required=True)
    profile.add_argument("--partition", required=True)
    profile.add_argument("--steps", type=int, default=5, help="profiled steps (default 5)")
    profile.add_argument("--db", type=Path, default=settings.database)
    profile.set_defaults(handler=_profile)


def _profile(args: argparse.Namespace, console: Console) -> int:
    import torch

    from advisor.bench.profile import profile_step
    from advisor.bench.tables import model_table
    from advisor.predict.service import Predictors
    from advisor.records import StepConfig

    channels, height, width = args.input_shape
    if channels != 3 or height != width:
        console.print("advisor: error: a profiled step takes a square RGB input (3,H,H)", highlight=False)
        return 2
    predictors = Predictors.load(Store.existing(args.db))
    own = sorted(
        {f.machine() for f in predictors.fingerprints if f.partition == args.partition}
        & set(predictors.models)
    )
    if not own:
        console.print(f"advisor: error: partition {args.partition} has no trained predictor", highlight=False)
        return 1
    model, version = predictors.models[own[0]]
    table = model_table(args.model, height, allow_factories=True)
    predicted = model.parts(table, args.batch_size, False, False)
    config = StepConfig(
        model=args.model, input_size=height, batch=args.batch_size, amp=False, channels_last=False,
        pinned=False, workers=0,
    )  # fmt: skip
    measured = profile_step(config, torch.device("cpu"), args.steps, allow_factories=True)
    title = f"{args.model} at batch {args.batch_size}: profiled here, predicted for {args.partition}"
    out = Table(title=f"{title} (machine {own[0]}, version {version})", title_justify="left")
    for column in ("part", "measured ms", "predicted ms", "predicted / measured"):
        out.add_column(column, justify="left" if column == "part" else "right")
    rows = [(str(part), seconds, predicted[part]) for part, seconds in measured.items()]
    for name, seconds, guess in [*rows, ("step", sum(measured.values()), sum(predicted.values()))]:
        ratio = f"{guess / seconds:.2f}" if seconds > 0 else "-"
        out.add_row(name, f"{seconds * 1000:.2f}", f"{guess * 1000:.2f}", ratio)
    console.print(out)
    return 0
