"""`advisor profile MODEL --batch-size B --partition P`: real training steps of a model (an image model at
``--input-shape``, a language model the advisor builds at ``--sequence-length``), profiled on this
machine, beside the active predictor's split of its prediction for the partition, part by part (`StepPart`:
the op sum's, scaled to the served blend, where the blend weighs it), and the op-sum model's own
(`advisor.predict.opsum`): which part a poor prediction misses. Its own part of the package: it joins the
benchmark engine (torch timing) and the predictors, which the service keeps apart."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel
from rich.console import Console
from rich.table import Table

from advisor import argtypes, readable, terminal
from advisor.machines import labelled, machine_names
from advisor.records import StepPart
from advisor.settings.validated import Settings
from advisor.store import Store

if TYPE_CHECKING:
    from advisor.introspect import LayerTable
    from advisor.predict.machine import MachineModel


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser], settings: Settings) -> None:
    profile = commands.add_parser(
        "profile",
        help="a model's training step profiled here, beside its prediction, part by part",
        description="Runs real training steps of MODEL on this machine under torch.profiler and sets where "
        "their time goes (convolutions and linears, memory-bound ops, the optimizer, per-op dispatch) beside "
        "the active predictor's split of its prediction for PARTITION. The optimizer is its step call's "
        "whole time; per-op dispatch is what no kernel accounts for. Each part is its least over three "
        "rounds of steps timed then profiled (a busy CPU and the profiler only add time). Run it on a node "
        "of that partition: the profile is this machine's.",
    )
    profile.add_argument(
        "model",
        help="a torchvision model name, timm:NAME or package.module:factory (images, --input-shape), or a "
        "language model the advisor builds (gpt2, bert-base-uncased, t5-small, llama-3.2-1b, the CPU "
        "grid's tiny_gpt2, tiny_bert, tiny_t5, tiny_llama; --sequence-length)",
    )
    shape = profile.add_mutually_exclusive_group()
    shape.add_argument("--input-shape", type=argtypes.input_shape, help="3,H,H (default 3,32,32)")
    shape.add_argument(
        "--sequence-length", type=argtypes.count, help="tokens a sample, at a length the model is built at"
    )
    profile.add_argument("--batch-size", type=int, required=True)
    profile.add_argument("--partition", required=True)
    profile.add_argument(
        "--steps", type=int, default=5, help="steps timed, then as many profiled, a round (default 5)"
    )
    profile.add_argument("--db", type=Path, default=settings.database)
    profile.add_argument("--json", action="store_true", help="each part's seconds, as JSON")
    profile.set_defaults(handler=_profile)


class ProfiledPart(BaseModel):
    """One part of a training step: the seconds measured here and those predicted for the partition."""

    part: str
    measured_s: float
    predicted_s: float
    op_sum_s: float | None = None
    """The op-sum model's seconds for the part; None where the partition has too few benchmarks."""


class StepProfile(BaseModel):
    """`advisor profile`'s answer: each part, then the whole step (``part`` "step")."""

    model: str
    batch_size: int
    input: str
    """A sample: ``3x32x32`` (an image) or ``128 tokens``."""
    partition: str
    machine: str
    machine_name: str | None
    version: int
    parts: list[ProfiledPart]


def _profile(args: argparse.Namespace, console: Console) -> int:
    size = _input_size(args)
    if isinstance(size, str):
        console.print(f"advisor: error: {size}", highlight=False)
        return 2
    answer = _profiled(args, size)
    if answer is None:
        console.print(f"advisor: error: partition {args.partition} has no trained predictor", highlight=False)
        return 1
    if args.json:
        print(answer.model_dump_json(indent=2))
    else:
        show(answer, console)
    return 0


def _input_size(args: argparse.Namespace) -> int | str:
    """The step's input size (an image's side, a language model's tokens a sample), or what is wrong."""
    from advisor.bench.zoo import zoo_model

    try:
        zoo = zoo_model(args.model)
    except ValueError:
        zoo = None
    if zoo is None or not zoo.tokens:
        if args.sequence_length is not None:
            return f"{args.model} takes images, not tokens: say --input-shape 3,H,H"
        channels, height, width = args.input_shape or (3, 32, 32)
        if channels != 3 or height != width:
            return "a profiled step takes a square RGB input (3,H,H)"
        return height
    if args.sequence_length not in zoo.sizes:
        built = ", ".join(map(str, zoo.sizes))
        return f"{args.model} is a language model built at {built} tokens: say --sequence-length with one"
    return int(args.sequence_length)


