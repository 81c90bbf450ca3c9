"""History's run times on a public batch log or a site's accounting, replayed in submission order.

    python -m benchmarks.history TRACE [--json] [--plot FILE] [--processors N] [--factor F] [--shakes N]
        [--shift S]

TRACE is a Parallel Workloads Archive log (``.swf`` or ``.swf.gz``), a ``sacct --json`` dump or a
``sacct -P`` one (`advisor.slurm.sacct_text.DUMP_COMMAND`). Each job is predicted at its submission from
the jobs ended by then, by the product's own predictor
(`advisor.history.replay`, retrained every night as the daemon does). Printed: mean accuracy and median
relative error of users' limits, Tsafrir's rule and the advisor's median; the advised limit's kill rate
against its median limit / run as the policy's factor varies (plotted with ``--plot``); then the log
through EASY backfilling with each arm's estimates ordering backfill (jobs killed at their users' limits),
and with the advised limit replacing the request (``--factor``, default the policy's): mean wait and mean
bounded slowdown, for the log as it is and over ``--shakes`` replays with every submission moved by up to
``--shift`` seconds (the estimates stay those made from the log as it is), with how many of those replays
each arm did better in than users' limits and Tsafrir's rule.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table

from advisor.history.cli import show_report
from advisor.history.jobs import TraceError, from_accounting, read_swf
from advisor.history.past import PastJob
from advisor.history.predictor import history_limit
from advisor.history.replay import DEFAULT_RULE, HistoryReport, Predicted, replay, report
from advisor.policy.schema import TimeLimitRule
from advisor.slurm.parse import parse_sacct_json
from advisor.slurm.sacct_text import parse_sacct_parsable
from benchmarks.harness.easy import Replayed, Replays, replays


def read_trace(path: Path) -> list[PastJob]:
    if path.name.endswith((".swf", ".swf.gz")):
        return read_swf(path)
    try:
        text = path.read_text(encoding="utf-8")
        if text.startswith("{"):
            return from_accounting(parse_sacct_json(text))
        return from_accounting(parse_sacct_parsable(text, str(path)))
    except (OSError, ValueError) as error:
        raise TraceError(f"{path}: not SWF (.swf, .swf.gz), sacct --json or sacct -P: {error}") from None


def read_or_say(path: Path, program: str) -> list[PastJob] | None:
    """`read_trace`, or None once what is wrong with the trace is on stderr."""
    try:
        return read_trace(path)
    except TraceError as error:
        print(f"{program}: error: {error}", file=sys.stderr)
        return None


SHAKES = 10
SHIFT_S = 300.0
"""Five minutes either way: small against the logs' runs, enough to reorder submissions made together."""
USERS = "users' limits"
TSAFRIR = "Tsafrir's rule"


def schedules(
    predicted: Sequence[Predicted],
    processors: int,
    factor: float,
    shakes: int = SHAKES,
    shift_s: float = SHIFT_S,
) -> dict[str, Replays]:
    """The log through EASY per arm (estimates that only order backfill, then limits that kill), as it
    is and shaken alike for every arm."""

    def submitted(p: Predicted, estimate: float | None, limit: float | None) -> Replayed:
        job, own = p.job, p.job.ask.limit_s or p.job.run_s
        return Replayed(
            submit_s=job.ask.submit_s,
            procs=min(job.ask.cpus, processors),
            run_s=job.run_s,
            estimate_s=estimate or own,
            limit_s=limit or own,
            fallback_s=own,
        )

    arms = {
        USERS: [submitted(p, None, None) for p in predicted],
        TSAFRIR: [submitted(p, p.tsafrir_s, None) for p in predicted],
        "advisor's median": [submitted(p, p.forecast.p50_s, None) for p in predicted],
        f"advisor's limit x {factor:g}": [submitted(p, *[_limit(p, factor)] * 2) for p in predicted],
    }
    return {name: replays(jobs, processors, shakes, shift_s) for name, jobs in arms.items()}


