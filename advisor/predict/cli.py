"""`advisor models train|evaluate` and `advisor predict`: the predictors from the command line.

torch and xgboost are imported by the handlers that need them, so other commands start without them.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from advisor import argtypes, readable, terminal
from advisor.machines import UnknownMachine, labelled, machine_names, partitions_of, resolve
from advisor.predict.bands import RETRAIN
from advisor.predict.jobtime import JobShape, job_time
from advisor.readable import percent
from advisor.settings.validated import Settings
from advisor.store import ModelRegistry, ModelVersionRow, Store

if TYPE_CHECKING:
    from advisor.predict.evaluate import MachineEvaluation


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser], settings: Settings) -> None:
    _add_models(commands, settings)
    _add_predict(commands, settings)


def _add_models(commands: argparse._SubParsersAction[argparse.ArgumentParser], settings: Settings) -> None:
    """`advisor models train|list|activate|evaluate`."""
    models = commands.add_parser("models", help="train and evaluate the per-machine predictors")
    actions = models.add_subparsers(required=True, metavar="ACTION")

    train = actions.add_parser("train", help="retrain every machine's predictors and swap them in")
    train.add_argument("--db", type=Path, default=settings.database)
    train.add_argument("--models-dir", type=Path, default=settings.models_dir)
    train.add_argument("--json", action="store_true", help="each machine's new version (or why none) as JSON")
    train.set_defaults(handler=_train)

    listing = actions.add_parser("list", help="every version of each machine's predictors, the active marked")
    listing.add_argument("machine", nargs="?", help="a partition, a machine's name or its hash")
    listing.add_argument("--db", type=Path, default=settings.database)
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(handler=_list)

    activate = actions.add_parser(
        "activate", help="make an earlier (or a held-back) version serve: a rollback, within a minute"
    )
    activate.add_argument("machine", help="a partition, a machine's name (advisor models list) or its hash")
    activate.add_argument("version", type=int)
    activate.add_argument("--db", type=Path, default=settings.database)
    activate.set_defaults(handler=_activate)

    evaluate = actions.add_parser("evaluate", help="held-out accuracy: unseen models, batch sizes, memory")
    evaluate.add_argument("--db", type=Path, default=settings.database)
    evaluate.add_argument("--json", action="store_true")
    evaluate.add_argument("--plot", type=Path, help="PNG of predicted against measured step times")
    evaluate.set_defaults(handler=_evaluate)


def _add_predict(commands: argparse._SubParsersAction[argparse.ArgumentParser], settings: Settings) -> None:
    """`advisor predict`: one model's step time and peak memory on a partition."""
    predict = commands.add_parser("predict", help="a model's step time and peak memory on a partition")
    predict.add_argument(
        "--model",
        required=True,
        help="a torchvision model name, timm:NAME, hf:NAME or package.module:factory (a factory is imported "
        "here, in your own process)",
    )
    predict.add_argument(
        "--input-shape", type=argtypes.input_shape, default=(3, 224, 224), help="C,H,W (default 3,224,224)"
    )
    predict.add_argument("--num-classes", type=int, help="default: the benchmark zoo's for this input size")
    argtypes.model_options(predict)
    predict.add_argument(
        "--optimizer",
        choices=("sgd", "adam", "adamw"),
        help="what trains the step (default: SGD with momentum, as benchmarked); Adam's moments count",
    )
    predict.add_argument(
        "--batch-size", type=argtypes.count, required=True, help="the micro-batch on one GPU"
    )
    predict.add_argument("--partition", required=True)
    argtypes.sharding_options(predict)
    predict.add_argument(
        "--gpu", help="the partition's GPU type, when it was never benchmarked (default: its name)"
    )
    predict.add_argument("--amp", action="store_true")
    predict.add_argument("--channels-last", action="store_true")
    predict.add_argument("--steps", type=int, help="also the whole job's time for this many steps")
    predict.add_argument("--db", type=Path, default=settings.database)
    predict.add_argument(
        "--gpu-specs",
        type=Path,
        default=settings.gpu_specs,
        help="folder of GPU specification files (default: %(default)s, or $ADVISOR_GPU_SPECS)",
    )
    predict.add_argument("--json", action="store_true")
    predict.set_defaults(handler=_predict)


def _train(args: argparse.Namespace, console: Console) -> int:
    from advisor.predict.retrain import retrain_all

    store = Store.existing(args.db)
    names = machine_names(store.fingerprints())
    began = time.monotonic()
    results: list[dict[str, Any]] = []
    for outcome in retrain_all(store, args.models_dir, args.settings.models.max_worse_mape):
        if outcome.trained is None:
            said = f"{_named_in(str(outcome.error), names)}: its active version, if any, stays"
            results.append({"machine": outcome.machine, "name": names.get(outcome.machine), "error": said})
            continue
        results.append({**outcome.trained.model_dump(mode="json"), "name": names.get(outcome.machine)})
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for line in [*_trained_lines(results, names), f"trained in {time.monotonic() - began:.1f} s"]:
            console.print(line, highlight=False)
    return 1 if any("error" in result for result in results) else 0


