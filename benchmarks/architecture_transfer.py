"""How well an architecture no zoo has is predicted once this machine has measured its own parts.

For each architecture (a torchvision name or ``package.module:factory``) and a database of the zoo's nightly
grid measured on this machine (``advisor bench run --partition P --db ZOO``), three predictors are trained
with the product's own commands, and the product's predictor is asked at ``--batches``:

- zoo only: the zoo database as it is;
- own layers: after ``advisor bench run --architecture REF --layers-only`` (its distinct layers);
- + whole steps: after ``advisor bench run --architecture REF`` (its layers, and whole steps at the grid's
  coarse batches, between which ``--batches`` lie).

Truth: the architecture's steps at ``--batches``, measured by ``advisor bench run --architecture REF
--batch-sizes ...`` into a scratch database, each the median of its measurements' ratios to the pace step
times the zoo database's pace (the unit the predictors are trained in, whatever the CPU's speed at the
time; ``--reuse-truth`` reads an earlier run's truth at another zoo's pace). ``--step-model today opsum
blend`` adds step models fitted on the zoo database alone, each a column, asked on the same layer tables as
the arms. Measure everything
with the same threads, e.g. pinned to one core: ``taskset -c 1 python -m benchmarks.architecture_transfer``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from advisor.argtypes import input_shape
from advisor.bench.architectures import measured_tables
from advisor.cli import main as advisor
from advisor.introspect import LayerTable
from advisor.introspect.run import introspect
from advisor.predict.evaluate import Fit, StepTimer
from advisor.predict.registry import layer_samples, machines, step_samples
from advisor.predict.service import Predictors, StepQuestion, predict
from advisor.predict.types import Prediction
from advisor.store import Store
from benchmarks.predict_zoo import STEP_MODELS, step_model_option

ARMS: tuple[tuple[str, list[str] | None], ...] = (
    ("zoo only", None),
    ("own layers", ["--layers-only"]),
    ("+ whole steps", []),
)
DEFAULT = (
    "benchmarks.harness.transfer_nets:vgg5x5",
    "benchmarks.harness.transfer_nets:dilated",
    "regnet_x_400mf",
    "benchmarks.harness.transfer_nets:encoder",
    "benchmarks.harness.transfer_nets:mixer",
)


def main() -> int:
    args = _parser().parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    shape = ",".join(map(str, args.input_shape))
    arms = [(arm, extra) for arm, extra in ARMS if arm in args.arms]
    fitted = {f"{name}, zoo only": _zoo_fit(args.zoo, STEP_MODELS[name]) for name in args.step_model}
    names = [arm for arm, _ in arms] + list(fitted)
    table = Table(title=f"step time on partition {args.partition}, {shape}", title_justify="left")
    for column in ("architecture", "batch", "measured ms", *(f"{arm} ms (error)" for arm in names)):
        table.add_column(column, justify="left" if column == "architecture" else "right")
    errors: dict[str, list[float]] = {arm: [] for arm in names}
    confidence: dict[str, set[str]] = {arm: set() for arm in names}
    for reference in args.architectures:
        truth = _truth(args, reference, shape)
        layer_table = introspect(reference, args.input_shape, {}, allow_factories=True)
        predicted = {
            arm: _product_arm(args, reference, shape, arm, extra, layer_table) for arm, extra in arms
        }
        for arm in predicted:
            confidence[arm] |= {answer.confidence for answer in predicted[arm].values()}
        seconds = {arm: {b: answer.step_s for b, answer in found.items()} for arm, found in predicted.items()}
        for name, model in fitted.items():
            seconds[name] = {b: model.step_seconds(layer_table, b, False, False) for b in args.batches}
        for batch in args.batches:
            cells = []
            for arm in names:
                error = seconds[arm][batch] / truth[batch] - 1
                errors[arm].append(abs(error))
                cells.append(f"{seconds[arm][batch] * 1000:.1f} ({error:+.0%})")
            table.add_row(reference.rpartition(":")[2], str(batch), f"{truth[batch] * 1000:.1f}", *cells)
    mape = [f"{statistics.mean(errors[arm]):.1%}" for arm in names]
    table.add_row("MAPE", "", "", *mape, end_section=True)
    table.add_row("confidence", "", "", *(", ".join(sorted(confidence[arm])) or "-" for arm in names))
    Console(width=140).print(table)
    return 0


def _zoo_fit(zoo: Path, fit: Fit) -> StepTimer:
    """A step model (``--step-model``) fitted on the zoo database alone, asked beside the arms."""
    store = Store.existing(zoo)
    (machine, *_) = machines(store)
    steps = step_samples(store.step_rows(machine), measured_tables(store))
    return fit(machine, steps, layer_samples(store.layer_rows(machine)))


def _product_arm(
    args: argparse.Namespace, reference: str, shape: str, arm: str, extra: list[str] | None, table: LayerTable
) -> dict[int, Prediction]:
    """One arm: the product's commands on a copy of the zoo database, then its predictor at each batch."""
    db = args.work / f"{slug(reference)}-{slug(arm)}.db"
    shutil.copy(args.zoo, db)
    if extra is not None:
        run_advisor(*bench_words(args, reference, shape, db), *extra)
    run_advisor("models", "train", "--db", str(db), "--models-dir", str(db.with_suffix(".models")))
    predictors = Predictors.load(Store.open(db))
    return {
        batch: predict(predictors, StepQuestion(args.partition, table, batch, False, False), [])
        for batch in args.batches
    }


