"""First sight before and after a change to what it measures, side by side, against a truth of several runs.

For each architecture no zoo has, on a copy of a zoo database measured on this machine (``--zoo``), each
arm runs ``advisor bench run --architecture REF --micro-batches LOW-HIGH`` (spanning ``--batches``) with the
same budget, in its own source tree (``--before TREE``: a worktree of the commit before; ``after``: this
tree), trains the product's predictor on the result with this tree's ``advisor models train``
and asks it at ``--batches``. Each arm's own steps (the median of its passes at each batch) are shown
beside its prediction: the gap between the two is the model's, the gap between them and the truth the
measurements'.

Truth: the architecture's whole steps alone at ``--batches``, in ``--truth-runs`` separate processes (each a
fresh one, the steps in an order of its own, ``--truth-minutes`` each), one before the arms, one between
them and one after: two instances of one configuration differ by up to 20% on a shared CPU, and a truth
taken in one run carried its own offset into both arms' errors. A batch's truth is the median over the runs
of each run's median paced step, at the zoo database's pace (the unit the predictors are trained in); its
spread, (slowest - fastest) / truth over the runs, says how far the truth itself can be trusted. Pin it to
one core: ``taskset -c 1 python -m benchmarks.first_sight_budget --zoo ZOO --before TREE --work DIR``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from random import Random

from rich.console import Console
from rich.table import Table

from advisor.argtypes import input_shape
from advisor.bench.plan import DeviceProfile, nightly_grid
from advisor.bench.results import read_jsonl
from advisor.bench.sight_plan import SightPart, sight_plan
from advisor.introspect import LayerTable
from advisor.introspect.run import introspect
from advisor.predict.registry import machine_pace
from advisor.predict.service import Predictors, StepQuestion, predict
from advisor.records import StepMeasurement
from advisor.store import Store
from benchmarks.architecture_transfer import slug

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ("benchmarks.harness.transfer_nets:vgg5x5", "benchmarks.harness.transfer_nets:dilated")
_CLI = "import sys; from advisor.cli import main; sys.exit(main(sys.argv[1:]))"
ARMS = ("before", "after")
Ratios = dict[int, list[float]]
"""A run's paced step ratios by batch."""


def main() -> int:
    args = _parser().parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    table = Table(title=_title(args), title_justify="left")
    columns = ["architecture", "batch", "truth ms (spread)"]
    columns += [f"{arm} {what}" for arm in ARMS for what in ("own steps ms", "predicted ms (error)")]
    for column in columns:
        table.add_column(column, justify="left" if column == "architecture" else "right")
    errors: dict[str, list[float]] = {arm: [] for arm in ARMS}
    said: list[str] = []
    for reference in args.architectures:
        said += _architecture(args, reference, table, errors)
    mape = [f"{statistics.mean(errors[arm]):.1%}" for arm in ARMS]
    table.add_row("MAPE", "", "", "", mape[0], "", mape[1])
    console = Console(width=160)
    console.print(table)
    for line in said:
        console.print(line, highlight=False)
    return 0


def _architecture(
    args: argparse.Namespace, reference: str, table: Table, errors: dict[str, list[float]]
) -> list[str]:
    """One architecture's rows: truth runs before, between and after the arms; what each run did."""
    layer_table = introspect(reference, args.input_shape, {}, allow_factories=True)
    truths: list[Ratios] = []
    own: dict[str, Ratios] = {}
    predicted: dict[str, dict[int, float]] = {}
    said = []
    for arm in ARMS:
        truths.append(_truth_run(args, layer_table, len(truths)))
        own[arm], predicted[arm], line = _arm(args, reference, layer_table, arm)
        said.append(line)
    while len(truths) < args.truth_runs:
        truths.append(_truth_run(args, layer_table, len(truths)))
    pace = _pace(args.zoo)
    said.append(f"{_name(reference)} truth: {_truth_said(truths, args.batches, pace)}")
    for batch in args.batches:
        truth, spread = _truth(truths, batch)
        cells = [f"{truth * pace * 1000:.1f} ({spread:.0%})"]
        for arm in ARMS:
            error = predicted[arm][batch] / (truth * pace) - 1
            errors[arm].append(abs(error))
            cells += [_ms(own[arm].get(batch), pace), f"{predicted[arm][batch] * 1000:.1f} ({error:+.0%})"]
        table.add_row(_name(reference), str(batch), *cells)
    return said


def _title(args: argparse.Namespace) -> str:
    shape = ",".join(map(str, args.input_shape))
    return (
        f"first sight, {shape}, {args.budget_minutes:g} min each arm; truth: {args.truth_runs} runs of "
        f"{args.truth_minutes:g} min"
    )


def _arm(
    args: argparse.Namespace, reference: str, layer_table: LayerTable, arm: str
) -> tuple[Ratios, dict[int, float], str]:
    """One arm's first sight on its own copy of the zoo: its steps' ratios, its predictions, what it did."""
    tree = args.before if arm == "before" else ROOT
    db = args.work / f"{slug(reference)}-{arm}.db"
    shutil.copy(args.zoo, db)
    words = [*_words(args, reference, db), "--micro-batches", f"{min(args.batches)}-{max(args.batches)}"]
    summary = json.loads(_cli(tree, words))["run"]
    ratios = _ratios(db.with_suffix(".jsonl"))
    _cli(ROOT, ["models", "train", "--db", str(db), "--models-dir", str(db.with_suffix(".models"))])
    predictors = Predictors.load(Store.open(db))
    predicted = {
        batch: predict(predictors, StepQuestion(args.partition, layer_table, batch, False, False), []).step_s
        for batch in args.batches
    }
    counts = ", ".join(f"{batch} x{len(found)}" for batch, found in sorted(ratios.items()))
    runs = _by_run(db.with_suffix(".jsonl"))
    line = (
        f"{_name(reference)} {arm}: {summary['measured']} measured in {summary['elapsed_s']:.0f} s of "
        f"{args.budget_minutes * 60:.0f} in {len(runs)} process(es); whole steps at {counts}; each "
        f"process's median step ms: {_run_medians(runs, _pace(args.zoo))}; the machine's pace its "
        f"predictor trained with: {_pace(db) / _pace(args.zoo):.2f}x the zoo's"
    )
    return ratios, predicted, line


