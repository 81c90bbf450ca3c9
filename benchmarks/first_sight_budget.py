"""First sight before and after it spends its budget across a job's micro-batches, side by side.

For each architecture no zoo has, on a copy of a zoo database measured on this machine (``--zoo``), each
arm runs ``advisor bench run --architecture REF`` with the same budget, in its own source tree (``--before
TREE``: a worktree of the commit before; ``after``: this tree, with ``--micro-batches`` spanning
``--batches``), trains the product's predictor on the result with this tree's ``advisor models train``
and asks it at ``--batches``. Truth: the architecture's whole steps at ``--batches``, measured by this
tree's first sight in a scratch database (each batch's median of its passes), each as its ratio to the
pace step times the zoo database's pace, the unit the predictors are trained in. Where training's pace of the
machine moved with the arm's own rows (before 7b7c764 it was the median over every row), "at the zoo's pace"
takes that shift out of each arm's predictions. Pin it to one core:
``taskset -c 1 python -m benchmarks.first_sight_budget --zoo ZOO --before TREE --work DIR``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from advisor.argtypes import input_shape
from advisor.bench.results import read_jsonl
from advisor.introspect.run import introspect
from advisor.predict.registry import machine_pace
from advisor.predict.service import Predictors, StepQuestion, predict
from advisor.records import StepMeasurement
from advisor.store import Store
from benchmarks.architecture_transfer import slug

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ("benchmarks.harness.transfer_nets:vgg5x5", "benchmarks.harness.transfer_nets:dilated")
_CLI = "import sys; from advisor.cli import main; sys.exit(main(sys.argv[1:]))"


def main() -> int:
    args = _parser().parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    shape = ",".join(map(str, args.input_shape))
    low, high = min(args.batches), max(args.batches)
    arms = {"before": (args.before, []), "after": (ROOT, ["--micro-batches", f"{low}-{high}"])}
    table = Table(title=f"first sight, {shape}, {args.budget_minutes:g} min", title_justify="left")
    for column in ("architecture", "batch", "measured ms", *(f"{arm} ms (error)" for arm in arms)):
        table.add_column(column, justify="left" if column == "architecture" else "right")
    errors: dict[str, list[float]] = {arm: [] for arm in arms}
    unshifted: dict[str, list[float]] = {arm: [] for arm in arms}
    runs: list[str] = []
    for reference in args.architectures:
        truth = _truth(args, reference, shape)
        layer_table = introspect(reference, args.input_shape, {}, allow_factories=True)
        predicted: dict[str, dict[int, float]] = {}
        shift: dict[str, float] = {}
        for arm, (tree, extra) in arms.items():
            db = args.work / f"{slug(reference)}-{arm}.db"
            shutil.copy(args.zoo, db)
            summary, batches = _bench(tree, [*_words(args, reference, shape, db), *extra])
            shift[arm] = _pace(db) / _pace(args.zoo)
            runs.append(
                f"{reference.rpartition(':')[2]} {arm}: {summary['measured']} measured in "
                f"{summary['elapsed_s']:.0f} s, whole steps at {', '.join(map(str, batches))}; "
                f"the machine's pace its predictor trained with: {shift[arm]:.2f}x the zoo's"
            )
            _cli(ROOT, ["models", "train", "--db", str(db), "--models-dir", str(db.with_suffix(".models"))])
            predictors = Predictors.load(Store.open(db))
            predicted[arm] = {
                batch: predict(
                    predictors, StepQuestion(args.partition, layer_table, batch, False, False), []
                ).step_s
                for batch in args.batches
            }
        for batch in args.batches:
            cells = []
            for arm in arms:
                error = predicted[arm][batch] / truth[batch] - 1
                errors[arm].append(abs(error))
                unshifted[arm].append(abs(predicted[arm][batch] / shift[arm] / truth[batch] - 1))
                cells.append(f"{predicted[arm][batch] * 1000:.1f} ({error:+.0%})")
            table.add_row(reference.rpartition(":")[2], str(batch), f"{truth[batch] * 1000:.1f}", *cells)
    table.add_row("MAPE", "", "", *(f"{statistics.mean(errors[arm]):.1%}" for arm in arms))
    table.add_row(
        "MAPE at the zoo's pace", "", "", *(f"{statistics.mean(unshifted[arm]):.1%}" for arm in arms)
    )
    console = Console(width=140)
    console.print(table)
    for line in runs:
        console.print(line, highlight=False)
    return 0


def _truth(args: argparse.Namespace, reference: str, shape: str) -> dict[int, float]:
    """Each batch's median paced step, in the zoo database's seconds."""
    db = args.work / f"{slug(reference)}-truth.db"
    db.unlink(missing_ok=True)
    words = _words(args, reference, shape, db)
    words[words.index("--budget-minutes") + 1] = str(args.truth_minutes)
    _bench(ROOT, [*words, "--batch-sizes", ",".join(map(str, args.batches))])
    pace = _pace(args.zoo)
    ratios: dict[int, list[float]] = {}
    for line in read_jsonl(db.with_suffix(".jsonl")):
        step = line.measurement
        if isinstance(step, StepMeasurement) and step.fits and step.pace_ratio:
            ratios.setdefault(step.config.batch, []).append(step.pace_ratio)
    return {batch: pace * statistics.median(found) for batch, found in ratios.items()}


def _pace(db: Path) -> float:
    """The machine's pace as training takes it (`machine_pace`)."""
    return machine_pace(Store.open(db).step_rows())


def _words(args: argparse.Namespace, reference: str, shape: str, db: Path) -> list[str]:
    out = db.with_suffix(".jsonl")
    out.unlink(missing_ok=True)
    return [
        *("bench", "run", "--architecture", reference, "--input-shape", shape, "--device", "cpu"),
        *("--partition", args.partition, "--budget-minutes", str(args.budget_minutes)),
        *("--db", str(db), "--out", str(out), "--json"),
    ]


def _bench(tree: Path, words: list[str]) -> tuple[dict[str, float], list[int]]:
    """The run's summary, and the batches it measured whole steps at (in its tree's own code)."""
    said = _cli(tree, words)
    out = Path(words[words.index("--out") + 1])
    steps = [line.measurement for line in read_jsonl(out) if isinstance(line.measurement, StepMeasurement)]
    return json.loads(said)["run"], sorted({step.config.batch for step in steps})


def _cli(tree: Path, words: list[str]) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _CLI, *words], cwd=tree, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"advisor {' '.join(words)} in {tree}: failed\n{done.stderr[-2000:]}")
    return done.stdout


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--zoo", type=Path, required=True, help="the zoo's measurements on this machine")
    parser.add_argument("--before", type=Path, required=True, help="a worktree of the commit before")
    parser.add_argument("--partition", default="cpu", help="the partition the zoo database was measured as")
    parser.add_argument("--work", type=Path, required=True, help="a folder for its databases")
    parser.add_argument("--architectures", nargs="+", default=list(DEFAULT))
    parser.add_argument("--input-shape", type=input_shape, default=(3, 64, 64), metavar="C,H,W")
    parser.add_argument("--batches", type=int, nargs="+", default=[2, 4, 8, 16, 32])
    parser.add_argument("--budget-minutes", type=float, default=3.0, help="each arm's first sight")
    parser.add_argument("--truth-minutes", type=float, default=2.0)
    return parser


if __name__ == "__main__":
    sys.exit(main())
