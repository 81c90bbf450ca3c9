"""`advisor report`: predicted against actual run times of finished advised jobs, per partition."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from pathlib import Path

from rich.console import Console
from rich.table import Table

from advisor import terminal
from advisor.machines import labelled, machine_names
from advisor.predict.calibration import (
    AGREEING_SHARE,
    BEYOND_BOUND_JOBS,
    BOUND,
    COMPARABLE_SHARE,
    Correction,
    Outcome,
    PartitionReport,
    QuantileCoverage,
    fit_corrections,
    report,
)
from advisor.predict.outcomes import collect_outcomes, load_outcomes
from advisor.readable import percent
from advisor.recommend.savings import Savings, advice_savings
from advisor.settings.validated import Settings
from advisor.slurm.client import SlurmClient
from advisor.store import Store
from advisor.store.architectures import ARCHITECTURES


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser], settings: Settings) -> None:
    parser = commands.add_parser(
        "report", help="what advice saved, and predicted against actual times of finished advised jobs"
    )
    parser.add_argument("--db", type=Path, default=settings.database)
    parser.add_argument(
        "--collect", action="store_true", help="first read finished jobs from Slurm's history (sacct)"
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--plot", type=Path, help="PNG of predicted against actual elapsed time")
    parser.set_defaults(handler=_report)


def _report(args: argparse.Namespace, console: Console) -> int:
    store = Store.existing(args.db)
    if args.collect:
        collect_outcomes(store, SlurmClient.from_settings(args.settings.slurm))
    outcomes = load_outcomes(store)
    partitions = report(outcomes)
    corrections = fit_corrections(outcomes)
    if args.plot:
        _plot(outcomes, args.plot)
    saved = advice_savings(store)
    if args.json:
        payload = {
            "savings": {
                **saved.model_dump(),
                "gpu_hours_saved": saved.gpu_hours_saved,
                "median_gpu_hours_saved": saved.median_gpu_hours_saved,
            },
            "partitions": [p.model_dump() for p in partitions],
            "corrections": [c.model_dump() for c in corrections.values()],
            "jobs": [o.model_dump() for o in outcomes],
        }
        print(json.dumps(payload, indent=2))
        return 0
    console.print(_saved(saved), highlight=False)
    if not outcomes:
        console.print("no advised job has finished yet", highlight=False)
        return 0
    terminal.show(_table(partitions), console)
    for line in _notes(partitions, corrections.values(), _names(store)):
        console.print(line, highlight=False)
    return 0


def _saved(saved: Savings) -> str:
    """The GPU-hours saved by the jobs that count, then every offer that does not, by why."""
    counted = f"advice saved {saved.gpu_hours_saved:.2f} GPU-hours over {len(saved.jobs)} jobs"
    if saved.median_gpu_hours_saved is not None:
        counted += f" (median {saved.median_gpu_hours_saved:.2f} GPU-hours a job)"
    return (
        f"{counted} that went in as advised and completed, each its run predicted as written less its "
        f"actual run. Not counted: {saved.did_not_train} did not train as described, {saved.not_completed} "
        f"not completed, {saved.not_applied} not applied (went in as written), {saved.previewed} previewed "
        "(dry runs, --test-only, no job reported)"
    )


def _names(store: Store) -> dict[str, str]:
    """Each machine hash and architecture hash a correction may name, as read: ``v100 (a7abe679)``,
    ``resnet18 (3f2a9c1b)``."""
    machines = machine_names(store.fingerprints())
    named = {machine: labelled(machine, machines) for machine in machines}
    for row in store.rows(ARCHITECTURES):
        named[row.architecture_hash] = f"{row.model} ({row.architecture_hash[:8]})"
    return named


def _notes(
    partitions: list[PartitionReport], corrections: Iterable[Correction], names: dict[str, str]
) -> list[str]:
    """Jobs left out as not comparable, then each machine's correction (and each architecture's with
    `ARCHITECTURE_JOBS` jobs there), flagged where it is beyond its bound or held at it."""
    lines = [
        f"{p.partition}: {p.not_comparable} jobs did not train as described (completed before their "
        f"predicted start-up and one epoch, or {COMPARABLE_SHARE:.0%} of their predicted run where the job "
        "gave no epochs): not comparable, not used"
        for p in partitions
        if p.not_comparable
    ]
    low, high = BOUND
    for c in corrections:
        of = names.get(c.machine, c.machine)
        if c.architecture is not None:
            of += f", architecture {names.get(c.architecture, c.architecture[:8])}"
        line = f"{of}: times x {c.factor:.3f} from {c.jobs} comparable jobs"
        line += " (completed, or timed out: at least their limit)"
        if c.beyond_bound:
            line += f"; FLAGGED: beyond {low:g}-{high:g}x, {c.agreeing} of {c.jobs} jobs agree"
        elif c.held:
            line += f"; held at the bound: the jobs say x {c.shrunk:.3f}, but {c.agreeing} of {c.jobs} agree"
            line += f" (beyond {low:g}-{high:g}x needs {BEYOND_BOUND_JOBS}, {AGREEING_SHARE:.0%} agreeing)"
        lines.append(line)
    return lines


def _table(partitions: list[PartitionReport]) -> Table:
    table = Table(title="advised jobs: predicted against actual (comparable jobs)")
    columns = (
        "partition",
        "finished",
        "not comparable",
        "completed",
        "timed out",
        "MAPE",
        "after calibration",
    )
    for column in (*columns, "actual / predicted", *(f"under p{q}" for q in (10, 50, 90))):
        table.add_column(column)
    for p in partitions:
        table.add_row(
            p.partition,
            str(p.jobs),
            str(p.not_comparable),
            str(p.completed),
            str(p.timed_out),
            percent(p.mape),
            percent(p.calibrated_mape),
            "-" if p.median_ratio is None else f"{p.median_ratio:.2f}",
            *(_under(c) for c in p.coverage),
        )
    return table


def _under(coverage: QuantileCoverage) -> str:
    """``62% of 13 (90% expected)``: the share beside the jobs it is of and what it should be."""
    if coverage.share is None:
        return "-"
    return f"{coverage.share:.0%} of {coverage.judged} ({coverage.expected:.0%} expected)"


def _plot(outcomes: list[Outcome], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 6))
    for partition in sorted({o.partition for o in outcomes}):
        mine = [o for o in outcomes if o.partition == partition]
        axis.scatter([o.actual_s for o in mine], [o.predicted_s for o in mine], s=16, label=partition)
    values = [v for o in outcomes for v in (o.actual_s, o.predicted_s) if v > 0]
    if values:
        axis.plot([min(values), max(values)], [min(values), max(values)], color="black", linewidth=0.8)
        axis.set(xscale="log", yscale="log")
        axis.legend()
    axis.set(xlabel="actual elapsed (s)", ylabel="predicted (s)", title="advised jobs")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