def _truth(args: argparse.Namespace, reference: str, shape: str) -> dict[int, float]:
    """The architecture's steps at ``--batches`` at the zoo database's pace: measured now, or with
    ``--reuse-truth`` read from the work folder's earlier measurement, if it has one."""
    db = args.work / f"{slug(reference)}-truth.db"
    if not (args.reuse_truth and db.is_file()):
        db.unlink(missing_ok=True)
        batches = ",".join(map(str, args.batches))
        run_advisor(*bench_words(args, reference, shape, db), "--batch-sizes", batches)
    pace = zoo_pace(Store.open(args.zoo))
    if pace is None:
        raise SystemExit(f"{args.zoo}: no paced steps, so no unit to judge the truth in")
    return {batch: pace * statistics.median(ratios) for batch, ratios in paced_ratios(Store.open(db)).items()}


def zoo_pace(store: Store) -> float | None:
    """The zoo database's pace step: the unit its predictors are trained in (`registry.step_samples`);
    None for a database measured without one, whose predictors are trained in seconds."""
    paces = [row.pace_s for row in store.step_rows() if row.pace_s]
    return statistics.median(paces) if paces else None


def paced_ratios(store: Store) -> dict[int, list[float]]:
    """Each batch's measured steps as ratios to the pace step: every pass's, in every process (a run
    measures each step several times, and a batch's last row alone strayed up to 30% from their median)."""
    ratios: dict[int, list[float]] = {}
    for row in store.step_rows():
        if row.fits and row.pace_ratio:
            ratios.setdefault(row.batch, []).append(row.pace_ratio)
    return ratios


def bench_words(args: argparse.Namespace, reference: str, shape: str, db: Path) -> list[str]:
    """``advisor bench run --architecture REF`` into ``db`` (and its JSON lines beside it)."""
    out = db.with_suffix(".jsonl")
    out.unlink(missing_ok=True)
    return [
        "bench",
        "run",
        "--architecture",
        reference,
        "--input-shape",
        shape,
        "--device",
        "cpu",
        "--partition",
        args.partition,
        "--budget-minutes",
        str(args.budget_minutes),
        "--db",
        str(db),
        "--out",
        str(out),
    ]


def run_advisor(*words: str) -> None:
    """The advisor's command line in this process; a failure ends the script, naming the command."""
    if advisor(list(words)) != 0:
        raise SystemExit(f"advisor {' '.join(words)}: failed")


def slug(text: str) -> str:
    """A name for a file in the work folder: an architecture's reference or an arm's words, runs of
    anything but letters and digits as dashes."""
    return "".join(c if c.isalnum() else "-" for c in text).strip("-")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--zoo", type=Path, required=True, help="the zoo's measurements on this machine")
    parser.add_argument("--partition", required=True, help="the partition the zoo database was measured as")
    parser.add_argument("--work", type=Path, required=True, help="a folder for its databases")
    parser.add_argument("--architectures", nargs="+", default=list(DEFAULT))
    parser.add_argument("--input-shape", type=input_shape, default=(3, 32, 32), metavar="C,H,W")
    parser.add_argument("--batches", type=int, nargs="+", default=[2, 8, 32])
    parser.add_argument("--budget-minutes", type=float, default=10.0)
    parser.add_argument(
        "--arms",
        nargs="*",
        default=[arm for arm, _ in ARMS],
        help=f"the product's arms to run (default all: {', '.join(arm for arm, _ in ARMS)}); none: the "
        "truth and the --step-model columns alone",
    )
    step_model_option(
        parser,
        "step models to fit on the zoo database alone and ask beside the arms, a column each "
        "(benchmarks/predict_zoo.py's STEP_MODELS: today's alone, the op sum alone, their blend as served)",
    )
    parser.add_argument(
        "--reuse-truth",
        action="store_true",
        help="take each architecture's truth from the work folder where an earlier run measured it (its "
        "batches must hold --batches), read at this --zoo's pace: one measurement judged on two zoos",
    )
    return parser


if __name__ == "__main__":
    sys.exit(main())