def _limit(p: Predicted, factor: float) -> float | None:
    """The limit the product advises, with the policy's floor (`history_limit`)."""
    limit = history_limit(DEFAULT_RULE, p.forecast, p.job.ask, factor)
    return None if limit is None else limit.total_seconds()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.history", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "trace", type=Path, help="an SWF log (.swf, .swf.gz), or a sacct --json or sacct -P dump"
    )
    parser.add_argument("--json", action="store_true", help="every figure as JSON")
    parser.add_argument("--plot", type=Path, help="write the kill-rate / limit trade-off here (PNG)")
    parser.add_argument("--processors", type=int, help="the machine's size (default: the largest job's)")
    factor = TimeLimitRule().history_factor
    parser.add_argument(
        "--factor",
        type=float,
        default=factor,
        help=f"the advised limit's factor in the replay where it kills (default the policy's, {factor:g})",
    )
    parser.add_argument(
        "--shakes", type=int, default=SHAKES, help=f"replays with shaken submissions (default {SHAKES})"
    )
    parser.add_argument(
        "--shift",
        type=float,
        default=SHIFT_S,
        help=f"the most a submission moves either way, seconds (default {SHIFT_S:g})",
    )
    args = parser.parse_args(argv)
    if args.shakes < 0 or args.shift < 0:
        parser.error("--shakes and --shift cannot be negative")
    jobs = read_or_say(args.trace, "history")
    if jobs is None:
        return 1
    predicted = replay(jobs)
    result = report(args.trace.name, predicted)
    processors = args.processors or max(job.ask.cpus for job in jobs)
    scheduled = schedules(predicted, processors, args.factor, args.shakes, args.shift)
    if args.json:
        print(
            json.dumps(
                {
                    "report": result.model_dump(),
                    "schedules": {k: v.model_dump() for k, v in scheduled.items()},
                }
            )
        )
    else:
        console = Console()
        show_report(result, console)
        show_schedules(scheduled, processors, args.shift, console)
    if args.plot:
        plot(result, args.plot)
    return 0


def show_schedules(scheduled: dict[str, Replays], processors: int, shift_s: float, console: Console) -> None:
    """Each arm's figures for the log and their mean ± standard deviation shaken; then how often it won."""
    shakes = len(scheduled[USERS].shaken)
    figures = Table(
        title=f"EASY backfilling on {processors} processors, each arm's estimates planning it (jobs "
        "killed at their users' limits, or at the advisor's): mean wait and mean bounded slowdown for the "
        f"log, then their mean ± standard deviation over {shakes} replays with every submission moved by up "
        f"to {shift_s:g} s"
    )
    for header in ("arm", "wait h", "slowdown", "shaken wait", "slowdown", "killed"):
        figures.add_column(header, justify="left" if header == "arm" else "right")
    wins = Table(
        title=f"shaken replays (of {shakes}) in which each arm's mean wait, and its mean bounded slowdown, "
        "were lower than with"
    )
    for header in ("arm", USERS, TSAFRIR):
        wins.add_column(header, justify="left" if header == "arm" else "right")
    for name, arm in scheduled.items():
        figures.add_row(
            name,
            f"{arm.log.mean_wait_s / 3600:.3f}",
            f"{arm.log.mean_bounded_slowdown:.2f}",
            _spread([schedule.mean_wait_s / 3600 for schedule in arm.shaken], 3),
            _spread([schedule.mean_bounded_slowdown for schedule in arm.shaken], 1),
            str(arm.log.killed),
        )
        wins.add_row(name, *(_wins(arm, scheduled[other]) for other in (USERS, TSAFRIR)))
    console.print(figures)
    if shakes:
        console.print(wins)


def _spread(values: Sequence[float], digits: int) -> str:
    if len(values) < 2:
        return "-"
    return f"{statistics.fmean(values):.{digits}f}±{statistics.stdev(values):.{digits}f}"


def _wins(arm: Replays, other: Replays) -> str:
    """In how many shaken replays ``arm`` had the lower mean wait, and the lower bounded slowdown."""
    if arm is other:
        return "-"
    pairs = list(zip(arm.shaken, other.shaken, strict=True))
    wait = sum(mine.mean_wait_s < theirs.mean_wait_s for mine, theirs in pairs)
    slowdown = sum(mine.mean_bounded_slowdown < theirs.mean_bounded_slowdown for mine, theirs in pairs)
    return f"{wait}, {slowdown}"


def plot(result: HistoryReport, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 4))
    for points, label in (
        (result.tradeoff, "advisor (the policy's floor)"),
        (result.tradeoff_floorless, "advisor, no floor"),
    ):
        axes.plot(
            [p.median_ratio for p in points], [100 * p.kill_rate for p in points], marker="o", label=label
        )
        for point in points:
            axes.annotate(f"x{point.factor:g}", (point.median_ratio, 100 * point.kill_rate), fontsize=7)
    user = result.user_limits
    axes.plot([user.median_ratio], [100 * user.kill_rate], marker="s", linestyle="", label="users' limits")
    for exact, label in ((result.exact, "own run (floor)"), (result.exact_floorless, "own run, no floor")):
        axes.plot([exact.median_ratio], [100 * exact.kill_rate], marker="x", linestyle="", label=label)
    axes.set_xlabel("median limit / run")
    axes.set_ylabel("jobs killed (%)")
    axes.set_title(result.trace)
    axes.axhline(1.0, color="grey", linewidth=0.5)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)


if __name__ == "__main__":
    raise SystemExit(main())