def _profiled(args: argparse.Namespace, size: int) -> StepProfile | None:
    """The profile and the prediction's split side by side; None where the partition has no predictor."""
    import torch

    from advisor.bench.profile import profile_step
    from advisor.bench.tables import model_table
    from advisor.predict.service import Predictors
    from advisor.records import StepConfig

    predictors = Predictors.load(Store.existing(args.db))
    own = sorted(
        {f.machine() for f in predictors.fingerprints if f.partition == args.partition}
        & set(predictors.models)
    )
    if not own:
        return None
    model, version = predictors.models[own[0]]
    table = model_table(args.model, size, allow_factories=True)
    predicted = model.parts(table, args.batch_size, False, False)
    summed = _op_sum(Store.existing(args.db), model, table, args.batch_size)
    config = StepConfig(
        model=args.model, input_size=size, batch=args.batch_size, amp=False, channels_last=False,
        pinned=False, workers=0,
    )  # fmt: skip
    measured = profile_step(config, torch.device("cpu"), args.steps, allow_factories=True)
    parts = [
        ProfiledPart(part=str(p), measured_s=s, predicted_s=predicted[p], op_sum_s=summed.get(p))
        for p, s in measured.items()
    ]
    step = ProfiledPart(
        part="step",
        measured_s=sum(measured.values()),
        predicted_s=sum(predicted.values()),
        op_sum_s=sum(summed.values()) if summed else None,
    )
    return StepProfile(
        model=args.model,
        batch_size=args.batch_size,
        input=f"{size} tokens" if table.sequence_length else f"3x{size}x{size}",
        partition=args.partition,
        machine=own[0],
        machine_name=machine_names(predictors.fingerprints).get(own[0]),
        version=version,
        parts=[*parts, step],
    )


def _op_sum(store: Store, served: MachineModel, table: LayerTable, batch: int) -> dict[StepPart, float]:
    """The op-sum model's split (seconds): the one the active version holds, else (a version from before the
    blend) fitted here on the machine's benchmarks; empty without them."""
    from advisor.bench.architectures import measured_tables
    from advisor.predict.blend import opsum_of
    from advisor.predict.machine import NotEnoughDataError
    from advisor.predict.opsum import fit_opsum
    from advisor.predict.registry import layer_samples, step_samples

    model = opsum_of(served)
    if model is None:
        machine = served.machine
        steps = step_samples(store.step_rows(machine), measured_tables(store))
        try:
            model = fit_opsum(machine, steps, layer_samples(store.layer_rows(machine)))
        except NotEnoughDataError:
            return {}
    return model.parts(table, batch, False, False)


def show(answer: StepProfile, console: Console) -> None:
    """The parts as a table: times with their units, the prediction as a factor of the measurement."""
    names = {} if answer.machine_name is None else {answer.machine: answer.machine_name}
    console.print(
        f"{answer.model} at batch {answer.batch_size} ({answer.input}): profiled here, predicted for "
        f"{answer.partition} "
        f"(machine {labelled(answer.machine, names)}, version {answer.version})",
        highlight=False,
    )
    out = Table()
    columns = ("part", "measured", "predicted", "predicted / measured", "op sum", "op sum / measured")
    for column in columns:
        out.add_column(column, justify="left" if column == "part" else "right")
    for row in answer.parts:
        out.add_row(
            row.part,
            readable.short_time(row.measured_s),
            *_beside(row.predicted_s, row.measured_s),
            *_beside(row.op_sum_s, row.measured_s),
        )
    terminal.show(out, console)


def _beside(predicted_s: float | None, measured_s: float) -> tuple[str, str]:
    """A predicted time and its factor of the measured one, or none where either is missing."""
    if predicted_s is None:
        return readable.NONE, readable.NONE
    ratio = readable.ratio(predicted_s / measured_s) if measured_s > 0 else readable.NONE
    return readable.short_time(predicted_s), ratio
