"""`advisor comm measure|ingest|show`: each partition's all-reduce, measured as one Slurm job over its
nodes, stored, and shown as the links the recommender predicts with (scipy loads only for the commands)."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from rich.console import Console
from rich.table import Table

from advisor import argtypes, readable, terminal
from advisor.bench.measuring import BenchJob, JobToSubmit, finish_jobs, submit_jobs
from advisor.bench.submit import device_kind
from advisor.bench.watching import measured_json, progress_on, said_measured, said_submitted
from advisor.settings.validated import BenchSettings, Settings
from advisor.slurm.client import SlurmClient
from advisor.slurm.models import Partition
from advisor.slurm.options import JobResources, OwnJob, own_job_options
from advisor.store import Store

JOB_NAME = "advisor-comm"
_CPU_MAX_BYTES = 2**26
"""On CPUs (gloo) the sweep stops at 64 MiB: a bigger all-reduce takes seconds and says nothing new."""


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser], settings: Settings) -> None:
    comm = commands.add_parser("comm", help="collective communication per partition: measure, ingest, show")
    actions = comm.add_subparsers(required=True, metavar="ACTION")
    measure = actions.add_parser(
        "measure", help="one Slurm job of several tasks per partition: all-reduces within and across nodes"
    )
    measure.add_argument(
        "--partition",
        action="append",
        help="repeatable; default: every partition with two GPUs on a node or two nodes that take jobs, "
        "less [bench] skip_partitions",
    )
    measure.add_argument("--nodes", type=argtypes.count, default=2, help="nodes of the job (default 2)")
    measure.add_argument(
        "--tasks-per-node",
        type=argtypes.count,
        help="ranks per node (default: the partition's GPUs per node, else 1)",
    )
    measure.add_argument(
        "--models",
        default="resnet18,mobilenet_v2",
        help="zoo models (comma-separated) whose DDP steps are measured too (default %(default)s)",
    )
    measure.add_argument("--max-bytes", type=int, help="the largest all-reduce (1 GiB; on CPUs 64 MiB)")
    measure.add_argument("--results-dir", type=Path, default=settings.bench_dir)
    measure.add_argument("--python", default=sys.executable, help="the advisor's Python on the compute nodes")
    measure.add_argument("--minutes", type=float, default=20, help="the job's time limit (default 20)")
    measure.add_argument(
        "--cpu-only",
        action="store_true",
        default=settings.bench.cpu_only,
        help="gloo on the CPUs even on GPU partitions (a cluster whose GPUs are not real: the sandbox)",
    )
    measure.add_argument("--db", type=Path, default=settings.database)
    measure.set_defaults(handler=_measure)
    ingest = actions.add_parser("ingest", help="store results files (again: ingestion is idempotent)")
    ingest.add_argument("files", type=Path, nargs="+")
    ingest.add_argument("--db", type=Path, default=settings.database)
    ingest.set_defaults(handler=_ingest)
    show = actions.add_parser("show", help="each partition's links and overlap, as predictions use them")
    show.add_argument("--partition", action="append", help="repeatable; default: every partition")
    show.add_argument("--db", type=Path, default=settings.database)
    show.set_defaults(handler=_show)
    for command in (measure, ingest, show):
        command.add_argument("--json", action="store_true", help="what it printed, as JSON")


def communicates(partition: Partition, nodes: int, site: BenchSettings) -> bool:
    """Whether data parallelism can span devices here: two GPUs on a node, or ``nodes`` serving nodes."""
    if partition.name in site.skip_partitions or not partition.takes_jobs:
        return False
    serving = sum(1 for node in partition.nodes if node.serves_jobs)
    return partition.gpus_per_node > 1 or serving >= max(nodes, 2)


def job_script(python: str, partition: str, results: Path, cpu: bool, max_bytes: int, models: str) -> str:
    """``srun`` of the benchmark on every task of the job, its argv quoted word by word; a rank that fails
    ends the step, so the others do not wait on it until the time limit."""
    argv = ["srun", "--kill-on-bad-exit=1", python, "-m", "advisor.comm.allreduce", "--out", str(results)]
    argv += ["--partition", partition]
    argv += ["--max-bytes", str(max_bytes), "--models", models, *(["--cpu"] if cpu else [])]
    return f"#!/bin/sh\nexec {shlex.join(argv)}\n"


def job_options(
    partition: Partition, nodes: int, tasks: int, minutes: float, log: Path, site: BenchSettings
) -> list[str]:
    """``tasks`` ranks on each of ``nodes`` nodes, a GPU each on a GPU partition, under the site's terms
    (`slurm/options.py`)."""
    resources = JobResources(
        partition=partition.name,
        nodes=nodes,
        tasks_per_node=tasks,
        gpus_per_node=tasks if partition.gpus_per_node else 0,
        time_limit=timedelta(minutes=max(int(minutes), 1)),
    )
    return own_job_options(resources, site, OwnJob(name=JOB_NAME, log=log))


def _measure(args: argparse.Namespace, console: Console) -> int:
    from advisor.comm.lines import read_comm_lines
    from advisor.comm.rows import CommunicationRows

    client = SlurmClient.from_settings(args.settings.slurm)
    known = {p.name: p for p in client.partitions()}
    site = args.settings.bench.model_copy(update={"cpu_only": args.cpu_only})
    names = args.partition or [p.name for p in known.values() if communicates(p, args.nodes, site)]
    unknown = sorted(set(names) - set(known))
    if unknown:
        console.print(f"advisor: error: no such partition: {', '.join(unknown)}", highlight=False)
        return 1
    args.results_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    rows = CommunicationRows(Store.open(args.db))

    def ingest(jobs: Sequence[BenchJob]) -> int:
        return sum(rows.ingest(read_comm_lines(job.results)) for job in jobs if job.results.exists())

    with progress_on(
        Console(stderr=True), "the all-reduces", said_submitted(console, "measured", args.json)
    ) as watch:
        night = submit_jobs(client, [_job(args, known[name], site, stamp) for name in names])
        watch.submitted(night)
        measured = finish_jobs(client, night, timedelta(minutes=args.minutes + 10), ingest, watch)
    if args.json:
        print(measured_json(measured, args.db))
    else:
        said_measured(console, measured, args.db)
    return 1 if measured.failed else 0


def _job(args: argparse.Namespace, partition: Partition, site: BenchSettings, stamp: str) -> JobToSubmit:
    """One partition's measuring job: every rank of it sweeps the all-reduce and steps the models."""
    cpu = device_kind(partition, site) == "cpu"
    tasks = args.tasks_per_node or partition.gpus_per_node or 1
    max_bytes = args.max_bytes or (_CPU_MAX_BYTES if cpu else 2**30)
    results = args.results_dir / f"{stamp}-{partition.name}.comm.jsonl"
    script = job_script(args.python, partition.name, results, cpu, max_bytes, args.models)
    log = args.results_dir / f"{stamp}-{partition.name}.comm.log"
    options = job_options(partition, args.nodes, tasks, args.minutes, log, site)
    return JobToSubmit(partition=partition.name, script=script, options=options, results=results)


