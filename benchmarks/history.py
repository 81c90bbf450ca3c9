"""History's run times on a public batch log or a site's accounting, replayed in submission order.

    python -m benchmarks.history TRACE [--json] [--plot FILE] [--processors N] [--factor F]

TRACE is a Parallel Workloads Archive log (``.swf`` or ``.swf.gz``), a ``sacct --json`` dump or a
``sacct -P`` one (`advisor.slurm.sacct_text.DUMP_COMMAND`). Each job is predicted at its submission from
the jobs ended by then, by the product's own predictor
(`advisor.history.replay`, retrained every night as the daemon does). Printed: mean accuracy and median
relative error of users' limits, Tsafrir's rule and the advisor's median; the advised limit's kill rate
against its median limit / run as the policy's factor varies (plotted with ``--plot``); then the log
through EASY backfilling with each arm's estimates ordering backfill (jobs killed at their users' limits),
and with the advised limit replacing the request (``--factor``, default the policy's): mean wait and mean
bounded slowdown.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from advisor.history.cli import show_report
from advisor.history.jobs import PastJob, TraceError, from_accounting, read_swf
from advisor.history.predictor import history_limit
from advisor.history.replay import DEFAULT_RULE, HistoryReport, Predicted, replay, report
from advisor.policy.schema import TimeLimitRule
from advisor.slurm.parse import parse_sacct_json
from advisor.slurm.sacct_text import parse_sacct_parsable
from benchmarks.harness.easy import Replayed, Schedule, easy


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


def schedules(predicted: Sequence[Predicted], processors: int, factor: float) -> dict[str, Schedule]:
    """The log through EASY once per arm: estimates that only order backfill, then limits that kill."""

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
        "users' limits": [submitted(p, None, None) for p in predicted],
        "Tsafrir (orders backfill)": [submitted(p, p.tsafrir_s, None) for p in predicted],
        "advisor (orders backfill)": [submitted(p, p.forecast.p50_s, None) for p in predicted],
        f"advisor limit x {factor:g} (kills)": [submitted(p, *[_limit(p, factor)] * 2) for p in predicted],
    }
    return {name: easy(jobs, processors) for name, jobs in arms.items()}


def _limit(p: Predicted, factor: float) -> float | None:
    """The limit the product advises, with the policy's floor (`history_limit`)."""
    limit = history_limit(DEFAULT_RULE, p.forecast, p.job.ask, factor)
    return None if limit is None else limit.total_seconds()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--plot", type=Path, help="write the kill-rate / limit trade-off here (PNG)")
    parser.add_argument("--processors", type=int, help="the machine's size (default: the largest job's)")
    parser.add_argument("--factor", type=float, default=TimeLimitRule().history_factor)
    args = parser.parse_args(argv)
    jobs = read_or_say(args.trace, "history")
    if jobs is None:
        return 1
    predicted = replay(jobs)
    result = report(args.trace.name, predicted)
    processors = args.processors or max(job.ask.cpus for job in jobs)
    scheduled = schedules(predicted, processors, args.factor)
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
        print(f"EASY backfilling on {processors} processors:")
        for name, schedule in scheduled.items():
            print(
                f"  {name:34} mean wait {schedule.mean_wait_s / 3600:7.2f} h   mean bounded slowdown "
                f"{schedule.mean_bounded_slowdown:8.2f}   killed {schedule.killed}"
            )
    if args.plot:
        plot(result, args.plot)
    return 0


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
