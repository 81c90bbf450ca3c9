"""`advisor history`: train the history model now, and see how good history's limits would have been on
this cluster's own accounting before letting them rewrite anything."""

from __future__ import annotations

import argparse
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel
from rich.console import Console
from rich.table import Table

from advisor import readable
from advisor.settings.validated import Settings

if TYPE_CHECKING:
    from advisor.history.replay import HistoryReport

_SPAN = re.compile(r"^(\d+)([dh])$")


def span(text: str) -> timedelta:
    """``30d`` or ``12h``."""
    match = _SPAN.match(text)
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r}: expected days or hours, such as 30d or 12h")
    count, unit = int(match[1]), match[2]
    return timedelta(days=count) if unit == "d" else timedelta(hours=count)


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser], settings: Settings) -> None:
    history = commands.add_parser("history", help="run times from Slurm's accounting: train, evaluate")
    actions = history.add_subparsers(required=True, metavar="ACTION")
    train = actions.add_parser(
        "train", help="train the history model from accounting now (the daemon does nightly)"
    )
    train.add_argument(
        "--since", type=span, default=timedelta(days=90), help="accounting to read (default 90d)"
    )
    train.add_argument("--models-dir", default=settings.models_dir, help="default: %(default)s")
    train.add_argument("--json", action="store_true", help="what was trained, as JSON")
    train.set_defaults(handler=_train)
    evaluate = actions.add_parser(
        "evaluate",
        help="replay accounting in submission order: users' limits, Tsafrir's rule and the advisor's",
    )
    evaluate.add_argument("--since", type=span, default=timedelta(days=30), help="default 30d")
    evaluate.add_argument("--json", action="store_true")
    evaluate.add_argument(
        "--policy",
        type=Path,
        default=settings.policy,
        help="its [time_limit] makes the limits (default: %(default)s, else the built-in policy)",
    )
    evaluate.set_defaults(handler=_evaluate)


class HistoryTraining(BaseModel):
    """What `history train` did: the jobs accounting held since when, those the model learned from (None:
    too few, Tsafrir's rule serves) and where the model was written."""

    since: datetime
    accounting_jobs: int
    trained_jobs: int | None
    path: str | None

    def said(self) -> str:
        """For a person, in one line."""
        since = readable.timestamp(self.since)
        if self.trained_jobs is None:
            too_few = "too few to train on (Tsafrir's rule serves)"
            return f"{self.accounting_jobs} jobs in accounting since {since}: {too_few}"
        return f"history model trained on {self.trained_jobs} jobs since {since}: {self.path}"


def _train(args: argparse.Namespace, console: Console) -> int:
    from advisor.history.service import MODEL_FILE, save_model, train_from_accounting
    from advisor.slurm.client import SlurmClient

    now = datetime.now(UTC)
    finished = SlurmClient.from_settings(args.settings.slurm).history(now - args.since)
    model = train_from_accounting(finished, now)
    path = Path(args.models_dir) / MODEL_FILE
    if model is not None:
        save_model(path, model, now)
    outcome = HistoryTraining(
        since=(now - args.since).replace(microsecond=0),
        accounting_jobs=len(finished),
        trained_jobs=None if model is None else model.jobs,
        path=None if model is None else str(path),
    )
    if args.json:
        print(outcome.model_dump_json(indent=2))
    else:
        console.print(outcome.said(), highlight=False)
    return 0


def _evaluate(args: argparse.Namespace, console: Console) -> int:
    from advisor.history.jobs import from_accounting
    from advisor.history.replay import FACTORS, replay, report
    from advisor.policy.holder import PolicyHolder
    from advisor.slurm.client import SlurmClient

    holder = PolicyHolder(args.policy)
    if holder.last_error is not None:
        console.print(f"advisor: warning: policy not used: {holder.last_error}", highlight=False)
    rule = holder.current.time_limit
    now = datetime.now(UTC)
    jobs = from_accounting(SlurmClient.from_settings(args.settings.slurm).history(now - args.since))
    since = f"accounting since {(now - args.since):%Y-%m-%d}"
    try:
        result = report(since, replay(jobs), sorted({*FACTORS, rule.history_factor}), rule)
    except ValueError as error:
        console.print(f"advisor: error: {error}", highlight=False)
        return 1
    if args.json:
        print(result.model_dump_json(indent=2))
        return 0
    show_report(result, console)
    return 0


def show_report(result: HistoryReport, console: Console) -> None:
    """The three predictors side by side, then the advised limit's trade-off as the factor varies."""
    points = Table(title=f"{result.trace}: {result.completed} completed of {result.jobs} jobs")
    for header in ("predictor", "mean accuracy", "median |p - run| / run"):
        points.add_column(header, justify="right" if header != "predictor" else "left")
    for name, score in (
        ("users' limits", result.users),
        ("Tsafrir", result.tsafrir),
        ("advisor", result.advisor),
    ):
        points.add_row(name, f"{score.mean_accuracy:.3f}", f"{score.median_error:.2f}")
    console.print(points)
    rules = Table(title="the advisor's median, by how it was made")
    for header in ("made by", "jobs", "mean accuracy"):
        rules.add_column(header, justify="right" if header != "made by" else "left")
    for label, score in result.rules.items():
        rules.add_row(label, f"{score.jobs / result.completed:.1%}", f"{score.mean_accuracy:.3f}")
    console.print(rules)
    limits = Table(
        title="as a time limit: jobs killed, and the median limit / run (advisor: its p95 x factor, within "
        f"the request; the policy's floor: at least {result.floor:g} of it)"
    )
    for header in ("limit", "killed", "limit / run", "no floor: killed", "limit / run"):
        limits.add_column(header, justify="right" if header != "limit" else "left")
    own = result.user_limits
    rows = [("users' own", own, own)]
    rows += [
        (f"advisor x {floored.factor:g}", floored, floorless)
        for floored, floorless in zip(result.tradeoff, result.tradeoff_floorless, strict=True)
    ]
    rows.append(("its own run", result.exact, result.exact_floorless))
    for name, floored, floorless in rows:
        limits.add_row(
            name,
            f"{floored.kill_rate:.2%}",
            f"{floored.median_ratio:.2f}",
            f"{floorless.kill_rate:.2%}",
            f"{floorless.median_ratio:.2f}",
        )
    console.print(limits)
