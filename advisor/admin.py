"""`advisor status` and `advisor explain JOBID`: what the service is doing and why a job was advised so.

`explain` asks the daemon, which answers only the job's owner (or root, or the service's own user);
`status` reads the daemon's health over its socket, the database the admin can read, and the queue.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from advisor.api import Explanation, Health
from advisor.daemon.transport import DaemonRefused, DaemonUnreachable, Service, call
from advisor.settings.validated import Settings
from advisor.slurm.client import SlurmClient
from advisor.slurm.runner import SlurmError

if TYPE_CHECKING:
    from advisor.store import Store


class DaemonError(RuntimeError):
    """The daemon did not answer, or refused."""


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser], settings: Settings) -> None:
    status = commands.add_parser("status", help="daemon health, models, last benchmarks")
    status.add_argument("--db", type=Path, default=settings.database)
    status.add_argument("--json", action="store_true")
    status.set_defaults(handler=_status)
    explain = commands.add_parser("explain", help="the candidates and reasons behind an advised job")
    explain.add_argument("job_id", type=int)
    explain.add_argument("--json", action="store_true")
    explain.set_defaults(handler=_explain)


def ask(settings: Settings, path: str) -> bytes:
    """GET from the daemon: the cluster-wide service where the settings name one, else the socket."""
    service = Service(settings.socket, settings.service, settings.munge_socket)
    try:
        return call(service, "GET", path, None, settings.timeout_s)
    except (DaemonUnreachable, DaemonRefused) as error:
        raise DaemonError(str(error)) from error


def _explain(args: argparse.Namespace, console: Console) -> int:
    from advisor.recommend.cli import show

    try:
        explanation = Explanation.model_validate_json(ask(args.settings, f"/explain/{args.job_id}"))
    except DaemonError as error:
        console.print(f"advisor: error: {error}", highlight=False)
        return 1
    if args.json:
        print(explanation.model_dump_json(indent=2))
        return 0
    if explanation.applied:
        verdict = "submitted as advised"
    elif explanation.offered:
        verdict = "submitted as written (the advised changes were declined or refused)"
    else:
        verdict = "submitted as written (no change was offered)"
    console.print(f"job {explanation.job_id} of {explanation.user}: {verdict}", highlight=False)
    show(explanation.recommendation, console)
    return 0


def _status(args: argparse.Namespace, console: Console) -> int:
    try:
        health: Health | None = Health.model_validate_json(ask(args.settings, "/health"))
        problem = None
    except DaemonError as error:
        health, problem = None, str(error)
    store, database_error = _database(args.db)
    now = datetime.now(UTC)
    models = [
        {
            "machine": row["machine"],
            "version": row["version"],
            "age_hours": round((now - datetime.fromisoformat(row["created_at"])).total_seconds() / 3600, 1),
            "heldout_mape": row["heldout_mape"],
            "steps": row["step_rows"],
        }
        for row in ([] if store is None else _versions(store))
        if row["active"]
    ]
    benchmarks = [] if store is None else store.benchmark_coverage()
    try:
        from advisor.daemon.views import queue_summary

        client = SlurmClient.from_settings(args.settings.slurm)
        queue = [row.model_dump() for row in queue_summary(client.partitions(), client.jobs())]
    except (SlurmError, ModuleNotFoundError):  # a base install reads no queue; the daemon's health stays
        queue = []
    report = {
        "daemon": None if health is None else health.model_dump(),
        "daemon_error": problem,
        "database_error": database_error,
        "models": models,
        "benchmarks": benchmarks,
        "queue": queue,
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0 if health is not None else 3
    console.print(
        f"daemon: {'up, version ' + health.version if health else 'down: ' + str(problem)}", highlight=False
    )
    if health is not None:
        console.print(f"policy in force: {health.policy}", highlight=False)
    if health is not None and health.policy_error:
        console.print(f"policy error: {health.policy_error}", highlight=False)
    for problem in [] if health is None else health.degraded:
        console.print(f"degraded: {problem}", highlight=False)
    if database_error is not None:
        console.print(f"database: {database_error}", highlight=False)
    for title, rows in (("models", models), ("benchmarks", benchmarks), ("queue", queue)):
        table = Table(title=title)
        for column in rows[0] if rows else ["(none)"]:
            table.add_column(column)
        for row in rows:
            table.add_row(*(str(value) for value in row.values()))
        console.print(table)
    return 0 if health is not None else 3


def _database(path: Path) -> tuple[Store | None, str | None]:
    """The store, or why not: the daemon's health and the queue are still worth showing without it."""
    try:
        from advisor.store import NoDatabase, Store
    except ModuleNotFoundError as missing:  # a login node's base install
        return None, f"not read here: {missing.name} is not installed (the service's packages)"
    try:
        return Store.existing(path), None
    except NoDatabase as error:
        return None, str(error)


def _versions(store: Store) -> list[dict[str, Any]]:
    from advisor.store import ModelRegistry

    return ModelRegistry(store).versions()
