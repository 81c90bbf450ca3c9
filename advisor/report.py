"""`advisor report`: predicted against actual run times of finished advised jobs, per partition."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from advisor.predict.calibration import Outcome, PartitionReport, fit_corrections, report
from advisor.predict.outcomes import collect_outcomes, load_outcomes
from advisor.settings.validated import Settings
from advisor.slurm.client import SlurmClient
from advisor.store import Store


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser], settings: Settings) -> None:
    parser = commands.add_parser("report", help="predicted against actual times of finished advised jobs")
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
    if args.json:
        payload = {
            "partitions": [p.model_dump() for p in partitions],
            "corrections": [c.model_dump() for c in corrections.values()],
            "jobs": [o.model_dump() for o in outcomes],
        }
        print(json.dumps(payload, indent=2))
        return 0
    if not outcomes:
        console.print("no advised job has finished yet", highlight=False)
        return 0
    console.print(_table(partitions))
    for correction in corrections.values():
        console.print(
            f"{correction.machine}: times x {correction.factor:.3f} from {correction.jobs} jobs "
            "(completed, or timed out: at least their limit)",
            highlight=False,
        )
    return 0


def _table(partitions: list[PartitionReport]) -> Table:
    table = Table(title="advised jobs: predicted against actual")
    columns = ("partition", "finished", "completed", "timed out", "MAPE", "after calibration")
    for column in (*columns, "actual/predicted", "within p90"):
        table.add_column(column)
    for p in partitions:
        table.add_row(
            p.partition,
            str(p.jobs),
            str(p.completed),
            str(p.timed_out),
            _percent(p.mape),
            _percent(p.calibrated_mape),
            "-" if p.median_ratio is None else f"{p.median_ratio:.2f}",
            _percent(p.within_p90),
        )
    return table


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


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
