"""`advisor bench plan|run|submit|ingest`: the nightly benchmarks from the command line.

torch is imported only by the commands that measure or plan (introspecting the zoo on the meta device);
`submit` and `ingest` run on a login node.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from advisor import readable, terminal
from advisor.argtypes import add_plan_choice
from advisor.bench.architectures import Architectures, NightOn, plan_tonight
from advisor.bench.night import Tonight, describe_night
from advisor.bench.plan import Phase, Plan, loader_workers
from advisor.bench.plan_rows import PlanRow, describe
from advisor.bench.results import read_jsonl
from advisor.bench.sight_cli import (
    add_architecture_options,
    architecture_table,
    plan_architecture,
    planned_sight,
    said_sight,
    whole_steps_possible,
)
from advisor.bench.submit import BenchRequest, run_night
from advisor.bench.watching import measured_json, progress_on, said_measured, said_submitted
from advisor.introspect import LayerTable
from advisor.settings.validated import Settings
from advisor.slurm.client import SlurmClient
from advisor.store import Store

if TYPE_CHECKING:
    from advisor.bench.run import RunSummary
    from advisor.bench.sight_plan import SightPlan


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser], settings: Settings) -> None:
    bench = commands.add_parser("bench", help="measure training steps and layers on each partition")
    actions = bench.add_subparsers(required=True, metavar="ACTION")
    for add in (_add_plan, _add_run, _add_submit, _add_ingest):
        add(actions, settings)


def _add_plan(actions: argparse._SubParsersAction[argparse.ArgumentParser], settings: Settings) -> None:
    plan = actions.add_parser(
        "plan",
        help="what tonight measures on a partition, why, and how much of the grid its machine has covered",
        description="Tonight's plan: the sweeps (bandwidth, launches, updates) and the coarse grid while a "
        "machine lacks them, then the architectures users submitted that it has not measured, then the rest "
        "of the nightly grid, then its oldest results again, within the budget. --grid, --quick and --check "
        "show those whole plans instead; --architecture what `advisor bench run --architecture` measures of "
        "one model.",
    )
    choice = add_plan_choice(plan)
    choice.add_argument("--grid", action="store_true", help="the whole nightly grid, by phase")
    add_architecture_options(plan, verb="show")
    plan.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    plan.add_argument(
        "--partition", help="its machine's history in the database (default: a machine never benchmarked)"
    )
    plan.add_argument("--budget-minutes", type=float, default=settings.bench.budget_minutes)
    plan.add_argument("--db", type=Path, default=settings.database)
    _add_json(plan)
    plan.set_defaults(handler=_plan)


def _add_run(actions: argparse._SubParsersAction[argparse.ArgumentParser], settings: Settings) -> None:
    run = actions.add_parser("run", help="measure this machine and store the results")
    add_plan_choice(run)
    run.add_argument(
        "--device", choices=["auto", "cpu", "cuda"], default="auto", help="auto: CUDA where torch sees it"
    )
    add_architecture_options(run, verb="measure")
    run.add_argument(
        "--budget-minutes",
        type=float,
        help="stop starting measurements after this long (default: the plan's own; with --architecture, "
        "[bench] budget_minutes)",
    )
    run.add_argument("--partition", help="recorded in the fingerprint")
    run.add_argument("--out", type=Path, help="JSON-lines results file (default: in the state folder)")
    run.add_argument("--db", type=Path, default=settings.database)
    _add_json(run)
    run.set_defaults(handler=_run)


def _add_submit(actions: argparse._SubParsersAction[argparse.ArgumentParser], settings: Settings) -> None:
    submit = actions.add_parser("submit", help="one Slurm job per partition, then ingest what they measured")
    submit.add_argument("--partition", action="append", help="repeatable; default: every partition")
    submit.add_argument(
        "--budget-minutes",
        type=float,
        default=settings.bench.budget_minutes,
        help="per partition ([bench] budget_minutes)",
    )
    submit.add_argument("--quick", action="store_true", help="the quick plan, not tonight's")
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
    _add_json(submit)
    submit.set_defaults(handler=_submit)


def _add_ingest(actions: argparse._SubParsersAction[argparse.ArgumentParser], settings: Settings) -> None:
    ingest = actions.add_parser("ingest", help="store results files (again: ingestion is idempotent)")
    ingest.add_argument("files", type=Path, nargs="+")
    ingest.add_argument("--db", type=Path, default=settings.database)
    _add_json(ingest)
    ingest.set_defaults(handler=_ingest)


def _add_json(command: argparse.ArgumentParser) -> None:
    command.add_argument("--json", action="store_true", help="what it printed, as JSON")


def _plan(args: argparse.Namespace, console: Console) -> int:
    from advisor.bench.plan import DeviceProfile, full_plan
    from advisor.bench.short_plans import check_plan, quick_plan
    from advisor.bench.tables import zoo_table

    if args.architecture and (args.quick or args.check or args.grid):
        console.print(
            "advisor: error: --architecture goes without --quick, --check and --grid", highlight=False
        )
        return 2
    if args.architecture:
        return plan_architecture(args, console)
    profile = DeviceProfile.assumed(args.device)
    if not (args.quick or args.check or args.grid):
        night = _night(args)
        if args.json:
            print(_night_json(night))
        else:
            _show_night(console, night)
        return 0
    if args.quick:
        plan, title = quick_plan(zoo_table, profile), f"quick plan on {args.device}"
    elif args.check:
        plan, title = check_plan(profile, zoo_table), f"check plan on {args.device}"
    else:
        plan, title = full_plan(profile, zoo_table), f"nightly grid on {args.device}"
    if args.json:
        print(_plan_json(plan, title))
    else:
        _show_plan(console, plan, title)
    return 0


def _night(args: argparse.Namespace) -> Tonight:
    # Without a database (a machine still being set up) the plan is a new machine's, nothing submitted yet.
    store = Store.existing(args.db) if args.partition or args.db.is_file() else None
    workers = loader_workers(args.settings.bench.cpus_per_job)
    budget_s, now = args.budget_minutes * 60, datetime.now(UTC)
    return plan_tonight(store, NightOn(args.partition, args.device, workers), budget_s, now)


def _plan_json(plan: Plan, title: str) -> str:
    rows = [row.model_dump(mode="json") for row in describe(plan)]
    answer = {"plan": title, "rows": rows, "measurements": len(plan.items), "estimate_s": plan.estimate_s}
    return json.dumps(answer, indent=2)


def _night_json(night: Tonight) -> str:
    return json.dumps(
        {
            "machine": night.machine,
            "rows": [row.model_dump(mode="json") for row in describe_night(night)],
            "measurements": len(night.entries),
            "estimate_s": night.estimate_s,
            "budget_s": night.budget_s,
            "grid_covered": night.covered,
            "grid_items": night.grid_items,
        },
        indent=2,
    )


def _show_plan(console: Console, plan: Plan, title: str) -> None:
    table = Table(title=title, title_justify="left")
    columns = ("phase", "kind", "items", "subjects", "sizes", "batches", "settings", "estimate", "share")
    for column in columns:
        table.add_column(column)
    for row in describe(plan):
        table.add_row(
            row.phase,
            row.kind,
            str(row.items),
            ", ".join(row.subjects),
            _sizes(row),
            ", ".join(map(str, row.batches)) or "-",
            ", ".join(row.settings) or "-",
            readable.duration(row.estimate_s),
            readable.percent(row.share),
        )
    terminal.show(table, console)
    console.print(
        f"{len(plan.items)} measurements, estimated {readable.duration(plan.estimate_s)}", highlight=False
    )


_SWEPT_UNITS = {Phase.BANDWIDTH: "elements", Phase.LAUNCHES: "ops in a chain", Phase.UPDATES: "parameters"}


def _sizes(row: PlanRow) -> str:
    """Input sides for steps; what a sweep varies, with its unit; none for layers."""
    if not row.sizes:
        return "-"
    unit = _SWEPT_UNITS.get(row.phase, "px")
    return f"{', '.join(map(str, row.sizes))} {unit}"


def _show_night(console: Console, night: Tonight) -> None:
    machine = f"machine {night.machine}" if night.machine else "a machine never benchmarked"
    table = Table(title=f"tonight on {machine}", title_justify="left")
    for column in ("priority", "kind", "items", "subjects", "batches", "estimate"):
        table.add_column(column)
    for row in describe_night(night):
        table.add_row(
            row.priority,
            row.kind,
            str(row.items),
            _subjects(row.subjects),
            ", ".join(map(str, row.batches)),
            readable.duration(row.estimate_s),
        )
    terminal.show(table, console)
    share = night.covered / night.grid_items if night.grid_items else 0.0
    console.print(
        f"{len(night.entries)} measurements, estimated {readable.duration(night.estimate_s)} of the "
        f"{readable.duration(night.budget_s)} budget\nthe nightly grid: {night.covered} of its "
        f"{night.grid_items} measurements made on earlier nights ({share:.0%})",
        highlight=False,
    )


def _run(args: argparse.Namespace, console: Console) -> int:
    console = Console(stderr=True) if args.json else console  # stdout: the JSON alone
    now = datetime.now(UTC)
    out = args.out or args.settings.bench_dir / f"run-{now:%Y%m%dT%H%M%S}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    words = ["--out", str(out), "--device", args.device]
    words += ["--quick"] if args.quick else ["--check"] if args.check else []
    table = None
    if args.architecture and (args.quick or args.check):
        console.print("advisor: error: --architecture goes without --quick and --check", highlight=False)
        return 2
    if args.architecture:
        table = architecture_table(args)
        if table is None:
            return 1
        if not args.layers_only and not whole_steps_possible(table):
            console.print(f"{table.reference}: whole steps need a square RGB input: measuring layers only")
        sight = _sight(args, table)
        plan_file = out.with_suffix(".plan.json")
        plan_file.write_text(sight.night().model_dump_json(), encoding="utf-8")
        words += ["--plan", str(plan_file), "--allow-factories"]
        console.print(f"{table.reference}: {said_sight(sight)}", highlight=False)
    if args.budget_minutes is not None:
        words += ["--budget-minutes", str(args.budget_minutes)]
    if args.partition:
        words += ["--partition", args.partition]
    summary = _measured_here(words)
    if summary is None:
        return 2
    store = Store.open(args.db)
    if table is not None:
        # Training finds the factory's table here: it cannot import the factory itself.
        Architectures(store).record(table, now, requested=False)
    stored = store.ingest(read_jsonl(out))
    _said_stored(args, console, stored, out, summary)
    return 0


def _measured_here(words: list[str]) -> RunSummary | None:
    """The benchmark job (`advisor.bench.job`) in this process, its summary read from what it prints, to
    be said with the rest; None where it failed (it said why on stderr)."""
    from advisor.bench import job
    from advisor.bench.run import RunSummary

    said = io.StringIO()
    with contextlib.redirect_stdout(said):
        code = job.main(words)
    return RunSummary.model_validate_json(said.getvalue().splitlines()[-1]) if code == 0 else None


def _sight(args: argparse.Namespace, table: LayerTable) -> SightPlan:
    import torch

    cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    budget_s = (args.budget_minutes or args.settings.bench.budget_minutes) * 60
    return planned_sight(args, table, "cuda" if cuda else "cpu", budget_s)


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
    store, now = Store.open(args.db), datetime.now(UTC)
    with progress_on(
        Console(stderr=True), "the benchmarks", said_submitted(console, "benchmarked", args.json)
    ) as watch:
        measured = run_night(client, store, partitions, request, now, watch)
    if args.json:
        print(measured_json(measured, args.db))
    else:
        said_measured(console, measured, args.db)
    return 1 if measured.failed else 0


def _ingest(args: argparse.Namespace, console: Console) -> int:
    store = Store.open(args.db)
    stored = store.ingest(line for path in args.files for line in read_jsonl(path))
    _said_stored(args, console, stored)
    return 0


def _said_stored(
    args: argparse.Namespace,
    console: Console,
    stored: int,
    results: Path | None = None,
    run: RunSummary | None = None,
) -> None:
    """The rows a command stored, with where they came from (and how its run went), as lines or JSON."""
    if args.json:
        files = [str(results)] if results is not None else [str(path) for path in args.files]
        answer = {"stored": stored, "db": str(args.db), "results": files}
        print(json.dumps(answer | ({} if run is None else {"run": run.model_dump(mode="json")}), indent=2))
        return
    if run is not None:
        console.print(
            f"measured {run.measured} of {run.planned} in {readable.duration(run.elapsed_s)}: "
            f"{run.did_not_fit} did not fit, {run.skipped_series} skipped after a smaller batch did not fit, "
            f"{run.failed} failed, {run.skipped_budget} left when the budget was spent",
            highlight=False,
        )
    where = "" if results is None else f" (results in {results})"
    console.print(f"{stored} new rows in {args.db}{where}", highlight=False)


def _subjects(subjects: tuple[str, ...], shown: int = 3) -> str:
    if len(subjects) <= shown + 1:
        return ", ".join(subjects)
    return f"{', '.join(subjects[:shown])} and {len(subjects) - shown} more"