def _truth_run(args: argparse.Namespace, layer_table: LayerTable, run: int) -> Ratios:
    """One fresh process timing the architecture's whole steps alone, in an order of its own."""
    batches = Random(run).sample(list(args.batches), len(args.batches))  # noqa: S311 (an order)
    plan = sight_plan(
        nightly_grid("cpu"), DeviceProfile.assumed("cpu"), layer_table, args.truth_minutes * 60, batches
    )
    # Estimated at nothing: the run measures until its budget is spent instead of skipping a step whose
    # rough estimate (15 times a step's time here) exceeds what is left.
    # In one process: a truth run is one fresh process by design.
    steps = tuple(
        entry.model_copy(update={"item": entry.item.model_copy(update={"estimate_s": 0.0}), "process": 1})
        for entry in plan.items
        if entry.part is not SightPart.LAYERS
    )
    base = args.work / f"{slug(layer_table.reference)}-truth-{run}"
    plan_file, out = base.with_suffix(".plan.json"), base.with_suffix(".jsonl")
    plan_file.write_text(plan.model_copy(update={"items": steps}).night().model_dump_json(), encoding="utf-8")
    out.unlink(missing_ok=True)
    words = ["--plan", str(plan_file), "--allow-factories", "--device", "cpu", "--out", str(out)]
    words += ["--partition", args.partition, "--budget-minutes", str(args.truth_minutes)]
    _run(ROOT, ["-m", "advisor.bench.job", *words])
    return _ratios(out)


def _truth(runs: list[Ratios], batch: int) -> tuple[float, float]:
    """A batch's truth (the median over runs of each run's median ratio) and its spread over the runs."""
    medians = [statistics.median(run[batch]) for run in runs if run.get(batch)]
    truth = statistics.median(medians)
    return truth, (max(medians) - min(medians)) / truth


def _truth_said(runs: list[Ratios], batches: list[int], pace: float) -> str:
    """Each truth run's median step (ms) at each batch, and how many steps it timed there."""
    return "; ".join(
        f"run {index + 1}: "
        + ", ".join(f"{batch} {_ms(run.get(batch), pace)} x{len(run.get(batch, []))}" for batch in batches)
        for index, run in enumerate(runs)
    )


def _ratios(results: Path) -> Ratios:
    """Each batch's paced step ratios in a results file."""
    ratios: Ratios = {}
    for line in read_jsonl(results):
        step = line.measurement
        if isinstance(step, StepMeasurement) and step.fits and step.pace_ratio:
            ratios.setdefault(step.config.batch, []).append(step.pace_ratio)
    return ratios


def _by_run(results: Path) -> dict[str, Ratios]:
    """Each run's (process's) paced step ratios by batch."""
    runs: dict[str, Ratios] = {}
    for line in read_jsonl(results):
        step = line.measurement
        if isinstance(step, StepMeasurement) and step.fits and step.pace_ratio:
            runs.setdefault(line.run_id, {}).setdefault(step.config.batch, []).append(step.pace_ratio)
    return runs


def _run_medians(runs: dict[str, Ratios], pace: float) -> str:
    """Each run's median step at each batch, in ms: how far the processes lie apart."""
    batches = sorted({batch for ratios in runs.values() for batch in ratios})
    return ", ".join(
        f"{batch}: " + " / ".join(_ms(ratios.get(batch), pace) for ratios in runs.values())
        for batch in batches
    )


def _ms(ratios: list[float] | None, pace: float) -> str:
    return f"{statistics.median(ratios) * pace * 1000:.1f}" if ratios else "-"


def _name(reference: str) -> str:
    return reference.rpartition(":")[2]


def _pace(db: Path) -> float:
    """The machine's pace as training takes it (`machine_pace`)."""
    return machine_pace(Store.open(db).step_rows())


def _words(args: argparse.Namespace, reference: str, db: Path) -> list[str]:
    out = db.with_suffix(".jsonl")
    out.unlink(missing_ok=True)
    shape = ",".join(map(str, args.input_shape))
    return [
        *("bench", "run", "--architecture", reference, "--input-shape", shape, "--device", "cpu"),
        *("--partition", args.partition, "--budget-minutes", str(args.budget_minutes)),
        *("--db", str(db), "--out", str(out), "--json"),
    ]


def _cli(tree: Path, words: list[str]) -> str:
    return _run(tree, ["-c", _CLI, *words])


def _run(tree: Path, words: list[str]) -> str:
    done = subprocess.run([sys.executable, *words], cwd=tree, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"python {' '.join(words)} in {tree}: failed\n{done.stderr[-2000:]}")
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
    parser.add_argument("--truth-runs", type=int, default=3, help="separate processes the truth is taken in")
    parser.add_argument("--truth-minutes", type=float, default=1.0, help="each truth run's steps")
    return parser


if __name__ == "__main__":
    sys.exit(main())