def _ingest(args: argparse.Namespace, console: Console) -> int:
    from advisor.comm.lines import read_comm_lines
    from advisor.comm.rows import CommunicationRows

    rows = CommunicationRows(Store.open(args.db))
    try:
        stored = rows.ingest(line for path in args.files for line in read_comm_lines(path))
    except ValueError as error:
        console.print(f"advisor: error: {error}", highlight=False)
        return 1
    if args.json:
        print(json.dumps({"stored": stored, "db": str(args.db), "results": [str(p) for p in args.files]}))
    else:
        console.print(f"{stored} new rows in {args.db}", highlight=False)
    return 0


def _show(args: argparse.Namespace, console: Console) -> int:
    from advisor.comm.rows import CommunicationRows

    store = Store.open(args.db)
    rows = CommunicationRows(store)
    found = {name: rows.communication(name) for name in args.partition or rows.partitions()}
    if args.json:
        print(json.dumps({name: link.model_dump(mode="json") for name, link in found.items()}, indent=2))
        return 0
    table = Table(title="communication per partition")
    for header in ("partition", "source", "within a node", "across nodes", "overlap"):
        table.add_column(header)
    for name, communication in found.items():
        source = "measured" if communication.measured else "default (never measured)"
        within, across = (
            f"{readable.short_time(link.latency_s)} + {link.bus_bytes_s / 1e9:.2f} GB/s bus"
            for link in (communication.node, communication.network)
        )
        table.add_row(name, source, within, across, readable.value(communication.overlap))
    terminal.show(table, console)
    return 0
