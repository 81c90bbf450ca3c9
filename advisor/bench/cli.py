"""`advisor bench plan|run|submit|ingest`: the nightly benchmarks from the command line.

torch is imported only by the commands that measure; `submit` and `ingest` run on a login node.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from rich.console import Console
from rich.table import Table

from advisor.bench.plan import add_plan_choice
from advisor.bench.results import read_jsonl
from advisor.bench.submit import (
    BenchRequest,
    cancel_leftovers,
    ingest_results,
    submit_benchmarks,
    wait_for_jobs,
)
from advisor.settings.validated import Settings
from advisor.slurm.client import SlurmClient
from advisor.store import Store


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser], settings: Settings) -> None:
    bench = commands.add_parser("bench", help="measure training steps and layers on each partition")
    actions = bench.add_subparsers(required=True, metavar="ACTION")

    plan = actions.add_parser("plan", help="what a run measures and how long it should take")
    add_plan_choice(plan)
    plan.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    plan.set_defaults(handler=_plan)

    run = actions.add_parser("run", help="measure this machine and store the results")
    add_plan_choice(run)
    run.add_argument(
        "--device", choices=["auto", "cpu", "cuda"], default="auto", help="auto: CUDA where torch sees it"
    )
    run.add_argument("--budget-minutes", type=float)
    run.add_argument("--partition", help="recorded in the fingerprint")
    run.add_argument("--out", type=Path, help="JSON-lines results file (default: in the state folder)")
    run.add_argument("--db", type=Path, default=settings.database)
    run.set_defaults(handler=_run)

    submit = actions.add_parser("submit", help="one Slurm job per partition, then ingest what they measured")
    submit.add_argument("--partition", action="append", help="repeatable; default: every partition")
    submit.add_argument("--budget-minutes", type=float, default=45.0)
    submit.add_argument("--quick", action="store_true")
    submit.add_argument("--one-at-a-time", action="store_true", help="nodes share hardware (the sandbox)")
    submit.add_argument("--results-dir", type=Path, default=settings.bench_dir)
    submit.add_argument("--python", default=sys.executable, help="the advisor's Python on the compute nodes")
    submit.add_argument("--job-arg", action="append", default=[], help="passed on to the benchmark job")
    submit.add_argument(
        "--cpu-only",
        action="store_true",
        default=settings.bench.cpu_only,
        help="measure on the CPU even on GPU partitions (a cluster whose GPUs are not real: the sandbox)",
    )
    submit.add_argument("--db", type=Path, default=settings.database)
    submit.set_defaults(handler=_submit)

    ingest = actions.add_parser("ingest", help="store results files (again: ingestion is idempotent)")
    ingest.add_argument("files", type=Path, nargs="+")
    ingest.add_argument("--db", type=Path, default=settings.database)
    ingest.set_defaults(handler=_ingest)


def _plan(args: argparse.Namespace, console: Console) -> int:
    from advisor.bench.plan import DeviceProfile, check_plan, describe, full_plan, quick_plan
    from advisor.bench.zoo import zoo_table

    profile = DeviceProfile.assumed(args.device)
    if args.quick:
        plan, title = quick_plan(zoo_table, profile), "quick"
    elif args.check:
        plan, title = check_plan(profile, zoo_table), "check"
    else:
        plan, title = full_plan(profile, zoo_table), "nightly"
    table = Table(title=f"{title} plan on {args.device}", title_justify="left")
    for column in ("phase", "kind", "items", "subjects", "sizes", "batches", "settings", "estimate"):
        table.add_column(column)
    for row in describe(plan):
        table.add_row(
            row.phase,
            row.kind,
            str(row.items),
            ", ".join(row.subjects),
            ", ".join(map(str, row.sizes)),
            ", ".join(map(str, row.batches)),
            ", ".join(row.settings) or "-",
            _minutes(row.estimate_s),
        )
    console.print(table)
    console.print(f"{len(plan.items)} measurements, estimated {_minutes(plan.estimate_s)}", highlight=False)
    return 0


def _run(args: argparse.Namespace, console: Console) -> int:
    from advisor.bench import job

    out = args.out or args.settings.bench_dir / f"run-{datetime.now(UTC):%Y%m%dT%H%M%S}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    words = ["--out", str(out), "--device", args.device]
    words += ["--quick"] if args.quick else ["--check"] if args.check else []
    if args.budget_minutes is not None:
        words += ["--budget-minutes", str(args.budget_minutes)]
    if args.partition:
        words += ["--partition", args.partition]
    if job.main(words) != 0:
        return 2
    stored = Store.open(args.db).ingest(read_jsonl(out))
    console.print(f"{stored} new rows in {args.db} (results in {out})", highlight=False)
    return 0


def _submit(args: argparse.Namespace, console: Console) -> int:
    client = SlurmClient.from_settings(args.settings.slurm)
    partitions = client.partitions()
    if args.partition:
        unknown = sorted(set(args.partition) - {p.name for p in partitions})
        if unknown:
            console.print(f"advisor: error: no such partition: {', '.join(unknown)}", highlight=False)
            return 1
        partitions = [p for p in partitions if p.name in args.partition]
    request = BenchRequest(
        python=args.python,
        results_dir=args.results_dir,
        budget=timedelta(minutes=args.budget_minutes),
        quick=args.quick,
        one_at_a_time=args.one_at_a_time,
        extra=tuple(args.job_arg),
        site=args.settings.bench.model_copy(update={"cpu_only": args.cpu_only}),
    )
    night = submit_benchmarks(client, partitions, request, datetime.now(UTC))
    for bench_job in night.jobs:
        console.print(f"{bench_job.partition}: job {bench_job.job_id}", highlight=False)
    for name, why in night.refused.items():
        console.print(f"{name}: not benchmarked, Slurm refused the job: {why}", highlight=False)
    window = request.budget * len(night.jobs) + timedelta(minutes=30)
    states = wait_for_jobs(client, night.jobs, timeout=window)
    cancelled = set(cancel_leftovers(client, states))
    stored = ingest_results(Store.open(args.db), night.jobs)
    for bench_job in night.jobs:
        state = states[bench_job.job_id]
        shown = "cancelled at the window's end" if bench_job.job_id in cancelled else state
        console.print(f"{bench_job.partition}: job {bench_job.job_id}: {shown}", highlight=False)
    console.print(f"{stored} new rows in {args.db}", highlight=False)
    failed = [job for job in night.jobs if states[job.job_id] != "COMPLETED"]
    return 1 if night.refused or failed else 0


def _ingest(args: argparse.Namespace, console: Console) -> int:
    store = Store.open(args.db)
    stored = store.ingest(line for path in args.files for line in read_jsonl(path))
    console.print(f"{stored} new rows in {args.db}", highlight=False)
    return 0


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"