def _trained_lines(results: list[dict[str, Any]], names: dict[str, str]) -> list[str]:
    lines = []
    for result in results:
        if "error" in result:
            lines.append(result["error"])
            continue
        named, version = labelled(result["machine"], names), result["version"]
        lines.append(
            f"{named}: version {version} from {result['step_rows']} steps and {result['layer_rows']} "
            f"layers, held-out MAPE {percent(result['heldout_mape'])}, {result['seconds']:.1f} s -> "
            f"{result['path']}"
        )
        if not result["activated"]:
            lines.append(
                f"{named}: version {version} held back: its held-out error is worse than the active "
                f"version's by more than max_worse_mape; `advisor models activate "
                f"{names.get(result['machine'], result['machine'])} {version}` serves it anyway"
            )
    return lines


def _list(args: argparse.Namespace, console: Console) -> int:
    store = Store.existing(args.db)
    names = machine_names(store.fingerprints())
    try:
        machine = None if args.machine is None else _machine(store, args.machine)
    except UnknownMachine as error:
        console.print(f"advisor: error: {error}", highlight=False)
        return 1
    rows = ModelRegistry(store).versions(machine)
    if args.json:
        print(json.dumps([_listed(row, names) for row in rows], indent=2))
        return 0
    if not rows:
        console.print("no model versions yet: advisor models train", highlight=False)
        return 0
    partitions = partitions_of(store.fingerprints())
    table = Table(title="model versions")
    for column in ("machine (hash)", "partitions", "version", "trained", "held-out MAPE"):
        table.add_column(column, overflow="fold")  # a name folds rather than losing its end
    for column in ("steps", "layers"):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(
            f"{names.get(row.machine, '-')}\n({row.machine[:8]})",
            ", ".join(partitions.get(row.machine, [])) or "-",
            f"{row.version}{', active' if row.active else ''}",
            readable.timestamp(row.created_at),
            percent(row.heldout_mape),
            f"{row.step_rows:,}",
            f"{row.layer_rows:,}",
        )
    terminal.show(table, console)
    for line in _list_notes(rows, names):
        console.print(line, highlight=False)
    return 0


def _listed(row: ModelVersionRow, names: dict[str, str]) -> dict[str, Any]:
    return {
        "machine": row.machine,
        "name": names.get(row.machine),
        "version": row.version,
        "active": row.active,
        "created_at": row.created_at.isoformat(),
        "heldout_mape": row.heldout_mape,
        "steps": row.step_rows,
        "layers": row.layer_rows,
        "quarantined": row.quarantined,
    }


def _list_notes(rows: list[ModelVersionRow], names: dict[str, str]) -> list[str]:
    notes = []
    for row in rows:
        version = f"{labelled(row.machine, names)} version {row.version}"
        if row.active and not row.quarantined and not _has_bands(row.path):
            notes.append(
                f"{version}: one band for every prediction, its confidence read off the machine's held-out "
                f"p90: {RETRAIN}"
            )
        if row.quarantined:
            notes.append(
                f"{version} {row.quarantined}: quarantined (the file is kept beside, as .quarantined)"
            )
    return notes


def _named_in(text: str, names: dict[str, str]) -> str:
    """A message from below, each machine hash in it named (``v100 (a7abe679)``)."""
    for machine in names:
        text = text.replace(machine, labelled(machine, names))
    return text


def _machine(store: Store, word: str) -> str:
    """The machine hash a partition, a machine's name or a hash means."""
    return resolve(word, store.fingerprints(), store.latest_machines())


def _has_bands(path: Path) -> bool:
    """Whether a version was trained with bands by evidence; an unreadable file is not this command's to
    judge (loading quarantines it)."""
    try:
        return "bands" in json.loads(path.read_bytes())
    except (OSError, ValueError, TypeError):
        return True


def _activate(args: argparse.Namespace, console: Console) -> int:
    store = Store.existing(args.db)
    names = machine_names(store.fingerprints())
    try:
        machine = _machine(store, args.machine)
        ModelRegistry(store).set_active(machine, args.version)
    except LookupError as error:
        console.print(f"advisor: error: {_named_in(str(error.args[0]), names)}", highlight=False)
        return 1
    console.print(
        f"{labelled(machine, names)}: version {args.version} is active; the daemon serves it within a minute",
        highlight=False,
    )
    return 0


def _evaluate(args: argparse.Namespace, console: Console) -> int:
    from advisor.bench.architectures import measured_tables
    from advisor.predict.evaluate import evaluate_machine
    from advisor.predict.registry import layer_samples, machines, step_samples

    store = Store.existing(args.db)
    names = machine_names(store.fingerprints())
    tables = measured_tables(store)
    results = []
    for machine in machines(store):
        steps = step_samples(store.step_rows(machine), tables)
        results.append(evaluate_machine(machine, steps, layer_samples(store.layer_rows(machine))))
    if args.plot:
        _plot(results, args.plot)
    if args.json:
        print(json.dumps([r.model_dump(mode="json", exclude={"lomo_points"}) for r in results], indent=2))
        return 0
    for result in results:
        named = labelled(result.machine, names)
        table = Table(title=f"machine {named}: leave one model out", title_justify="left")
        table.add_column("model")
        table.add_column("MAPE", justify="right")
        for model, mape in result.lomo_mape_by_model.items():
            table.add_row(model, percent(mape))
        console.print(table)
        by_batch = ", ".join(f"{b}: {percent(m)}" for b, m in result.unseen_batch_mape_by_batch.items())
        console.print(
            f"overall {percent(result.lomo_mape)}; unseen batch sizes {percent(result.unseen_batch_mape)} "
            f"({by_batch}); peak memory {percent(result.memory_mape)}; served: today's step model at weight "
            f"{result.blend_weight} blended with the op sum",
            highlight=False,
        )
        if result.measurement_error is not None:
            console.print(
                f"the measured steps err by about {percent(result.measurement_error)} themselves (their "
                "repeated measurements' spread): the held-out figures are read against it",
                highlight=False,
            )
    return 0


def _plot(results: list[MachineEvaluation], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(results), figsize=(6 * len(results), 6), squeeze=False)
    for axis, result in zip(axes[0], results, strict=True):
        points = list(result.lomo_points)
        for model in sorted({p.model for p in points}):
            mine = [p for p in points if p.model == model]
            axis.scatter([p.measured_s for p in mine], [p.predicted_s for p in mine], s=14, label=model)
        low = min(min(p.measured_s, p.predicted_s) for p in points)
        high = max(max(p.measured_s, p.predicted_s) for p in points)
        axis.plot([low, high], [low, high], color="black", linewidth=0.8)
        axis.set(xscale="log", yscale="log", xlabel="measured step (s)", ylabel="predicted step (s)")
        axis.set_title(f"{result.machine}: leave one model out, MAPE {percent(result.lomo_mape)}")
        axis.legend(fontsize=6, ncol=2)
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def _predict(args: argparse.Namespace, console: Console) -> int:
    from advisor.bench.zoo import zoo_model
    from advisor.introspect.run import TaskInput, introspect
    from advisor.introspect.table import TrainingSettings
    from advisor.predict.service import Predictors, StepQuestion, load_specs, predict
    from advisor.predict.types import NoModelError

    wrong = argtypes.sharding_problem(args)
    if wrong is not None:
        console.print(f"advisor: error: {wrong}", highlight=False)
        return 2
    _channels, height, width = args.input_shape
    kwargs = {} if args.num_classes is None else {"num_classes": args.num_classes}
    if args.num_classes is None and height == width:
        try:
            kwargs = zoo_model(args.model).kwargs(height)
        except ValueError:
            kwargs = {}
    kwargs |= dict(args.model_arg)
    # This command runs as the user who typed it, like `advisor inspect`: their own factories may be imported.
    table = introspect(
        args.model,
        args.input_shape,
        kwargs,
        allow_factories=True,
        given=TaskInput(args.sequence_length, args.task),
    ).trained(
        TrainingSettings(optimizer=args.optimizer, zero_stage=args.zero, hybrid_shard=args.hybrid_shard)
    )
    shards = (table.training or TrainingSettings()).shard_devices(args.gpus // args.nodes, args.nodes)
    specs = load_specs(args.gpu_specs) if args.gpu_specs.is_dir() else []
    store = Store.existing(args.db)
    try:
        predictors = Predictors.load(store)
        question = StepQuestion(args.partition, table, args.batch_size, args.amp, args.channels_last, shards)
        prediction = predict(predictors, question, specs, args.gpu)
    except NoModelError as error:
        console.print(f"advisor: error: {error}", highlight=False)
        return 1
    output = prediction.model_dump(mode="json")
    if args.zero:
        output |= {"zero_stage": args.zero, "gpus": args.gpus, "sharded_among": shards}
    if args.steps is not None:
        whole = job_time(prediction.step_s, prediction.step_p90_s, JobShape(steps=args.steps))
        output["job_s"], output["job_p90_s"] = whole.p50_s, whole.p90_s
    if args.json:
        print(json.dumps(output, indent=2))
        return 0
    names = machine_names(store.fingerprints())
    table_out = Table(title=f"{args.model} on {args.partition}", show_header=False, title_justify="left")
    for name, value in output.items():
        if value is not None:
            table_out.add_row(readable.header(name), _predicted(name, value, names))
    console.print(table_out)
    return 0


def _predicted(name: str, value: object, names: dict[str, str]) -> str:
    """A prediction's field as read: a machine by its name, a step in ms, memory in MiB, a factor as x."""
    if name in ("machine", "scaled_from") and isinstance(value, str):
        return labelled(value, names)
    if name in ("job_s", "job_p90_s") and isinstance(value, float):
        return readable.duration(value)
    if name == "calibration" and isinstance(value, float):
        return f"x {value:.2f}"
    if isinstance(value, str):
        return _named_in(value, names)  # a note names its machine
    return readable.field(name, value)
